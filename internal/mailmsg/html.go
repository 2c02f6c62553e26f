package mailmsg

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/k3a/html2text"
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
func HTMLToText(html string) string {
	text, _ := htmlToText(html)
	return text
}

// hiddenWarning is the warning for n hidden elements whose text was left
// out.
func hiddenWarning(n int) string {
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
func htmlToText(html string) (string, int) {
	// Sanitising first drops invisible characters k3a would turn into
	// spaces (U+200B) and controls the tokenizer need not think about.
	html = sanitizeChars(html)
	c := newHTMLConv()
	if hasStyleTag(html) {
		// A <style> block applies to the whole document, also to what
		// comes before it: read them all first.
		pre := htmlConv{collecting: true, sheet: newStyleSheet()}
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
func hasStyleTag(s string) bool {
	for i := 0; ; {
		k := strings.IndexByte(s[i:], '<')
		if k < 0 {
			return false
		}
		i += k + 1
		if i+5 <= len(s) && asciiEqualFold(s[i:i+5], "style") {
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
type htmlConv struct {
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
	stack     []elem
	base      elem             // what the empty stack stands for
	last      map[string]int32 // index of the topmost open element of each name
	overflow  int              // elements opened beyond maxDepth (not on the stack)
	ovState   visState         // visibility inside them: once hidden, hidden until they all close
	ovCounted bool
	afe       []afeEntry // active formatting elements, with markers (td, th, ...)
	afeNextID int32
	needRecon bool // a formatting element was closed implicitly

	sheet      *styleSheet // rules of the document's <style> blocks; nil if none
	collecting bool        // first pass: only read <style> blocks into sheet

	hiddenCount int
}

func newHTMLConv() *htmlConv {
	return &htmlConv{
		lineStart: true,
		last:      map[string]int32{},
		base:      elem{hider: -1, prevSame: -1, special: -1, specialNotADP: -1, defBound: -1, tableBound: -1},
	}
}

// maxDepth caps the open elements tracked (Blink caps the DOM depth at 512
// too).
const maxDepth = 512

// elem is an open element.
type elem struct {
	name string
	st   visState // what its content inherits
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

type afeEntry struct {
	name    string
	own     ownStyle
	id      int32 // shared by the element and its reopened copies
	marker  bool
	open    bool // on the stack
	counted bool // one of its copies was counted as hidden
}

// maxAFE caps the formatting elements remembered after the last marker.
const maxAFE = 64

func (c *htmlConv) run(s string) {
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
func (c *htmlConv) markup(s string, i int) int {
	if i+1 >= len(s) {
		c.text("&lt;")
		return len(s)
	}
	switch n := s[i+1]; {
	case n == '!':
		if strings.HasPrefix(s[i:], "<!--") {
			return commentEnd(s, i+4)
		}
		return bogusCommentEnd(s, i+2)
	case n == '?':
		return bogusCommentEnd(s, i+2)
	case n == '/':
		if i+2 < len(s) && isASCIILetter(s[i+2]) {
			name, p := tagName(s, i+2)
			_, end, closed := parseAttrs(s, p)
			if closed && !c.collecting {
				c.endTag(name)
			}
			return end
		}
		if i+2 < len(s) && s[i+2] == '>' {
			return i + 3
		}
		return bogusCommentEnd(s, i+2)
	case isASCIILetter(n):
		name, p := tagName(s, i+1)
		attrs, end, closed := parseAttrs(s, p)
		if !closed {
			return end // EOF inside a tag: the tag is dropped
		}
		switch name {
		case "script", "style", "title", "iframe", "noembed", "noframes":
			contentEnd, after := rawTextEnd(s, end, name)
			if name == "style" && c.collecting && mediaApplies(decodeAttr(attrs.media)) {
				c.sheet.addCSS(s[end:contentEnd])
			}
			return after
		case "textarea", "xmp":
			contentEnd, after := rawTextEnd(s, end, name)
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
func commentEnd(s string, p int) int {
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

func bogusCommentEnd(s string, p int) int {
	if k := strings.IndexByte(s[p:], '>'); k >= 0 {
		return p + k + 1
	}
	return len(s)
}

// rawTextEnd finds the end tag closing a raw text element whose content
// starts at s[p]; it returns where the content ends and where parsing
// continues.
func rawTextEnd(s string, p int, name string) (contentEnd, after int) {
	for q := p; ; {
		k := strings.Index(s[q:], "</")
		if k < 0 {
			return len(s), len(s)
		}
		t := q + k + 2
		if t+len(name) <= len(s) && asciiEqualFold(s[t:t+len(name)], name) &&
			(t+len(name) == len(s) || strings.IndexByte("\t\n\f\r />", s[t+len(name)]) >= 0) {
			return q + k, bogusCommentEnd(s, t+len(name))
		}
		q = t
	}
}

// asciiEqualFold is strings.EqualFold for ASCII only, as HTML tag names
// compare (no Unicode folding of "ſ" or "K").
func asciiEqualFold(a, lower string) bool {
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

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// tagName reads a tag name at s[p:] and returns it in lower case (names
// longer than any we care about come back as "?").
func tagName(s string, p int) (string, int) {
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
type htmlAttrs struct {
	href, style, class, id, media string
	color, bgcolor, background    string // <font color>, <td bgcolor>, <td background>
	hidden                        bool
	seen                          uint16 // HTML keeps the first of duplicate attributes
}

var attrBits = map[string]uint16{
	"href": 1, "style": 2, "class": 4, "id": 8, "media": 16, "color": 32, "bgcolor": 64, "background": 128,
}

func (a *htmlAttrs) set(name, val string) {
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
	bit, ok := attrBits[n]
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
func parseAttrs(s string, p int) (a htmlAttrs, end int, closed bool) {
	for p < len(s) {
		switch s[p] {
		case '>':
			return a, p + 1, true
		case ' ', '\t', '\n', '\f', '\r', '/':
			p++
			continue
		}
		start := p
		p++ // the first character may be '='
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

func isVoidElement(name string) bool {
	switch name {
	case "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
		"param", "source", "track", "wbr", "basefont", "bgsound", "keygen", "frame", "image":
		return true
	}
	return false
}

// isSpecial reports whether name is in HTML's "special" category: a stray
// end tag cannot close an element across one of these.
func isSpecial(name string) bool {
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
func isFormatting(name string) bool {
	switch name {
	case "a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u":
		return true
	}
	return false
}

// isMarkerElement reports whether name puts a marker in the list of active
// formatting elements: formatting from outside is not reopened inside it.
func isMarkerElement(name string) bool {
	switch name {
	case "applet", "object", "marquee", "template", "td", "th", "caption":
		return true
	}
	return false
}

func isDefaultScopeBoundary(name string) bool {
	switch name {
	case "applet", "caption", "html", "table", "td", "th", "marquee", "object", "template":
		return true
	}
	return false
}

func isHeading(name string) bool {
	return len(name) == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6'
}

// closesP reports whether a start tag closes an open <p>. (<table> does
// not: in quirks mode, which mail without a doctype is in, it stays inside.)
func closesP(name string) bool {
	switch name {
	case "address", "article", "aside", "blockquote", "center", "details", "dialog", "dir",
		"div", "dl", "fieldset", "figcaption", "figure", "footer", "header", "hgroup", "main",
		"menu", "nav", "ol", "p", "search", "section", "summary", "ul", "pre", "listing",
		"form", "plaintext", "xmp", "hr", "li", "dd", "dt":
		return true
	}
	return isHeading(name)
}

// allowedInHead reports whether a start tag keeps <head> open.
func allowedInHead(name string) bool {
	switch name {
	case "title", "meta", "link", "style", "script", "base", "noscript", "template", "head",
		"basefont", "bgsound", "noframes", "html":
		return true
	}
	return false
}

func (c *htmlConv) top() *elem {
	if len(c.stack) == 0 {
		return &c.base
	}
	return &c.stack[len(c.stack)-1]
}

// cur is the visibility the next text or element inherits.
func (c *htmlConv) cur() visState {
	if c.overflow > 0 {
		return c.ovState
	}
	return c.top().st
}

func (c *htmlConv) lastOf(name string) int32 {
	if i, ok := c.last[name]; ok {
		return i
	}
	return -1
}

// inScope returns the index of the topmost open element named name if no
// scope boundary is above it (bound is the topmost boundary), else -1.
func (c *htmlConv) inScope(name string, bound int32) int32 {
	if i := c.lastOf(name); i >= 0 && i >= bound {
		return i
	}
	return -1
}

func (c *htmlConv) buttonBound() int32 { return max(c.top().defBound, c.lastOf("button")) }

func (c *htmlConv) listItemBound() int32 {
	return max(c.top().defBound, c.lastOf("ol"), c.lastOf("ul"))
}

// styleFor computes what an element's own attributes and the style sheet
// say about its visibility.
func (c *htmlConv) styleFor(name string, a *htmlAttrs) ownStyle {
	if name == "head" || name == "template" {
		return ownStyle{drop: true}
	}
	if a == nil || !a.hidden && a.style == "" && a.color == "" && a.bgcolor == "" && a.background == "" && c.sheet == nil {
		return ownStyle{}
	}
	a.style, a.class, a.id = stripCSSComments(decodeAttr(a.style)), decodeAttr(a.class), decodeAttr(a.id)
	p := cascade(c.sheet, name, a)
	return styleOf(&p, a)
}

// push opens an element; nil if it is beyond maxDepth.
func (c *htmlConv) push(name string, own ownStyle) *elem {
	st := inherit(c.cur(), own)
	if c.overflow > 0 || len(c.stack) >= maxDepth {
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
	e := elem{name: name, st: st, hider: -1, prevSame: c.lastOf(name),
		special: t.special, specialNotADP: t.specialNotADP, defBound: t.defBound, tableBound: t.tableBound,
		countable: name != "head" && name != "template"}
	switch {
	case !st.hidden():
	case t.st.hidden():
		e.hider = t.hider
	default:
		e.hider = i
	}
	if isSpecial(name) {
		e.special = i
		if name != "address" && name != "div" && name != "p" {
			e.specialNotADP = i
		}
	}
	if isDefaultScopeBoundary(name) {
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
func (c *htmlConv) popTo(i int32, explicit bool) {
	for int32(len(c.stack)) > i {
		j := len(c.stack) - 1
		e := c.stack[j]
		c.stack = c.stack[:j]
		if e.prevSame >= 0 {
			c.last[e.name] = e.prevSame
		} else {
			delete(c.last, e.name)
		}
		if isFormatting(e.name) {
			if explicit && int32(j) == i {
				c.afeRemove(e.name)
			} else {
				c.afeClose(e.name)
			}
		}
		if isMarkerElement(e.name) {
			c.afeClearToMarker()
		}
		if e.rendered {
			c.closeOutput(e.name)
		}
	}
}

// countHidden counts the hidden element that text just dropped was in.
func (c *htmlConv) countHidden() {
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
						return // a reopened copy of an element already counted
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

func (c *htmlConv) startTag(name string, a *htmlAttrs) {
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
		return // browsers merge its attributes into the open one
	}
	c.implyEnds(name)
	if c.needRecon && !isSpecial(name) {
		c.reconstruct()
	}
	own := c.styleFor(name, a)
	rendered := !c.cur().drop && !own.drop
	if isVoidElement(name) {
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
	if isFormatting(name) {
		e.afeID = c.afePush(name, own)
	}
	if isMarkerElement(name) {
		c.afe = append(c.afe, afeEntry{marker: true})
	}
}

// implyEnds closes the elements a start tag implicitly ends.
func (c *htmlConv) implyEnds(name string) {
	if c.overflow > 0 {
		return
	}
	if h := c.lastOf("head"); h >= 0 && !allowedInHead(name) {
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
	if closesP(name) {
		if i := c.inScope("p", c.buttonBound()); i >= 0 {
			c.popTo(i, false)
		}
	}
	if isHeading(name) && isHeading(c.top().name) {
		c.popTo(int32(len(c.stack)-1), false)
	}
}

func (c *htmlConv) endTag(name string) {
	if name == "br" { // "</br>" is a <br> in HTML
		c.startTag("br", nil)
		return
	}
	if c.overflow > 0 {
		if c.overflow--; c.overflow == 0 {
			c.ovState, c.ovCounted = visState{}, false
		}
		return
	}
	i := int32(-1)
	switch {
	case name == "body" || name == "html":
		return // text after them still goes into the body
	case name == "p":
		if i = c.inScope("p", c.buttonBound()); i < 0 && !c.cur().drop {
			c.want(2) // a browser shows an empty paragraph
		}
	case name == "li":
		i = c.inScope("li", c.listItemBound())
	case isHeading(name):
		for _, h := range [...]string{"h1", "h2", "h3", "h4", "h5", "h6"} {
			i = max(i, c.inScope(h, c.top().defBound))
		}
	case name == "td" || name == "th" || name == "tr" || name == "table" || name == "tbody" ||
		name == "thead" || name == "tfoot" || name == "caption" || name == "colgroup":
		i = c.inScope(name, c.top().tableBound)
	case isFormatting(name):
		c.endFormatting(name)
		return
	case isSpecial(name):
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
func (c *htmlConv) endFormatting(name string) {
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
		return // not in scope: ignored
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
func (c *htmlConv) afeStart() int {
	for k := len(c.afe) - 1; k >= 0; k-- {
		if c.afe[k].marker {
			return k + 1
		}
	}
	return 0
}

// afePush adds a formatting element and returns its id (0 if it was not
// added).
func (c *htmlConv) afePush(name string, own ownStyle) int32 {
	start := c.afeStart()
	if len(c.afe)-start >= maxAFE {
		// Forget the oldest one that hides nothing.
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
	c.afe = append(c.afe, afeEntry{name: name, own: own, id: c.afeNextID, open: true})
	return c.afeNextID
}

// afeFind returns the index of the last entry named name after the last
// marker, or -1.
func (c *htmlConv) afeFind(name string) int {
	for k := len(c.afe) - 1; k >= 0 && !c.afe[k].marker; k-- {
		if c.afe[k].name == name {
			return k
		}
	}
	return -1
}

// afeOpen returns the last open entry named name after the last marker, or
// -1.
func (c *htmlConv) afeOpen(name string) int {
	for k := len(c.afe) - 1; k >= 0 && !c.afe[k].marker; k-- {
		if c.afe[k].name == name && c.afe[k].open {
			return k
		}
	}
	return -1
}

// afeClose records that a formatting element was closed implicitly: it is
// reopened before the next text.
func (c *htmlConv) afeClose(name string) {
	if k := c.afeOpen(name); k >= 0 {
		c.afe[k].open = false
		c.needRecon = true
	}
}

// afeRemove forgets a formatting element closed by its end tag.
func (c *htmlConv) afeRemove(name string) {
	k := c.afeOpen(name)
	if k < 0 {
		k = c.afeFind(name)
	}
	if k >= 0 {
		c.afe = slices.Delete(c.afe, k, k+1)
	}
}

func (c *htmlConv) afeClearToMarker() {
	c.afe = c.afe[:max(c.afeStart()-1, 0)]
}

// reconstruct reopens formatting elements that were closed implicitly
// (HTML's "reconstruct the active formatting elements").
func (c *htmlConv) reconstruct() {
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
func (c *htmlConv) openOutput(name string, a *htmlAttrs) {
	switch {
	case isNestedList(name, c.listDepth):
		c.want(1)
	case isParaBlock(name):
		c.want(2)
	case isLineBlock(name):
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
func (c *htmlConv) closeOutput(name string) {
	switch {
	case isNestedList(name, c.listDepth-1):
		c.want(1)
	case isParaBlock(name):
		c.want(2)
	case isLineBlock(name):
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
func isLineBlock(name string) bool {
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
func isParaBlock(name string) bool {
	switch name {
	case "p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "ul", "ol", "dl",
		"table", "hr", "figure", "listing", "plaintext":
		return true
	}
	return false
}

// isNestedList reports whether name is a list inside another list (depth
// lists already open outside it): it gets a line break, not a blank line.
func isNestedList(name string, depth int) bool {
	return depth > 0 && (name == "ul" || name == "ol" || name == "menu" || name == "dir")
}

// want asks for at least n line breaks before the next visible text.
func (c *htmlConv) want(n int) {
	if c.started && c.pendingNL < n {
		c.pendingNL = n
	}
}

// text handles character data (entities still encoded).
func (c *htmlConv) text(t string) {
	if c.collecting || t == "" {
		return
	}
	if h := c.lastOf("head"); h >= 0 && c.overflow == 0 && !isBlankHTML(t) {
		c.popTo(h, false) // text ends the head
	}
	if c.needRecon {
		c.reconstruct()
	}
	if c.cur().hidden() {
		if !isBlankHTML(t) {
			c.countHidden()
		}
		return
	}
	if c.preDepth > 0 {
		c.preText(t)
		return
	}
	if isBlankHTML(t) {
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
func (c *htmlConv) preText(t string) {
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
					c.out.WriteString("\u00a0") // k3a keeps it; turned back into a space after
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
		if len(content) < len(line) { // it had a line break
			if c.started {
				c.pendingNL = min(c.pendingNL+1, 3)
			}
		}
	}
}

// flush writes the line breaks and prefixes owed before visible text.
func (c *htmlConv) flush() {
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

func (c *htmlConv) writeEscaped(t string) {
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

func (c *htmlConv) addLinkText(t string) {
	if c.inLink && c.linkText.Len() < 1024 {
		c.linkText.WriteString(t)
	}
}

// closeLink ends the open link, writing " (url)" after its text unless the
// text already shows the URL, the link has no text, or the URL is a script or
// a fragment.
func (c *htmlConv) closeLink() {
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
	if text == "" || url == "" || !linkWorthShowing(url) || sameLink(text, url) {
		return
	}
	c.flush()
	c.out.WriteString(" (")
	c.writeEscaped(href)
	c.out.WriteString(")")
	c.lineStart = false
}

func linkWorthShowing(url string) bool {
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
func sameLink(text, url string) bool {
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
func isBlankHTML(t string) bool {
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
