package mailmsg

import (
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
// The contents of <script>, <style>, <head>, <template>, comments and of
// elements hidden with display:none, visibility:hidden or the hidden
// attribute are dropped (hidden text is a common way to address the model
// behind the reader's back). The result is sanitised and tidied like
// DecodeText's.
//
// It runs in time linear in len(html).
func HTMLToText(html string) string {
	text, _ := htmlToText(html)
	return text
}

// htmlToText also returns how many hidden elements were dropped.
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
	html = Sanitize(html)
	c := htmlConv{lineStart: true}
	c.out.Grow(len(html) / 2)
	c.run(html)
	c.closeLink()
	out := html2text.HTML2TextWithOptions(c.out.String(), html2text.WithUnixLineBreaks())
	out = strings.ReplaceAll(out, "\u00a0", " ")
	return normalizeText(Sanitize(out)), c.hiddenCount
}

// htmlConv turns HTML into the simplified stream for k3a: text with "<" and
// ">" escaped and entities left for k3a to decode, and "<br>" tags.
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

	// Hidden element being skipped, if any.
	hidden      string
	hiddenDepth int            // open elements named hidden
	inner       map[string]int // containers opened inside the hidden element
	open        map[string]int // containers open outside hidden elements
	hiddenCount int
}

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
			if closed {
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
			_, after := rawTextEnd(s, end, name)
			return after
		case "textarea", "xmp":
			contentEnd, after := rawTextEnd(s, end, name)
			c.startTag(name, attrs)
			c.text(s[end:contentEnd])
			c.endTag(name)
			return after
		}
		c.startTag(name, attrs)
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

type htmlAttrs struct {
	href, style       string
	hidden            bool
	hasHref, hasStyle bool // HTML keeps the first of duplicate attributes
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
		switch {
		case asciiEqualFold(name, "href") && !a.hasHref:
			a.href, a.hasHref = val, true
		case asciiEqualFold(name, "style") && !a.hasStyle:
			a.style, a.hasStyle = val, true
		case asciiEqualFold(name, "hidden"):
			a.hidden = true
		}
	}
	return a, len(s), false
}

// styleHides reports whether an inline style hides the element.
func styleHides(style string) bool {
	if style == "" {
		return false
	}
	var b strings.Builder
	for i := 0; i < len(style) && b.Len() < 4096; i++ {
		c := style[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' {
			continue
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	st := b.String()
	return strings.Contains(st, "display:none") || strings.Contains(st, "visibility:hidden") ||
		strings.Contains(st, "mso-hide:all")
}

func isVoidElement(name string) bool {
	switch name {
	case "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
		"param", "source", "track", "wbr", "basefont", "bgsound", "keygen", "frame":
		return true
	}
	return false
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

// Containers whose end closes an unclosed inline hidden element inside them.
func isContainer(name string) bool {
	switch name {
	case "div", "td", "th", "tr", "table", "tbody", "thead", "tfoot", "li", "ul", "ol",
		"blockquote", "section", "article", "header", "footer", "nav", "aside", "main",
		"center", "form", "dl", "details", "figure", "body", "html", "p":
		return true
	}
	return false
}

// hiddenStart handles a start tag inside the hidden element and reports
// whether the tag implicitly ends it (HTML's implied end tags, roughly).
func (c *htmlConv) hiddenStart(name string) bool {
	switch c.hidden {
	case "head":
		switch name {
		case "title", "meta", "link", "style", "script", "base", "noscript", "template", "head":
		default:
			return true
		}
	case "td", "th":
		if c.inner["table"] == 0 && (name == "td" || name == "th" || name == "tr") {
			return true
		}
	case "tr":
		if c.inner["table"] == 0 && name == "tr" {
			return true
		}
	case "li":
		if c.inner["ul"]+c.inner["ol"] == 0 && name == "li" {
			return true
		}
	case "p":
		if isParaBlock(name) || isLineBlock(name) {
			return true
		}
	}
	if name == c.hidden {
		c.hiddenDepth++
	} else if isContainer(name) && !isVoidElement(name) {
		c.countInner(name, 1)
	}
	return false
}

// hiddenEnd handles an end tag inside the hidden element and reports
// whether it ends it: its own end tag, or the end tag of a container that
// was opened before it (a browser closes the hidden element there too). A
// stray end tag that matches nothing open is ignored, as browsers do, so it
// cannot reveal hidden text to the model only.
func (c *htmlConv) hiddenEnd(name string) bool {
	if name == c.hidden {
		c.hiddenDepth--
		return c.hiddenDepth == 0
	}
	if name == "body" || name == "html" {
		return true
	}
	if !isContainer(name) {
		return false
	}
	if c.inner[name] > 0 {
		c.countInner(name, -1)
		return false
	}
	return c.open[name] > 0
}

func (c *htmlConv) countInner(name string, d int) {
	if c.inner == nil {
		c.inner = map[string]int{}
	}
	c.inner[name] += d
}

// countOpen tracks open containers outside hidden elements. Implied end
// tags are not tracked, so counts can only be too high.
func (c *htmlConv) countOpen(name string, d int) {
	if !isContainer(name) || isVoidElement(name) {
		return
	}
	if c.open == nil {
		c.open = map[string]int{}
	}
	c.open[name] = max(c.open[name]+d, 0)
}

func (c *htmlConv) startTag(name string, a htmlAttrs) {
	if c.hidden != "" {
		if !c.hiddenStart(name) {
			return
		}
		c.hidden = ""
	}
	if !isVoidElement(name) && (name == "head" || name == "template" || a.hidden || styleHides(a.style)) {
		if name != "head" && name != "template" {
			c.hiddenCount++
		}
		c.hidden, c.hiddenDepth = name, 1
		clear(c.inner)
		return
	}
	c.countOpen(name, 1)
	switch {
	case name == "br":
		c.pendingNL = min(c.pendingNL+1, 3)
		if !c.started {
			c.pendingNL = 0
		}
		return
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
		if a.href != "" {
			c.inLink, c.linkHref = true, a.href
			c.linkText.Reset()
		}
	}
}

func (c *htmlConv) endTag(name string) {
	if c.hidden != "" {
		own := name == c.hidden
		if !c.hiddenEnd(name) {
			return
		}
		c.hidden = ""
		if own {
			return
		}
	}
	c.countOpen(name, -1)
	switch {
	case name == "br": // "</br>" is a <br> in HTML
		c.startTag("br", htmlAttrs{})
		return
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

// want asks for at least n line breaks before the next visible text.
func (c *htmlConv) want(n int) {
	if c.started && c.pendingNL < n {
		c.pendingNL = n
	}
}

// text handles character data (entities still encoded).
func (c *htmlConv) text(t string) {
	if c.hidden != "" || t == "" {
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
