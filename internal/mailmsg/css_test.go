package mailmsg

import (
	"math"
	"slices"
	"testing"
)

func TestMediaApplies(t *testing.T) {
	tests := []struct {
		query string
		want  bool
	}{
		{"", true},
		{"all", true},
		{"screen", true},
		{"only screen", true},
		{"print", false},
		{"not print", true},
		{"screen, print", true},
		{"only screen and (max-width: 600px)", false},
		{"only screen and (max-width:480px)", false},
		{"(min-width: 1px)", true},
		{"(max-width: 2000px)", true},
		{"screen and (min-width:40em)", true},
		{"(prefers-color-scheme: dark)", false},
		{"(prefers-color-scheme: light)", true},
		{"screen and (-webkit-min-device-pixel-ratio: 2)", false},
		{"(width >= 600px)", false},
		{"not all and (monochrome)", false},
	}
	for _, tt := range tests {
		if got := mediaApplies(tt.query); got != tt.want {
			t.Errorf("mediaApplies(%q) = %v, want %v", tt.query, got, tt.want)
		}
	}
}

func TestFontSizeKind(t *testing.T) {
	tests := []struct {
		val  string
		want int8
	}{
		{"", fontUnset},
		{"0", fontZero},
		{"0px", fontZero},
		{"0.4px", fontZero},
		{"0em", fontZero},
		{"0pt", fontZero},
		{"0%", fontZero},
		{"0rem", fontZero},
		{"0vw", fontZero},
		{"0.01em", fontZero},
		{"1px", fontSet},
		{"10px", fontSet},
		{"9pt", fontSet},
		{"1rem", fontSet},
		{"small", fontSet},
		{"1em", fontRel},
		{"120%", fontRel},
		{"smaller", fontRel},
		{"12", fontUnset},
		{"-1px", fontUnset},
		{"calc(1px)", fontUnset},
	}
	for _, tt := range tests {
		if got := fontSizeKind(tt.val); got != tt.want {
			t.Errorf("fontSizeKind(%q) = %d, want %d", tt.val, got, tt.want)
		}
	}
	for in, want := range map[string]string{"0/0 a": "0", "bold 12px/1.5 arial": "12px", "700 0px serif": "0px", "caption": "", "italic bold": ""} {
		if got := fontShorthandSize(in); got != want {
			t.Errorf("fontShorthandSize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseColor(t *testing.T) {
	for in, want := range map[string]rgba{
		"#FFF": {1, 1, 1, 1}, "#ffffff": {1, 1, 1, 1}, "white": {1, 1, 1, 1}, "rgb(255, 255, 255)": {1, 1, 1, 1},
		"rgb(100%,100%,100%)": {1, 1, 1, 1}, "rgba(0,0,0,0)": {0, 0, 0, 0}, "#0000": {0, 0, 0, 0},
		"rgba(0,0,0,.05)": {0, 0, 0, 0.05}, "rgb(0 0 0 / 50%)": {0, 0, 0, 0.5}, "hsla(0, 0%, 0%, 0)": {0, 0, 0, 0},
		"hsl(0, 100%, 50%)": {1, 0, 0, 1}, "transparent": {0, 0, 0, 0}, "red": {1, 0, 0, 1}, "GhostWhite": {}, "ghostwhite": {248.0 / 255, 248.0 / 255, 1, 1},
	} {
		got, ok := parseColor(in)
		if in == "GhostWhite" { // values reach parseColor in lower case
			if ok {
				t.Errorf("parseColor(%q) = %v, want not a colour", in, got)
			}
			continue
		}
		if !ok || math.Abs(got.r-want.r)+math.Abs(got.g-want.g)+math.Abs(got.b-want.b)+math.Abs(got.a-want.a) > 0.01 {
			t.Errorf("parseColor(%q) = %v %v, want %v", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "currentcolor", "inherit", "#12345", "rgb(1,2)", "rgb(a,b,c)", "hsl(10%,1%,1%)", "url(x)"} {
		if c, ok := parseColor(bad); ok {
			t.Errorf("parseColor(%q) = %v, want not a colour", bad, c)
		}
	}
}

// Text is unreadable when its colour, composited over the background, is
// too close to it; translucent backgrounds are composited over what is
// behind them first.
func TestUnreadable(t *testing.T) {
	white := rgba{1, 1, 1, 1}
	tests := []struct {
		name  string
		color string
		bgs   []string // outermost first, over the white page
		want  bool
	}{
		{"black on white", "#000", nil, false},
		{"white on white", "#fff", nil, true},
		{"near white on white", "#f7f7f7", nil, true},
		{"light grey footer text", "#999", nil, false},
		{"e0e0e0 stays readable", "#e0e0e0", nil, false},
		{"black on a 5% black cell (a verification code)", "#000", []string{"rgba(0,0,0,.05)"}, false},
		{"translucent cells stack", "#000", []string{"rgba(0,0,0,.5)", "rgba(0,0,0,.5)"}, false},
		{"white on stacked translucent black", "#fff", []string{"rgba(0,0,0,.5)", "rgba(0,0,0,.5)"}, false},
		{"black on stacked translucent black", "#000", []string{"rgba(0,0,0,.6)", "rgba(0,0,0,.9)"}, true},
		{"transparent text", "transparent", nil, true},
		{"text at alpha 3%", "rgba(0,0,0,.03)", nil, true},
		{"transparent background shows the parent's", "#fff", []string{"#000", "transparent"}, false},
		{"same colour on a coloured cell", "#22bc66", []string{"#22BC66"}, true},
		{"image background is unknown", "#fff", []string{"url(hero.jpg)"}, false},
		{"translucent over an image is unknown", "#fff", []string{"url(hero.jpg)", "rgba(255,255,255,.5)"}, false},
	}
	for _, tt := range tests {
		st := rootState
		st.bg = white
		for _, bg := range tt.bgs {
			st = inherit(st, ownStyle{opacity: 1, color: rgba{a: -1}, bg: backgroundColor(bg)})
		}
		c, _ := parseColor(tt.color)
		st = inherit(st, ownStyle{opacity: 1, color: c, bg: rgba{a: -1}})
		if got := st.unreadable(); got != tt.want {
			t.Errorf("%s: unreadable = %v, want %v (contrast %.2f)", tt.name, got, tt.want, contrast(over(st.color, st.bg), st.bg))
		}
	}
}

func TestSplitCompounds(t *testing.T) {
	tests := []struct {
		sel   string
		parts []string
		combs string
		ok    bool
	}{
		{".a", []string{".a"}, "", true},
		{"table.body .container td", []string{"table.body", ".container", "td"}, "  ", true},
		{"a > b + c ~ d", []string{"a", "b", "c", "d"}, ">+~", true},
		{"a>b", []string{"a", "b"}, ">", true},
		{`td[title="a b > c"] .x:not(.y, .z)`, []string{`td[title="a b > c"]`, ".x:not(.y, .z)"}, " ", true},
		{"li:nth-child(2n + 1)", []string{"li:nth-child(2n + 1)"}, "", true},
		{"> a", nil, "", false},
		{"a >", nil, "", false},
		{"a > > b", nil, "", false},
		{"a[x", nil, "", false},
	}
	for _, tt := range tests {
		parts, combs, ok := splitCompounds(tt.sel)
		if ok != tt.ok || ok && (!slices.Equal(parts, tt.parts) || string(combs) != tt.combs) {
			t.Errorf("splitCompounds(%q) = %q %q %v, want %q %q %v", tt.sel, parts, combs, ok, tt.parts, tt.combs, tt.ok)
		}
	}
}

func TestCompoundKey(t *testing.T) {
	for in, want := range map[string]cssKey{
		".pre": {'c', "pre"}, "#Main": {'i', "Main"}, "SPAN": {'t', "span"}, "*": {'*', ""},
		"td.x": {'c', "x"}, "div#i.c": {'i', "i"}, "span[data-x]": {'t', "span"}, ":not(.x)": {'*', ""},
		`.\31 23`: {'*', ""}, "a:hover": {'t', "a"},
	} {
		if got := compoundKey(in); got != want {
			t.Errorf("compoundKey(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestCSSUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`d\69 splay`: "display", `\64isplay`: "display", `a\:b`: "a:b", `\0`: "\uFFFD", `x\`: `x\`,
	} {
		if got := cssUnescape(in); got != want {
			t.Errorf("cssUnescape(%q) = %q, want %q", in, got, want)
		}
	}
}
