package mailmsg

import (
	"math"
	"strconv"
	"strings"

	"golang.org/x/image/colornames"
)

// Which HTML elements a reader does not see. Mail hides text from the reader
// (and shows it to a model) with inline styles and <style> rules:
// display:none, visibility:hidden, a zero font size, opacity near 0, a
// zero-sized box that clips its overflow, a position far off the screen, a
// text colour too close to its background to read. This file computes, for
// one element, the few properties that can hide text, from the cascade:
// the rules of the document's <style> blocks that match it (selector.go
// matches them exactly), then its style attribute, ordered by importance,
// specificity and source order as in CSS; colour, visibility and font size
// are inherited.
//
// What a desktop mail client shows is the reference: @media blocks apply as
// for a screen about 1000 pixels wide in light mode (so responsive "mobile
// only" rules do not hide the desktop text), and mso-hide (which only
// desktop Outlook reads) hides nothing. Rules for interaction (:hover,
// :focus ...) or for pseudo-elements (::before) never apply.
//
// Hand-written here, because no Go library does it: the reading of style
// sheets into rules (blocks, @media, nesting; bounded by maxCSSDepth,
// maxRules and the input size) and of the few property values that matter.
// FuzzHTMLToText runs it on arbitrary style sheets.

// The properties that can hide text, or move or size a box enough to.
const (
	propDisplay = iota
	propVisibility
	propFontSize // from font-size or the font shorthand
	propOpacity
	propHeight
	propMaxHeight
	propWidth
	propMaxWidth
	propOverflow
	propOverflowX
	propOverflowY
	propColor
	propTextFill // -webkit-text-fill-color
	propBackground
	propBackgroundImage
	propContentVisibility
	propPosition
	propLeft
	propTop
	propTextIndent
	propRight
	propBottom
	propMinWidth
	propMinHeight
	propMarginLeft
	propMarginRight
	propMarginTop
	propMarginBottom
	propPaddingLeft
	propPaddingRight
	propPaddingTop
	propPaddingBottom
	propBorderLeft // the widths
	propBorderRight
	propBorderTop
	propBorderBottom
	propTransform
	propTranslate
	propScale
	propFilter
	propClip
	propClipPath
	propTextAlign
	propDirection
	propFloat
	propLineHeight
	propLetterSpacing
	propWordSpacing
	propWhiteSpace
	propWritingMode
	propZoom
	propFill
	propFillOpacity
	propStroke
	numProps
	propCustom = numProps // a custom property (--name); val is "--name:value"
)

var propNames = map[string]int{
	"display": propDisplay, "visibility": propVisibility, "font-size": propFontSize,
	"opacity": propOpacity, "height": propHeight, "max-height": propMaxHeight,
	"width": propWidth, "max-width": propMaxWidth, "overflow": propOverflow,
	"overflow-x": propOverflowX, "overflow-y": propOverflowY, "color": propColor,
	"-webkit-text-fill-color": propTextFill, "background-color": propBackground,
	"background": propBackground, "background-image": propBackgroundImage,
	"content-visibility": propContentVisibility, "position": propPosition,
	"left": propLeft, "top": propTop, "text-indent": propTextIndent,
	"right": propRight, "bottom": propBottom, "min-width": propMinWidth, "min-height": propMinHeight,
	"margin-left": propMarginLeft, "margin-right": propMarginRight, "margin-top": propMarginTop, "margin-bottom": propMarginBottom,
	"margin-inline-start": propMarginLeft, "margin-inline-end": propMarginRight, "margin-block-start": propMarginTop, "margin-block-end": propMarginBottom,
	"padding-left": propPaddingLeft, "padding-right": propPaddingRight, "padding-top": propPaddingTop, "padding-bottom": propPaddingBottom,
	"padding-inline-start": propPaddingLeft, "padding-inline-end": propPaddingRight, "padding-block-start": propPaddingTop, "padding-block-end": propPaddingBottom,
	"border-left-width": propBorderLeft, "border-right-width": propBorderRight, "border-top-width": propBorderTop, "border-bottom-width": propBorderBottom,
	"inset-inline-start": propLeft, "inset-inline-end": propRight, "inset-block-start": propTop, "inset-block-end": propBottom,
	"transform": propTransform, "translate": propTranslate, "scale": propScale, "filter": propFilter,
	"clip": propClip, "clip-path": propClipPath, "-webkit-clip-path": propClipPath,
	"text-align": propTextAlign, "direction": propDirection, "float": propFloat, "line-height": propLineHeight,
	"letter-spacing": propLetterSpacing, "word-spacing": propWordSpacing, "white-space": propWhiteSpace,
	"writing-mode": propWritingMode, "zoom": propZoom,
	"fill": propFill, "fill-opacity": propFillOpacity, "stroke": propStroke,
}

// boxShorthands are the shorthands read into the longhands above: their
// top, right, bottom and left values, in that order (a value left out
// repeats the opposite side, as in CSS).
var boxShorthands = map[string][4]int{
	"margin":         {propMarginTop, propMarginRight, propMarginBottom, propMarginLeft},
	"padding":        {propPaddingTop, propPaddingRight, propPaddingBottom, propPaddingLeft},
	"border-width":   {propBorderTop, propBorderRight, propBorderBottom, propBorderLeft},
	"inset":          {propTop, propRight, propBottom, propLeft},
	"margin-inline":  {-1, propMarginRight, -1, propMarginLeft},
	"padding-inline": {-1, propPaddingRight, -1, propPaddingLeft},
	"inset-inline":   {-1, propRight, -1, propLeft},
}

// borderShorthands set border widths from a "width style colour" value.
var borderShorthands = map[string][]int{
	"border":        {propBorderTop, propBorderRight, propBorderBottom, propBorderLeft},
	"border-left":   {propBorderLeft},
	"border-right":  {propBorderRight},
	"border-top":    {propBorderTop},
	"border-bottom": {propBorderBottom},
}

// cssDecl is one declaration with what decides the cascade.
type cssDecl struct {
	val       string // lower case (unless hasVar), white space collapsed, without !important
	important bool
	hasVar    bool  // val uses var(): resolved for each element
	spec      int32 // specificity; the style attribute is above all selectors
	order     int32 // source order, from 1; 0 means not set
}

func (d cssDecl) beats(o cssDecl) bool {
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

// cssProps holds an element's cascaded declarations: one per property,
// and its custom properties (all of them, winners chosen when read).
type cssProps struct {
	d      [numProps]cssDecl
	custom []cssDecl // val is "--name:value"
	vars   bool      // some declaration uses var()
}

// propDecl is one declaration of a rule, for the property prop.
type propDecl struct {
	prop int8
	cssDecl
}

// set merges one declaration into p.
func (p *cssProps) set(prop int8, d cssDecl) {
	p.vars = p.vars || d.hasVar
	if prop == propCustom {
		p.custom = append(p.custom, d)
		return
	}
	if d.beats(p.d[prop]) {
		p.d[prop] = d
	}
}

// apply merges a rule's declarations into p.
func (p *cssProps) apply(decls []propDecl) {
	for _, d := range decls {
		p.set(d.prop, d.cssDecl)
	}
}

const (
	inlineSpec  = 1 << 30
	inlineOrder = 1<<31 - 1
)

// unknownValue stands for a longhand whose value comes from a shorthand
// that uses var(): it is not read (never hides, and makes a length
// unknown).
const unknownValue = "?"

// parseDecls reads a declaration list (a style attribute or a rule's body)
// and appends the declarations of the properties that matter, with the
// given specificity and order, to out. Shorthands of the box (margin,
// padding, border, inset) are split into their longhands. Custom
// properties are kept with their case (their names are case-sensitive), and
// so are values that use var(): they are resolved, then lower-cased, for
// each element (vars.go).
func parseDecls(out []propDecl, list string, spec, order int32) []propDecl {
	for len(list) > 0 {
		item := list
		if k := indexTopLevel(list, ';'); k >= 0 {
			item, list = list[:k], list[k+1:]
		} else {
			list = ""
		}
		name, val, ok := strings.Cut(item, ":")
		if !ok {
			continue
		}
		name = cssUnescape(strings.TrimSpace(name))
		if strings.HasPrefix(name, "--") {
			val = strings.TrimSpace(cssUnescape(val))
			important := false
			if k := strings.LastIndexByte(val, '!'); k >= 0 && strings.EqualFold(strings.TrimSpace(val[k+1:]), "important") {
				important = true
				val = strings.TrimSpace(val[:k])
			}
			if len(name) > 2 && len(val) <= maxCustomBytes {
				out = append(out, propDecl{prop: propCustom, cssDecl: cssDecl{val: name + ":" + collapseSpace(val), important: important, spec: spec, order: order, hasVar: strings.Contains(strings.ToLower(val), "var(")}})
			}
			continue
		}
		name = strings.ToLower(name)
		prop, known := propNames[name]
		box, isBox := boxShorthands[name]
		border, isBorder := borderShorthands[name]
		if !known && !isBox && !isBorder && name != "font" {
			continue
		}
		val = cssUnescape(val)
		hasVar := strings.Contains(strings.ToLower(val), "var(")
		if hasVar {
			val = collapseSpace(val)
		} else {
			val = collapseSpace(strings.ToLower(val))
		}
		important := false
		if k := strings.LastIndexByte(val, '!'); k >= 0 && strings.EqualFold(strings.TrimSpace(val[k+1:]), "important") {
			important = true
			val = strings.TrimSpace(val[:k])
		}
		if val == "" {
			continue
		}
		d := cssDecl{val: val, important: important, spec: spec, order: order, hasVar: hasVar}
		switch {
		case isBox:
			var parts [4]string
			if hasVar {
				parts = [4]string{unknownValue, unknownValue, unknownValue, unknownValue}
			} else {
				parts = boxSides(val)
			}
			for i, prop := range box {
				if prop >= 0 && parts[i] != "" {
					d.val, d.hasVar = parts[i], false
					out = append(out, propDecl{prop: int8(prop), cssDecl: d})
				}
			}
			continue
		case isBorder:
			w := unknownValue
			if !hasVar {
				w = borderWidth(val)
			}
			d.hasVar = false
			for _, prop := range border {
				d.val = w
				out = append(out, propDecl{prop: int8(prop), cssDecl: d})
			}
			continue
		case name == "font":
			prop = propFontSize
			if hasVar {
				d.val, d.hasVar = unknownValue, false
			} else if d.val = fontShorthandSize(val); d.val == "" {
				continue
			}
		}
		out = append(out, propDecl{prop: int8(prop), cssDecl: d})
	}
	return out
}

// boxSides splits a one- to four-value box shorthand into top, right,
// bottom and left.
func boxSides(v string) [4]string {
	var w []string
	for x := range splitTopLevel(v, ' ') {
		if x = strings.TrimSpace(x); x != "" {
			w = append(w, x)
		}
	}
	switch len(w) {
	case 1:
		return [4]string{w[0], w[0], w[0], w[0]}
	case 2:
		return [4]string{w[0], w[1], w[0], w[1]}
	case 3:
		return [4]string{w[0], w[1], w[2], w[1]}
	case 4:
		return [4]string{w[0], w[1], w[2], w[3]}
	}
	return [4]string{}
}

// borderWidth finds the width in a border shorthand ("1px solid #ccc");
// "medium" (3 px) when it names none, as CSS does.
func borderWidth(v string) string {
	for w := range strings.FieldsSeq(v) {
		switch w {
		case "thin", "medium", "thick":
			return w
		}
		if _, _, ok := parseLength(w); ok {
			return w
		}
	}
	return "medium"
}

// parseOpacity reads an opacity value (a number or a percentage).
func parseOpacity(v string) (float64, bool) {
	if v == "" {
		return 0, false
	}
	pct := strings.HasSuffix(v, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	if pct {
		f /= 100
	}
	return min(max(f, 0), 1), true
}

func overflowClips(v string) bool {
	for w := range strings.FieldsSeq(v) {
		if w == "hidden" || w == "clip" {
			return true
		}
	}
	return false
}

func firstWord(v string) string {
	w, _, _ := strings.Cut(v, " ")
	return w
}

// parseLength splits "12.5px" into 12.5 and "px".
func parseLength(v string) (float64, string, bool) {
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

func isZeroLength(v string) bool {
	f, unit, ok := parseLength(v)
	return ok && f == 0 && (unit == "" || len(unit) <= 4 && strings.Trim(unit, "abcdefghijklmnopqrstuvwxyz%") == "")
}

// farNegative reports whether a length puts content at least 999 px to the
// left or above (-9999px, -100em): off any screen.
func farNegative(v string) bool {
	f, unit, ok := parseLength(v)
	if !ok || f >= 0 {
		return false
	}
	switch unit {
	case "px":
	case "em", "rem":
		f *= 16
	case "pt":
		f = f * 4 / 3
	case "in":
		f *= 96
	case "cm":
		f = f * 96 / 2.54
	default:
		return false
	}
	return f <= -999
}

// fontSizeKind classifies a font-size value: sizes under one pixel count as
// zero; relative sizes (em, %) are assumed to be of a 16 px parent unless the
// parent is zero, which they keep.
func fontSizeKind(v string) int8 {
	switch v {
	case "":
		return fontUnset
	case "xx-small", "x-small", "small", "medium", "large", "x-large", "xx-large", "xxx-large":
		return fontSet
	case "smaller", "larger":
		return fontRel
	}
	f, unit, ok := parseLength(v)
	if !ok || f < 0 {
		return fontUnset
	}
	px := -1.0
	rel := -1.0
	switch unit {
	case "", "px":
		if unit == "" && f != 0 {
			return fontUnset // invalid
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
	default: // vw, vh, ...
		if f == 0 {
			return fontZero
		}
		return fontSet
	}
	switch {
	case px >= 0 && px < 1, rel >= 0 && rel*16 < 1:
		return fontZero
	case px >= 0:
		return fontSet
	}
	return fontRel
}

// fontShorthandSize finds the size in a font shorthand ("bold 0/0 a",
// "12px/1.5 Arial"); "" if there is none.
func fontShorthandSize(v string) string {
	for w := range strings.FieldsSeq(strings.ReplaceAll(v, "/", " / ")) {
		if w == "/" {
			return "" // a line height before any size: invalid
		}
		if k := fontSizeKind(w); k != fontUnset {
			return w
		}
	}
	return ""
}

// rgba is a colour with components from 0 to 1 (not premultiplied).
type rgba struct{ r, g, b, a float64 }

// over composites c over the opaque background bg.
func over(c, bg rgba) rgba {
	if c.a >= 1 {
		return c
	}
	return rgba{c.r*c.a + bg.r*(1-c.a), c.g*c.a + bg.g*(1-c.a), c.b*c.a + bg.b*(1-c.a), 1}
}

// contrast is WCAG's contrast ratio of two opaque colours, from 1 to 21.
func contrast(x, y rgba) float64 {
	lx, ly := luminance(x), luminance(y)
	if lx < ly {
		lx, ly = ly, lx
	}
	return (lx + 0.05) / (ly + 0.05)
}

func luminance(c rgba) float64 {
	return 0.2126*linear(c.r) + 0.7152*linear(c.g) + 0.0722*linear(c.b)
}

// linear turns an sRGB component into linear light.
func linear(v float64) float64 {
	if n := v * 255; n == math.Trunc(n) && n >= 0 && n <= 255 {
		return linearTable[int(n)]
	}
	return linearOf(v)
}

func linearOf(v float64) float64 {
	if v <= 0.04045 {
		return v / 12.92
	}
	return math.Pow((v+0.055)/1.055, 2.4)
}

// linearTable holds linear for the 8-bit components most colours have.
var linearTable = func() (t [256]float64) {
	for i := range t {
		t[i] = linearOf(float64(i) / 255)
	}
	return t
}()

// parseColor reads a CSS colour: #rgb, #rgba, #rrggbb, #rrggbbaa, rgb(),
// rgba(), hsl(), hsla() (comma or space syntax, with percentages and "/
// alpha"), a named colour or transparent. currentcolor, inherit and what it
// cannot read are not colours here (ok false).
func parseColor(v string) (rgba, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 64 {
		return rgba{}, false
	}
	if v[0] == '#' {
		h := v[1:]
		for i := 0; i < len(h); i++ {
			if !isHex(h[i]) {
				return rgba{}, false
			}
		}
		nib := func(i int) float64 { n, _ := strconv.ParseUint(h[i:i+1], 16, 8); return float64(n*17) / 255 }
		byt := func(i int) float64 { n, _ := strconv.ParseUint(h[i:i+2], 16, 8); return float64(n) / 255 }
		switch len(h) {
		case 3:
			return rgba{nib(0), nib(1), nib(2), 1}, true
		case 4:
			return rgba{nib(0), nib(1), nib(2), nib(3)}, true
		case 6:
			return rgba{byt(0), byt(2), byt(4), 1}, true
		case 8:
			return rgba{byt(0), byt(2), byt(4), byt(6)}, true
		}
		return rgba{}, false
	}
	if fn, args, ok := strings.Cut(v, "("); ok {
		args, ok = strings.CutSuffix(strings.TrimSpace(args), ")")
		if !ok {
			return rgba{}, false
		}
		parts := strings.FieldsFunc(args, func(r rune) bool { return r == ',' || r == ' ' || r == '/' })
		if len(parts) != 3 && len(parts) != 4 {
			return rgba{}, false
		}
		num := func(s string, scale float64) (float64, bool) {
			pct := strings.HasSuffix(s, "%")
			s = strings.TrimSuffix(s, "%")
			s = strings.TrimSuffix(s, "deg")
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return 0, false
			}
			if pct {
				return f / 100, true
			}
			return f / scale, true
		}
		alpha := 1.0
		if len(parts) == 4 {
			a, ok := num(parts[3], 1)
			if !ok {
				return rgba{}, false
			}
			alpha = min(max(a, 0), 1)
		}
		var x [3]float64
		switch fn {
		case "rgb", "rgba":
			for i := range 3 {
				f, ok := num(parts[i], 255)
				if !ok {
					return rgba{}, false
				}
				x[i] = min(max(f, 0), 1)
			}
			return rgba{x[0], x[1], x[2], alpha}, true
		case "hsl", "hsla":
			h, ok1 := num(parts[0], 1)
			s, ok2 := num(parts[1], 100)
			l, ok3 := num(parts[2], 100)
			if !ok1 || !ok2 || !ok3 {
				return rgba{}, false
			}
			if strings.HasSuffix(parts[0], "%") {
				return rgba{}, false
			}
			r, g, b := hslToRGB(math.Mod(math.Mod(h, 360)+360, 360), min(max(s, 0), 1), min(max(l, 0), 1))
			return rgba{r, g, b, alpha}, true
		}
		return rgba{}, false
	}
	switch v {
	case "transparent":
		return rgba{0, 0, 0, 0}, true
	case "rebeccapurple":
		return rgba{0x66 / 255.0, 0x33 / 255.0, 0x99 / 255.0, 1}, true
	}
	if c, ok := colornames.Map[v]; ok {
		return rgba{float64(c.R) / 255, float64(c.G) / 255, float64(c.B) / 255, 1}, true
	}
	return rgba{}, false
}

func hslToRGB(h, s, l float64) (r, g, b float64) {
	f := func(n float64) float64 {
		k := math.Mod(n+h/30, 12)
		a := s * min(l, 1-l)
		return l - a*max(-1, min(k-3, 9-k, 1))
	}
	return f(0), f(8), f(4)
}

func collapseSpace(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\t\n\r\f") && !strings.Contains(s, "  ") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// cssUnescape resolves CSS escapes ("\64 isplay", "\:"), which a browser
// resolves in property names, values and selectors.
func cssUnescape(s string) string {
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
		for j < len(s) && j-i < 6 && isHex(s[j]) {
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

func isHex(c byte) bool { return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f' }

// indexTopLevel finds c outside strings, parentheses and brackets; -1 if
// there is none.
func indexTopLevel(s string, c byte) int {
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
func stripCSSComments(s string) string {
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

// maxCSSDepth caps the nesting of blocks that are read; deeper ones are
// skipped.
const maxCSSDepth = 12

// cssRule is a style rule as read: one selector list (nested rules already
// joined to their parents') and its declarations.
type cssRule struct {
	selectors string
	decls     []propDecl // with spec 0: the selector's specificity is added when it is compiled
	order     int32
}

// geoOnly reports whether all of a rule's declarations only place or size
// boxes, which matters only where positions are followed (geometry.go).
func (r *cssRule) geoOnly() bool {
	for _, d := range r.decls {
		if !geoOnlyProp(int(d.prop)) {
			return false
		}
	}
	return true
}

func geoOnlyProp(prop int) bool {
	switch prop {
	case propMarginRight, propMarginBottom, propPaddingLeft, propPaddingRight, propPaddingTop, propPaddingBottom,
		propBorderLeft, propBorderRight, propBorderTop, propBorderBottom, propMinWidth, propMinHeight,
		propTextAlign, propDirection, propWritingMode, propLineHeight, propLetterSpacing, propWordSpacing,
		propWhiteSpace, propZoom:
		return true
	}
	return false
}

// cssReader reads the rules of style blocks that apply on a desktop
// screen, in source order.
type cssReader struct {
	rules []cssRule
	order int32
	bytes int // selector text kept, capped by maxSelectorBytes
}

// addCSS reads the rules of one style block.
func (r *cssReader) addCSS(css string) {
	p := cssParser{s: stripCSSComments(css), r: r}
	p.rules(nil, 0)
}

type cssParser struct {
	s string
	i int
	r *cssReader
}

// until moves to the first of stops outside strings, parentheses and
// brackets and returns the text before it and the stop byte (0 at the end).
func (p *cssParser) until(stops string) (string, byte) {
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
			// A brace inside parentheses is broken CSS: stop there too.
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
func (p *cssParser) skipBlock() {
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

// rules reads rules up to the '}' closing the block (or the end at depth
// 0). parents are the selectors of the enclosing style rule (nesting) or
// @scope, nil at the top.
func (p *cssParser) rules(parents []string, depth int) {
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
			p.atRule(parents, depth)
			continue
		}
		prelude, c := p.until("{}")
		if c != '{' {
			continue // '}' is handled above; 0 ends the loop
		}
		p.i++
		p.styleRule(nest(parents, prelude), depth+1)
	}
}

func (p *cssParser) atRule(parents []string, depth int) {
	p.i++
	start := p.i
	for p.i < len(p.s) && (isASCIILetter(p.s[p.i]) || p.s[p.i] == '-') {
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
	prelude = strings.TrimSpace(prelude)
	switch {
	case depth >= maxCSSDepth:
		p.skipBlock()
	case name == "media":
		if mediaApplies(prelude) {
			p.rules(parents, depth+1)
		} else {
			p.skipBlock()
		}
	case name == "supports":
		// Chromium supports what mail tests for (-webkit- properties,
		// grid); a negated test is taken as failing.
		if strings.HasPrefix(strings.ToLower(prelude), "not") {
			p.skipBlock()
		} else {
			p.rules(parents, depth+1)
		}
	case name == "layer", name == "container":
		p.rules(parents, depth+1)
	case name == "scope":
		root, _, _ := strings.Cut(prelude, ")")
		root = strings.TrimSpace(strings.TrimPrefix(root, "("))
		if root == "" || strings.Contains(prelude, " to ") {
			p.skipBlock() // a scope limit: not matched
		} else {
			p.rules(nest(parents, root), depth+1)
		}
	default: // @font-face, @keyframes, @page, @document, @starting-style, ...
		p.skipBlock()
	}
}

// styleRule reads the block of a style rule (its '{' was just read),
// including nested rules, and records it.
func (p *cssParser) styleRule(selectors []string, depth int) {
	p.r.order = min(p.r.order+1, inlineOrder-1)
	order := p.r.order
	var decls []propDecl
	for {
		item, c := p.until(";{}")
		switch c {
		case ';':
			decls = parseDecls(decls, item, 0, order)
			p.i++
			continue
		case '{':
			p.i++
			if depth >= maxCSSDepth {
				p.skipBlock()
			} else {
				p.styleRule(nest(selectors, item), depth+1) // a nested rule
			}
			continue
		case '}':
			p.i++
		}
		decls = parseDecls(decls, item, 0, order)
		break
	}
	if len(decls) == 0 || len(selectors) == 0 || len(p.r.rules) >= maxRules {
		return
	}
	for _, sel := range selectors {
		if p.r.bytes += len(sel); p.r.bytes > maxSelectorBytes {
			return
		}
	}
	p.r.rules = append(p.r.rules, cssRule{selectors: strings.Join(selectors, ","), decls: decls, order: order})
}

// nest returns the selectors of a rule written inside parents (CSS
// nesting): "&" stands for the parent, and a selector without one is a
// descendant of it. Each parent is paired with each selector, capped at
// maxSelectorsPerRule.
func nest(parents []string, prelude string) []string {
	var out []string
	for sel := range splitTopLevel(prelude, ',') {
		sel = strings.TrimSpace(sel)
		if sel == "" {
			continue
		}
		if parents == nil {
			out = append(out, sel)
		}
		for _, parent := range parents {
			if strings.Contains(sel, "&") {
				out = append(out, strings.ReplaceAll(sel, "&", parent))
			} else {
				out = append(out, parent+" "+sel)
			}
			if len(out) >= maxSelectorsPerRule {
				return out
			}
		}
		if len(out) >= maxSelectorsPerRule {
			return out
		}
	}
	return out
}

// splitTopLevel yields the parts of s between top-level seps.
func splitTopLevel(s string, sep byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for {
			k := indexTopLevel(s, sep)
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

// mediaApplies evaluates a media query list for a desktop screen about
// 1000 px wide and 800 px high, in light mode. Queries it cannot read do not
// apply.
func mediaApplies(q string) bool {
	q = strings.ToLower(collapseSpace(q))
	if q == "" {
		return true
	}
	for query := range splitTopLevel(q, ',') {
		if mediaQueryApplies(strings.TrimSpace(query)) {
			return true
		}
	}
	return false
}

func mediaQueryApplies(q string) bool {
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
		ok, k := mediaFeatureApplies(strings.TrimSuffix(strings.TrimPrefix(part, "("), ")"))
		result = result && ok
		known = known && k
	}
	if !known {
		return false
	}
	return result != negate
}

func mediaFeatureApplies(f string) (result, known bool) {
	name, val, _ := strings.Cut(f, ":")
	name, val = strings.TrimSpace(name), strings.TrimSpace(val)
	size := func(v string) (float64, bool) {
		n, unit, ok := parseLength(v)
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

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
