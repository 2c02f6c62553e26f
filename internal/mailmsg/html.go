package mailmsg

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// HTMLToText converts an HTML document or fragment to readable plain text:
// no tags, entities decoded, links kept as "text (url)", block elements and
// <br> as line breaks, table cells separated by " | ", list items as "- "
// (numbered in an <ol>), blockquotes as "> " lines, <pre> spacing kept.
// Link URLs are left out when the link text already shows them, the link
// has no text (images), or they are javascript:, data: or #fragment links.
// The contents of <script>, <style>, <head>, <template>, <noscript> and
// comments are dropped, and so is text a reader does not see (see css.go):
// elements hidden with display:none, visibility:hidden, a zero font size,
// opacity near 0, a zero-sized box with hidden overflow, a position off the
// screen, a text colour too close to its background, the hidden attribute
// or a closed <details>, whether by their style attribute or by a rule of a
// <style> block. Hidden text is a common way to address the model behind
// the reader's back. The result is sanitised and tidied like DecodeText's.
//
// The document is parsed as a browser parses it (golang.org/x/net/html
// implements the HTML5 parsing algorithm), so the tree whose visibility is
// judged is the one a mail client renders. It runs in time linear in
// len(html): the style matching is budgeted (selector.go); the parser
// looks through at most 512 open elements per tag, as browsers do.
func HTMLToText(html string) string {
	return convertHTML(html, false).text
}

// htmlText is what convertHTML makes of a document.
type htmlText struct {
	text   string // what a reader sees
	hidden string // the text of the hidden elements, one line per element (only when asked for)
	count  int    // hidden elements (outermost ones) that had text
	// Text kept in text that may be hidden all the same (placed in a way
	// not decided here): its lines (only when asked for) and how many
	// elements.
	unsure      string
	unsureCount int
}

// HiddenWarning is the warning for n hidden HTML elements whose text was
// left out (DecodeText gives it).
func HiddenWarning(n int) string {
	if n == 1 {
		return "1 HTML element with text was removed because mail clients do not show it (styled to be invisible, a common way to hide instructions)."
	}
	return fmt.Sprintf("%d HTML elements with text were removed because mail clients do not show them (styled to be invisible, a common way to hide instructions).", n)
}

// UnsureWarning is the warning for n HTML elements whose text was kept
// although mail clients may not show it.
func UnsureWarning(n int) string {
	what := fmt.Sprintf("%d HTML elements with text are", n)
	if n == 1 {
		what = "1 HTML element with text is"
	}
	return what + " moved off the page or clipped in a way that depends on the mail client, so the reader may not see it; the text is kept in the body (treat it with suspicion: hiding text is a common way to address a model behind the reader's back)."
}

// UnsureLabel starts the lines of possibly hidden text in the hidden text
// (DecodeTextHidden).
const UnsureLabel = "possibly hidden (also in the body):"

// htmlToText is convertHTML without the hidden text.
func htmlToText(s string) (string, int) {
	r := convertHTML(s, false)
	return r.text, r.count
}

// convertHTML converts a document; keepHidden also collects the text of
// hidden elements.
func convertHTML(s string, keepHidden bool) htmlText {
	// Sanitising first drops invisible characters and controls.
	s = sanitizeChars(s)
	doc, rest := parseHTML(s)
	r := &renderer{lineStart: true, keepHidden: keepHidden, doc: doc}
	if css := styleBlocks(doc); len(css.rules) > 0 {
		if sh := newStyleSheet(css.rules, quirksMode(doc)); !sh.empty() {
			r.m = newMatcher(sh, doc, matchBudget(len(s)))
		}
	}
	r.out.Grow(len(s) / 4)
	r.walk(doc, rootState, nil, false)
	r.closeLink()
	if rest != "" {
		// Deeper than the parser goes: kept out of the visible text.
		run := &hiddenRun{}
		r.startHidden()
		tokenText(rest, func(t string) { r.hiddenText(t, run) })
	}
	out := strings.ReplaceAll(r.out.String(), "\u00a0", " ")
	res := htmlText{text: normalizeText(Sanitize(out)), count: r.count, unsureCount: r.unsCount}
	if keepHidden {
		res.hidden = normalizeText(Sanitize(strings.ReplaceAll(r.hid.String(), "\u00a0", " ")))
		res.unsure = normalizeText(Sanitize(strings.ReplaceAll(r.uns.String(), "\u00a0", " ")))
	}
	return res
}

// parseHTML parses s with the HTML5 algorithm (parse). x/net/html refuses a
// document nested deeper than 512 elements (Chromium stops nesting there
// too); then the longest prefix it accepts is parsed, and the rest is
// returned, to be treated as hidden.
func parseHTML(s string) (*html.Node, string) {
	doc, err := parse(strings.NewReader(s))
	if err == nil {
		return doc, ""
	}
	cut := len(s)
	for range 4 {
		// Read one byte at a time to learn where it gave up.
		cr := &byteReader{s: s[:cut]}
		if _, err := parse(cr); err == nil {
			break
		}
		k := strings.LastIndexByte(s[:max(cr.n-1, 0)], '<')
		if k <= 0 {
			break
		}
		cut = k
		if doc, err := parse(strings.NewReader(s[:cut])); err == nil {
			return doc, s[cut:]
		}
	}
	doc, _ = parse(strings.NewReader(""))
	return doc, s
}

// parse builds the tree as a mail client does: with scripting disabled,
// so <noscript> holds markup that is shown.
func parse(r io.Reader) (*html.Node, error) {
	return html.ParseWithOptions(r, html.ParseOptionEnableScripting(false))
}

// byteReader hands out s one byte per Read and counts them.
type byteReader struct {
	s string
	n int
}

func (b *byteReader) Read(p []byte) (int, error) {
	if b.n >= len(b.s) {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = b.s[b.n]
	b.n++
	return 1, nil
}

// tokenText calls f with the text of s outside tags, comments, scripts and
// styles (for what the parser could not nest).
func tokenText(s string, f func(string)) {
	z := html.NewTokenizer(strings.NewReader(s))
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return
		case html.TextToken:
			if skip == 0 {
				f(string(z.Text()))
			}
		case html.StartTagToken:
			if name, _ := z.TagName(); string(name) == "script" || string(name) == "style" {
				skip++
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); (string(name) == "script" || string(name) == "style") && skip > 0 {
				skip--
			}
		}
	}
}

// styleBlocks reads the rules of the document's <style> elements that
// apply on a desktop screen (by their media attribute), in document order;
// those inside <template> are inert.
func styleBlocks(doc *html.Node) *cssReader {
	r := &cssReader{}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode {
				continue
			}
			switch {
			case c.Data == "template" && c.Namespace == "":
				continue
			case c.Data == "style":
				if mediaApplies(attr(c, "media")) {
					var b strings.Builder
					for t := c.FirstChild; t != nil; t = t.NextSibling {
						if t.Type == html.TextNode {
							b.WriteString(t.Data)
						}
					}
					r.addCSS(b.String())
				}
				continue
			}
			walk(c)
		}
	}
	walk(doc)
	return r
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key && a.Namespace == "" {
			return a.Val
		}
	}
	return ""
}

// quirksMode tells whether a browser renders the document in quirks mode,
// where class and id selectors ignore ASCII case. Without a doctype, or with
// one it does not know as standards or almost-standards mode, it says yes:
// matching without case then hides what the browser may hide.
func quirksMode(doc *html.Node) bool {
	for c := doc.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.DoctypeNode {
			continue
		}
		if c.Data != "html" {
			return true
		}
		var public, system string
		hasSystem := false
		for _, a := range c.Attr {
			switch a.Key {
			case "public":
				public = strings.ToLower(a.Val)
			case "system":
				system, hasSystem = strings.ToLower(a.Val), true
			}
		}
		switch {
		case public == "" && system != "http://www.ibm.com/data/dtd/v11/ibmxhtml1-transitional.dtd":
			return false
		case strings.HasPrefix(public, "-//w3c//dtd xhtml 1.0 "), strings.HasPrefix(public, "-//w3c//dtd xhtml 1.1//"),
			strings.HasPrefix(public, "-//w3c//dtd html 4.01//"), strings.HasPrefix(public, "-//w3c//dtd html 4.0//"):
			return false
		case hasSystem && (strings.HasPrefix(public, "-//w3c//dtd html 4.01 transitional//") || strings.HasPrefix(public, "-//w3c//dtd html 4.01 frameset//")):
			return false
		}
		return true
	}
	return true
}

// elemAttrs holds the attributes that matter (the first of duplicates, as
// browsers keep).
type elemAttrs struct {
	style, color, bgcolor, background, hrefVal string
	align, dir, width, height, border          string
	hidden, untilFound, href, open             bool
}

func attrsOf(n *html.Node) elemAttrs {
	var a elemAttrs
	var seen uint8
	var seenNames []string
	for _, at := range n.Attr {
		if at.Namespace != "" {
			continue
		}
		var bit uint8
		switch at.Key {
		case "style":
			bit = 1
		case "color":
			bit = 2
		case "bgcolor":
			bit = 4
		case "background":
			bit = 8
		case "href":
			bit = 16
		case "hidden":
			a.hidden = true
			a.untilFound = strings.EqualFold(strings.TrimSpace(at.Val), "until-found")
		case "open":
			a.open = true
		case "text":
			bit = 2 // <body text> is <body>'s colour
		case "align":
			bit = 32
		case "dir":
			bit = 64
		case "width", "height", "border":
			if !slicesContains(seenNames, at.Key) {
				seenNames = append(seenNames, at.Key)
				switch at.Key {
				case "width":
					a.width = at.Val
				case "height":
					a.height = at.Val
				default:
					a.border = at.Val
				}
			}
		}
		if bit == 0 || seen&bit != 0 {
			continue
		}
		seen |= bit
		switch at.Key {
		case "style":
			a.style = at.Val
		case "color", "text":
			a.color = legacyColor(at.Val)
		case "bgcolor":
			a.bgcolor = legacyColor(at.Val)
		case "background":
			a.background = at.Val
		case "href":
			a.href, a.hrefVal = true, at.Val
		case "align":
			a.align = strings.ToLower(strings.TrimSpace(at.Val))
		case "dir":
			a.dir = strings.ToLower(strings.TrimSpace(at.Val))
		}
	}
	return a
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// legacyColor reads a colour attribute (bgcolor, <font color>) by HTML's
// rules for parsing a legacy colour value: bgcolor="ffffff" is #ffffff and
// "chucknorris" is #c00000. It returns a value parseColor reads ("" for
// none).
func legacyColor(v string) string {
	v = strings.Trim(v, " \t\n\f\r")
	l := strings.ToLower(v)
	if v == "" || l == "transparent" {
		return ""
	}
	if _, ok := parseColor(l); ok && !strings.HasPrefix(l, "#") && !strings.Contains(l, "(") {
		return l // a named colour
	}
	if len(v) == 4 && v[0] == '#' && isHex(v[1]) && isHex(v[2]) && isHex(v[3]) {
		return l
	}
	var b []byte
	for _, r := range v {
		if len(b) >= 128 {
			break
		}
		switch {
		case r > 0xFFFF:
			b = append(b, '0', '0')
		case r < 0x80 && isHex(byte(r)):
			b = append(b, byte(r))
		case r == '#' && len(b) == 0 && strings.HasPrefix(v, "#"):
			// a leading '#' is dropped
		default:
			b = append(b, '0')
		}
	}
	if len(b) > 128 {
		b = b[:128]
	}
	for len(b) == 0 || len(b)%3 != 0 {
		b = append(b, '0')
	}
	n := len(b) / 3
	parts := [3][]byte{b[:n], b[n : 2*n], b[2*n:]}
	if n > 8 {
		for i := range parts {
			parts[i] = parts[i][n-8:]
		}
		n = 8
	}
	for n > 2 && parts[0][0] == '0' && parts[1][0] == '0' && parts[2][0] == '0' {
		for i := range parts {
			parts[i] = parts[i][1:]
		}
		n--
	}
	out := []byte{'#'}
	for i := range parts {
		p := parts[i]
		if len(p) > 2 {
			p = p[:2]
		}
		if len(p) == 1 {
			p = []byte{'0', p[0]}
		}
		out = append(out, p...)
	}
	return strings.ToLower(string(out))
}

// renderer walks the parsed document and writes what a reader sees.
type renderer struct {
	out strings.Builder

	started    bool // visible text has been written
	lineStart  bool // the output is at the start of a line
	space      bool // a space is owed before the next visible text
	lastSpace  bool // the output ends with a space
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

	doc        *html.Node
	m          *matcher // nil without style rules
	next       int32    // the index in m.elems of the next element
	styleCache map[string][]propDecl
	props      cssProps   // the cascade of the element styled last
	propsNode  *html.Node // that element

	geo   lineBounds // where text can land (geometry.go)
	pageW float64    // pageWidth, once computed

	// In a <select> shown as a drop-down: the option it shows.
	inSelect bool
	shown    *html.Node

	keepHidden bool
	hid        strings.Builder // the hidden text
	hidSpace   bool
	count      int

	// Text shown that may be hidden (visState.unsure).
	uns         strings.Builder
	unsCount    int
	unsLastRun  *hiddenRun
	varOverflow bool
}

// hiddenRun is one stretch of hidden content: an element that hides and
// what it holds.
type hiddenRun struct{ counted bool }

// skipped elements are never rendered, nor is anything in them.
func skipped(n *html.Node) bool {
	if n.Namespace != "" {
		return n.Data == "style" || n.Data == "script"
	}
	switch n.Data {
	case "head", "script", "style", "template", "title", "iframe", "noembed", "noframes":
		return true
	}
	return false
}

// walk renders the children of n, which inherit st; run is the hidden
// stretch they are in (nil when visible). closedDetails says n is a
// <details> without open: only its first <summary> is shown.
func (r *renderer) walk(n *html.Node, st visState, run *hiddenRun, closedDetails bool) {
	summary := false
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		cst := st
		if closedDetails {
			if c.Type == html.ElementNode && c.Data == "summary" && c.Namespace == "" && !summary {
				summary = true
			} else {
				cst.drop = true
			}
		}
		switch c.Type {
		case html.TextNode:
			hidden := cst.hidden() || r.inSelect && n.Data == "select"
			crun := run
			if r.geo.on && !cst.drop {
				// Text takes its place whether it is seen or not.
				if off := r.offPage(c.Data, &cst); off && !hidden {
					hidden = true
					if r.geo.run == nil {
						r.geo.run = &hiddenRun{}
						r.startHidden()
					}
					crun = r.geo.run
				}
			}
			if hidden {
				if crun == nil {
					crun = &hiddenRun{}
					r.startHidden()
				}
				r.hiddenText(c.Data, crun)
			} else {
				r.text(c.Data)
				if cst.unsure != nil {
					r.unsureText(c.Data, cst.unsure)
				}
			}
		case html.ElementNode:
			r.element(c, cst, run)
		}
	}
}

func (r *renderer) element(n *html.Node, st visState, run *hiddenRun) {
	e := r.next // its index in the matcher's list
	r.next++
	if skipped(n) {
		r.skipSubtree(e)
		return
	}
	name := n.Data
	svg := n.Namespace == "svg"
	if n.Namespace != "" {
		name = "" // foreign content: no HTML rendering
	}
	if name == "br" {
		r.hidSpace = r.hidSpace || st.hidden()
		if !st.hidden() {
			r.pendingNL = min(r.pendingNL+1, 3)
			if !r.started {
				r.pendingNL = 0
			}
		}
		r.geoBreak(&st)
		return
	}
	a := attrsOf(n)
	var own ownStyle
	if !st.drop {
		own = r.styleFor(e, n, name, &a, &st)
	} else {
		own = ownStyle{drop: true, opacity: 1, color: rgba{a: -1}, bg: rgba{a: -1}, scale: 1}
	}
	inner := r.rendering(n, name, svg, &a, &own, &st) // what happens to its content
	cst := inherit(st, own)
	if own.box != nil && own.box.far && cst.unsure == nil {
		cst.unsure = &hiddenRun{}
	}
	crun := run
	switch {
	case !cst.hidden():
		crun = nil
	case run == nil:
		crun = &hiddenRun{}
		r.startHidden()
	}
	if cst.drop {
		// Nothing inside can show: only its text is collected.
		r.dropped(n, crun)
		r.skipSubtree(e)
		return
	}
	r.openOutput(name, &a)
	block := isLineBlock(name) || isParaBlock(name)
	r.hidSpace = r.hidSpace || block
	if r.m != nil {
		r.m.enter(e)
	}
	saved := r.geoEnter(n, &own, &st, &cst)
	wasSelect, wasShown := r.inSelect, r.shown
	if name == "select" {
		r.inSelect, r.shown = dropDown(n)
	}
	kids := cst
	switch inner {
	case contentHidden:
		kids.drop = true
		if crun == nil {
			crun = &hiddenRun{}
			r.startHidden()
		}
	case contentUnsure:
		if kids.unsure == nil {
			kids.unsure = &hiddenRun{}
		}
	case contentPlaceUnknown:
		r.geo = offBounds
		r.geo.on = saved.on
	}
	r.walk(n, kids, crun, name == "details" && !a.open)
	r.inSelect, r.shown = wasSelect, wasShown
	r.geoLeave(&own, saved)
	if r.m != nil {
		r.m.leave(e)
	}
	r.hidSpace = r.hidSpace || block
	r.closeOutput(name)
}

// What an element does with its content, besides its style.
const (
	contentShown        = iota
	contentHidden       // not rendered: media fallback, an object that displays, SVG outside <text>
	contentUnsure       // rendered or not depending on the mail client: an object that may load
	contentPlaceUnknown // rendered where positions are not followed (inside an SVG)
)

// rendering applies the browser's rendering rules that are not CSS: the
// options of a drop-down that it does not show, <datalist>, media and
// object fallback content, SVG (only <text> paints text; <desc>, <title>
// and <metadata> never do; a zero-sized <svg> shows nothing). It may mark
// own as dropped, and tells what happens to the element's content.
func (r *renderer) rendering(n *html.Node, name string, svg bool, a *elemAttrs, own *ownStyle, st *visState) int {
	if svg {
		return r.svgRendering(n, a, own, st)
	}
	switch name {
	case "datalist":
		own.drop = true // its options are never rendered, whatever the CSS
	case "option":
		if r.inSelect && n != r.shown {
			own.drop = true
		} else if r.inSelect && attr(n, "label") != "" {
			return contentHidden // it shows its label, not its text
		}
	case "video", "audio":
		return contentHidden // a browser that plays them never renders their fallback
	case "object":
		switch objectDisplays(n) {
		case objectShown:
			return contentHidden
		case objectMaybe:
			return contentUnsure
		}
	case "svg", "math":
	}
	return contentShown
}

// dropDown tells whether select n is a drop-down (not a list box), and the
// option it shows: the last one marked selected, else the first that is
// not disabled.
func dropDown(n *html.Node) (bool, *html.Node) {
	if hasAttr(n, "multiple") {
		return false, nil
	}
	if size := strings.TrimSpace(attr(n, "size")); size != "" && size != "0" && size != "1" {
		if k, err := strconv.Atoi(size); err == nil && k > 1 {
			return false, nil
		}
	}
	var selected, first *html.Node
	var visit func(p *html.Node)
	visit = func(p *html.Node) {
		for c := p.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode || c.Namespace != "" {
				continue
			}
			switch c.Data {
			case "option":
				if hasAttr(c, "selected") {
					selected = c
				}
				if first == nil && !hasAttr(c, "disabled") {
					first = c
				}
			case "optgroup":
				if !hasAttr(c, "disabled") {
					visit(c)
				}
			}
		}
	}
	visit(n)
	if selected != nil {
		return true, selected
	}
	return true, first
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key && a.Namespace == "" {
			return true
		}
	}
	return false
}

// skipSubtree moves the element count past the subtree of element e.
func (r *renderer) skipSubtree(e int32) {
	if r.m != nil && int(e) < len(r.m.elems) {
		r.next = e + r.m.elems[e].subtree
	}
}

// dropped collects the text of an element nothing of which shows.
func (r *renderer) dropped(n *html.Node, run *hiddenRun) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		switch c.Type {
		case html.TextNode:
			r.hiddenText(c.Data, run)
		case html.ElementNode:
			if skipped(c) {
				continue
			}
			if c.Data == "br" || isLineBlock(c.Data) || isParaBlock(c.Data) {
				r.hidSpace = true
			}
			r.dropped(c, run)
		}
	}
}

// styleFor computes what an element's own attributes and the style sheet
// say about its visibility, under its parent's state st.
func (r *renderer) styleFor(e int32, n *html.Node, name string, a *elemAttrs, st *visState) ownStyle {
	p := &r.props
	*p = cssProps{custom: p.custom[:0]}
	r.propsNode = nil
	applied := r.m != nil && r.m.cascade(p, e, n, r.geo.on)
	if !applied && a.style == "" && !a.hidden && a.color == "" && a.bgcolor == "" && a.background == "" &&
		a.align == "" && a.dir == "" && !r.geo.on && !defaultHides(name, n) {
		o := ownStyle{opacity: 1, color: rgba{a: -1}, bg: rgba{a: -1}, scale: 1, disp: defaultDisplay(name)}
		if name == "a" && a.href {
			o.color = linkColor
		}
		if st.blockify && o.disp != dispContents {
			o.disp = dispBlock
		}
		return o
	}
	if a.style != "" {
		p.apply(r.inlineDecls(a.style))
	}
	if r.m != nil && !r.geo.on && r.m.sh.hasGeoOnly && (needsBox(p) || strings.Contains(p.d[propTextIndent].val, "-")) {
		// It may start following positions: its own box counts too.
		applied = r.m.cascade(p, e, n, true) || applied
	}
	r.propsNode = n
	custom, over := st.custom, false
	if len(p.custom) > 0 || p.vars {
		custom, over = resolveVars(p, st.custom)
	}
	o := styleOf(p, name, a, st)
	o.custom = custom
	if over {
		r.varOverflow = true
		o.unsure = true
	}
	if r.geo.on || needsBox(p) || a.width != "" && r.geo.on {
		fontPx := st.fontPx
		if o.font != "" {
			if px, ok := fontSizePx(o.font, st.fontPx); ok {
				fontPx = px
			}
		}
		o.box = readBox(p, a, o.disp, fontPx)
	}
	return o
}

// defaultHides reports whether the browser's own rules can hide an element
// with no style of its own.
func defaultHides(name string, n *html.Node) bool {
	switch name {
	case "dialog", "rp":
		return true
	}
	return n.Namespace == "svg"
}

// inlineDecls parses a style attribute. Mail repeats the same few style
// attributes on many elements, so up to maxStyleCache of them are kept.
func (r *renderer) inlineDecls(style string) []propDecl {
	if d, ok := r.styleCache[style]; ok {
		return d
	}
	d := parseDecls(nil, stripCSSComments(style), inlineSpec, inlineOrder)
	if len(r.styleCache) < maxStyleCache && len(style) <= 1024 {
		if r.styleCache == nil {
			r.styleCache = map[string][]propDecl{}
		}
		r.styleCache[style] = d
	}
	return d
}

const maxStyleCache = 1024

// startHidden begins a new stretch of hidden text on its own line.
func (r *renderer) startHidden() {
	if r.keepHidden && r.hid.Len() > 0 {
		r.hid.WriteByte('\n')
		r.hidSpace = false
	}
}

// hiddenText records text of a hidden stretch.
func (r *renderer) hiddenText(t string, run *hiddenRun) {
	if isBlankText(t) {
		r.hidSpace = r.hidSpace || t != ""
		return
	}
	if !run.counted {
		run.counted = true
		r.count++
	}
	if !r.keepHidden || r.hid.Len() > MaxPartBytes {
		return
	}
	for i, w := range strings.FieldsFunc(t, isCollapsible) {
		if (i > 0 || r.hidSpace || startsWithSpace(t)) && r.hid.Len() > 0 && !strings.HasSuffix(r.hid.String(), "\n") {
			r.hid.WriteByte(' ')
		}
		r.hid.WriteString(w)
	}
	_, size := utf8.DecodeLastRuneInString(t)
	r.hidSpace = isCollapsibleString(t[len(t)-size:])
}

func startsWithSpace(t string) bool {
	r, _ := utf8.DecodeRuneInString(t)
	return isCollapsible(r)
}

func isCollapsibleString(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isCollapsible(r)
}

// isCollapsible reports whether r is white space that collapses with its
// neighbours (and the few Unicode spaces treated alike).
func isCollapsible(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\f', '\v', 0x85, 0x2028, 0x2029:
		return true
	}
	return r >= 0x2008 && r <= 0x200B
}

// isBlankText reports whether t renders as nothing but white space: white
// space, no-break and zero-width spaces and joiners (mail "preheader"
// padding is made of these).
func isBlankText(t string) bool {
	for _, r := range t {
		switch {
		case isCollapsible(r), r == 0xA0, r == 0x200C, r == 0x200D, r == 0x34F, r == 0xFEFF, r == 0xAD:
		default:
			return false
		}
	}
	return true
}

// openOutput renders the start of an element that is not dropped.
func (r *renderer) openOutput(name string, a *elemAttrs) {
	switch {
	case isNestedList(name, r.listDepth):
		r.want(1)
	case isParaBlock(name):
		r.want(2)
	case isLineBlock(name):
		r.want(1)
	}
	switch name {
	case "blockquote":
		r.quoteDepth = min(r.quoteDepth+1, 20)
	case "pre", "listing", "plaintext":
		r.preDepth++
		r.preFirst = true
	case "ul", "ol", "menu", "dir":
		r.listDepth++
		if len(r.olCount) < 32 && r.listDepth == len(r.olCount)+1 {
			n := 0
			if name == "ol" {
				n = 1
			}
			r.olCount = append(r.olCount, n)
		}
	case "li":
		r.listItem = true
	case "rt":
		r.space = true // ruby text is shown above its base, a word of its own
	case "table", "tr":
		r.rowText, r.cellSep = false, false
	case "td", "th":
		r.cellSep = r.rowText
	case "a":
		r.closeLink()
		if a.hrefVal != "" {
			r.inLink, r.linkHref = true, a.hrefVal
			r.linkText.Reset()
		}
	}
}

// closeOutput renders the end of an element whose start was rendered.
func (r *renderer) closeOutput(name string) {
	switch {
	case isNestedList(name, r.listDepth-1):
		r.want(1)
	case isParaBlock(name):
		r.want(2)
	case isLineBlock(name):
		r.want(1)
	}
	switch name {
	case "blockquote":
		r.quoteDepth = max(r.quoteDepth-1, 0)
	case "pre", "listing", "plaintext":
		r.preDepth = max(r.preDepth-1, 0)
	case "ul", "ol", "menu", "dir":
		if r.listDepth > 0 && r.listDepth == len(r.olCount) {
			r.olCount = r.olCount[:len(r.olCount)-1]
		}
		r.listDepth = max(r.listDepth-1, 0)
	case "tr", "table":
		r.rowText, r.cellSep = false, false
	case "a":
		r.closeLink()
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
func (r *renderer) want(n int) {
	if r.started && r.pendingNL < n {
		r.pendingNL = n
	}
}

// text renders visible character data.
func (r *renderer) text(t string) {
	if t == "" {
		return
	}
	if r.preDepth > 0 {
		r.preText(t)
		return
	}
	if isBlankText(t) {
		if r.started && r.pendingNL == 0 && !r.lineStart {
			r.space = true
			r.addLinkText(" ")
		}
		return
	}
	r.flush()
	if r.lineStart {
		t = strings.TrimLeftFunc(t, isCollapsible)
	}
	for len(t) > 0 {
		k := strings.IndexFunc(t, isCollapsible)
		if k < 0 {
			r.word(t)
			break
		}
		if k > 0 {
			r.word(t[:k])
		}
		_, size := utf8.DecodeRuneInString(t[k:])
		t = t[k+size:]
		r.space = true
	}
	r.addLinkText(" ")
}

// word writes text without collapsible white space, after the space owed.
func (r *renderer) word(w string) {
	if r.space && !r.lineStart && !r.lastSpace {
		r.out.WriteByte(' ')
		r.addLinkText(" ")
	}
	r.space = false
	r.write(w)
	r.addLinkText(w)
	r.lineStart = false
}

// write writes s to the output.
func (r *renderer) write(s string) {
	if s == "" {
		return
	}
	r.out.WriteString(s)
	r.lastSpace = s[len(s)-1] == ' '
}

// preText writes preformatted text, keeping its spaces and line breaks.
func (r *renderer) preText(t string) {
	if r.preFirst {
		r.preFirst = false
		t = strings.TrimPrefix(strings.TrimPrefix(t, "\r"), "\n")
	}
	for line := range strings.Lines(t) {
		content := strings.TrimRight(line, "\r\n")
		if content != "" {
			r.flush()
			if r.space && !r.lineStart && !r.lastSpace {
				r.write(" ")
			}
			r.space = false
			r.write(strings.ReplaceAll(content, "\f", ""))
			r.addLinkText(content)
			r.lineStart = false
		}
		if len(content) < len(line) { // it had a line break
			if r.started {
				r.pendingNL = min(r.pendingNL+1, 3)
			}
		}
	}
}

// flush writes the line breaks and prefixes owed before visible text.
func (r *renderer) flush() {
	if r.pendingNL > 0 && r.started {
		for range r.pendingNL {
			r.out.WriteByte('\n')
		}
		r.lineStart, r.lastSpace = true, false
		r.cellSep = false
		r.space = false
	}
	r.pendingNL = 0
	if r.lineStart {
		r.space = false
		for range r.quoteDepth {
			r.write("> ")
		}
		if r.listItem {
			for range min(max(r.listDepth-1, 0), 10) {
				r.write("  ")
			}
			if r.listDepth > 0 && r.listDepth == len(r.olCount) && r.olCount[r.listDepth-1] > 0 {
				r.write(strconv.Itoa(r.olCount[r.listDepth-1]) + ". ")
				r.olCount[r.listDepth-1]++
			} else {
				r.write("- ")
			}
		}
	} else if r.cellSep {
		r.write(" | ")
		r.space = false
	}
	r.listItem, r.cellSep = false, false
	r.started, r.rowText = true, true
}

func (r *renderer) addLinkText(t string) {
	if r.inLink && r.linkText.Len() < 1024 {
		r.linkText.WriteString(t)
	}
}

// closeLink ends the open link, writing " (url)" after its text unless the
// text already shows the URL, the link has no text, or the URL is a script or
// a fragment.
func (r *renderer) closeLink() {
	if !r.inLink {
		return
	}
	r.inLink = false
	url := strings.Map(func(c rune) rune {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' {
			return -1
		}
		return c
	}, r.linkHref)
	text := strings.Join(strings.Fields(r.linkText.String()), " ")
	if text == "" || url == "" || !linkWorthShowing(url) || sameLink(text, url) {
		return
	}
	r.flush()
	if r.lineStart {
		r.write("(" + url + ")")
	} else {
		r.write(" (" + url + ")")
	}
	r.space = false
	r.lineStart = false
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
