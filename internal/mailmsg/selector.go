package mailmsg

import (
	"slices"
	"strings"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
)

// Which <style> rules apply to which element. Selectors are matched
// exactly: each compound selector ("td.x", ".a:first-child", "[data-x]") by
// cascadia, the combinators between them (descendant, child, next and
// subsequent sibling) here, with every intermediate answer remembered, so
// that a selector of k compounds costs at most k steps per element however
// the document nests (cascadia's own combinator matching backtracks without
// memory: ".a .a .a .a .b" against 500 nested .a elements would take
// billions of steps). A selector a browser would reject, or that cascadia
// cannot match exactly, is dropped and hides nothing: cascadia's own
// extensions (:contains, :matches, [a!=b], [a#=re]), relative selectors or
// combinators inside :not() and :has(), namespaces, pseudo-elements.
//
// The work is bounded three ways: at most maxRules rules and
// maxSelectorsPerRule selectors per rule (and maxSelectorBytes of selector
// text in all), at most maxCompounds compounds per selector, and a budget of
// matching steps that grows with the input (matchBudget). Rules are tried
// only on elements that carry their subject's id, class or tag (as browsers
// index them), and a rule whose selector needs an ancestor with a class, id
// or tag that no ancestor has is rejected without matching. When the budget
// is spent, the remaining elements get the hiding declarations of every
// rule that could apply to them (by id, class and tag), whether or not the
// rest of its selector matches: a hostile style sheet then hides too much,
// never too little.

const (
	maxRules            = 8192
	maxSelectorsPerRule = 64
	maxSelectorBytes    = 1 << 20
	maxCompounds        = 32
)

// matchBudget is the number of matching steps allowed for a document of n
// bytes. The 41 templates of tests/corpus_test.go take at most 0.24 steps
// a byte and 20,000 in all (Foundation's sidebar template with its whole
// stylesheet); a step costs 50-200 ns.
func matchBudget(n int) int { return 1<<18 + 2*n }

// compiledSel is one complex selector.
type compiledSel struct {
	compounds []cascadia.Sel // left to right; the last is the subject
	combs     []byte         // combs[i] joins compounds[i] and compounds[i+1]: ' ', '>', '+', '~'
	cost      []uint8        // per compound: costSiblings, costChildren, costSubtree flags
	ancestors []int32        // keys that ancestors of the subject must carry
	spec      int32
	rule      int32     // index into styleSheet.rules
	geoOnly   bool      // its rule only places or sizes boxes (geoOnlyProp): matched only where positions are followed
	idx       int32     // index into styleSheet.sels
	memo      [][]uint8 // per kind of question and compound, per element: memoUnknown, memoNo, memoYes
}

const (
	costSiblings = 1 << iota // structural pseudo-classes count the siblings
	costChildren             // :empty looks at the children
	costSubtree              // :has() searches the subtree
)

// cssKey names what a selector's subject needs: a tag, a class, an id or
// nothing ('*').
type cssKey struct {
	kind byte // 't', 'c', 'i', '*'
	name string
}

// styleSheet holds a document's rules, ready to match.
type styleSheet struct {
	rules      []cssRule
	sels       []compiledSel
	byID       [][]int32        // selectors by their subject's key id
	keyID      map[cssKey]int32 // keys that selectors need on ancestors or subjects; '*' is 0
	approx     []cssProps       // per key id, when the budget is spent
	quirks     bool
	hasKeys    bool
	hasGeoOnly bool // some selector is geoOnly
}

// newStyleSheet compiles the rules read from a document's style blocks.
// quirks says the document is in quirks mode, where class and id selectors
// match without regard to ASCII case.
func newStyleSheet(rules []cssRule, quirks bool) *styleSheet {
	sh := &styleSheet{rules: rules, keyID: map[cssKey]int32{{'*', ""}: 0}, quirks: quirks}
	for ri := range rules {
		n := 0
		for sel := range splitTopLevel(rules[ri].selectors, ',') {
			if n++; n > maxSelectorsPerRule {
				break
			}
			cs, key, ok := sh.compile(sel)
			if !ok {
				continue
			}
			cs.rule, cs.idx = int32(ri), int32(len(sh.sels))
			cs.geoOnly = rules[ri].geoOnly()
			sh.hasGeoOnly = sh.hasGeoOnly || cs.geoOnly
			id := sh.id(key)
			for int(id) >= len(sh.byID) {
				sh.byID = append(sh.byID, nil)
			}
			sh.byID[id] = append(sh.byID[id], int32(len(sh.sels)))
			sh.sels = append(sh.sels, cs)
		}
	}
	for len(sh.byID) < len(sh.keyID) {
		sh.byID = append(sh.byID, nil)
	}
	return sh
}

func (sh *styleSheet) empty() bool { return len(sh.sels) == 0 }

func (sh *styleSheet) id(k cssKey) int32 {
	if id, ok := sh.keyID[k]; ok {
		return id
	}
	id := int32(len(sh.keyID))
	sh.keyID[k] = id
	return id
}

// compile splits a complex selector at its combinators and compiles each
// compound with cascadia. It returns the subject's key.
func (sh *styleSheet) compile(sel string) (compiledSel, cssKey, bool) {
	var cs compiledSel
	parts, combs, ok := splitCompounds(strings.TrimSpace(sel))
	if !ok || len(parts) == 0 || len(parts) > maxCompounds {
		return cs, cssKey{}, false
	}
	var keys []cssKey
	for _, part := range parts {
		if !acceptedCompound(part) {
			return cs, cssKey{}, false
		}
		if sh.quirks {
			part = foldClassesAndIDs(part)
		}
		s, err := cascadia.ParseWithPseudoElement(part)
		if err != nil || s.PseudoElement() != "" {
			return cs, cssKey{}, false
		}
		sp := s.Specificity()
		cs.spec = addSpec(cs.spec, int32(min(sp[0], 127))<<16+int32(min(sp[1], 255))<<8+int32(min(sp[2], 255)))
		cs.compounds = append(cs.compounds, s)
		cs.cost = append(cs.cost, compoundCost(part))
		keys = append(keys, compoundKey(part))
	}
	cs.combs = combs
	// Compounds joined to the subject by descendant and child combinators
	// only match ancestors of it.
	for i := len(parts) - 2; i >= 0; i-- {
		if c := combs[i]; c != ' ' && c != '>' {
			break
		}
		if keys[i].kind != '*' {
			cs.ancestors = append(cs.ancestors, sh.id(keys[i]))
		}
	}
	return cs, keys[len(keys)-1], true
}

func addSpec(spec, n int32) int32 { return min(spec+n, inlineSpec-1) }

// splitCompounds splits a complex selector into compounds and the
// combinators between them. A selector that starts or ends with a
// combinator, or has two in a row, is refused.
func splitCompounds(s string) (parts []string, combs []byte, ok bool) {
	start := 0
	pendingComb := byte(0)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			i += 2
			continue
		case c == '"' || c == '\'':
			k := strings.IndexByte(s[i+1:], c)
			if k < 0 {
				return nil, nil, false
			}
			i += k + 2
			continue
		case c == '(' || c == '[':
			end := closingOf(s, i)
			if end < 0 {
				return nil, nil, false
			}
			i = end + 1
			continue
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '>' || c == '+' || c == '~':
			if i > start {
				parts = append(parts, s[start:i])
				if len(parts) > maxCompounds {
					return nil, nil, false
				}
				pendingComb = ' '
			} else if len(parts) == 0 {
				return nil, nil, false // starts with a combinator
			}
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' {
				if pendingComb != ' ' {
					return nil, nil, false // two combinators in a row
				}
				pendingComb = c
			}
			i++
			start = i
			continue
		}
		if start == i && len(parts) > 0 {
			if pendingComb == 0 {
				return nil, nil, false
			}
			combs = append(combs, pendingComb)
			pendingComb = 0
		}
		i++
	}
	if start < len(s) {
		parts = append(parts, s[start:])
	} else if pendingComb != 0 && pendingComb != ' ' {
		return nil, nil, false // ends with a combinator
	}
	if len(combs) != len(parts)-1 {
		return nil, nil, false
	}
	return parts, combs, true
}

// closingOf returns the index of the ')' or ']' closing the bracket at
// s[i], or -1.
func closingOf(s string, i int) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '(', '[':
			depth++
		case ')', ']':
			if depth--; depth == 0 {
				return j
			}
		case '"', '\'':
			k := strings.IndexByte(s[j+1:], s[j])
			if k < 0 {
				return -1
			}
			j += k + 1
		}
	}
	return -1
}

// acceptedCompound reports whether a compound selector means in cascadia
// what it means in a browser, and can be matched in bounded time: no
// cascadia extensions, no namespaces, no combinators or relative selectors
// inside functional pseudo-classes.
func acceptedCompound(c string) bool {
	l := strings.ToLower(c)
	for _, bad := range []string{":contains", ":matches", ":haschild", ":input", "!=", "#="} {
		if strings.Contains(l, bad) {
			return false
		}
	}
	for i := 0; i < len(l); i++ {
		if l[i] == '|' && (i+1 == len(l) || l[i+1] != '=') {
			return false // a namespace
		}
	}
	// Inside parentheses: a selector list of compounds only.
	for i := 0; i < len(l); i++ {
		if l[i] != '(' {
			continue
		}
		end := closingOf(l, i)
		if end < 0 {
			return false
		}
		inner := l[i+1 : end]
		if strings.ContainsAny(strings.TrimSpace(inner), ">+~") && !strings.Contains(l[:i], "nth-") {
			return false
		}
		for part := range splitTopLevel(inner, ',') {
			if strings.ContainsAny(strings.TrimSpace(part), " \t\n\r\f") && !strings.Contains(l[:i], "nth-") {
				return false
			}
		}
		i = end
	}
	return true
}

// compoundCost tells which matching costs more than one step.
func compoundCost(c string) uint8 {
	l := strings.ToLower(c)
	var cost uint8
	for _, p := range []string{":nth-", ":last-", ":only-", ":first-of-type"} {
		if strings.Contains(l, p) {
			cost |= costSiblings
		}
	}
	if strings.Contains(l, ":empty") {
		cost |= costChildren
	}
	if strings.Contains(l, ":has(") {
		cost |= costSubtree
	}
	return cost
}

// compoundKey is the most selective part of a compound at its top level:
// its id, else its first class, else its tag, else '*'. A name written with
// escapes gives no key (the rule is then tried on every element).
func compoundKey(c string) cssKey {
	var class, tag string
	i := 0
	if i < len(c) && isIdentStart(c[i]) {
		j := identEnd(c, i)
		tag = strings.ToLower(c[i:j])
		i = j
	}
	for i < len(c) {
		switch c[i] {
		case '#', '.':
			j := identEnd(c, i+1)
			name := c[i+1 : j]
			if name != "" && (j == len(c) || c[j] != '\\') {
				if c[i] == '#' {
					return cssKey{'i', name}
				}
				if class == "" {
					class = name
				}
			}
			i = max(j, i+1)
		case '[', '(':
			end := closingOf(c, i)
			if end < 0 {
				return cssKey{'*', ""}
			}
			i = end + 1
		default:
			i++
		}
	}
	switch {
	case class != "":
		return cssKey{'c', class}
	case tag != "" && tag != "*":
		return cssKey{'t', tag}
	}
	return cssKey{'*', ""}
}

func isIdentStart(c byte) bool { return isASCIILetter(c) || c == '_' || c >= 0x80 }

func identEnd(s string, i int) int {
	for i < len(s) && (isIdentStart(s[i]) || s[i] == '-' || s[i] >= '0' && s[i] <= '9') {
		i++
	}
	return i
}

// foldClassesAndIDs lower-cases (ASCII only) the class and id names of a
// compound, for quirks mode; names with escapes are unescaped first and
// written back escaped.
func foldClassesAndIDs(c string) string {
	var b strings.Builder
	for i := 0; i < len(c); {
		switch ch := c[i]; {
		case ch == '[':
			end := closingOf(c, i)
			if end < 0 {
				end = len(c) - 1
			}
			b.WriteString(c[i : end+1])
			i = end + 1
		case ch == '"' || ch == '\'':
			k := strings.IndexByte(c[i+1:], ch)
			if k < 0 {
				b.WriteString(c[i:])
				return b.String()
			}
			b.WriteString(c[i : i+k+2])
			i += k + 2
		case (ch == '.' || ch == '#') && i+1 < len(c):
			j := i + 1
			for j < len(c) && (isIdentStart(c[j]) || c[j] == '-' || c[j] >= '0' && c[j] <= '9' || c[j] == '\\') {
				if c[j] == '\\' {
					j = min(j+2, len(c))
					for j < len(c) && isHex(c[j-1]) && isHex(c[j]) {
						j++
					}
					if j < len(c) && c[j] == ' ' {
						j++
					}
					continue
				}
				j++
			}
			b.WriteByte(ch)
			b.WriteString(escapeIdent(asciiLower(cssUnescape(c[i+1 : j]))))
			i = j
		default:
			b.WriteByte(ch)
			i++
		}
	}
	return b.String()
}

func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// escapeIdent writes a name as a CSS identifier.
func escapeIdent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80 || isASCIILetter(c) || c == '_' || c == '-' && i > 0:
			b.WriteByte(c)
		case c >= '0' && c <= '9' && i > 0:
			b.WriteByte(c)
		default:
			b.WriteString("\\" + strings.ToUpper(string("0123456789abcdef"[c>>4])+string("0123456789abcdef"[c&15])) + " ")
		}
	}
	return b.String()
}

// matcher matches a style sheet's selectors against one document.
type matcher struct {
	sh        *styleSheet
	elems     []elemNode // in document order, as the renderer meets them
	memoBytes int
	budget    int
	spent     bool
	anc       []int32            // per key id: how many open ancestors carry it
	keyIDs    []int32            // the key ids of all elements (elemNode.k0, k1)
	tagIDs    map[string]int32   // tag name to key id, -1 for none
	classIDs  map[string][]int32 // class attribute to the key ids of its classes
}

// elemNode is one element of the document, in document order.
type elemNode struct {
	n              *html.Node
	parent, prev   int32 // element parent and previous element sibling, -1 if none
	subtree, sibls int32 // elements in its subtree (itself included); element children of its parent
	k0, k1         int32 // its key ids are keyIDs[k0:k1]
}

func newMatcher(sh *styleSheet, doc *html.Node, budget int) *matcher {
	m := &matcher{sh: sh, budget: budget, anc: make([]int32, len(sh.keyID)),
		tagIDs: map[string]int32{}, classIDs: map[string][]int32{}}
	n := countElements(doc)
	m.elems = make([]elemNode, 0, n)
	m.keyIDs = make([]int32, 0, 2*n)
	var kids []int32
	var walk func(n *html.Node, parent int32)
	walk = func(n *html.Node, parent int32) {
		prev := int32(-1)
		first := len(kids)
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode {
				continue
			}
			i := int32(len(m.elems))
			if sh.quirks {
				for k := range c.Attr {
					if a := &c.Attr[k]; a.Namespace == "" && (a.Key == "class" || a.Key == "id") {
						a.Val = asciiLower(a.Val)
					}
				}
			}
			k0 := int32(len(m.keyIDs))
			m.addKeys(c)
			m.elems = append(m.elems, elemNode{n: c, parent: parent, prev: prev, k0: k0, k1: int32(len(m.keyIDs))})
			kids = append(kids, i)
			walk(c, i)
			m.elems[i].subtree = int32(len(m.elems)) - i
			prev = i
		}
		for _, k := range kids[first:] {
			m.elems[k].sibls = int32(len(kids) - first)
		}
		kids = kids[:first]
	}
	walk(doc, -1)
	return m
}

func countElements(n *html.Node) int {
	count := 0
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode {
			count += 1 + countElements(c)
		}
	}
	return count
}

// addKeys appends the ids of the keys n carries (its tag, id and classes)
// that some selector needs, and of '*'.
func (m *matcher) addKeys(n *html.Node) {
	start := len(m.keyIDs)
	addID := func(id int32) {
		for _, o := range m.keyIDs[start:] {
			if o == id {
				return
			}
		}
		m.keyIDs = append(m.keyIDs, id)
	}
	add := func(k cssKey) {
		if id, ok := m.sh.keyID[k]; ok {
			addID(id)
		}
	}
	m.keyIDs = append(m.keyIDs, 0) // '*'
	if id, ok := m.tagIDs[n.Data]; ok {
		if id >= 0 {
			m.keyIDs = append(m.keyIDs, id)
		}
	} else {
		id, ok := m.sh.keyID[cssKey{'t', n.Data}]
		if !ok {
			id = -1
		}
		if len(m.tagIDs) < 1024 {
			m.tagIDs[n.Data] = id
		}
		if id >= 0 {
			m.keyIDs = append(m.keyIDs, id)
		}
	}
	for _, a := range n.Attr {
		if a.Namespace != "" {
			continue
		}
		switch a.Key {
		case "id":
			if a.Val != "" {
				add(cssKey{'i', a.Val})
			}
		case "class":
			// Mail repeats the same class attributes: their ids are
			// looked up once.
			if ids, ok := m.classIDs[a.Val]; ok {
				for _, id := range ids {
					addID(id)
				}
				continue
			}
			before := len(m.keyIDs)
			for c := range strings.FieldsFuncSeq(a.Val, isHTMLSpace) {
				add(cssKey{'c', c})
			}
			if len(m.classIDs) < 4096 && len(a.Val) <= 256 {
				m.classIDs[a.Val] = slices.Clone(m.keyIDs[before:])
			}
		}
	}
}

func isHTMLSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r' }

// keys returns the key ids of element e.
func (m *matcher) keys(e int32) []int32 {
	el := &m.elems[e]
	return m.keyIDs[el.k0:el.k1]
}

// enter and leave keep the counts of the keys on the open ancestors.
func (m *matcher) enter(e int32) {
	if e >= 0 && int(e) < len(m.elems) {
		for _, id := range m.keys(e) {
			m.anc[id]++
		}
	}
}

func (m *matcher) leave(e int32) {
	if e >= 0 && int(e) < len(m.elems) {
		for _, id := range m.keys(e) {
			m.anc[id]--
		}
	}
}

// cascade adds the declarations of the rules that match element e (the
// node n) to p, and reports whether any did. Rules that only place or
// size boxes are matched only with geo (where positions are followed).
func (m *matcher) cascade(p *cssProps, e int32, n *html.Node, geo bool) (applied bool) {
	if e < 0 || int(e) >= len(m.elems) || m.elems[e].n != n {
		// Out of step with the renderer (a bug): hide too much.
		m.approximate(p, m.sh.allKeys())
		return true
	}
	keys := m.keys(e)
	if m.spent {
		m.approximate(p, keys)
		return true
	}
	for _, k := range keys {
		for _, si := range m.sh.byID[k] {
			s := &m.sh.sels[si]
			if s.geoOnly && !geo {
				continue
			}
			if m.budget--; m.budget < 0 {
				m.spent = true
				m.approximate(p, keys)
				return true
			}
			if !m.ancestorsPresent(s) {
				continue
			}
			match, done := m.match(s, e)
			if !done {
				m.spent = true
				m.approximate(p, keys)
				return true
			}
			if match {
				p.applyWith(m.sh.rules[s.rule].decls, s.spec)
				applied = true
			}
		}
	}
	return applied
}

// applyWith merges a rule's declarations with the specificity of the
// selector that matched.
func (p *cssProps) applyWith(decls []propDecl, spec int32) {
	for _, d := range decls {
		d.spec = spec
		p.set(d.prop, d.cssDecl)
	}
}

// approximate adds the hiding declarations of every rule keyed by one of
// keys, as if it matched. They are merged per key once, so this costs the
// same whatever the number of rules.
func (m *matcher) approximate(p *cssProps, keys []int32) {
	if m.sh.approx == nil {
		m.sh.approx = make([]cssProps, len(m.sh.byID))
		for k, list := range m.sh.byID {
			for _, si := range list {
				s := &m.sh.sels[si]
				for _, d := range m.sh.rules[s.rule].decls {
					if d.prop != propCustom && declHides(int(d.prop), d.val) {
						d.spec = s.spec
						if d.beats(m.sh.approx[k].d[d.prop]) {
							m.sh.approx[k].d[d.prop] = d.cssDecl
						}
					}
				}
			}
		}
	}
	for _, k := range keys {
		for prop, d := range m.sh.approx[k].d {
			if d.order != 0 && d.beats(p.d[prop]) {
				p.d[prop] = d
			}
		}
	}
}

// allKeys is every key id.
func (sh *styleSheet) allKeys() []int32 {
	ids := make([]int32, len(sh.byID))
	for i := range ids {
		ids[i] = int32(i)
	}
	return ids
}

func (m *matcher) ancestorsPresent(s *compiledSel) bool {
	for _, id := range s.ancestors {
		if m.anc[id] == 0 {
			return false
		}
	}
	return true
}

// match reports whether the selector matches element e; done is false
// when the budget ran out first.
func (m *matcher) match(s *compiledSel, e int32) (match, done bool) {
	k := len(s.compounds) - 1
	if !m.compound(s, k, e) {
		return false, m.budget >= 0
	}
	if k == 0 {
		return true, m.budget >= 0
	}
	r := m.related(s, k, e)
	return r, m.budget >= 0
}

// compound matches compound i of s at element e, charging the budget.
func (m *matcher) compound(s *compiledSel, i int, e int32) bool {
	cost := 1
	el := &m.elems[e]
	if s.cost[i]&costSiblings != 0 {
		cost += int(el.sibls)
	}
	if s.cost[i]&costChildren != 0 || s.cost[i]&costSubtree != 0 {
		cost += int(el.subtree)
	}
	if m.budget -= cost; m.budget < 0 {
		return false
	}
	return s.compounds[i].Match(el.n)
}

// Memo kinds.
const (
	memoMatch    = iota // compounds 0..i match with compound i at the element
	memoAncestor        // memoMatch holds at some ancestor of the element or the element itself
	memoSibling         // memoMatch holds at some previous sibling or the element itself
)

// maxMemoBytes caps the memory of the answers remembered for one document
// (one byte per element for each compound and kind of question asked; the
// corpus templates take at most 45 KB); past it the budget counts as
// spent.
const maxMemoBytes = 8 << 20

// Answers in a memo table.
const (
	memoUnknown = iota
	memoNo
	memoYes
)

// table returns the memo table of s for a kind of question about compound
// i, allocating it on first use (nil when the memory cap is reached).
func (m *matcher) table(s *compiledSel, kind, i int) []uint8 {
	if s.memo == nil {
		s.memo = make([][]uint8, 3*len(s.compounds))
	}
	t := &s.memo[kind*len(s.compounds)+i]
	if *t == nil {
		if m.memoBytes += len(m.elems); m.memoBytes > maxMemoBytes {
			m.budget = -1
			return nil
		}
		*t = make([]uint8, len(m.elems))
	}
	return *t
}

func answer(v bool) uint8 {
	if v {
		return memoYes
	}
	return memoNo
}

// prefix reports whether compounds 0..i of s match with compound i at e.
func (m *matcher) prefix(s *compiledSel, i int, e int32) bool {
	if e < 0 || m.budget < 0 {
		return false
	}
	t := m.table(s, memoMatch, i)
	if t == nil {
		return false
	}
	if v := t[e]; v != memoUnknown {
		return v == memoYes
	}
	m.budget--
	v := m.compound(s, i, e) && (i == 0 || m.related(s, i, e))
	if m.budget >= 0 {
		t[e] = answer(v)
	}
	return v
}

// related reports whether an element related to e by the combinator
// before compound i matches compounds 0..i-1.
func (m *matcher) related(s *compiledSel, i int, e int32) bool {
	switch s.combs[i-1] {
	case '>':
		return m.prefix(s, i-1, m.elems[e].parent)
	case '+':
		return m.prefix(s, i-1, m.elems[e].prev)
	case ' ':
		return m.chain(s, memoAncestor, i-1, m.elems[e].parent)
	default: // '~'
		return m.chain(s, memoSibling, i-1, m.elems[e].prev)
	}
}

// chain reports whether compounds 0..i match at e or at an element before
// it in the chain of parents (memoAncestor) or previous siblings
// (memoSibling), remembering the answer for every element it walked.
func (m *matcher) chain(s *compiledSel, kind, i int, e int32) bool {
	t := m.table(s, kind, i)
	if t == nil {
		return false
	}
	start := e
	result := false
	for e >= 0 && m.budget >= 0 {
		if v := t[e]; v != memoUnknown {
			result = v == memoYes
			break
		}
		m.budget--
		if m.prefix(s, i, e) {
			result = true
			break
		}
		if kind == memoAncestor {
			e = m.elems[e].parent
		} else {
			e = m.elems[e].prev
		}
	}
	if m.budget < 0 {
		return false
	}
	// Everything walked from start up to (not including) e gets the answer.
	for w := start; w >= 0 && w != e; {
		t[w] = answer(result)
		if kind == memoAncestor {
			w = m.elems[w].parent
		} else {
			w = m.elems[w].prev
		}
	}
	if e >= 0 {
		t[e] = answer(result)
	}
	return result
}
