package mailmsg

import (
	"slices"
	"strconv"
	"strings"

	"github.com/k3a/html2text"
)

// Which HTML elements a reader does not see. Mail hides text from the reader
// (and shows it to a model) with inline styles and <style> rules:
// display:none, visibility:hidden, a zero font size, opacity 0, a zero-sized
// box that clips its overflow, a text colour equal to its background. This
// file computes, for one element, the few properties that can hide text,
// from a small cascade: rules of the document's <style> blocks whose selector
// is simple enough to match exactly (tag, .class, #id and compounds of them,
// such as td.x or .a.b), then the style attribute, ordered by importance,
// specificity and source order as in CSS.
//
// Everything else is approximated on the side of hiding: a rule with a
// complex selector (".a .x", "body > .x", "td[x]", ".x:first-child") or in a
// @supports, @layer or nested block counts as matching its rightmost
// compound (".x"), but only its declarations that hide count. So an evasion
// through such a rule hides too much rather than too little; a mail that
// hides text only for some clients loses it here. Rules for interaction
// (:hover, :focus, :checked ...) or for pseudo-elements (::before) are
// ignored, as are @media blocks that do not apply to a desktop screen about
// 1000 pixels wide in light mode (so responsive "mobile only" rules do not
// hide the desktop text).
//
// All work is linear in the size of the CSS and of the document: rules are
// merged per selector key while parsing, and only up to maxCompound compound
// selectors are kept for exact matching (later ones are approximated).

// The properties that can hide text.
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
	propMsoHide
	propContentVisibility
	numProps
)

var propNames = map[string]int{
	"display": propDisplay, "visibility": propVisibility, "font-size": propFontSize,
	"opacity": propOpacity, "height": propHeight, "max-height": propMaxHeight,
	"width": propWidth, "max-width": propMaxWidth, "overflow": propOverflow,
	"overflow-x": propOverflowX, "overflow-y": propOverflowY, "color": propColor,
	"-webkit-text-fill-color": propTextFill, "background-color": propBackground,
	"background": propBackground, "background-image": propBackgroundImage,
	"mso-hide": propMsoHide, "content-visibility": propContentVisibility,
}

// cssDecl is one declaration with what decides the cascade.
type cssDecl struct {
	val       string // lower case, white space collapsed, without !important
	important bool
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

type cssProps [numProps]cssDecl

func (p *cssProps) merge(q *cssProps) {
	for i := range q {
		if q[i].order != 0 && q[i].beats(p[i]) {
			p[i] = q[i]
		}
	}
}

const (
	inlineSpec  = 1 << 30
	inlineOrder = 1<<31 - 1
)

// parseDecls reads a declaration list (a style attribute or a rule's body)
// into p with the given specificity and order. Only declarations that hide
// are kept when hidingOnly is set.
func parseDecls(p *cssProps, list string, spec, order int32, hidingOnly bool) {
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
		name = strings.ToLower(cssUnescape(strings.TrimSpace(name)))
		val = collapseSpace(strings.ToLower(cssUnescape(val)))
		important := false
		if k := strings.LastIndexByte(val, '!'); k >= 0 && strings.TrimSpace(val[k+1:]) == "important" {
			important = true
			val = strings.TrimSpace(val[:k])
		}
		prop, known := propNames[name]
		if name == "font" {
			prop, known, val = propFontSize, true, fontShorthandSize(val)
		}
		if !known || val == "" || hidingOnly && !declHides(prop, val) {
			continue
		}
		d := cssDecl{val: val, important: important, spec: spec, order: order}
		if d.beats(p[prop]) {
			p[prop] = d
		}
	}
}

// declHides reports whether a declaration on its own can hide text (it may
// need a partner: a zero height needs hidden overflow).
func declHides(prop int, val string) bool {
	switch prop {
	case propDisplay:
		return val == "none"
	case propVisibility:
		return val == "hidden" || val == "collapse"
	case propFontSize:
		return fontSizeKind(val) == fontZero
	case propOpacity:
		return opacityHides(val)
	case propHeight, propMaxHeight, propWidth, propMaxWidth:
		return isZeroLength(val)
	case propOverflow, propOverflowX, propOverflowY:
		return overflowClips(val)
	case propColor, propTextFill:
		return normColor(val) == "transparent"
	case propMsoHide:
		return val == "all"
	case propContentVisibility:
		return val == "hidden"
	}
	return false
}

// ownStyle is what an element's own declarations say about its visibility;
// inherit combines it with its parent's.
type ownStyle struct {
	drop  bool // the element and everything in it is invisible
	font  int8 // fontUnset, fontZero, fontSet (an absolute size), fontRel (relative, so zero stays zero)
	vis   int8 // visUnset, visHidden, visShown
	color string
	bg    string // "" with bgSet: a background we cannot compare (image, gradient)
	bgSet bool
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

// visState is the visibility inherited by an element's content.
type visState struct {
	drop      bool
	fontZero  bool
	visHidden bool
	color, bg string // normalised; "" unknown
}

func (v visState) hidden() bool {
	return v.drop || v.fontZero || v.visHidden || v.color == "transparent" || v.color != "" && v.color == v.bg
}

func inherit(parent visState, own ownStyle) visState {
	st := parent
	st.drop = parent.drop || own.drop
	switch own.font {
	case fontZero:
		st.fontZero = true
	case fontSet:
		st.fontZero = false
	}
	switch own.vis {
	case visHidden:
		st.visHidden = true
	case visShown:
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
func styleOf(p *cssProps, a *htmlAttrs) ownStyle {
	var o ownStyle
	o.drop = a.hidden || p[propDisplay].val == "none" || p[propContentVisibility].val == "hidden" ||
		p[propMsoHide].val == "all" || opacityHides(p[propOpacity].val)
	zeroH := isZeroLength(p[propHeight].val) || isZeroLength(p[propMaxHeight].val)
	zeroW := isZeroLength(p[propWidth].val) || isZeroLength(p[propMaxWidth].val)
	clipY := overflowClips(p[propOverflow].val) || overflowClips(p[propOverflowY].val)
	clipX := overflowClips(firstWord(p[propOverflow].val)) || overflowClips(p[propOverflowX].val)
	if zeroH && clipY || zeroW && clipX || isZeroLength(p[propWidth].val) && isZeroLength(p[propHeight].val) {
		o.drop = true
	}
	o.font = fontSizeKind(p[propFontSize].val)
	switch p[propVisibility].val {
	case "hidden", "collapse":
		o.vis = visHidden
	case "visible":
		o.vis = visShown
	}
	o.color = normColor(p[propColor].val)
	if o.color == "" && a.color != "" {
		o.color = normColor(a.color) // <font color>
	}
	if fill := normColor(p[propTextFill].val); fill != "" && fill != "currentcolor" {
		o.color = fill
	}
	if o.color == "currentcolor" || o.color == "inherit" {
		o.color = ""
	}
	switch bg := p[propBackground].val; {
	case p[propBackgroundImage].order != 0 && p[propBackgroundImage].val != "none", a.background != "":
		o.bgSet = true // an image: unknown
	case bg != "":
		o.bgSet = true
		if !strings.ContainsAny(bg, " (") || strings.HasPrefix(bg, "rgb") || strings.HasPrefix(bg, "hsl") {
			o.bg = normColor(bg)
		}
	case a.bgcolor != "":
		o.bg, o.bgSet = normColor(a.bgcolor), true
	}
	switch o.bg {
	case "transparent", "none":
		o.bg, o.bgSet = "", false // the parent's background shows through
	case "inherit", "initial", "unset", "currentcolor":
		o.bg = ""
	}
	return o
}

func (o ownStyle) hides() bool {
	return o.drop || o.font == fontZero || o.vis == visHidden || o.color == "transparent"
}

// opacityHides reports whether an opacity value makes content practically
// invisible (below 0.1; 0.5 is still readable).
func opacityHides(v string) bool {
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

// normColor normalises a colour for comparison: lower case, #rgb expanded,
// rgb() to hex, a few names, anything fully transparent as "transparent".
func normColor(v string) string {
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

// cssKey names what a selector needs: a tag, a class, an id or nothing ('*').
type cssKey struct {
	kind byte // 't', 'c', 'i', '*'
	name string
}

type compoundRule struct {
	tag, id string
	classes []string
	props   cssProps
}

// maxCompound caps the compound selectors matched exactly.
const maxCompound = 128

// styleSheet holds the rules of a document's <style> blocks that can hide
// text.
type styleSheet struct {
	exact    map[cssKey]*cssProps // rules whose selector is one simple selector
	approx   map[cssKey]*cssProps // hiding declarations of approximated rules
	compound []compoundRule
	byKey    map[cssKey][]int32 // compound rules by their most selective part
	order    int32
}

func newStyleSheet() *styleSheet {
	return &styleSheet{exact: map[cssKey]*cssProps{}, approx: map[cssKey]*cssProps{}, byKey: map[cssKey][]int32{}}
}

func (sh *styleSheet) empty() bool {
	return len(sh.exact) == 0 && len(sh.approx) == 0 && len(sh.compound) == 0
}

// maxCSSDepth caps the nesting of blocks that are read; deeper ones are
// skipped.
const maxCSSDepth = 12

// addCSS reads the rules of one style block.
func (sh *styleSheet) addCSS(css string) {
	p := cssParser{s: stripCSSComments(css), sh: sh}
	p.rules(false, 0)
}

type cssParser struct {
	s  string
	i  int
	sh *styleSheet
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

// rules reads rules up to the '}' closing the block (or the end at depth 0).
func (p *cssParser) rules(approx bool, depth int) {
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
			continue // '}' is handled above; 0 ends the loop
		}
		p.i++
		p.styleRule(prelude, approx, depth+1)
	}
}

func (p *cssParser) atRule(approx bool, depth int) {
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
	switch {
	case depth >= maxCSSDepth:
		p.skipBlock()
	case name == "media":
		if mediaApplies(prelude) {
			p.rules(approx, depth+1)
		} else {
			p.skipBlock()
		}
	case name == "supports", name == "layer", name == "scope", name == "container",
		name == "document", name == "-moz-document":
		p.rules(true, depth+1)
	default: // @font-face, @keyframes, @page, @starting-style, ...
		p.skipBlock()
	}
}

// styleRule reads the block of a style rule (its '{' was just read),
// including nested rules, and records it under each of its selectors.
func (p *cssParser) styleRule(prelude string, approx bool, depth int) {
	p.sh.order = min(p.sh.order+1, inlineOrder-1)
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
			if depth >= maxCSSDepth {
				p.skipBlock()
			} else {
				p.styleRule(item, true, depth+1) // nested rule
			}
			continue
		case '}':
			p.i++
		}
		decls.WriteString(item)
		break
	}
	list := decls.String()
	for sel := range splitTopLevel(prelude, ',') {
		p.sh.addRule(parseSelector(sel), list, order, approx)
	}
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

func (sh *styleSheet) addRule(sel selector, list string, order int32, approx bool) {
	if sel.kind == selSkip {
		return
	}
	if approx || sel.kind == selApprox || sel.kind == selCompound && len(sh.compound) >= maxCompound {
		sh.merge(sh.approx, sel.key, list, sel.spec, order, true)
		return
	}
	if sel.kind == selSimple {
		sh.merge(sh.exact, sel.key, list, sel.spec, order, false)
		return
	}
	var props cssProps
	parseDecls(&props, list, sel.spec, order, false)
	if props == (cssProps{}) {
		return
	}
	sh.compound = append(sh.compound, compoundRule{tag: sel.tag, id: sel.id, classes: sel.classes, props: props})
	sh.byKey[sel.key] = append(sh.byKey[sel.key], int32(len(sh.compound)-1))
}

func (sh *styleSheet) merge(m map[cssKey]*cssProps, key cssKey, list string, spec, order int32, hidingOnly bool) {
	var props cssProps
	parseDecls(&props, list, spec, order, hidingOnly)
	if props == (cssProps{}) {
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
func cascade(sh *styleSheet, tag string, a *htmlAttrs) cssProps {
	var p cssProps
	if sh != nil {
		var classes []string
		if a.class != "" {
			classes = strings.Fields(strings.ToLower(a.class))
			slices.Sort(classes)
			classes = slices.Compact(classes)
		}
		id := strings.ToLower(strings.TrimSpace(a.id))
		sh.apply(&p, cssKey{'*', ""}, tag, id, classes)
		sh.apply(&p, cssKey{'t', tag}, tag, id, classes)
		if id != "" {
			sh.apply(&p, cssKey{'i', id}, tag, id, classes)
		}
		for _, c := range classes {
			sh.apply(&p, cssKey{'c', c}, tag, id, classes)
		}
	}
	if a.style != "" {
		parseDecls(&p, a.style, inlineSpec, inlineOrder, false)
	}
	return p
}

func (sh *styleSheet) apply(p *cssProps, key cssKey, tag, id string, classes []string) {
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
	selSkip     = iota // never applies (interaction, pseudo-element) or unreadable
	selSimple          // one tag, class or id, or '*'
	selCompound        // tag, classes and id together, matched exactly
	selApprox          // anything else: matched by key, hiding declarations only
)

type selector struct {
	kind    int
	key     cssKey
	tag, id string
	classes []string
	spec    int32
}

// interactive pseudo-classes: a rule with one applies only on user action.
var interactivePseudo = map[string]bool{
	"hover": true, "focus": true, "active": true, "checked": true, "target": true,
	"focus-within": true, "focus-visible": true, "visited": true, "indeterminate": true,
	"open": true, "popover-open": true, "modal": true, "fullscreen": true, "user-invalid": true,
}

var legacyPseudoElements = map[string]bool{"before": true, "after": true, "first-line": true, "first-letter": true}

// parseSelector reads one complex selector.
func parseSelector(s string) selector {
	s = strings.TrimSpace(cssUnescape(s))
	if s == "" || len(s) > 1024 {
		return selector{kind: selSkip}
	}
	var sel selector
	complexSel := false
	// Walk the compounds; the last one read is the subject.
	for i := 0; i < len(s); {
		if c := s[i]; c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '>' || c == '+' || c == '~' {
			complexSel = true
			i++
			continue
		}
		var ok, approx bool
		var next int
		sel.tag, sel.id, sel.classes = "", "", nil
		next, ok, approx = parseCompound(s, i, &sel)
		if !ok {
			return selector{kind: selSkip}
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
		sel.key = cssKey{'i', sel.id}
	case len(sel.classes) > 0:
		sel.key = cssKey{'c', sel.classes[0]}
	case sel.tag != "":
		sel.key = cssKey{'t', sel.tag}
	default:
		sel.key = cssKey{'*', ""}
	}
	switch {
	case complexSel || len(sel.classes) > 8:
		sel.kind = selApprox
	case parts <= 1:
		sel.kind = selSimple
	default:
		sel.kind = selCompound
		slices.Sort(sel.classes)
		sel.classes = slices.Compact(sel.classes)
	}
	return sel
}

// parseCompound reads a compound selector at s[i:] into sel (tag, id,
// classes) and adds to its specificity. approx reports parts it cannot
// match exactly (attributes, pseudo-classes, namespaces, nesting).
func parseCompound(s string, i int, sel *selector) (next int, ok, approx bool) {
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
			name, j := cssIdent(s, i+1)
			if name == "" {
				return i, false, false
			}
			if c == '#' {
				if sel.id != "" && sel.id != name {
					return i, false, false // can never match
				}
				sel.id = name
				sel.spec = addSpec(sel.spec, 100)
			} else {
				sel.classes = append(sel.classes, name)
				sel.spec = addSpec(sel.spec, 10)
			}
			i = j
		case c == '[':
			end := closingBracket(s, i)
			if end < 0 {
				return i, false, false
			}
			approx = true
			sel.spec = addSpec(sel.spec, 10)
			i = end + 1
		case c == ':':
			if strings.HasPrefix(s[i:], "::") {
				return i, false, false // a pseudo-element
			}
			name, j := cssIdent(s, i+1)
			if name == "" {
				return i, false, false
			}
			if interactivePseudo[name] || legacyPseudoElements[name] {
				return i, false, false
			}
			if j < len(s) && s[j] == '(' {
				end := closingParen(s, j)
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
			sel.spec = addSpec(sel.spec, 10)
			i = j
		case c >= 0x80 || isASCIILetter(c) || c == '_' || c == '-' || c == '\\':
			if i != start && !approx {
				return i, false, false
			}
			name, j := cssIdent(s, i)
			if name == "" {
				return i, false, false
			}
			if j < len(s) && s[j] == '|' { // a namespace prefix
				approx = true
				i = j
				continue
			}
			sel.tag = name
			sel.spec = addSpec(sel.spec, 1)
			i = j
		default:
			return i, false, false
		}
	}
	return i, i > start, approx
}

func addSpec(spec, n int32) int32 { return min(spec+n, inlineSpec-1) }

// cssIdent reads an identifier at s[i:] and returns it in lower case.
func cssIdent(s string, i int) (string, int) {
	start := i
	for i < len(s) {
		c := s[i]
		if c >= 0x80 || isASCIILetter(c) || c >= '0' && c <= '9' || c == '-' || c == '_' {
			i++
			continue
		}
		break
	}
	return strings.ToLower(s[start:i]), i
}

func closingParen(s string, i int) int {
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

func closingBracket(s string, i int) int {
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

// decodeAttr decodes character references in an attribute value, as a
// browser does before CSS sees it ("display&colon;none").
func decodeAttr(v string) string {
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
		for d < len(v) && d-j < 8 && (base == 10 && v[d] >= '0' && v[d] <= '9' || base == 16 && isHex(v[d])) {
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
