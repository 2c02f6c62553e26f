package approval

import (
	"fmt"
	"strings"
	"unicode"
)

// Visible returns s with every character a person cannot see, or that
// changes the direction or shape of the text around it, shown as an
// escape such as ⟨U+202E⟩: the format characters (bidirectional
// overrides, isolates and marks, zero-width spaces and joiners, the soft
// hyphen, tag characters), line and paragraph separators, control
// characters other than newline and tab, and the fillers and marks that
// render as nothing. A subject like "invoice\u202Efdp.exe" then reads as
// what it is, on the approval page and in the client's form alike.
func Visible(s string) string {
	if strings.IndexFunc(s, hidden) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if hidden(r) {
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func hidden(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case unicode.In(r, unicode.Cf, unicode.Cc, unicode.Zl, unicode.Zp):
		return true
	}
	switch r {
	case 0x034F, // combining grapheme joiner
		0x115F, 0x1160, 0x3164, 0xFFA0, // Hangul fillers
		0x17B4, 0x17B5, // Khmer inherent vowels
		0x180B, 0x180C, 0x180D, 0x180F: // Mongolian variation selectors
		return true
	}
	return false
}
