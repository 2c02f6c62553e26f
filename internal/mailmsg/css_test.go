package mailmsg

import "testing"

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

func TestNormColor(t *testing.T) {
	for in, want := range map[string]string{
		"#FFF": "#ffffff", "#ffffff": "#ffffff", "white": "#ffffff", "rgb(255, 255, 255)": "#ffffff",
		"rgb(100%,100%,100%)": "#ffffff", "rgba(0,0,0,0)": "transparent", "#0000": "transparent",
		"#12345600": "transparent", "#12345680": "#123456", "hsla(0, 0%, 0%, 0)": "transparent",
		"transparent": "transparent", "red": "red",
	} {
		if got := normColor(in); got != want {
			t.Errorf("normColor(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseSelector(t *testing.T) {
	tests := []struct {
		sel  string
		kind int
		key  cssKey
	}{
		{".pre", selSimple, cssKey{'c', "pre"}},
		{"#Main", selSimple, cssKey{'i', "main"}},
		{"SPAN", selSimple, cssKey{'t', "span"}},
		{"*", selSimple, cssKey{'*', ""}},
		{"td.x", selCompound, cssKey{'c', "x"}},
		{".a.b", selCompound, cssKey{'c', "a"}},
		{"div#i.c", selCompound, cssKey{'i', "i"}},
		{"body .x", selApprox, cssKey{'c', "x"}},
		{"table > td", selApprox, cssKey{'t', "td"}},
		{"u + .body .gmail-hide", selApprox, cssKey{'c', "gmail-hide"}},
		{"span[data-x]", selApprox, cssKey{'t', "span"}},
		{".x:first-child", selApprox, cssKey{'c', "x"}},
		{".x:not(.y)", selApprox, cssKey{'c', "x"}},
		{`.\31 23`, selSimple, cssKey{'c', "123"}},
		{".x:hover", selSkip, cssKey{}},
		{"#cb:checked ~ .menu", selSkip, cssKey{}},
		{".x::before", selSkip, cssKey{}},
		{".x:after", selSkip, cssKey{}},
		{"", selSkip, cssKey{}},
		{"#a#b", selSkip, cssKey{}},
		{"{", selSkip, cssKey{}},
	}
	for _, tt := range tests {
		got := parseSelector(tt.sel)
		if got.kind != tt.kind || got.kind != selSkip && got.key != tt.key {
			t.Errorf("parseSelector(%q) = kind %d key %v, want %d %v", tt.sel, got.kind, got.key, tt.kind, tt.key)
		}
	}
	if a, b := parseSelector("#x").spec, parseSelector("div.a.b").spec; a <= b {
		t.Errorf("specificity of #x (%d) not above div.a.b (%d)", a, b)
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
