package mailmsg

// A frozen copy of the hand-made HTML to text converter that issue 28
// replaced (internal/mailmsg/html.go and css.go at commit 30a9744), with
// every package-level name prefixed "old". It exists only for
// FuzzHTMLToTextOld (fuzz_old_test.go): on documents without a <style>
// block, the new converter must show the same words. It is kept as code in a
// test file, not as recorded outputs, so that the fuzzer can compare on
// inputs nobody recorded; it is not built into the program.

import (
	"fmt"
	"github.com/k3a/html2text"
	"slices"
	"strconv"
	"strings"
)

// HTMLToText converts an HTML document or fragment to readable plain text:
// no tags, entities decoded, links kept as "text (url)", block elements and
// <br> as line breaks, table cells separated by " | ", list items as "- "
// (numbered in an <ol>), blockquotes as "> " lines, <pre> spacing kept.
// Link URLs are left out when the link text already shows them, the link
// has no text (images), or they are javascript:, data: or #fragment links.
// The contents of <script>, <style>, <head>, <template> and comments are
// dropped, and so is text a reader does not see (see css.go): elements
// hidden with display:none, visibility:hidden, a zero font size, opacity 0,
// a zero-sized box with hidden overflow, a colour equal to the background or
// the hidden attribute, whether by their style attribute or by a rule of a
// <style> block. Hidden text is a common way to address the model behind
// the reader's back. The result is sanitised and tidied like DecodeText's.
//
// It runs in time linear in len(html).
func oldHTMLToText(html string) string {
	text, _ := oldHtmlToText(html)
	return text
}

// hiddenWarning is the warning for n hidden elements whose text was left
// out.
func oldHiddenWarning(n int) string {
	if n == 1 {
		return "1 hidden HTML element was removed (text styled to be invisible, a common way to hide instructions)."
	}
	return fmt.Sprintf("%d hidden HTML elements were removed (text styled to be invisible, a common way to hide instructions).", n)
}

// htmlToText also returns how many hidden elements had text that was
// dropped (an element hidden inside another hidden one counts with it).
//
// k3a/html2text does the last step (entities, white space, line breaks), but
// it cannot be given mail HTML directly: a "</a>" inside a script string or
// an <a> without href makes it hide the rest of the document, a bare "<"
// swallows the text up to the next ">", comments containing ">" leak, and
// divs and table cells run together. So a tokenizer here first reduces the
// HTML to text plus <br>, the only input k3a then sees.
func oldHtmlToText(html string) (string, int) {

	html = sanitizeChars(html)
	c := oldNewHTMLConv()
	if oldHasStyleTag(html) {

		pre := oldHtmlConv{collecting: true, sheet: oldNewStyleSheet()}
		pre.run(html)
		if !pre.sheet.empty() {
			c.sheet = pre.sheet
		}
	}
	c.out.Grow(len(html) / 2)
	c.run(html)
	c.closeLink()
	out := html2text.HTML2TextWithOptions(c.out.String(), html2text.WithUnixLineBreaks())
	out = strings.ReplaceAll(out, "\u00a0", " ")
	return normalizeText(Sanitize(out)), c.hiddenCount
}

// hasStyleTag reports whether s has a "<style" (any case).
func oldHasStyleTag(s string) bool {
	for i := 0; ; {
		k := strings.IndexByte(s[i:], '<')
		if k < 0 {
			return false
		}
		i += k + 1
		if i+5 <= len(s) && oldAsciiEqualFold(s[i:i+5], "style") {
			return true
		}
	}
}

// htmlConv turns HTML into the simplified stream for k3a: text with "<" and
// ">" escaped and entities left for k3a to decode, and "<br>" tags.
//
// To know what is hidden it keeps the open elements the way a browser's
// tree builder does, closely enough that mis-nested mail HTML cannot show
// the model text the browser hides: end tags close only what they close in
// a browser (a stray end tag is ignored), start tags close what they
// implicitly end (<p>, <li>, <td>, <head>), and formatting elements (<b>,
// <font>, ...) closed implicitly are reopened before the next text, as
// browsers do. Where it must simplify (the adoption agency for mis-nested
// formatting end tags, more than maxDepth open elements), it keeps text
// hidden rather than showing it.
type oldHtmlConv struct {
	out strings.Builder

	started    bool // visible text has been written
	lineStart  bool // the output is at the start of a line
	pendingNL  int  // line breaks owed before the next visible text (2 = blank line)
	quoteDepth int
	preDepth   int
	preFirst   bool // just after <pre>: a leading newline is ignored
	listDepth  int
	olCount    []int // per open list (first 32): next number of an <ol>, 0 for <ul>
	listItem   bool  // a list marker is owed before the next visible text
	rowText    bool  // the current table row has visible text
	cellSep    bool  // a " | " is owed before the next visible text

	// The open link, if any (HTML does not nest links).
	inLink   bool
	linkHref string
	linkText strings.Builder

	// Open elements.
	stack     []oldElem
	base      oldElem          // what the empty stack stands for
	last      map[string]int32 // index of the topmost open element of each name
	overflow  int              // elements opened beyond maxDepth (not on the stack)
	ovState   oldVisState      // visibility inside them: once hidden, hidden until they all close
	ovCounted bool
	afe       []oldAfeEntry // active formatting elements, with markers (td, th, ...)
	afeNextID int32
	needRecon bool // a formatting element was closed implicitly

	sheet      *oldStyleSheet // rules of the document's <style> blocks; nil if none
	collecting bool           // first pass: only read <style> blocks into sheet

	hiddenCount int
}

func oldNewHTMLConv() *oldHtmlConv {
	return &oldHtmlConv{
		lineStart: true,
		last:      map[string]int32{},
		base:      oldElem{hider: -1, prevSame: -1, special: -1, specialNotADP: -1, defBound: -1, tableBound: -1},
	}
}

// maxDepth caps the open elements tracked (Blink caps the DOM depth at 512
// too).
const oldMaxDepth = 512

// elem is an open element.
type oldElem struct {
	name string
	st   oldVisState // what its content inherits
	// hider is the index of the element that started the hidden stretch
	// this one is in (itself or an ancestor), -1 when it is visible.
	hider    int32
	prevSame int32 // the next open element below with the same name, -1
	// The topmost open element at or below this one that is special
	// (HTML's category), special but not address/div/p, or a boundary of the
	// default or the table scope; -1 if none.
	special, specialNotADP, defBound, tableBound int32

	rendered  bool  // its start was rendered, so its end is too
	countable bool  // as a hider, counts towards hiddenCount (not <head>)
	counted   bool  // as a hider, has been counted
	afeID     int32 // a formatting element's entry (reopened copies count once); 0 if none
}

type oldAfeEntry struct {
	name    string
	own     oldOwnStyle
	id      int32 // shared by the element and its reopened copies
	marker  bool
	open    bool // on the stack
	counted bool // one of its copies was counted as hidden
}

// maxAFE caps the formatting elements remembered after the last marker.
const oldMaxAFE = 64

func (c *oldHtmlConv) run(s string) {
	i := 0
	for i < len(s) {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			c.text(s[i:])
			return
		}
		if j > 0 {
			c.text(s[i : i+j])
		}
		i = c.markup(s, i+j)
	}
}

// markup handles the construct starting with '<' at s[i] and returns where
// parsing continues.
func (c *oldHtmlConv) markup(s string, i int) int {
	if i+1 >= len(s) {
		c.text("&lt;")
		return len(s)
	}
	switch n := s[i+1]; {
	case n == '!':
		if strings.HasPrefix(s[i:], "<!--") {
			return oldCommentEnd(s, i+4)
		}
		return oldBogusCommentEnd(s, i+2)
	case n == '?':
		return oldBogusCommentEnd(s, i+2)
	case n == '/':
		if i+2 < len(s) && oldIsASCIILetter(s[i+2]) {
			name, p := oldTagName(s, i+2)
			_, end, closed := oldParseAttrs(s, p)
			if closed && !c.collecting {
				c.endTag(name)
			}
			return end
		}
		if i+2 < len(s) && s[i+2] == '>' {
			return i + 3
		}
		return oldBogusCommentEnd(s, i+2)
	case oldIsASCIILetter(n):
		name, p := oldTagName(s, i+1)
		attrs, end, closed := oldParseAttrs(s, p)
		if !closed {
			return end
		}
		switch name {
		case "script", "style", "title", "iframe", "noembed", "noframes":
			contentEnd, after := oldRawTextEnd(s, end, name)
			if name == "style" && c.collecting && oldMediaApplies(oldDecodeAttr(attrs.media)) {
				c.sheet.addCSS(s[end:contentEnd])
			}
			return after
		case "textarea", "xmp":
			contentEnd, after := oldRawTextEnd(s, end, name)
			if !c.collecting {
				c.startTag(name, &attrs)
				c.text(s[end:contentEnd])
				c.endTag(name)
			}
			return after
		}
		if !c.collecting {
			c.startTag(name, &attrs)
		}
		return end
	}
	c.text("&lt;")
	return i + 1
}

// commentEnd returns the index after the comment whose text starts at s[p]
// ("-->", "--!>", or the abrupt "<!-->" and "<!--->"), or len(s).
func oldCommentEnd(s string, p int) int {
	if strings.HasPrefix(s[p:], ">") {
		return p + 1
	}
	if strings.HasPrefix(s[p:], "->") {
		return p + 2
	}
	for {
		k := strings.Index(s[p:], "--")
		if k < 0 {
			return len(s)
		}
		q := p + k + 2
		if q < len(s) && s[q] == '>' {
			return q + 1
		}
		if q+1 < len(s) && s[q] == '!' && s[q+1] == '>' {
			return q + 2
		}
		p += k + 1
	}
}

func oldBogusCommentEnd(s string, p int) int {
	if k := strings.IndexByte(s[p:], '>'); k >= 0 {
		return p + k + 1
	}
	return len(s)
}

// rawTextEnd finds the end tag closing a raw text element whose content
// starts at s[p]; it returns where the content ends and where parsing
// continues.
func oldRawTextEnd(s string, p int, name string) (contentEnd, after int) {
	for q := p; ; {
		k := strings.Index(s[q:], "</")
		if k < 0 {
			return len(s), len(s)
		}
		t := q + k + 2
		if t+len(name) <= len(s) && oldAsciiEqualFold(s[t:t+len(name)], name) &&
			(t+len(name) == len(s) || strings.IndexByte("\t\n\f\r />", s[t+len(name)]) >= 0) {
			return q + k, oldBogusCommentEnd(s, t+len(name))
		}
		q = t
	}
}

// asciiEqualFold is strings.EqualFold for ASCII only, as HTML tag names
// compare (no Unicode folding of "ſ" or "K").
func oldAsciiEqualFold(a, lower string) bool {
	if len(a) != len(lower) {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func oldIsASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// tagName reads a tag name at s[p:] and returns it in lower case (names
// longer than any we care about come back as "?").
func oldTagName(s string, p int) (string, int) {
	start := p
	for p < len(s) && strings.IndexByte("\t\n\f\r />", s[p]) < 0 {
		p++
	}
	name := s[start:p]
	if len(name) > 10 {
		return "?", p
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(name), p
		}
	}
	return name, p
}

// htmlAttrs holds the attributes that matter, raw (character references
// are decoded only when a value is used).
type oldHtmlAttrs struct {
	href, style, class, id, media string
	color, bgcolor, background    string // <font color>, <td bgcolor>, <td background>
	hidden                        bool
	seen                          uint16 // HTML keeps the first of duplicate attributes
}

var oldAttrBits = map[string]uint16{
	"href": 1, "style": 2, "class": 4, "id": 8, "media": 16, "color": 32, "bgcolor": 64, "background": 128,
}

func (a *oldHtmlAttrs) set(name, val string) {
	if len(name) > 10 {
		return
	}
	var lower [10]byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	n := string(lower[:len(name)])
	if n == "hidden" {
		a.hidden = true
		return
	}
	bit, ok := oldAttrBits[n]
	if !ok || a.seen&bit != 0 {
		return
	}
	a.seen |= bit
	switch n {
	case "href":
		a.href = val
	case "style":
		a.style = val
	case "class":
		a.class = val
	case "id":
		a.id = val
	case "media":
		a.media = val
	case "color":
		a.color = val
	case "bgcolor":
		a.bgcolor = val
	case "background":
		a.background = val
	}
}

// parseAttrs reads attributes up to and including the closing '>' and
// returns the few that matter, the index after the tag and whether the tag
// was closed before the end of s.
func oldParseAttrs(s string, p int) (a oldHtmlAttrs, end int, closed bool) {
	for p < len(s) {
		switch s[p] {
		case '>':
			return a, p + 1, true
		case ' ', '\t', '\n', '\f', '\r', '/':
			p++
			continue
		}
		start := p
		p++
		for p < len(s) && strings.IndexByte("\t\n\f\r />=", s[p]) < 0 {
			p++
		}
		name := s[start:p]
		for p < len(s) && strings.IndexByte("\t\n\f\r ", s[p]) >= 0 {
			p++
		}
		val := ""
		if p < len(s) && s[p] == '=' {
			p++
			for p < len(s) && strings.IndexByte("\t\n\f\r ", s[p]) >= 0 {
				p++
			}
			if p < len(s) && (s[p] == '"' || s[p] == '\'') {
				k := strings.IndexByte(s[p+1:], s[p])
				if k < 0 {
					return a, len(s), false
				}
				val = s[p+1 : p+1+k]
				p += k + 2
			} else {
				vs := p
				for p < len(s) && strings.IndexByte("\t\n\f\r >", s[p]) < 0 {
					p++
				}
				val = s[vs:p]
			}
		}
		a.set(name, val)
	}
	return a, len(s), false
}

func oldIsVoidElement(name string) bool {
	switch name {
	case "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
		"param", "source", "track", "wbr", "basefont", "bgsound", "keygen", "frame", "image":
		return true
	}
	return false
}

// isSpecial reports whether name is in HTML's "special" category: a stray
// end tag cannot close an element across one of these.
func oldIsSpecial(name string) bool {
	switch name {
	case "address", "applet", "area", "article", "aside", "base", "basefont", "bgsound",
		"blockquote", "body", "br", "button", "caption", "center", "col", "colgroup", "dd",
		"details", "dir", "div", "dl", "dt", "embed", "fieldset", "figcaption", "figure",
		"footer", "form", "frame", "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head",
		"header", "hgroup", "hr", "html", "iframe", "img", "input", "keygen", "li", "link",
		"listing", "main", "marquee", "menu", "meta", "nav", "noembed", "noframes", "noscript",
		"object", "ol", "p", "param", "plaintext", "pre", "script", "search", "section",
		"select", "source", "style", "summary", "table", "tbody", "td", "template",
		"textarea", "tfoot", "th", "thead", "title", "tr", "track", "ul", "wbr", "xmp":
		return true
	}
	return false
}

// isFormatting reports whether name is a formatting element, which HTML
// reopens after it was closed implicitly.
func oldIsFormatting(name string) bool {
	switch name {
	case "a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u":
		return true
	}
	return false
}

// isMarkerElement reports whether name puts a marker in the list of active
// formatting elements: formatting from outside is not reopened inside it.
func oldIsMarkerElement(name string) bool {
	switch name {
	case "applet", "object", "marquee", "template", "td", "th", "caption":
		return true
	}
	return false
}

func oldIsDefaultScopeBoundary(name string) bool {
	switch name {
	case "applet", "caption", "html", "table", "td", "th", "marquee", "object", "template":
		return true
	}
	return false
}

func oldIsHeading(name string) bool {
	return len(name) == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6'
}

// closesP reports whether a start tag closes an open <p>. (<table> does
// not: in quirks mode, which mail without a doctype is in, it stays inside.)
func oldClosesP(name string) bool {
	switch name {
	case "address", "article", "aside", "blockquote", "center", "details", "dialog", "dir",
		"div", "dl", "fieldset", "figcaption", "figure", "footer", "header", "hgroup", "main",
		"menu", "nav", "ol", "p", "search", "section", "summary", "ul", "pre", "listing",
		"form", "plaintext", "xmp", "hr", "li", "dd", "dt":
		return true
	}
	return oldIsHeading(name)
}

// allowedInHead reports whether a start tag keeps <head> open.
func oldAllowedInHead(name string) bool {
	switch name {
	case "title", "meta", "link", "style", "script", "base", "noscript", "template", "head",
		"basefont", "bgsound", "noframes", "html":
		return true
	}
	return false
}

func (c *oldHtmlConv) top() *oldElem {
	if len(c.stack) == 0 {
		return &c.base
	}
	return &c.stack[len(c.stack)-1]
}

// cur is the visibility the next text or element inherits.
func (c *oldHtmlConv) cur() oldVisState {
	if c.overflow > 0 {
		return c.ovState
	}
	return c.top().st
}

func (c *oldHtmlConv) lastOf(name string) int32 {
	if i, ok := c.last[name]; ok {
		return i
	}
	return -1
}

// inScope returns the index of the topmost open element named name if no
// scope boundary is above it (bound is the topmost boundary), else -1.
func (c *oldHtmlConv) inScope(name string, bound int32) int32 {
	if i := c.lastOf(name); i >= 0 && i >= bound {
		return i
	}
	return -1
}

func (c *oldHtmlConv) buttonBound() int32 { return max(c.top().defBound, c.lastOf("button")) }

func (c *oldHtmlConv) listItemBound() int32 {
	return max(c.top().defBound, c.lastOf("ol"), c.lastOf("ul"))
}

// styleFor computes what an element's own attributes and the style sheet
// say about its visibility.
func (c *oldHtmlConv) styleFor(name string, a *oldHtmlAttrs) oldOwnStyle {
	if name == "head" || name == "template" {
		return oldOwnStyle{drop: true}
	}
	if a == nil || !a.hidden && a.style == "" && a.color == "" && a.bgcolor == "" && a.background == "" && c.sheet == nil {
		return oldOwnStyle{}
	}
	a.style, a.class, a.id = oldStripCSSComments(oldDecodeAttr(a.style)), oldDecodeAttr(a.class), oldDecodeAttr(a.id)
	p := oldCascade(c.sheet, name, a)
	return oldStyleOf(&p, a)
}

// push opens an element; nil if it is beyond maxDepth.
func (c *oldHtmlConv) push(name string, own oldOwnStyle) *oldElem {
	st := oldInherit(c.cur(), own)
	if c.overflow > 0 || len(c.stack) >= oldMaxDepth {
		wasHidden := c.overflow > 0 && c.ovState.hidden()
		c.overflow++
		c.ovState = st
		if wasHidden {
			c.ovState.drop = true
		}
		return nil
	}
	t := c.top()
	i := int32(len(c.stack))
	e := oldElem{name: name, st: st, hider: -1, prevSame: c.lastOf(name),
		special: t.special, specialNotADP: t.specialNotADP, defBound: t.defBound, tableBound: t.tableBound,
		countable: name != "head" && name != "template"}
	switch {
	case !st.hidden():
	case t.st.hidden():
		e.hider = t.hider
	default:
		e.hider = i
	}
	if oldIsSpecial(name) {
		e.special = i
		if name != "address" && name != "div" && name != "p" {
			e.specialNotADP = i
		}
	}
	if oldIsDefaultScopeBoundary(name) {
		e.defBound = i
	}
	if name == "html" || name == "table" || name == "template" {
		e.tableBound = i
	}
	c.last[name] = i
	c.stack = append(c.stack, e)
	return &c.stack[i]
}

// popTo closes the open elements from the top down to index i. explicit
// says that the element at i is closed by its own end tag.
func (c *oldHtmlConv) popTo(i int32, explicit bool) {
	for int32(len(c.stack)) > i {
		j := len(c.stack) - 1
		e := c.stack[j]
		c.stack = c.stack[:j]
		if e.prevSame >= 0 {
			c.last[e.name] = e.prevSame
		} else {
			delete(c.last, e.name)
		}
		if oldIsFormatting(e.name) {
			if explicit && int32(j) == i {
				c.afeRemove(e.name)
			} else {
				c.afeClose(e.name)
			}
		}
		if oldIsMarkerElement(e.name) {
			c.afeClearToMarker()
		}
		if e.rendered {
			c.closeOutput(e.name)
		}
	}
}

// countHidden counts the hidden element that text just dropped was in.
func (c *oldHtmlConv) countHidden() {
	if t := c.top(); t.st.hidden() && t.hider >= 0 {
		h := &c.stack[t.hider]
		if !h.countable || h.counted {
			return
		}
		h.counted = true
		if h.afeID != 0 {
			for k := len(c.afe) - 1; k >= 0; k-- {
				if c.afe[k].id == h.afeID {
					if c.afe[k].counted {
						return
					}
					c.afe[k].counted = true
				}
			}
		}
		c.hiddenCount++
		return
	}
	if c.overflow > 0 && !c.ovCounted {
		c.ovCounted = true
		c.hiddenCount++
	}
}

func (c *oldHtmlConv) startTag(name string, a *oldHtmlAttrs) {
	if name == "br" {
		if !c.cur().hidden() {
			c.pendingNL = min(c.pendingNL+1, 3)
			if !c.started {
				c.pendingNL = 0
			}
		}
		return
	}
	if (name == "html" || name == "body") && c.lastOf(name) >= 0 {
		return
	}
	c.implyEnds(name)
	if c.needRecon && !oldIsSpecial(name) {
		c.reconstruct()
	}
	own := c.styleFor(name, a)
	rendered := !c.cur().drop && !own.drop
	if oldIsVoidElement(name) {
		if rendered {
			c.openOutput(name, a)
		}
		return
	}
	e := c.push(name, own)
	if e == nil {
		return
	}
	e.rendered = rendered
	if rendered {
		c.openOutput(name, a)
	}
	if oldIsFormatting(name) {
		e.afeID = c.afePush(name, own)
	}
	if oldIsMarkerElement(name) {
		c.afe = append(c.afe, oldAfeEntry{marker: true})
	}
}

// implyEnds closes the elements a start tag implicitly ends.
func (c *oldHtmlConv) implyEnds(name string) {
	if c.overflow > 0 {
		return
	}
	if h := c.lastOf("head"); h >= 0 && !oldAllowedInHead(name) {
		c.popTo(h, false)
	}
	switch {
	case name == "li":
		if i := c.lastOf("li"); i >= 0 && i >= c.top().specialNotADP {
			c.popTo(i, false)
		}
	case name == "dd" || name == "dt":
		if i := max(c.lastOf("dd"), c.lastOf("dt")); i >= 0 && i >= c.top().specialNotADP {
			c.popTo(i, false)
		}
	case name == "td" || name == "th":
		if i := max(c.inScope("td", c.top().tableBound), c.inScope("th", c.top().tableBound)); i >= 0 {
			c.popTo(i, false)
		}
	case name == "tr":
		i := c.inScope("tr", c.top().tableBound)
		if i < 0 {
			i = max(c.inScope("td", c.top().tableBound), c.inScope("th", c.top().tableBound))
		}
		if i >= 0 {
			c.popTo(i, false)
		}
	case name == "tbody" || name == "thead" || name == "tfoot":
		i := int32(-1)
		for _, n := range [...]string{"tbody", "thead", "tfoot", "tr", "td", "th"} {
			if j := c.inScope(n, c.top().tableBound); j >= 0 && (i < 0 || j < i) {
				i = j
			}
		}
		if i >= 0 {
			c.popTo(i, false)
		}
	case name == "option":
		if c.top().name == "option" {
			c.popTo(int32(len(c.stack)-1), false)
		}
	case name == "optgroup":
		for _, n := range [...]string{"option", "optgroup"} {
			if c.top().name == n {
				c.popTo(int32(len(c.stack)-1), false)
			}
		}
	case name == "button":
		if i := c.inScope("button", c.top().defBound); i >= 0 {
			c.popTo(i, false)
		}
	case name == "a" || name == "nobr":
		if c.afeFind(name) >= 0 {
			c.endFormatting(name)
		}
	}
	if oldClosesP(name) {
		if i := c.inScope("p", c.buttonBound()); i >= 0 {
			c.popTo(i, false)
		}
	}
	if oldIsHeading(name) && oldIsHeading(c.top().name) {
		c.popTo(int32(len(c.stack)-1), false)
	}
}

func (c *oldHtmlConv) endTag(name string) {
	if name == "br" {
		c.startTag("br", nil)
		return
	}
	if c.overflow > 0 {
		if c.overflow--; c.overflow == 0 {
			c.ovState, c.ovCounted = oldVisState{}, false
		}
		return
	}
	i := int32(-1)
	switch {
	case name == "body" || name == "html":
		return
	case name == "p":
		if i = c.inScope("p", c.buttonBound()); i < 0 && !c.cur().drop {
			c.want(2)
		}
	case name == "li":
		i = c.inScope("li", c.listItemBound())
	case oldIsHeading(name):
		for _, h := range [...]string{"h1", "h2", "h3", "h4", "h5", "h6"} {
			i = max(i, c.inScope(h, c.top().defBound))
		}
	case name == "td" || name == "th" || name == "tr" || name == "table" || name == "tbody" ||
		name == "thead" || name == "tfoot" || name == "caption" || name == "colgroup":
		i = c.inScope(name, c.top().tableBound)
	case oldIsFormatting(name):
		c.endFormatting(name)
		return
	case oldIsSpecial(name):
		i = c.inScope(name, c.top().defBound)
	default:
		if j := c.lastOf(name); j >= 0 && j >= c.top().special {
			i = j
		}
	}
	if i >= 0 {
		c.popTo(i, true)
	}
}

// endFormatting handles the end tag of a formatting element. When a special
// element is open inside it, a browser runs the adoption agency algorithm,
// which can move that element (and the text after the end tag) out of the
// formatting element or leave it inside; the formatting element is then
// kept open here, so hidden text stays hidden.
func (c *oldHtmlConv) endFormatting(name string) {
	i := c.lastOf(name)
	if i < 0 {
		c.afeRemove(name)
		if name == "a" {
			c.closeLink()
		}
		return
	}
	t := c.top()
	if i < t.defBound {
		return
	}
	if t.special > i {
		if name == "a" {
			c.closeLink()
		}
		return
	}
	c.popTo(i, true)
}

// afeStart is the index after the last marker.
func (c *oldHtmlConv) afeStart() int {
	for k := len(c.afe) - 1; k >= 0; k-- {
		if c.afe[k].marker {
			return k + 1
		}
	}
	return 0
}

// afePush adds a formatting element and returns its id (0 if it was not
// added).
func (c *oldHtmlConv) afePush(name string, own oldOwnStyle) int32 {
	start := c.afeStart()
	if len(c.afe)-start >= oldMaxAFE {

		k := start
		for k < len(c.afe) && c.afe[k].own.hides() {
			k++
		}
		if k == len(c.afe) {
			return 0
		}
		c.afe = slices.Delete(c.afe, k, k+1)
	}
	c.afeNextID++
	c.afe = append(c.afe, oldAfeEntry{name: name, own: own, id: c.afeNextID, open: true})
	return c.afeNextID
}

// afeFind returns the index of the last entry named name after the last
// marker, or -1.
func (c *oldHtmlConv) afeFind(name string) int {
	for k := len(c.afe) - 1; k >= 0 && !c.afe[k].marker; k-- {
		if c.afe[k].name == name {
			return k
		}
	}
	return -1
}

// afeOpen returns the last open entry named name after the last marker, or
// -1.
func (c *oldHtmlConv) afeOpen(name string) int {
	for k := len(c.afe) - 1; k >= 0 && !c.afe[k].marker; k-- {
		if c.afe[k].name == name && c.afe[k].open {
			return k
		}
	}
	return -1
}

// afeClose records that a formatting element was closed implicitly: it is
// reopened before the next text.
func (c *oldHtmlConv) afeClose(name string) {
	if k := c.afeOpen(name); k >= 0 {
		c.afe[k].open = false
		c.needRecon = true
	}
}

// afeRemove forgets a formatting element closed by its end tag.
func (c *oldHtmlConv) afeRemove(name string) {
	k := c.afeOpen(name)
	if k < 0 {
		k = c.afeFind(name)
	}
	if k >= 0 {
		c.afe = slices.Delete(c.afe, k, k+1)
	}
}

func (c *oldHtmlConv) afeClearToMarker() {
	c.afe = c.afe[:max(c.afeStart()-1, 0)]
}

// reconstruct reopens formatting elements that were closed implicitly
// (HTML's "reconstruct the active formatting elements").
func (c *oldHtmlConv) reconstruct() {
	c.needRecon = false
	n := len(c.afe)
	if n == 0 || c.afe[n-1].marker || c.afe[n-1].open {
		return
	}
	k := n - 1
	for k > 0 && !c.afe[k-1].marker && !c.afe[k-1].open {
		k--
	}
	for ; k < n; k++ {
		if e := c.push(c.afe[k].name, c.afe[k].own); e != nil {
			e.afeID = c.afe[k].id
		}
		c.afe[k].open = true
	}
}

// openOutput renders a start tag that is not hidden.
func (c *oldHtmlConv) openOutput(name string, a *oldHtmlAttrs) {
	switch {
	case oldIsNestedList(name, c.listDepth):
		c.want(1)
	case oldIsParaBlock(name):
		c.want(2)
	case oldIsLineBlock(name):
		c.want(1)
	}
	switch name {
	case "blockquote":
		c.quoteDepth = min(c.quoteDepth+1, 20)
	case "pre", "listing", "plaintext":
		c.preDepth++
		c.preFirst = true
	case "ul", "ol", "menu", "dir":
		c.listDepth++
		if len(c.olCount) < 32 && c.listDepth == len(c.olCount)+1 {
			n := 0
			if name == "ol" {
				n = 1
			}
			c.olCount = append(c.olCount, n)
		}
	case "li":
		c.listItem = true
	case "table", "tr":
		c.rowText, c.cellSep = false, false
	case "td", "th":
		c.cellSep = c.rowText
	case "a":
		c.closeLink()
		if a != nil && a.href != "" {
			c.inLink, c.linkHref = true, a.href
			c.linkText.Reset()
		}
	}
}

// closeOutput renders the end of an element whose start was rendered.
func (c *oldHtmlConv) closeOutput(name string) {
	switch {
	case oldIsNestedList(name, c.listDepth-1):
		c.want(1)
	case oldIsParaBlock(name):
		c.want(2)
	case oldIsLineBlock(name):
		c.want(1)
	}
	switch name {
	case "blockquote":
		c.quoteDepth = max(c.quoteDepth-1, 0)
	case "pre", "listing", "plaintext":
		c.preDepth = max(c.preDepth-1, 0)
	case "ul", "ol", "menu", "dir":
		if c.listDepth > 0 && c.listDepth == len(c.olCount) {
			c.olCount = c.olCount[:len(c.olCount)-1]
		}
		c.listDepth = max(c.listDepth-1, 0)
	case "tr", "table":
		c.rowText, c.cellSep = false, false
	case "a":
		c.closeLink()
	}
}

// Elements that need a line break before and after them.
func oldIsLineBlock(name string) bool {
	switch name {
	case "div", "li", "dt", "dd", "tr", "section", "article", "header", "footer", "nav",
		"aside", "main", "center", "form", "fieldset", "legend", "caption", "details",
		"summary", "option", "figcaption", "tbody", "thead", "tfoot", "body", "dialog",
		"menu", "dir", "address", "hgroup", "search":
		return true
	}
	return false
}

// Elements that need a blank line before and after them.
func oldIsParaBlock(name string) bool {
	switch name {
	case "p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "ul", "ol", "dl",
		"table", "hr", "figure", "listing", "plaintext":
		return true
	}
	return false
}

// isNestedList reports whether name is a list inside another list (depth
// lists already open outside it): it gets a line break, not a blank line.
func oldIsNestedList(name string, depth int) bool {
	return depth > 0 && (name == "ul" || name == "ol" || name == "menu" || name == "dir")
}

// want asks for at least n line breaks before the next visible text.
func (c *oldHtmlConv) want(n int) {
	if c.started && c.pendingNL < n {
		c.pendingNL = n
	}
}

// text handles character data (entities still encoded).
func (c *oldHtmlConv) text(t string) {
	if c.collecting || t == "" {
		return
	}
	if h := c.lastOf("head"); h >= 0 && c.overflow == 0 && !oldIsBlankHTML(t) {
		c.popTo(h, false)
	}
	if c.needRecon {
		c.reconstruct()
	}
	if c.cur().hidden() {
		if !oldIsBlankHTML(t) {
			c.countHidden()
		}
		return
	}
	if c.preDepth > 0 {
		c.preText(t)
		return
	}
	if oldIsBlankHTML(t) {
		if c.started && c.pendingNL == 0 && !c.lineStart {
			c.out.WriteByte(' ')
			c.addLinkText(" ")
		}
		return
	}
	c.flush()
	if c.lineStart {
		t = strings.TrimLeft(t, " \t\n\r\f")
	}
	c.writeEscaped(t)
	c.addLinkText(t)
	c.lineStart = false
}

// preText writes preformatted text, keeping its spaces and line breaks.
func (c *oldHtmlConv) preText(t string) {
	if c.preFirst {
		c.preFirst = false
		t = strings.TrimPrefix(strings.TrimPrefix(t, "\r"), "\n")
	}
	for line := range strings.Lines(t) {
		content := strings.TrimRight(line, "\r\n")
		if content != "" {
			c.flush()
			for i := 0; i < len(content); i++ {
				switch ch := content[i]; ch {
				case ' ':
					c.out.WriteString("\u00a0")
				case '\t':
					c.out.WriteString("&#9;")
				case '<':
					c.out.WriteString("&lt;")
				case '>':
					c.out.WriteString("&gt;")
				case '\r', '\f':
				default:
					c.out.WriteByte(ch)
				}
			}
			c.addLinkText(content)
			c.lineStart = false
		}
		if len(content) < len(line) {
			if c.started {
				c.pendingNL = min(c.pendingNL+1, 3)
			}
		}
	}
}

// flush writes the line breaks and prefixes owed before visible text.
func (c *oldHtmlConv) flush() {
	if c.pendingNL > 0 && c.started {
		for range c.pendingNL {
			c.out.WriteString("<br>")
		}
		c.lineStart = true
		c.cellSep = false
	}
	c.pendingNL = 0
	if c.lineStart {
		for range c.quoteDepth {
			c.out.WriteString("&gt; ")
		}
		if c.listItem {
			for range min(max(c.listDepth-1, 0), 10) {
				c.out.WriteString("\u00a0\u00a0")
			}
			if c.listDepth > 0 && c.listDepth == len(c.olCount) && c.olCount[c.listDepth-1] > 0 {
				c.out.WriteString(strconv.Itoa(c.olCount[c.listDepth-1]) + ". ")
				c.olCount[c.listDepth-1]++
			} else {
				c.out.WriteString("- ")
			}
		}
	} else if c.cellSep {
		c.out.WriteString(" | ")
	}
	c.listItem, c.cellSep = false, false
	c.started, c.rowText = true, true
}

func (c *oldHtmlConv) writeEscaped(t string) {
	for len(t) > 0 {
		k := strings.IndexAny(t, "<>")
		if k < 0 {
			c.out.WriteString(t)
			return
		}
		c.out.WriteString(t[:k])
		if t[k] == '<' {
			c.out.WriteString("&lt;")
		} else {
			c.out.WriteString("&gt;")
		}
		t = t[k+1:]
	}
}

func (c *oldHtmlConv) addLinkText(t string) {
	if c.inLink && c.linkText.Len() < 1024 {
		c.linkText.WriteString(t)
	}
}

// closeLink ends the open link, writing " (url)" after its text unless the
// text already shows the URL, the link has no text, or the URL is a script or
// a fragment.
func (c *oldHtmlConv) closeLink() {
	if !c.inLink {
		return
	}
	c.inLink = false
	href := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' {
			return -1
		}
		return r
	}, c.linkHref)
	url := html2text.HTMLEntitiesToText(href)
	text := strings.Join(strings.Fields(html2text.HTMLEntitiesToText(c.linkText.String())), " ")
	if text == "" || url == "" || !oldLinkWorthShowing(url) || oldSameLink(text, url) {
		return
	}
	c.flush()
	c.out.WriteString(" (")
	c.writeEscaped(href)
	c.out.WriteString(")")
	c.lineStart = false
}

func oldLinkWorthShowing(url string) bool {
	if strings.HasPrefix(url, "#") {
		return false
	}
	l := strings.ToLower(url)
	for _, bad := range []string{"javascript:", "vbscript:", "data:", "about:", "file:"} {
		if strings.HasPrefix(l, bad) {
			return false
		}
	}
	return true
}

// sameLink reports whether a link's text already shows its URL.
func oldSameLink(text, url string) bool {
	t := strings.TrimSuffix(strings.ToLower(text), "/")
	u := strings.TrimSuffix(strings.ToLower(url), "/")
	for _, prefix := range []string{"", "mailto:", "tel:", "http://", "https://", "http://www.", "https://www."} {
		if prefix+t == u {
			return true
		}
	}
	return false
}

// isBlankHTML reports whether t renders as nothing but white space: ASCII
// white space, no-break and zero-width spaces, raw or as entities (mail
// "preheader" padding is made of these).
func oldIsBlankHTML(t string) bool {
	for i := 0; i < len(t); {
		switch c := t[i]; c {
		case ' ', '\t', '\n', '\r', '\f':
			i++
			continue
		case '&':
			k := strings.IndexByte(t[i:], ';')
			if k < 0 || k > 10 {
				return false
			}
			switch strings.ToLower(t[i+1 : i+k]) {
			case "nbsp", "#160", "#xa0", "zwnj", "zwj", "#8203", "#x200b", "#8204", "#x200c",
				"#8205", "#x200d", "#847", "#x34f", "#65279", "#xfeff", "shy", "#173", "#xad":
				i += k + 1
				continue
			}
			return false
		}
		if strings.HasPrefix(t[i:], "\u00a0") || strings.HasPrefix(t[i:], "\u200b") ||
			strings.HasPrefix(t[i:], "\u200c") || strings.HasPrefix(t[i:], "\u200d") ||
			strings.HasPrefix(t[i:], "\u034f") || strings.HasPrefix(t[i:], "\ufeff") ||
			strings.HasPrefix(t[i:], "\u00ad") {
			if t[i] == 0xC2 || t[i] == 0xCD {
				i += 2
			} else {
				i += 3
			}
			continue
		}
		return false
	}
	return true
}

// The properties that can hide text.
const (
	oldPropDisplay = iota
	oldPropVisibility
	oldPropFontSize // from font-size or the font shorthand
	oldPropOpacity
	oldPropHeight
	oldPropMaxHeight
	oldPropWidth
	oldPropMaxWidth
	oldPropOverflow
	oldPropOverflowX
	oldPropOverflowY
	oldPropColor
	oldPropTextFill // -webkit-text-fill-color
	oldPropBackground
	oldPropBackgroundImage
	oldPropMsoHide
	oldPropContentVisibility
	oldNumProps
)

var oldPropNames = map[string]int{
	"display": oldPropDisplay, "visibility": oldPropVisibility, "font-size": oldPropFontSize,
	"opacity": oldPropOpacity, "height": oldPropHeight, "max-height": oldPropMaxHeight,
	"width": oldPropWidth, "max-width": oldPropMaxWidth, "overflow": oldPropOverflow,
	"overflow-x": oldPropOverflowX, "overflow-y": oldPropOverflowY, "color": oldPropColor,
	"-webkit-text-fill-color": oldPropTextFill, "background-color": oldPropBackground,
	"background": oldPropBackground, "background-image": oldPropBackgroundImage,
	"mso-hide": oldPropMsoHide, "content-visibility": oldPropContentVisibility,
}

// cssDecl is one declaration with what decides the cascade.
type oldCssDecl struct {
	val       string // lower case, white space collapsed, without !important
	important bool
	spec      int32 // specificity; the style attribute is above all selectors
	order     int32 // source order, from 1; 0 means not set
}

func (d oldCssDecl) beats(o oldCssDecl) bool {
	switch {
	case o.order == 0:
		return true
	case d.important != o.important:
		return d.important
	case d.spec != o.spec:
		return d.spec > o.spec
	}
	return d.order > o.order
}

type oldCssProps [oldNumProps]oldCssDecl

func (p *oldCssProps) merge(q *oldCssProps) {
	for i := range q {
		if q[i].order != 0 && q[i].beats(p[i]) {
			p[i] = q[i]
		}
	}
}

const (
	oldInlineSpec  = 1 << 30
	oldInlineOrder = 1<<31 - 1
)

// parseDecls reads a declaration list (a style attribute or a rule's body)
// into p with the given specificity and order. Only declarations that hide
// are kept when hidingOnly is set.
func oldParseDecls(p *oldCssProps, list string, spec, order int32, hidingOnly bool) {
	for len(list) > 0 {
		item := list
		if k := oldIndexTopLevel(list, ';'); k >= 0 {
			item, list = list[:k], list[k+1:]
		} else {
			list = ""
		}
		name, val, ok := strings.Cut(item, ":")
		if !ok {
			continue
		}
		name = strings.ToLower(oldCssUnescape(strings.TrimSpace(name)))
		val = oldCollapseSpace(strings.ToLower(oldCssUnescape(val)))
		important := false
		if k := strings.LastIndexByte(val, '!'); k >= 0 && strings.TrimSpace(val[k+1:]) == "important" {
			important = true
			val = strings.TrimSpace(val[:k])
		}
		prop, known := oldPropNames[name]
		if name == "font" {
			prop, known, val = oldPropFontSize, true, oldFontShorthandSize(val)
		}
		if !known || val == "" || hidingOnly && !oldDeclHides(prop, val) {
			continue
		}
		d := oldCssDecl{val: val, important: important, spec: spec, order: order}
		if d.beats(p[prop]) {
			p[prop] = d
		}
	}
}

// declHides reports whether a declaration on its own can hide text (it may
// need a partner: a zero height needs hidden overflow).
func oldDeclHides(prop int, val string) bool {
	switch prop {
	case oldPropDisplay:
		return val == "none"
	case oldPropVisibility:
		return val == "hidden" || val == "collapse"
	case oldPropFontSize:
		return oldFontSizeKind(val) == oldFontZero
	case oldPropOpacity:
		return oldOpacityHides(val)
	case oldPropHeight, oldPropMaxHeight, oldPropWidth, oldPropMaxWidth:
		return oldIsZeroLength(val)
	case oldPropOverflow, oldPropOverflowX, oldPropOverflowY:
		return oldOverflowClips(val)
	case oldPropColor, oldPropTextFill:
		return oldNormColor(val) == "transparent"
	case oldPropMsoHide:
		return val == "all"
	case oldPropContentVisibility:
		return val == "hidden"
	}
	return false
}

// ownStyle is what an element's own declarations say about its visibility;
// inherit combines it with its parent's.
type oldOwnStyle struct {
	drop  bool // the element and everything in it is invisible
	font  int8 // fontUnset, fontZero, fontSet (an absolute size), fontRel (relative, so zero stays zero)
	vis   int8 // visUnset, visHidden, visShown
	color string
	bg    string // "" with bgSet: a background we cannot compare (image, gradient)
	bgSet bool
}

const (
	oldFontUnset = iota
	oldFontZero
	oldFontSet
	oldFontRel
)

const (
	oldVisUnset = iota
	oldVisHidden
	oldVisShown
)

// visState is the visibility inherited by an element's content.
type oldVisState struct {
	drop      bool
	fontZero  bool
	visHidden bool
	color, bg string // normalised; "" unknown
}

func (v oldVisState) hidden() bool {
	return v.drop || v.fontZero || v.visHidden || v.color == "transparent" || v.color != "" && v.color == v.bg
}

func oldInherit(parent oldVisState, own oldOwnStyle) oldVisState {
	st := parent
	st.drop = parent.drop || own.drop
	switch own.font {
	case oldFontZero:
		st.fontZero = true
	case oldFontSet:
		st.fontZero = false
	}
	switch own.vis {
	case oldVisHidden:
		st.visHidden = true
	case oldVisShown:
		st.visHidden = false
	}
	if own.color != "" {
		st.color = own.color
	}
	if own.bgSet {
		st.bg = own.bg
	}
	return st
}

// styleOf turns an element's cascaded declarations into its ownStyle.
func oldStyleOf(p *oldCssProps, a *oldHtmlAttrs) oldOwnStyle {
	var o oldOwnStyle
	o.drop = a.hidden || p[oldPropDisplay].val == "none" || p[oldPropContentVisibility].val == "hidden" ||
		p[oldPropMsoHide].val == "all" || oldOpacityHides(p[oldPropOpacity].val)
	zeroH := oldIsZeroLength(p[oldPropHeight].val) || oldIsZeroLength(p[oldPropMaxHeight].val)
	zeroW := oldIsZeroLength(p[oldPropWidth].val) || oldIsZeroLength(p[oldPropMaxWidth].val)
	clipY := oldOverflowClips(p[oldPropOverflow].val) || oldOverflowClips(p[oldPropOverflowY].val)
	clipX := oldOverflowClips(oldFirstWord(p[oldPropOverflow].val)) || oldOverflowClips(p[oldPropOverflowX].val)
	if zeroH && clipY || zeroW && clipX || oldIsZeroLength(p[oldPropWidth].val) && oldIsZeroLength(p[oldPropHeight].val) {
		o.drop = true
	}
	o.font = oldFontSizeKind(p[oldPropFontSize].val)
	switch p[oldPropVisibility].val {
	case "hidden", "collapse":
		o.vis = oldVisHidden
	case "visible":
		o.vis = oldVisShown
	}
	o.color = oldNormColor(p[oldPropColor].val)
	if o.color == "" && a.color != "" {
		o.color = oldNormColor(a.color)
	}
	if fill := oldNormColor(p[oldPropTextFill].val); fill != "" && fill != "currentcolor" {
		o.color = fill
	}
	if o.color == "currentcolor" || o.color == "inherit" {
		o.color = ""
	}
	switch bg := p[oldPropBackground].val; {
	case p[oldPropBackgroundImage].order != 0 && p[oldPropBackgroundImage].val != "none", a.background != "":
		o.bgSet = true
	case bg != "":
		o.bgSet = true
		if !strings.ContainsAny(bg, " (") || strings.HasPrefix(bg, "rgb") || strings.HasPrefix(bg, "hsl") {
			o.bg = oldNormColor(bg)
		}
	case a.bgcolor != "":
		o.bg, o.bgSet = oldNormColor(a.bgcolor), true
	}
	switch o.bg {
	case "transparent", "none":
		o.bg, o.bgSet = "", false
	case "inherit", "initial", "unset", "currentcolor":
		o.bg = ""
	}
	return o
}

func (o oldOwnStyle) hides() bool {
	return o.drop || o.font == oldFontZero || o.vis == oldVisHidden || o.color == "transparent"
}

// opacityHides reports whether an opacity value makes content practically
// invisible (below 0.1; 0.5 is still readable).
func oldOpacityHides(v string) bool {
	if v == "" {
		return false
	}
	pct := strings.HasSuffix(v, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil {
		return false
	}
	if pct {
		f /= 100
	}
	return f < 0.1
}

func oldOverflowClips(v string) bool {
	for w := range strings.FieldsSeq(v) {
		if w == "hidden" || w == "clip" {
			return true
		}
	}
	return false
}

func oldFirstWord(v string) string {
	w, _, _ := strings.Cut(v, " ")
	return w
}

// parseLength splits "12.5px" into 12.5 and "px".
func oldParseLength(v string) (float64, string, bool) {
	k := 0
	for k < len(v) && (v[k] >= '0' && v[k] <= '9' || v[k] == '.' || v[k] == '+' || v[k] == '-') {
		k++
	}
	if k == 0 || k > 24 {
		return 0, "", false
	}
	f, err := strconv.ParseFloat(v[:k], 64)
	if err != nil {
		return 0, "", false
	}
	return f, v[k:], true
}

func oldIsZeroLength(v string) bool {
	f, unit, ok := oldParseLength(v)
	return ok && f == 0 && (unit == "" || len(unit) <= 4 && strings.Trim(unit, "abcdefghijklmnopqrstuvwxyz%") == "")
}

// fontSizeKind classifies a font-size value: sizes under one pixel count as
// zero; relative sizes (em, %) are assumed to be of a 16 px parent unless the
// parent is zero, which they keep.
func oldFontSizeKind(v string) int8 {
	switch v {
	case "":
		return oldFontUnset
	case "xx-small", "x-small", "small", "medium", "large", "x-large", "xx-large", "xxx-large":
		return oldFontSet
	case "smaller", "larger":
		return oldFontRel
	}
	f, unit, ok := oldParseLength(v)
	if !ok || f < 0 {
		return oldFontUnset
	}
	px := -1.0
	rel := -1.0
	switch unit {
	case "", "px":
		if unit == "" && f != 0 {
			return oldFontUnset
		}
		px = f
	case "pt":
		px = f * 4 / 3
	case "pc":
		px = f * 16
	case "in":
		px = f * 96
	case "cm":
		px = f * 96 / 2.54
	case "mm":
		px = f * 96 / 25.4
	case "q":
		px = f * 96 / 101.6
	case "rem":
		px = f * 16
	case "em":
		rel = f
	case "%":
		rel = f / 100
	case "ex", "ch":
		rel = f / 2
	default:
		if f == 0 {
			return oldFontZero
		}
		return oldFontSet
	}
	switch {
	case px >= 0 && px < 1, rel >= 0 && rel*16 < 1:
		return oldFontZero
	case px >= 0:
		return oldFontSet
	}
	return oldFontRel
}

// fontShorthandSize finds the size in a font shorthand ("bold 0/0 a",
// "12px/1.5 Arial"); "" if there is none.
func oldFontShorthandSize(v string) string {
	for w := range strings.FieldsSeq(strings.ReplaceAll(v, "/", " / ")) {
		if w == "/" {
			return ""
		}
		if k := oldFontSizeKind(w); k != oldFontUnset {
			return w
		}
	}
	return ""
}

// normColor normalises a colour for comparison: lower case, #rgb expanded,
// rgb() to hex, a few names, anything fully transparent as "transparent".
func oldNormColor(v string) string {
	v = strings.ToLower(strings.TrimSpace(v))
	switch v {
	case "white":
		return "#ffffff"
	case "black":
		return "#000000"
	case "transparent":
		return v
	}
	if strings.HasPrefix(v, "#") {
		h := v[1:]
		switch len(h) {
		case 3, 4:
			var b strings.Builder
			b.WriteByte('#')
			for i := range 3 {
				b.WriteByte(h[i])
				b.WriteByte(h[i])
			}
			if len(h) == 4 && h[3] == '0' {
				return "transparent"
			}
			return b.String()
		case 8:
			if h[6:] == "00" {
				return "transparent"
			}
			return "#" + h[:6]
		}
		return v
	}
	if fn, args, ok := strings.Cut(v, "("); ok && (fn == "rgb" || fn == "rgba" || fn == "hsl" || fn == "hsla") {
		args = strings.TrimSuffix(args, ")")
		parts := strings.FieldsFunc(args, func(r rune) bool { return r == ',' || r == ' ' || r == '/' })
		if len(parts) == 4 {
			if a, err := strconv.ParseFloat(strings.TrimSuffix(parts[3], "%"), 64); err == nil && a == 0 {
				return "transparent"
			}
		}
		if fn[0] == 'r' && len(parts) >= 3 {
			var b strings.Builder
			b.WriteByte('#')
			for _, p := range parts[:3] {
				n, err := strconv.ParseFloat(strings.TrimSuffix(p, "%"), 64)
				if err != nil {
					return v
				}
				if strings.HasSuffix(p, "%") {
					n = n * 255 / 100
				}
				b.WriteString(strconv.FormatUint(uint64(min(max(n+0.5, 0), 255))|0x100, 16)[1:])
			}
			return b.String()
		}
	}
	return v
}

func oldCollapseSpace(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\t\n\r\f") && !strings.Contains(s, "  ") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// cssUnescape resolves CSS escapes ("\64 isplay", "\:"), which a browser
// resolves in property names, values and selectors.
func oldCssUnescape(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		j := i
		for j < len(s) && j-i < 6 && oldIsHex(s[j]) {
			j++
		}
		if j == i {
			if s[i] != '\n' {
				b.WriteByte(s[i])
			}
			continue
		}
		n, _ := strconv.ParseUint(s[i:j], 16, 32)
		r := rune(n)
		if r == 0 || r > 0x10FFFF || r >= 0xD800 && r <= 0xDFFF {
			r = 0xFFFD
		}
		b.WriteRune(r)
		if j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n') {
			j++
		}
		i = j - 1
	}
	return b.String()
}

func oldIsHex(c byte) bool { return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f' }

// indexTopLevel finds c outside strings, parentheses and brackets; -1 if
// there is none.
func oldIndexTopLevel(s string, c byte) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case '\\':
			i++
		case '"', '\'':
			if k := strings.IndexByte(s[i+1:], ch); k >= 0 {
				i += k + 1
			} else {
				return -1
			}
		case '(', '[':
			depth++
		case ')', ']':
			depth = max(depth-1, 0)
		default:
			if ch == c && depth == 0 {
				return i
			}
		}
	}
	return -1
}

// stripCSSComments removes /* comments */ and the <!-- --> wrappers mail
// often puts around a style block.
func oldStripCSSComments(s string) string {
	if !strings.Contains(s, "/*") && !strings.Contains(s, "<!--") && !strings.Contains(s, "-->") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "/*"):
			k := strings.Index(s[i+2:], "*/")
			if k < 0 {
				return b.String()
			}
			i += k + 4
			b.WriteByte(' ')
		case strings.HasPrefix(s[i:], "<!--"):
			i += 4
		case strings.HasPrefix(s[i:], "-->"):
			i += 3
		case s[i] == '"' || s[i] == '\'':
			k := strings.IndexByte(s[i+1:], s[i])
			if k < 0 {
				k = len(s) - i - 2
			}
			b.WriteString(s[i : i+k+2])
			i += k + 2
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

// cssKey names what a selector needs: a tag, a class, an id or nothing ('*').
type oldCssKey struct {
	kind byte // 't', 'c', 'i', '*'
	name string
}

type oldCompoundRule struct {
	tag, id string
	classes []string
	props   oldCssProps
}

// maxCompound caps the compound selectors matched exactly.
const oldMaxCompound = 128

// styleSheet holds the rules of a document's <style> blocks that can hide
// text.
type oldStyleSheet struct {
	exact    map[oldCssKey]*oldCssProps // rules whose selector is one simple selector
	approx   map[oldCssKey]*oldCssProps // hiding declarations of approximated rules
	compound []oldCompoundRule
	byKey    map[oldCssKey][]int32 // compound rules by their most selective part
	order    int32
}

func oldNewStyleSheet() *oldStyleSheet {
	return &oldStyleSheet{exact: map[oldCssKey]*oldCssProps{}, approx: map[oldCssKey]*oldCssProps{}, byKey: map[oldCssKey][]int32{}}
}

func (sh *oldStyleSheet) empty() bool {
	return len(sh.exact) == 0 && len(sh.approx) == 0 && len(sh.compound) == 0
}

// maxCSSDepth caps the nesting of blocks that are read; deeper ones are
// skipped.
const oldMaxCSSDepth = 12

// addCSS reads the rules of one style block.
func (sh *oldStyleSheet) addCSS(css string) {
	p := oldCssParser{s: oldStripCSSComments(css), sh: sh}
	p.rules(false, 0)
}

type oldCssParser struct {
	s  string
	i  int
	sh *oldStyleSheet
}

// until moves to the first of stops outside strings, parentheses and
// brackets and returns the text before it and the stop byte (0 at the end).
func (p *oldCssParser) until(stops string) (string, byte) {
	start, depth := p.i, 0
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '\\':
			p.i += 2
			continue
		case c == '"' || c == '\'':
			if k := strings.IndexByte(p.s[p.i+1:], c); k >= 0 {
				p.i += k + 2
			} else {
				p.i = len(p.s)
			}
			continue
		case c == '(' || c == '[':
			depth++
		case (c == ')' || c == ']') && depth > 0:
			depth--
		case depth == 0 && strings.IndexByte(stops, c) >= 0:
			return p.s[start:p.i], c
		case c == '{' || c == '}':

			if strings.IndexByte(stops, c) >= 0 {
				return p.s[start:p.i], c
			}
		}
		p.i++
	}
	p.i = min(p.i, len(p.s))
	return p.s[start:p.i], 0
}

// skipBlock moves past the '}' closing the block whose '{' was just read.
func (p *oldCssParser) skipBlock() {
	for depth := 1; ; {
		_, c := p.until("{}")
		if c == 0 {
			return
		}
		p.i++
		if c == '{' {
			depth++
		} else if depth--; depth == 0 {
			return
		}
	}
}

// rules reads rules up to the '}' closing the block (or the end at depth 0).
func (p *oldCssParser) rules(approx bool, depth int) {
	for {
		for p.i < len(p.s) && strings.IndexByte(" \t\n\r\f;", p.s[p.i]) >= 0 {
			p.i++
		}
		if p.i >= len(p.s) {
			return
		}
		if p.s[p.i] == '}' {
			p.i++
			if depth > 0 {
				return
			}
			continue
		}
		if p.s[p.i] == '@' {
			p.atRule(approx, depth)
			continue
		}
		prelude, c := p.until("{}")
		if c != '{' {
			continue
		}
		p.i++
		p.styleRule(prelude, approx, depth+1)
	}
}

func (p *oldCssParser) atRule(approx bool, depth int) {
	p.i++
	start := p.i
	for p.i < len(p.s) && (oldIsASCIILetter(p.s[p.i]) || p.s[p.i] == '-') {
		p.i++
	}
	name := strings.ToLower(p.s[start:p.i])
	prelude, c := p.until(";{}")
	switch c {
	case ';':
		p.i++
		return
	case '{':
		p.i++
	default:
		return
	}
	switch {
	case depth >= oldMaxCSSDepth:
		p.skipBlock()
	case name == "media":
		if oldMediaApplies(prelude) {
			p.rules(approx, depth+1)
		} else {
			p.skipBlock()
		}
	case name == "supports", name == "layer", name == "scope", name == "container",
		name == "document", name == "-moz-document":
		p.rules(true, depth+1)
	default:
		p.skipBlock()
	}
}

// styleRule reads the block of a style rule (its '{' was just read),
// including nested rules, and records it under each of its selectors.
func (p *oldCssParser) styleRule(prelude string, approx bool, depth int) {
	p.sh.order = min(p.sh.order+1, oldInlineOrder-1)
	order := p.sh.order
	var decls strings.Builder
	for {
		item, c := p.until(";{}")
		switch c {
		case ';':
			decls.WriteString(item)
			decls.WriteByte(';')
			p.i++
			continue
		case '{':
			p.i++
			if depth >= oldMaxCSSDepth {
				p.skipBlock()
			} else {
				p.styleRule(item, true, depth+1)
			}
			continue
		case '}':
			p.i++
		}
		decls.WriteString(item)
		break
	}
	list := decls.String()
	for sel := range oldSplitTopLevel(prelude, ',') {
		p.sh.addRule(oldParseSelector(sel), list, order, approx)
	}
}

// splitTopLevel yields the parts of s between top-level seps.
func oldSplitTopLevel(s string, sep byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for {
			k := oldIndexTopLevel(s, sep)
			if k < 0 {
				yield(s)
				return
			}
			if !yield(s[:k]) {
				return
			}
			s = s[k+1:]
		}
	}
}

func (sh *oldStyleSheet) addRule(sel oldSelector, list string, order int32, approx bool) {
	if sel.kind == oldSelSkip {
		return
	}
	if approx || sel.kind == oldSelApprox || sel.kind == oldSelCompound && len(sh.compound) >= oldMaxCompound {
		sh.merge(sh.approx, sel.key, list, sel.spec, order, true)
		return
	}
	if sel.kind == oldSelSimple {
		sh.merge(sh.exact, sel.key, list, sel.spec, order, false)
		return
	}
	var props oldCssProps
	oldParseDecls(&props, list, sel.spec, order, false)
	if props == (oldCssProps{}) {
		return
	}
	sh.compound = append(sh.compound, oldCompoundRule{tag: sel.tag, id: sel.id, classes: sel.classes, props: props})
	sh.byKey[sel.key] = append(sh.byKey[sel.key], int32(len(sh.compound)-1))
}

func (sh *oldStyleSheet) merge(m map[oldCssKey]*oldCssProps, key oldCssKey, list string, spec, order int32, hidingOnly bool) {
	var props oldCssProps
	oldParseDecls(&props, list, spec, order, hidingOnly)
	if props == (oldCssProps{}) {
		return
	}
	if t := m[key]; t != nil {
		t.merge(&props)
	} else {
		m[key] = &props
	}
}

// cascade computes the declarations that apply to an element: sheet rules
// (may be nil), then its style attribute.
func oldCascade(sh *oldStyleSheet, tag string, a *oldHtmlAttrs) oldCssProps {
	var p oldCssProps
	if sh != nil {
		var classes []string
		if a.class != "" {
			classes = strings.Fields(strings.ToLower(a.class))
			slices.Sort(classes)
			classes = slices.Compact(classes)
		}
		id := strings.ToLower(strings.TrimSpace(a.id))
		sh.apply(&p, oldCssKey{'*', ""}, tag, id, classes)
		sh.apply(&p, oldCssKey{'t', tag}, tag, id, classes)
		if id != "" {
			sh.apply(&p, oldCssKey{'i', id}, tag, id, classes)
		}
		for _, c := range classes {
			sh.apply(&p, oldCssKey{'c', c}, tag, id, classes)
		}
	}
	if a.style != "" {
		oldParseDecls(&p, a.style, oldInlineSpec, oldInlineOrder, false)
	}
	return p
}

func (sh *oldStyleSheet) apply(p *oldCssProps, key oldCssKey, tag, id string, classes []string) {
	if t := sh.exact[key]; t != nil {
		p.merge(t)
	}
	if t := sh.approx[key]; t != nil {
		p.merge(t)
	}
	for _, k := range sh.byKey[key] {
		r := &sh.compound[k]
		if r.tag != "" && r.tag != tag || r.id != "" && r.id != id {
			continue
		}
		ok := true
		for _, c := range r.classes {
			if _, found := slices.BinarySearch(classes, c); !found {
				ok = false
				break
			}
		}
		if ok {
			p.merge(&r.props)
		}
	}
}

// What a selector is to the matcher.
const (
	oldSelSkip     = iota // never applies (interaction, pseudo-element) or unreadable
	oldSelSimple          // one tag, class or id, or '*'
	oldSelCompound        // tag, classes and id together, matched exactly
	oldSelApprox          // anything else: matched by key, hiding declarations only
)

type oldSelector struct {
	kind    int
	key     oldCssKey
	tag, id string
	classes []string
	spec    int32
}

// interactive pseudo-classes: a rule with one applies only on user action.
var oldInteractivePseudo = map[string]bool{
	"hover": true, "focus": true, "active": true, "checked": true, "target": true,
	"focus-within": true, "focus-visible": true, "visited": true, "indeterminate": true,
	"open": true, "popover-open": true, "modal": true, "fullscreen": true, "user-invalid": true,
}

var oldLegacyPseudoElements = map[string]bool{"before": true, "after": true, "first-line": true, "first-letter": true}

// parseSelector reads one complex selector.
func oldParseSelector(s string) oldSelector {
	s = strings.TrimSpace(oldCssUnescape(s))
	if s == "" || len(s) > 1024 {
		return oldSelector{kind: oldSelSkip}
	}
	var sel oldSelector
	complexSel := false

	for i := 0; i < len(s); {
		if c := s[i]; c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '>' || c == '+' || c == '~' {
			complexSel = true
			i++
			continue
		}
		var ok, approx bool
		var next int
		sel.tag, sel.id, sel.classes = "", "", nil
		next, ok, approx = oldParseCompound(s, i, &sel)
		if !ok {
			return oldSelector{kind: oldSelSkip}
		}
		if approx {
			complexSel = true
		}
		i = next
	}
	if sel.tag == "*" {
		sel.tag = ""
	}
	parts := len(sel.classes)
	if sel.tag != "" {
		parts++
	}
	if sel.id != "" {
		parts++
	}
	switch {
	case sel.id != "":
		sel.key = oldCssKey{'i', sel.id}
	case len(sel.classes) > 0:
		sel.key = oldCssKey{'c', sel.classes[0]}
	case sel.tag != "":
		sel.key = oldCssKey{'t', sel.tag}
	default:
		sel.key = oldCssKey{'*', ""}
	}
	switch {
	case complexSel || len(sel.classes) > 8:
		sel.kind = oldSelApprox
	case parts <= 1:
		sel.kind = oldSelSimple
	default:
		sel.kind = oldSelCompound
		slices.Sort(sel.classes)
		sel.classes = slices.Compact(sel.classes)
	}
	return sel
}

// parseCompound reads a compound selector at s[i:] into sel (tag, id,
// classes) and adds to its specificity. approx reports parts it cannot
// match exactly (attributes, pseudo-classes, namespaces, nesting).
func oldParseCompound(s string, i int, sel *oldSelector) (next int, ok, approx bool) {
	start := i
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '>' || c == '+' || c == '~':
			return i, i > start, approx
		case c == '*':
			if i != start {
				return i, false, false
			}
			sel.tag = "*"
			i++
		case c == '&':
			approx = true
			i++
		case c == '|':
			approx = true
			sel.tag = ""
			i++
		case c == '#' || c == '.':
			name, j := oldCssIdent(s, i+1)
			if name == "" {
				return i, false, false
			}
			if c == '#' {
				if sel.id != "" && sel.id != name {
					return i, false, false
				}
				sel.id = name
				sel.spec = oldAddSpec(sel.spec, 100)
			} else {
				sel.classes = append(sel.classes, name)
				sel.spec = oldAddSpec(sel.spec, 10)
			}
			i = j
		case c == '[':
			end := oldClosingBracket(s, i)
			if end < 0 {
				return i, false, false
			}
			approx = true
			sel.spec = oldAddSpec(sel.spec, 10)
			i = end + 1
		case c == ':':
			if strings.HasPrefix(s[i:], "::") {
				return i, false, false
			}
			name, j := oldCssIdent(s, i+1)
			if name == "" {
				return i, false, false
			}
			if oldInteractivePseudo[name] || oldLegacyPseudoElements[name] {
				return i, false, false
			}
			if j < len(s) && s[j] == '(' {
				end := oldClosingParen(s, j)
				if end < 0 {
					return i, false, false
				}
				if name == "not" || name == "is" || name == "where" || name == "has" {
					for _, bad := range []string{"hover", "focus", "active", "checked", "target"} {
						if strings.Contains(strings.ToLower(s[j:end]), ":"+bad) {
							return i, false, false
						}
					}
				}
				j = end + 1
			}
			approx = true
			sel.spec = oldAddSpec(sel.spec, 10)
			i = j
		case c >= 0x80 || oldIsASCIILetter(c) || c == '_' || c == '-' || c == '\\':
			if i != start && !approx {
				return i, false, false
			}
			name, j := oldCssIdent(s, i)
			if name == "" {
				return i, false, false
			}
			if j < len(s) && s[j] == '|' {
				approx = true
				i = j
				continue
			}
			sel.tag = name
			sel.spec = oldAddSpec(sel.spec, 1)
			i = j
		default:
			return i, false, false
		}
	}
	return i, i > start, approx
}

func oldAddSpec(spec, n int32) int32 { return min(spec+n, oldInlineSpec-1) }

// cssIdent reads an identifier at s[i:] and returns it in lower case.
func oldCssIdent(s string, i int) (string, int) {
	start := i
	for i < len(s) {
		c := s[i]
		if c >= 0x80 || oldIsASCIILetter(c) || c >= '0' && c <= '9' || c == '-' || c == '_' {
			i++
			continue
		}
		break
	}
	return strings.ToLower(s[start:i]), i
}

func oldClosingParen(s string, i int) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '(':
			depth++
		case ')':
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

func oldClosingBracket(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case ']':
			return j
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

// mediaApplies evaluates a media query list for a desktop screen about
// 1000 px wide and 800 px high, in light mode. Queries it cannot read do not
// apply.
func oldMediaApplies(q string) bool {
	q = strings.ToLower(oldCollapseSpace(q))
	if q == "" {
		return true
	}
	for query := range oldSplitTopLevel(q, ',') {
		if oldMediaQueryApplies(strings.TrimSpace(query)) {
			return true
		}
	}
	return false
}

func oldMediaQueryApplies(q string) bool {
	negate := false
	if rest, ok := strings.CutPrefix(q, "not "); ok {
		negate, q = true, rest
	}
	q = strings.TrimPrefix(q, "only ")
	result, known := true, true
	for i, part := range strings.Split(q, " and ") {
		part = strings.TrimSpace(part)
		if !strings.HasPrefix(part, "(") {
			if i > 0 {
				return false
			}
			switch part {
			case "all", "screen":
			case "print", "speech", "tty", "tv", "projection", "handheld", "braille", "embossed", "aural":
				result = false
			default:
				known = false
			}
			continue
		}
		ok, k := oldMediaFeatureApplies(strings.TrimSuffix(strings.TrimPrefix(part, "("), ")"))
		result = result && ok
		known = known && k
	}
	if !known {
		return false
	}
	return result != negate
}

func oldMediaFeatureApplies(f string) (result, known bool) {
	name, val, _ := strings.Cut(f, ":")
	name, val = strings.TrimSpace(name), strings.TrimSpace(val)
	size := func(v string) (float64, bool) {
		n, unit, ok := oldParseLength(v)
		switch {
		case !ok:
			return 0, false
		case unit == "px" || unit == "" && n == 0:
			return n, true
		case unit == "em" || unit == "rem":
			return n * 16, true
		case unit == "pt":
			return n * 4 / 3, true
		}
		return 0, false
	}
	const width, height = 1000, 800
	switch name {
	case "min-width", "min-device-width":
		n, ok := size(val)
		return ok && width >= n, ok
	case "max-width", "max-device-width":
		n, ok := size(val)
		return ok && width <= n, ok
	case "min-height", "min-device-height":
		n, ok := size(val)
		return ok && height >= n, ok
	case "max-height", "max-device-height":
		n, ok := size(val)
		return ok && height <= n, ok
	case "prefers-color-scheme":
		return val == "light", val == "light" || val == "dark"
	case "orientation":
		return val == "landscape", val == "landscape" || val == "portrait"
	case "color":
		return true, true
	}
	return false, false
}

// decodeAttr decodes character references in an attribute value, as a
// browser does before CSS sees it ("display&colon;none").
func oldDecodeAttr(v string) string {
	if !strings.Contains(v, "&") {
		return v
	}
	// Numeric references without the ';' count too ("&#58none").
	var b strings.Builder
	for {
		k := strings.Index(v, "&#")
		if k < 0 {
			b.WriteString(v)
			break
		}
		b.WriteString(v[:k])
		j, base := k+2, 10
		if j < len(v) && v[j]|0x20 == 'x' {
			j, base = j+1, 16
		}
		d := j
		for d < len(v) && d-j < 8 && (base == 10 && v[d] >= '0' && v[d] <= '9' || base == 16 && oldIsHex(v[d])) {
			d++
		}
		n, err := strconv.ParseUint(v[j:d], base, 32)
		if d == j || err != nil {
			b.WriteString(v[k:j])
			v = v[j:]
			continue
		}
		r := rune(n)
		if r == 0 || r > 0x10FFFF || r >= 0xD800 && r <= 0xDFFF {
			r = 0xFFFD
		}
		b.WriteRune(r)
		if d < len(v) && v[d] == ';' {
			d++
		}
		v = v[d:]
	}
	return html2text.HTMLEntitiesToText(b.String())
}
