package mailmsg

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// Text moved off the page. A person can scroll right and down, never left
// of the page or above it, so text placed entirely there is hidden:
// absolutely placed boxes (left:-9999px, right:10000px, top:-9999px),
// boxes shifted by a negative margin-left, by position:relative or by a
// translating transform, and the first line of a block pushed out by a
// negative text-indent.
//
// There is no layout engine here: where text lands is bounded from above
// while the document is walked, and text is hidden only when even the
// bound is off the page. The bounds assume that a line of text is never
// wider than 1.25 em for each ASCII character and 3 em for any other, that
// every character may sit on a line of its own (for heights), and that
// nothing in the page's normal flow starts further right than the page is
// wide: 1000 px, or the widest width the message declares (pageWidth).
// Whatever the bounds cannot follow (an offset in percent, a flex item,
// right-aligned or right-to-left lines, a box placed against a positioned
// ancestor, an offset upwards in the normal flow, whose place depends on
// everything above it) makes the position unknown, and unknown is never
// hidden: text under a far offset that stays shown this way is reported as
// possibly hidden instead (visState.unsure).

// Positions.
const (
	posStatic int8 = iota
	posRelative
	posAbsolute
	posFixed
	posSticky
)

func positionOf(v string) int8 {
	switch v {
	case "relative":
		return posRelative
	case "absolute":
		return posAbsolute
	case "fixed":
		return posFixed
	case "sticky", "-webkit-sticky":
		return posSticky
	}
	return posStatic
}

// The viewport of the desktop client the reader uses (css.go's media
// queries assume the same).
const (
	viewportWidth  = 1000
	viewportHeight = 800
)

// farOffset is how far (in px) an offset must move text to count as
// hiding it when its exact place cannot be computed: what stays shown
// under it is reported as possibly hidden.
const farOffset = 999

var inf = math.Inf(1)

// boxStyle is what places and sizes an element's box, in pixels. NaN is
// auto (or not set); +Inf is a value that cannot be computed here.
type boxStyle struct {
	pos                      int8
	left, right, top, bottom float64
	margin, padding, border  [4]float64 // top, right, bottom, left
	width, height            float64
	tx, ty                   float64 // translation by transform and translate
	transformed              bool    // a transform applies: the box contains absolute and fixed boxes
	float                    int8    // 0 none, 1 left, 2 right
	far                      bool    // it moves its content far (left, up, or right of a right edge)
}

// relativeShift is how far position:relative (or sticky) moves the box
// right: left, else minus right.
func (b *boxStyle) relativeShift() float64 {
	if b.pos != posRelative && b.pos != posSticky {
		return 0
	}
	switch {
	case !math.IsNaN(b.left):
		return b.left
	case !math.IsNaN(b.right):
		return -b.right
	}
	return 0
}

// Box sides.
const (
	sideTop = iota
	sideRight
	sideBottom
	sideLeft
)

// needsBox reports whether an element's declarations can move it, so its
// box must be read even where positions are not followed.
func needsBox(p *cssProps) bool {
	if v := p.d[propPosition].val; v != "" && v != "static" {
		return true
	}
	for _, prop := range []int{propMarginLeft, propMarginTop, propTransform, propTranslate} {
		if v := p.d[prop].val; v != "" && v != "none" && (strings.Contains(v, "-") || v == unknownValue) {
			return true
		}
	}
	return false
}

// readBox reads an element's box from its cascaded declarations and
// attributes; fontPx is its own font size (for em).
func readBox(p *cssProps, a *elemAttrs, disp int8, fontPx float64) *boxStyle {
	b := &boxStyle{pos: positionOf(p.d[propPosition].val), tx: 0, ty: 0}
	length := func(prop int, auto float64) float64 {
		v := p.d[prop].val
		switch v {
		case "", "auto", "initial", "unset":
			return auto
		}
		if px, ok := lengthPx(v, fontPx); ok {
			return px
		}
		return inf
	}
	b.left, b.right = length(propLeft, math.NaN()), length(propRight, math.NaN())
	b.top, b.bottom = length(propTop, math.NaN()), length(propBottom, math.NaN())
	if b.pos == posStatic {
		b.left, b.right, b.top, b.bottom = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	}
	for i, prop := range [4]int{propMarginTop, propMarginRight, propMarginBottom, propMarginLeft} {
		b.margin[i] = length(prop, 0)
		if math.IsNaN(b.margin[i]) {
			b.margin[i] = inf
		}
	}
	for i, prop := range [4]int{propPaddingTop, propPaddingRight, propPaddingBottom, propPaddingLeft} {
		b.padding[i] = length(prop, 0)
		if math.IsNaN(b.padding[i]) || b.padding[i] < 0 {
			b.padding[i] = inf
		}
	}
	for i, prop := range [4]int{propBorderTop, propBorderRight, propBorderBottom, propBorderLeft} {
		switch p.d[prop].val {
		case "thin":
			b.border[i] = 1
		case "medium":
			b.border[i] = 3
		case "thick":
			b.border[i] = 5
		default:
			b.border[i] = max(length(prop, 0), 0)
		}
	}
	if a.border != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(a.border)); err == nil && n > 0 {
			for i := range b.border {
				b.border[i] = max(b.border[i], float64(n))
			}
		}
	}
	b.width = max(length(propWidth, math.NaN()), length(propMinWidth, math.NaN()))
	if math.IsNaN(b.width) {
		b.width = attrLength(a.width)
	}
	b.height = max(length(propHeight, math.NaN()), length(propMinHeight, math.NaN()))
	if math.IsNaN(b.height) {
		b.height = attrLength(a.height)
	}
	switch p.d[propFloat].val {
	case "left", "inline-start":
		b.float = 1
	case "right", "inline-end":
		b.float = 2
	}
	if disp != dispInline && disp != dispContents {
		for _, prop := range []int{propTranslate, propTransform} {
			if v := p.d[prop].val; v != "" && v != "none" {
				t := parseTransform(v, false)
				if prop == propTranslate {
					t = parseTranslate(v)
				}
				b.transformed = true
				b.tx += t.tx
				b.ty += t.ty
			}
		}
		if v := p.d[propScale].val; v != "" && v != "none" {
			b.transformed = true
		}
	}
	if p.d[propFilter].val != "" && p.d[propFilter].val != "none" {
		b.transformed = true // a filter contains fixed and absolute boxes too
	}
	switch b.pos {
	case posAbsolute, posFixed:
		b.far = b.left <= -farOffset || b.top <= -farOffset || b.right >= farOffset || b.bottom >= farOffset
	case posRelative, posSticky:
		b.far = b.left <= -farOffset || b.top <= -farOffset || b.right >= farOffset || b.bottom >= farOffset
	}
	b.far = b.far || b.margin[sideLeft] <= -farOffset || b.margin[sideTop] <= -farOffset ||
		b.tx <= -farOffset || b.ty <= -farOffset || math.IsInf(b.tx, 0) || math.IsInf(b.ty, 0)
	return b
}

// attrLength reads a width or height attribute in pixels (NaN when absent,
// +Inf for a percentage).
func attrLength(v string) float64 {
	v = strings.TrimSpace(v)
	if v == "" {
		return math.NaN()
	}
	v = strings.TrimSuffix(v, "px")
	if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && !math.IsInf(f, 0) {
		return f
	}
	return inf
}

// transformOf is what a transform does that matters here.
type transformOf struct {
	empty  bool    // it flattens the box to nothing (a zero scale)
	scale  float64 // the smallest scale it applies on either axis (1 when none)
	tx, ty float64 // the translation; +Inf when it cannot be computed (percentages, or mixed with scaling or rotation)
}

// parseTransform reads a transform value, or with scaleProp the value of
// the scale property.
func parseTransform(v string, scaleProp bool) transformOf {
	t := transformOf{scale: 1}
	if scaleProp {
		f := strings.Fields(v)
		if len(f) == 0 || len(f) > 3 {
			return t
		}
		for i, s := range f {
			if i == 2 {
				break
			}
			if x, ok := scaleNumber(s); ok {
				t.scale = min(t.scale, math.Abs(x))
				if x == 0 {
					t.empty = true
				}
			}
		}
		if len(f) == 1 {
			if x, ok := scaleNumber(f[0]); ok {
				t.scale = math.Abs(x)
			}
		}
		return t
	}
	mixed := false
	for len(v) > 0 {
		open := strings.IndexByte(v, '(')
		if open < 0 {
			break
		}
		name := strings.TrimSpace(v[:open])
		end := strings.IndexByte(v[open:], ')')
		if end < 0 {
			break
		}
		args := splitArgs(v[open+1 : open+end])
		v = v[open+end+1:]
		switch name {
		case "translate", "translate3d":
			if len(args) >= 1 {
				t.tx += translateLength(args[0])
			}
			if len(args) >= 2 {
				t.ty += translateLength(args[1])
			}
		case "translatex":
			if len(args) == 1 {
				t.tx += translateLength(args[0])
			}
		case "translatey":
			if len(args) == 1 {
				t.ty += translateLength(args[0])
			}
		case "translatez", "perspective":
		case "scale", "scalex", "scaley", "scale3d":
			n := len(args)
			if name == "scale3d" {
				n = min(n, 2)
			}
			for i := 0; i < n; i++ {
				x, ok := scaleNumber(args[i])
				if !ok {
					continue
				}
				if x == 0 {
					t.empty = true
				}
				if x != 1 {
					mixed = true
				}
				t.scale *= math.Abs(x)
				if name == "scale" && n == 1 {
					break // one factor for both axes
				}
			}
		case "matrix":
			if len(args) == 6 {
				var m [6]float64
				ok := true
				for i := range m {
					var err error
					m[i], err = strconv.ParseFloat(args[i], 64)
					ok = ok && err == nil
				}
				if ok {
					if m[0]*m[3]-m[1]*m[2] == 0 {
						t.empty = true
					}
					if m[0] != 1 || m[1] != 0 || m[2] != 0 || m[3] != 1 {
						mixed = true
					}
					t.tx += m[4]
					t.ty += m[5]
				}
			}
		default: // rotations, skews, matrix3d
			mixed = true
		}
	}
	if mixed {
		if t.tx != 0 {
			t.tx = inf
		}
		if t.ty != 0 {
			t.ty = inf
		}
		if t.scale != 1 {
			// What a scale does to where text lands is not followed.
			t.scale = max(t.scale, 0)
		}
	}
	return t
}

// parseTranslate reads the value of the translate property.
func parseTranslate(v string) transformOf {
	t := transformOf{scale: 1}
	f := strings.Fields(v)
	if len(f) >= 1 {
		t.tx = translateLength(f[0])
	}
	if len(f) >= 2 {
		t.ty = translateLength(f[1])
	}
	return t
}

func splitArgs(s string) []string {
	var out []string
	for a := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		out = append(out, a)
	}
	return out
}

// translateLength is a translation in px; +Inf for percentages (of the
// box's own size) and what cannot be read.
func translateLength(s string) float64 {
	if px, ok := lengthPx(s, 16); ok {
		return px
	}
	return inf
}

func scaleNumber(s string) (float64, bool) {
	pct := strings.HasSuffix(s, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	if pct {
		f /= 100
	}
	return f, true
}

// clipEmpty reports whether a clip value (which only absolutely placed
// boxes obey) leaves at most one pixel: rect(0 0 0 0), rect(1px, 1px, 1px,
// 1px).
func clipEmpty(v string) bool {
	args, ok := strings.CutPrefix(v, "rect(")
	if !ok {
		return false
	}
	args, ok = strings.CutSuffix(args, ")")
	if !ok {
		return false
	}
	e, ok := rectEdges(args)
	return ok && (e[1]-e[3] <= 1 || e[2]-e[0] <= 1)
}

// rectEdges reads rect()'s four edges (top, right, bottom, left) in
// pixels; not ok for any other count, or an edge that is not a length
// (auto: the box's own edge, which this cannot know).
func rectEdges(args string) (e [4]float64, ok bool) {
	a := splitArgs(args)
	if len(a) != 4 {
		return e, false
	}
	for i, s := range a {
		if e[i], ok = lengthPx(s, 16); !ok {
			return e, false
		}
	}
	return e, true
}

// clipPathEmpty reports whether a clip-path shape is empty: inset() of 50%
// or more from both sides, a circle or ellipse of radius 0, a polygon
// without area, rect() or xywh() of no size.
func clipPathEmpty(v string) bool {
	if v == "" || v == "none" {
		return false
	}
	open := strings.IndexByte(v, '(')
	if open < 0 {
		return false
	}
	name := v[:open]
	if k := strings.LastIndexByte(name, ' '); k >= 0 {
		name = name[k+1:] // a box keyword before the shape
	}
	end := strings.LastIndexByte(v, ')')
	if end < open {
		return false
	}
	body := v[open+1 : end]
	if k := strings.Index(body, " round "); k >= 0 {
		body = body[:k]
	}
	switch name {
	case "inset":
		s := boxSides(body)
		pct := func(x string) float64 {
			f, unit, ok := parseLength(x)
			if ok && unit == "%" {
				return f
			}
			return -1
		}
		t, r, b, l := pct(s[0]), pct(s[1]), pct(s[2]), pct(s[3])
		return t >= 0 && b >= 0 && t+b >= 100 || l >= 0 && r >= 0 && l+r >= 100
	case "circle", "ellipse":
		radii, _, _ := strings.Cut(body, " at ")
		f := strings.Fields(radii)
		if len(f) == 0 {
			return false
		}
		for _, x := range f {
			if isZeroLength(x) {
				return true
			}
		}
		return false
	case "polygon":
		var xs, ys []string
		for pt := range strings.SplitSeq(body, ",") {
			f := strings.Fields(pt)
			if len(f) == 1 && (f[0] == "nonzero" || f[0] == "evenodd") {
				continue
			}
			if len(f) != 2 {
				return false
			}
			xs, ys = append(xs, f[0]), append(ys, f[1])
		}
		same := func(list []string) bool {
			for _, x := range list[1:] {
				if x != list[0] && !(isZeroLength(x) && isZeroLength(list[0])) {
					return false
				}
			}
			return true
		}
		return len(xs) > 0 && (same(xs) || same(ys))
	case "rect":
		e, ok := rectEdges(body)
		return ok && (e[1] <= e[3] || e[2] <= e[0])
	case "xywh":
		a := splitArgs(body)
		return len(a) == 4 && (isZeroLength(a[2]) || isZeroLength(a[3]))
	}
	return false
}

// lineBounds follows where text can land (upper bounds, in page
// pixels), while positions are followed (on).
type lineBounds struct {
	on        bool
	x         float64 // the pen in the current line
	start     float64 // where a new line of the current block starts
	right     float64 // the current block's right edge
	first     bool    // the current line is the block's first
	reach     float64 // the furthest x text reached in the current box
	xMax      float64 // no text of the current box goes right of this
	y, yMax   float64 // in a box placed against the page: the pen's y and the box's bottom (+Inf: not followed)
	cells     bool    // in a table row: each cell starts where the last ended
	wideTable bool    // the table declares its width: cells may be wider than their text
	cellPad   float64 // the table's cellspacing and cellpadding
	run       *hiddenRun
}

// offBounds is lineBounds where positions are not followed.
var offBounds = lineBounds{x: inf, start: inf, right: inf, reach: inf, xMax: inf, y: inf, yMax: inf}

// pageWidth is how far right the page's normal flow can start a box:
// 1000 px, or the widest width or min-width the message declares.
func (r *renderer) pageWidth() float64 {
	if r.pageW > 0 {
		return r.pageW
	}
	w := float64(viewportWidth)
	consider := func(px float64) {
		if !math.IsNaN(px) && !math.IsInf(px, 0) {
			w = max(w, px)
		}
	}
	if r.m != nil {
		for _, rule := range r.m.sh.rules {
			for _, d := range rule.decls {
				if d.prop == propWidth || d.prop == propMinWidth {
					px, _ := lengthPx(d.val, 16)
					consider(px)
				}
			}
		}
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode {
				continue
			}
			a := attrsOf(c)
			consider(attrLength(a.width))
			if strings.Contains(a.style, "width") {
				for _, d := range parseDecls(nil, a.style, 0, 0) {
					if d.prop == propWidth || d.prop == propMinWidth {
						px, _ := lengthPx(d.val, 16)
						consider(px)
					}
				}
			}
			walk(c)
		}
	}
	walk(r.doc)
	r.pageW = w
	return w
}

// textBox bounds the width of t laid out on one line, and its height if
// every character had a line of its own.
func textBox(t string, st *visState) (w, h float64) {
	n, wide, spaces := 0, 0, 0
	for i := 0; i < len(t); {
		c := t[i]
		if c < utf8.RuneSelf {
			if c == ' ' {
				spaces++
			}
			if c == '\t' {
				wide += 3 // a tab is at most 8 spaces
			}
			n++
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(t[i:])
		n++
		wide++
		i += size
	}
	em := st.fontPx * max(st.scale, 1)
	w = float64(n)*1.25*em + float64(wide)*1.75*em
	if st.letterSpacing > 0 || math.IsNaN(st.letterSpacing) {
		w += float64(n) * st.letterSpacing
	}
	if st.wordSpacing > 0 || math.IsNaN(st.wordSpacing) {
		w += float64(spaces) * st.wordSpacing
	}
	step := 2 * em
	if lh := st.lineHeight; lh > step || math.IsNaN(lh) && !math.IsNaN(st.lineHeight) {
		step = lh
	}
	h = float64(n)*step + em
	if math.IsNaN(w) {
		w = inf
	}
	return w, h
}

// offPage reports whether text t (with the style st) lands left of or above
// the page, and moves the pen past it.
func (r *renderer) offPage(t string, st *visState) bool {
	g := &r.geo
	if !g.on || isBlankText(t) {
		return false
	}
	w, h := textBox(t, st)
	x := g.x
	if st.rtl || st.align == alignEnd || st.scale != 1 {
		x = inf
	}
	end := x + w
	if st.align == alignCenter {
		// A centred line's text ends at most halfway between its start and
		// the block's right edge, plus half its width so far.
		end = (g.right + x + w) / 2
	}
	hidden := end <= 0 || g.xMax <= 0 || g.y+h <= 0 || g.yMax <= 0
	g.x += w
	g.reach = max(g.reach, g.x)
	g.y += h
	if math.IsNaN(g.x) {
		g.x = inf
	}
	return hidden
}

// geoEnter updates the bounds for element n entering with its own style
// and box (nil when not read), under the parent's state st and its own
// cst. It returns what geoLeave needs to restore.
func (r *renderer) geoEnter(n *html.Node, own *ownStyle, st, cst *visState) lineBounds {
	saved := r.geo
	b := own.box
	g := &r.geo
	disp := own.disp
	if b == nil {
		if !g.on && !(blockContainer(disp) && indentOf(cst) < 0 && indentOf(cst)+r.pageWidth() < 0) {
			return saved
		}
		// Positions are followed but this element's box was not read:
		// it has no box properties (all zero).
		b = &boxStyle{left: math.NaN(), right: math.NaN(), top: math.NaN(), bottom: math.NaN(), width: math.NaN(), height: math.NaN()}
	}
	activate := func() {
		if !g.on {
			p := r.pageWidth()
			*g = lineBounds{on: true, x: p, start: p, right: p, reach: p, xMax: inf, y: inf, yMax: inf, first: g.first}
		}
	}
	out := b.pos == posAbsolute || b.pos == posFixed
	if out {
		contained := b.pos == posAbsolute && st.posAnc || b.pos == posFixed && st.fixedAnc
		if contained {
			*g = offBounds // placed against a box whose place is not followed
		} else {
			activate()
			*g = lineBounds{on: true, x: g.x, start: g.x, right: viewportWidth, reach: g.x, xMax: inf, y: inf, yMax: inf, first: true}
			switch {
			case !math.IsNaN(b.left):
				g.start = b.left + b.margin[sideLeft] + b.border[sideLeft] + b.padding[sideLeft]
			case !math.IsNaN(b.right) && math.IsNaN(b.width):
				g.xMax = viewportWidth - b.right - b.margin[sideRight] // shrink-to-fit: all of it is left of its right edge
				g.start = g.xMax
			case !math.IsNaN(b.right):
				g.start = viewportWidth - b.right - b.margin[sideRight] - b.border[sideRight] - b.padding[sideRight] - b.width
			}
			if !math.IsNaN(b.width) {
				g.right = g.start + b.width
			}
			switch {
			case !math.IsNaN(b.top):
				g.y = b.top + b.margin[sideTop] + b.border[sideTop] + b.padding[sideTop]
			case !math.IsNaN(b.bottom) && math.IsNaN(b.height):
				g.yMax = viewportHeight - b.bottom - b.margin[sideBottom]
				g.y = g.yMax
			case !math.IsNaN(b.bottom):
				g.y = viewportHeight - b.bottom - b.margin[sideBottom] - b.border[sideBottom] - b.padding[sideBottom] - b.height
			}
			g.start += b.tx
			g.xMax += b.tx
			g.y += b.ty
			g.yMax += b.ty
			g.x = g.start + indentOf(cst)
			g.reach = g.x
			nanToInf(g)
		}
		return saved
	}
	dx := b.relativeShift()
	if disp == dispInline || disp == dispContents {
		shift := dx + b.margin[sideLeft] + b.border[sideLeft] + b.padding[sideLeft]
		if shift < 0 && shift+r.pageWidth() < 0 {
			activate()
		}
		if g.on {
			g.x += shift
			nanToInf(g)
		}
		return saved
	}
	// A block, a cell, an inline-block or a replaced element: a box whose
	// lines start at its own left edge.
	left := dx + b.tx + b.margin[sideLeft] + b.border[sideLeft] + b.padding[sideLeft]
	if !g.on && (left < 0 && left+r.pageWidth() < 0 || indentOf(cst) < 0 && indentOf(cst)+r.pageWidth() < 0) {
		activate()
	}
	if !g.on {
		return saved
	}
	inLine := disp == dispAtomic || b.float == 1 || disp == dispTable && g.cells
	base := g.start
	if inLine {
		base = g.x
	}
	if st.blockify || b.float == 2 || disp == dispTable && g.cells && g.wideTable {
		base = inf // a flex or grid item, a right float, a cell after one that may be wider than its text
	}
	if st.align != alignStart && inLine {
		base = inf
	}
	if inLine && saved.cells && saved.wideTable && g.x > g.start {
		base = inf // a cell after one that the table's width may have widened
	}
	right := g.right - min(b.margin[sideRight], 0)
	*g = lineBounds{on: true, run: g.run, xMax: g.xMax, y: g.y, yMax: g.yMax, first: true}
	g.start = base + left
	g.right = right
	if !math.IsNaN(b.width) && !math.IsInf(b.width, 0) {
		g.right = g.start + b.width
	}
	g.x = g.start
	if blockContainer(disp) && n.Data != "table" && n.Data != "tr" && n.Data != "tbody" && n.Data != "thead" && n.Data != "tfoot" {
		g.x += indentOf(cst)
	}
	switch n.Data {
	case "table":
		// Cells may be wider than their text when the table declares a
		// width; cellspacing and cellpadding move each cell's text.
		g.wideTable = !math.IsNaN(b.width)
		g.cellPad = attrPixels(attr(n, "cellspacing"), 2) + attrPixels(attr(n, "cellpadding"), 1)
	case "tbody", "thead", "tfoot":
		g.wideTable, g.cellPad = saved.wideTable, saved.cellPad
	case "tr":
		g.cells, g.wideTable, g.cellPad = true, saved.wideTable, saved.cellPad
	case "td", "th":
		g.start += saved.cellPad
		g.x += saved.cellPad
		if hasAttr(n, "colspan") || hasAttr(n, "rowspan") {
			g.start, g.x = inf, inf
		}
	}
	g.reach = g.x
	if g.y < inf {
		g.y += max(b.margin[sideTop], 0) + b.border[sideTop] + b.padding[sideTop]
	}
	nanToInf(g)
	return saved
}

// blockContainer reports whether a display kind holds lines of its own
// (text-indent applies to its first one).
func blockContainer(disp int8) bool {
	return disp == dispBlock || disp == dispAtomic || disp == dispTable
}

// attrPixels reads a pixel attribute (cellpadding), def when absent or
// unreadable (a percentage counts as unknown: +Inf).
func attrPixels(v string, def float64) float64 {
	if strings.TrimSpace(v) == "" {
		return def
	}
	px := attrLength(v)
	if math.IsNaN(px) {
		return def
	}
	return px
}

// indentOf is the text-indent that applies to a block's first line.
func indentOf(st *visState) float64 {
	if math.IsNaN(st.indent) {
		return inf
	}
	return st.indent
}

func nanToInf(g *lineBounds) {
	for _, f := range []*float64{&g.x, &g.start, &g.right, &g.reach, &g.xMax, &g.y, &g.yMax} {
		if math.IsNaN(*f) {
			*f = inf
		}
	}
}

// geoLeave restores the bounds when element n ends (saved is what
// geoEnter returned).
func (r *renderer) geoLeave(own *ownStyle, saved lineBounds) {
	g := &r.geo
	if !g.on && !saved.on {
		return
	}
	b := own.box
	if b == nil {
		b = &boxStyle{left: math.NaN(), right: math.NaN(), width: math.NaN(), height: math.NaN()}
	}
	if b.pos == posAbsolute || b.pos == posFixed {
		r.geo = saved // out of the flow: the line goes on as if it were not there
		return
	}
	disp := own.disp
	dx := b.relativeShift()
	if disp == dispInline || disp == dispContents {
		if g.on {
			g.x += b.padding[sideRight] + b.border[sideRight] + b.margin[sideRight] - dx
			g.reach = max(g.reach, g.x)
			nanToInf(g)
		}
		return
	}
	inner := *g
	*g = saved
	if !g.on {
		if inner.on {
			// The element turned positions on; outside it they are
			// unknown again.
			*g = lineBounds{}
		}
		return
	}
	end := inner.reach + b.padding[sideRight] + b.border[sideRight] + max(b.margin[sideRight], 0)
	if saved.cells {
		end += saved.cellPad
	}
	if !math.IsNaN(b.width) {
		end = max(end, inner.start+b.width+b.padding[sideRight]+b.border[sideRight]+max(b.margin[sideRight], 0))
	}
	inLine := disp == dispAtomic || b.float == 1 || disp == dispTable && saved.cells
	if inLine {
		g.x = max(g.x, end)
	} else {
		g.x = g.start // the parent goes on on a new line
		g.first = false
	}
	g.reach = max(g.reach, end)
	if g.y < inf && inner.y < inf {
		g.y = max(g.y, inner.y) + b.padding[sideBottom] + b.border[sideBottom] + max(b.margin[sideBottom], 0)
		if !math.IsNaN(b.height) {
			g.y += b.height
		}
	} else if g.y < inf {
		g.y = inf
	}
	nanToInf(g)
}

// geoBreak is a <br>: a new line of the current block.
func (r *renderer) geoBreak(st *visState) {
	g := &r.geo
	if !g.on {
		return
	}
	g.x = g.start
	g.first = false
	step := 2 * st.fontPx
	if st.lineHeight > step {
		step = st.lineHeight
	}
	g.y += step
}

// unsureText records shown text that may be hidden (visState.unsure).
func (r *renderer) unsureText(t string, run *hiddenRun) {
	if isBlankText(t) {
		return
	}
	if !run.counted {
		run.counted = true
		r.unsCount++
	}
	if !r.keepHidden || r.uns.Len() > MaxPartBytes {
		return
	}
	if r.unsLastRun != run && r.uns.Len() > 0 {
		r.uns.WriteByte('\n')
	} else if r.uns.Len() > 0 {
		r.uns.WriteByte(' ')
	}
	r.unsLastRun = run
	r.uns.WriteString(strings.Join(strings.FieldsFunc(t, isCollapsible), " "))
}
