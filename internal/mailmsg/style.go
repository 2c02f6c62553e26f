package mailmsg

import (
	"math"
	"strings"
)

// What one element's cascaded declarations say about whether its text can
// be seen: the properties that hide it outright (display, visibility, a
// font under one pixel, opacity and filter: opacity(), a colour too close
// to its background, a box of zero or one pixel that clips, a clip or
// clip-path to nothing, a transform to nothing) and the ones that move it
// (geometry.go). A browser's own style sheet counts as the lowest layer:
// the hidden attribute and a closed <dialog> hide unless the sender's CSS
// sets display, and presentational attributes count only on the elements
// browsers map them for (color on <font>, bgcolor and background on body
// and the table elements).

// declHides reports whether a declaration on its own can hide text (it may
// need a partner: a zero height needs hidden overflow). Rules matched only
// approximately (selector.go, when the matching budget is spent) contribute
// these alone.
func declHides(prop int, val string) bool {
	switch prop {
	case propDisplay:
		return val == "none"
	case propVisibility:
		return val == "hidden" || val == "collapse"
	case propFontSize:
		return fontSizeKind(val) == fontZero
	case propOpacity:
		o, ok := parseOpacity(val)
		return ok && o < minOpacity
	case propHeight, propMaxHeight, propWidth, propMaxWidth:
		return tinyLength(val)
	case propOverflow, propOverflowX, propOverflowY:
		return overflowClips(val)
	case propColor, propTextFill:
		c, ok := parseColor(val)
		return ok && c.a == 0
	case propContentVisibility:
		return val == "hidden"
	case propPosition:
		return val == "absolute" || val == "fixed"
	case propLeft, propTop, propTextIndent, propMarginLeft:
		return farNegative(val)
	case propRight, propBottom:
		f, unit, ok := parseLength(val)
		return ok && unit == "px" && f >= 999
	case propClip:
		return clipEmpty(val)
	case propClipPath:
		return clipPathEmpty(val)
	case propFilter:
		o, _ := filterOpacity(val)
		return o < minOpacity
	case propTransform, propScale:
		t := parseTransform(val, prop == propScale)
		return t.empty
	}
	return false
}

// Display kinds, as they matter here.
const (
	dispInline   = iota // a non-replaced inline box: sizes, overflow and transforms do not apply
	dispAtomic          // a box in a line: inline-block, replaced elements (img, input, svg, ...)
	dispBlock           // a block container
	dispTable           // a table or one of its parts: sizes are minimums, never clip
	dispFlex            // a flex or grid container: its items are blocks, placed anywhere
	dispContents        // no box of its own (display: contents)
)

// defaultDisplay is the display kind of an HTML element before CSS.
func defaultDisplay(tag string) int8 {
	switch tag {
	case "html", "body", "address", "blockquote", "center", "div", "figure", "figcaption", "footer",
		"form", "header", "hr", "legend", "listing", "main", "p", "plaintext", "pre", "search", "xmp",
		"details", "summary", "dialog", "h1", "h2", "h3", "h4", "h5", "h6", "hgroup", "article",
		"aside", "nav", "section", "ul", "ol", "menu", "dir", "dl", "dd", "dt", "fieldset", "li",
		"optgroup", "option", "caption", "frameset", "datalist":
		return dispBlock
	case "table", "thead", "tbody", "tfoot", "tr", "td", "th", "col", "colgroup":
		return dispTable
	case "img", "input", "button", "select", "textarea", "video", "audio", "canvas", "iframe",
		"object", "embed", "svg", "meter", "progress", "math":
		return dispAtomic
	}
	return dispInline
}

// displayKind reads a display value; ok is false for a value it does not
// know (the declaration is then ignored, as a browser ignores an invalid
// one).
func displayKind(v string) (kind int8, ok bool) {
	switch v {
	case "inline", "inline flow", "ruby", "ruby-base", "ruby-text", "ruby-base-container", "ruby-text-container", "math":
		return dispInline, true
	case "block", "flow-root", "list-item", "table-caption", "block flow", "block flow-root", "run-in",
		"block list-item", "list-item block", "flow list-item", "list-item flow":
		return dispBlock, true
	case "inline-block", "inline flow-root", "inline-list-item", "inline list-item":
		return dispAtomic, true
	case "table", "inline-table", "table-row", "table-cell", "table-row-group", "table-header-group",
		"table-footer-group", "table-column", "table-column-group", "block table", "inline table":
		return dispTable, true
	case "flex", "grid", "inline-flex", "inline-grid", "block flex", "block grid", "inline flex", "inline grid":
		return dispFlex, true
	case "contents":
		return dispContents, true
	}
	return 0, false
}

// Values of text-align as they matter: where a line's text starts.
const (
	alignUnset int8 = iota
	alignStart
	alignCenter
	alignEnd // right, end, justify (its last line is at the start, but a
	// justified line fills the box: its words spread to the right edge)
)

func textAlign(v string) int8 {
	switch v {
	case "left", "start", "-webkit-left", "initial", "-webkit-auto", "match-parent", "auto":
		return alignStart
	case "center", "-webkit-center":
		return alignCenter
	case "right", "end", "justify", "-webkit-right", "justify-all":
		return alignEnd
	}
	return alignUnset
}

// ownStyle is what an element's own declarations say about its visibility;
// inherit combines it with its parent's.
type ownStyle struct {
	drop    bool    // the element and everything in it is invisible
	font    string  // its font-size declaration ("" when none), resolved against the parent's
	vis     int8    // visUnset, visHidden, visShown
	opacity float64 // 1 when not set (with filter: opacity())
	color   rgba    // the text colour; a == -1: not set (inherited)
	bg      rgba    // the background; a == -1: none; unknownBG: an image or gradient
	disp    int8    // display kind (after blockification)
	align   int8    // text-align (alignUnset: inherited)
	dir     int8    // direction: 0 inherited, 1 ltr, 2 rtl
	scale   float64 // the scale its transform applies (1 when none)

	// Inherited text properties that move text, as declared ("" when not).
	indent, lineHeight, letterSpacing, wordSpacing string

	box    *boxStyle    // the properties that place or size its box, when read (geometry.go)
	svg    int8         // 0 inherited, else what SVG paints inside it
	custom *customProps // its custom properties (nil: its parent's)
	unsure bool         // what it computes may not be what a browser computes (vars.go)
}

const (
	fontUnset = iota
	fontZero
	fontSet
	fontRel
)

const (
	visUnset = iota
	visHidden
	visShown
)

// minOpacity is the opacity below which content is practically invisible
// (0.5 is still readable).
const minOpacity = 0.1

// minContrast is the contrast ratio (WCAG's, 1 to 21) below which text on
// its background cannot be read: #f0f0f0 on white is 1.14, the light grey
// #e0e0e0 that footers use is 1.32.
const minContrast = 1.2

// visState is the visibility inherited by an element's content.
type visState struct {
	drop      bool
	visHidden bool
	opacity   float64 // the product of the ancestors' opacities
	color     rgba    // the text colour; a == -1 unknown
	bg        rgba    // the opaque background behind the text; a == -1 unknown
	unread    bool    // unreadable(), kept up to date by inherit
	fontPx    float64 // the computed font size in pixels
	scale     float64 // the product of the ancestors' transform scales
	align     int8    // text-align
	rtl       bool    // direction: rtl
	blockify  bool    // its children are flex or grid items (blocks)
	posAnc    bool    // an ancestor is positioned or transformed: it contains absolute boxes
	fixedAnc  bool    // an ancestor is transformed or filtered: it contains fixed boxes
	svg       int8    // svgNone, svgHidden (in SVG, outside <text>), svgText

	// Inherited text properties, in pixels (NaN: unknown).
	indent, lineHeight, letterSpacing, wordSpacing float64

	custom *customProps // custom properties (vars.go)
	unsure *hiddenRun   // not nil: its text may be hidden in ways not decided here (geometry.go)
}

// In SVG, only <text> paints its text.
const (
	svgNone = iota
	svgHidden
	svgText
	svgForeign // HTML inside <foreignObject>
)

// rootState is what the document starts with: black text in a 16 px font
// on the white page of a desktop client in light mode.
var rootState = visState{opacity: 1, color: rgba{0, 0, 0, 1}, bg: rgba{1, 1, 1, 1}, fontPx: 16, scale: 1, align: alignStart}

func (v visState) hidden() bool {
	return v.drop || v.fontPx*v.scale < 1 || v.visHidden || v.opacity < minOpacity || v.unread || v.svg == svgHidden
}

// unreadable reports whether the text colour is too close to the background
// to read (both known).
func (v visState) unreadable() bool {
	if v.color.a < 0 || v.bg.a < 0 {
		return false
	}
	return contrast(over(v.color, v.bg), v.bg) < minContrast
}

func inherit(parent visState, own ownStyle) visState {
	st := parent
	st.drop = parent.drop || own.drop
	if own.font != "" {
		if px, ok := fontSizePx(own.font, parent.fontPx); ok {
			st.fontPx = px
		}
	}
	switch own.vis {
	case visHidden:
		st.visHidden = true
	case visShown:
		st.visHidden = false
	}
	if own.disp != dispContents {
		// opacity, filter and transforms apply to a box.
		st.opacity *= own.opacity
		if own.scale != 1 && own.disp != dispInline {
			st.scale *= own.scale
		}
	}
	if own.color.a >= 0 {
		st.color = own.color
	}
	switch {
	case own.bg == unknownBG:
		st.bg = rgba{a: -1}
	case own.bg.a == 1:
		st.bg = own.bg
	case own.bg.a > 0 && st.bg.a >= 0:
		st.bg = over(own.bg, st.bg)
	case own.bg.a > 0:
		st.bg = rgba{a: -1} // translucent over something unknown
	}
	if own.color.a >= 0 || own.bg.a != -1 {
		st.unread = st.unreadable()
	}
	if own.align != alignUnset {
		st.align = own.align
	}
	if own.dir != 0 {
		st.rtl = own.dir == 2
	}
	st.blockify = own.disp == dispFlex
	if own.indent != "" {
		st.indent = textLength(own.indent, st.fontPx)
	}
	if own.lineHeight != "" {
		st.lineHeight = lineHeightPx(own.lineHeight, st.fontPx)
	}
	if own.letterSpacing != "" {
		st.letterSpacing = spacingPx(own.letterSpacing, st.fontPx)
	}
	if own.wordSpacing != "" {
		st.wordSpacing = spacingPx(own.wordSpacing, st.fontPx)
	}
	if own.svg != 0 {
		st.svg = own.svg
	}
	if own.custom != nil {
		st.custom = own.custom
	}
	if own.unsure && st.unsure == nil {
		st.unsure = &hiddenRun{}
	}
	if b := own.box; b != nil {
		st.posAnc = st.posAnc || b.pos != posStatic || b.transformed
		st.fixedAnc = st.fixedAnc || b.transformed
	}
	return st
}

// unknownBG is a background that cannot be compared: an image or gradient.
var unknownBG = rgba{-1, -1, -1, -2}

// styleOf turns an element's cascaded declarations (and its presentational
// attributes) into its ownStyle. parent is what it inherits.
func styleOf(p *cssProps, tag string, a *elemAttrs, parent *visState) ownStyle {
	o := ownStyle{opacity: 1, color: rgba{a: -1}, bg: rgba{a: -1}, scale: 1, font: p.d[propFontSize].val}
	if o.font == unknownValue {
		o.font = ""
	}
	// The browser's own style sheet: display:none for these, under any
	// display the sender sets.
	o.disp = defaultDisplay(tag)
	uaNone := a.hidden && !a.untilFound || tag == "dialog" && !a.open || tag == "rp"
	if d := p.d[propDisplay]; d.order != 0 {
		if d.val == "none" {
			o.drop = true
		} else if k, ok := displayKind(d.val); ok {
			o.disp = k
			uaNone = false
		}
	}
	cv := p.d[propContentVisibility]
	o.drop = o.drop || uaNone || cv.val == "hidden" || a.untilFound && cv.order == 0
	if op, ok := parseOpacity(p.d[propOpacity].val); ok {
		o.opacity = op
	}
	if f, ok := filterOpacity(p.d[propFilter].val); ok {
		o.opacity *= f
	}
	pos := positionOf(p.d[propPosition].val)
	if o.disp == dispInline && (pos == posAbsolute || pos == posFixed || p.d[propFloat].val == "left" || p.d[propFloat].val == "right" || parent.blockify) {
		o.disp = dispBlock // blockified
	}
	if o.disp == dispAtomic && parent.blockify {
		o.disp = dispBlock
	}
	sized := o.disp == dispBlock || o.disp == dispAtomic || o.disp == dispFlex
	if sized {
		tinyH := tinyLength(p.d[propHeight].val) || tinyLength(p.d[propMaxHeight].val)
		tinyW := tinyLength(p.d[propWidth].val) || tinyLength(p.d[propMaxWidth].val)
		ov := p.d[propOverflow].val
		clipY := overflowClips(lastWord(ov)) || overflowClips(p.d[propOverflowY].val)
		clipX := overflowClips(firstWord(ov)) || overflowClips(p.d[propOverflowX].val)
		if tinyH && clipY || tinyW && clipX {
			o.drop = true // a box of at most one pixel that clips what it holds
		}
	}
	if (pos == posAbsolute || pos == posFixed) && clipEmpty(p.d[propClip].val) {
		o.drop = true
	}
	if o.disp != dispContents && clipPathEmpty(p.d[propClipPath].val) {
		o.drop = true
	}
	if o.disp != dispInline && o.disp != dispContents {
		for _, prop := range []int{propTransform, propScale} {
			if v := p.d[prop].val; v != "" && v != "none" {
				t := parseTransform(v, prop == propScale)
				if t.empty {
					o.drop = true
				}
				o.scale *= t.scale
			}
		}
	}
	switch p.d[propVisibility].val {
	case "hidden", "collapse":
		o.vis = visHidden
	case "visible":
		o.vis = visShown
	}
	if c, ok := parseColor(p.d[propColor].val); ok {
		o.color = c
	} else if p.d[propColor].order == 0 {
		if c, ok := parseColor(a.color); ok && (tag == "font" || tag == "body") { // <font color>, <body text>
			o.color = c
		} else if tag == "a" && a.href {
			o.color = linkColor // the browser's own style for links
		}
	}
	if fill, ok := parseColor(p.d[propTextFill].val); ok {
		o.color = fill
	}
	tablePart := tag == "body" || tag == "table" || tag == "thead" || tag == "tbody" || tag == "tfoot" || tag == "tr" || tag == "td" || tag == "th"
	image := p.d[propBackgroundImage].order != 0 && p.d[propBackgroundImage].val != "none" &&
		(p.d[propBackground].order == 0 || p.d[propBackgroundImage].beats(p.d[propBackground]))
	switch {
	case image:
		o.bg = unknownBG
	case p.d[propBackground].order != 0:
		o.bg = backgroundColor(p.d[propBackground].val)
	case a.background != "" && tablePart: // <td background="image.png">
		o.bg = unknownBG
	case a.bgcolor != "" && tablePart:
		if c, ok := parseColor(a.bgcolor); ok {
			o.bg = c
		}
	}
	o.align = textAlign(p.d[propTextAlign].val)
	if o.align == alignUnset {
		switch {
		case tag == "center":
			o.align = alignCenter
		case a.align != "" && (tag == "div" || tag == "p" || tag == "td" || tag == "th" || tag == "tr" || tag == "tbody" || tag == "thead" || tag == "tfoot" || strings.HasPrefix(tag, "h") && len(tag) == 2):
			o.align = textAlign(a.align)
		}
	}
	switch v := p.d[propDirection].val; {
	case v == "rtl", v == "" && a.dir == "rtl":
		o.dir = 2
	case v == "ltr", v == "" && a.dir == "ltr":
		o.dir = 1
	}
	if v := p.d[propWritingMode].val; v != "" && !strings.HasPrefix(v, "horizontal") && v != "lr" && v != "lr-tb" && v != "initial" {
		o.dir = 2 // vertical text: its lines are not placed as this file reckons; taken as unknown, like rtl
	}
	o.indent = p.d[propTextIndent].val
	o.lineHeight = p.d[propLineHeight].val
	o.letterSpacing = p.d[propLetterSpacing].val
	o.wordSpacing = p.d[propWordSpacing].val
	return o
}

// linkColor is the colour browsers give a link (<a href>) that its page
// does not colour.
var linkColor = rgba{0, 0, 0.933, 1}

// backgroundColor reads the colour a background (or background-color)
// value paints: unknownBG for an image or gradient (drawn above the
// colour), no background (a == -1) for values it cannot read.
func backgroundColor(v string) rgba {
	if strings.Contains(v, "url(") || strings.Contains(v, "gradient(") || strings.Contains(v, "image(") || strings.Contains(v, "image-set(") {
		return unknownBG
	}
	if c, ok := parseColor(v); ok {
		return c
	}
	// The colour is one of the words of the shorthand ("#fff no-repeat").
	for len(v) > 0 {
		w := v
		if k := indexTopLevel(v, ' '); k >= 0 {
			w, v = v[:k], v[k+1:]
		} else {
			v = ""
		}
		if c, ok := parseColor(w); ok {
			return c
		}
	}
	return rgba{a: -1}
}

// fontSizePx computes a font-size value against the parent's size; ok is
// false for a value it cannot read (then the size is inherited).
func fontSizePx(v string, parent float64) (float64, bool) {
	switch v {
	case "xx-small":
		return 9, true
	case "x-small":
		return 10, true
	case "small":
		return 13, true
	case "medium":
		return 16, true
	case "large":
		return 18, true
	case "x-large":
		return 24, true
	case "xx-large":
		return 32, true
	case "xxx-large":
		return 48, true
	case "smaller":
		return parent / 1.2, true
	case "larger":
		return parent * 1.2, true
	case "inherit", "unset":
		return parent, true
	case "initial":
		return 16, true
	}
	f, unit, ok := parseLength(v)
	if !ok || f < 0 {
		return 0, false
	}
	switch unit {
	case "em":
		return f * parent, true
	case "%":
		return f / 100 * parent, true
	case "ex", "ch":
		return f * parent / 2, true
	case "", "px":
		if unit == "" && f != 0 {
			return 0, false // invalid
		}
		return f, true
	}
	if px, ok := absolutePx(f, unit); ok {
		return px, true
	}
	if f == 0 {
		return 0, true
	}
	return 0, false
}

// absolutePx converts an absolute or viewport length (the viewport is
// 1000 × 800) to pixels.
func absolutePx(f float64, unit string) (float64, bool) {
	switch unit {
	case "px":
		return f, true
	case "pt":
		return f * 4 / 3, true
	case "pc":
		return f * 16, true
	case "in":
		return f * 96, true
	case "cm":
		return f * 96 / 2.54, true
	case "mm":
		return f * 96 / 25.4, true
	case "q":
		return f * 96 / 101.6, true
	case "rem":
		return f * 16, true
	case "vw", "vmax", "dvw", "svw", "lvw":
		return f * 10, true
	case "vh", "vmin", "dvh", "svh", "lvh":
		return f * 8, true
	}
	return 0, false
}

// lengthPx converts a length to pixels, em against fontPx; ok is false for
// what it cannot compute (percentages, calc(), auto, keywords).
func lengthPx(v string, fontPx float64) (float64, bool) {
	f, unit, ok := parseLength(v)
	if !ok || math.IsInf(f, 0) {
		return 0, false
	}
	switch unit {
	case "":
		return 0, f == 0
	case "em":
		return f * fontPx, true
	}
	return absolutePx(f, unit)
}

// textLength is a text-indent in pixels; NaN when unknown (a percentage
// counts as unknown, as do the keywords hanging and each-line).
func textLength(v string, fontPx float64) float64 {
	if px, ok := lengthPx(v, fontPx); ok && !strings.ContainsAny(v, " ") {
		return px
	}
	switch v {
	case "0", "initial", "unset":
		return 0
	}
	return math.NaN()
}

// lineHeightPx is a line height in pixels (NaN for "normal" or what it
// cannot read).
func lineHeightPx(v string, fontPx float64) float64 {
	if f, unit, ok := parseLength(v); ok && unit == "" {
		return f * fontPx
	}
	if f, unit, ok := parseLength(v); ok && unit == "%" {
		return f / 100 * fontPx
	}
	if px, ok := lengthPx(v, fontPx); ok {
		return px
	}
	return math.NaN()
}

// spacingPx is a letter-spacing or word-spacing in pixels ("normal" is 0;
// NaN for what it cannot read).
func spacingPx(v string, fontPx float64) float64 {
	if v == "normal" || v == "initial" || v == "unset" {
		return 0
	}
	if px, ok := lengthPx(v, fontPx); ok {
		return px
	}
	return math.NaN()
}

// filterOpacity is the product of the opacity() functions of a filter
// value (1 when it has none).
func filterOpacity(v string) (float64, bool) {
	o, found := 1.0, false
	for len(v) > 0 {
		k := strings.Index(v, "opacity(")
		if k < 0 {
			break
		}
		v = v[k+len("opacity("):]
		end := strings.IndexByte(v, ')')
		if end < 0 {
			break
		}
		arg := strings.TrimSpace(v[:end])
		if arg == "" {
			arg = "1"
		}
		if f, ok := parseOpacity(arg); ok {
			o *= f
			found = true
		}
		v = v[end+1:]
	}
	return o, found
}

// tinyLength reports whether a length is at most one pixel (zero in any
// unit): a box that small shows nothing of what it clips.
func tinyLength(v string) bool {
	if isZeroLength(v) {
		return true
	}
	f, unit, ok := parseLength(v)
	return ok && f >= 0 && f <= 1 && unit == "px"
}

func lastWord(v string) string {
	if k := strings.LastIndexByte(v, ' '); k >= 0 {
		return v[k+1:]
	}
	return v
}
