package mailmsg

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
)

// DecodeHeader decodes the RFC 2047 encoded-words in a header value, in any
// charset this package knows (ISO-8859-x, windows-125x, KOI8-R, ISO-2022-JP,
// Shift_JIS, EUC-JP, GB2312, GBK, GB18030, Big5, EUC-KR, UTF-7, UTF-8...).
//
// It never fails: a word that cannot be decoded (bad base64 or
// quoted-printable) is kept as it was; a word in an unknown charset is
// decoded as UTF-8 if valid, else as Windows-1252. Adjacent words in the same
// charset are joined before charset decoding, so a multibyte character split
// across two words (a common encoder bug) still decodes. Raw 8-bit text that
// is not UTF-8 is read as Windows-1252. The result is passed through
// SanitizeLine: a header value is one line, and a newline in it could fake
// another header for the model.
func DecodeHeader(s string) string {
	if !strings.Contains(s, "=?") {
		return SanitizeLine(rawHeaderText(s))
	}
	var out strings.Builder
	out.Grow(len(s))
	var pendCharset string
	var pend []byte
	flush := func() {
		if len(pend) > 0 {
			txt, _, _ := decodeCharset(pend, pendCharset)
			out.WriteString(txt)
		}
		pend = pend[:0]
		pendCharset = ""
	}
	lastEnd := 0     // end of the last decoded word
	decoded := false // whether a word has been decoded yet
	for i := 0; ; {
		k := strings.Index(s[i:], "=?")
		if k < 0 {
			break
		}
		start := i + k
		charset, enc, text, end, ok := parseEncodedWord(s, start)
		if !ok {
			i = start + 2
			continue
		}
		data, ok := decodeWordText(enc, text)
		if !ok {
			i = start + 2
			continue
		}
		// White space between two encoded-words is not part of the text.
		if gap := s[lastEnd:start]; !decoded || !isLWSP(gap) {
			flush()
			out.WriteString(rawHeaderText(gap))
		}
		if cs := normCharset(charset); cs != pendCharset {
			flush()
			pendCharset = cs
		}
		pend = append(pend, data...)
		decoded = true
		lastEnd, i = end, end
	}
	flush()
	out.WriteString(rawHeaderText(s[lastEnd:]))
	return SanitizeLine(out.String())
}

// parseEncodedWord parses "=?charset?enc?text?=" at s[start:]. Neither the
// charset nor the text may contain "?", so every scan stops at the next "?"
// and DecodeHeader stays linear however the input is built.
func parseEncodedWord(s string, start int) (charset string, enc byte, text string, end int, ok bool) {
	p := start + 2
	q := p
	for q < len(s) && q-p <= 64 && s[q] != '?' && s[q] > ' ' && s[q] < 0x7F {
		q++
	}
	if q == p || q >= len(s) || s[q] != '?' {
		return "", 0, "", 0, false
	}
	charset = s[p:q]
	if q+2 >= len(s) || s[q+2] != '?' {
		return "", 0, "", 0, false
	}
	enc = s[q+1] | 0x20 // lower case
	if enc != 'b' && enc != 'q' {
		return "", 0, "", 0, false
	}
	t := q + 3
	e := strings.IndexByte(s[t:], '?')
	if e < 0 || t+e+1 >= len(s) || s[t+e+1] != '=' {
		return "", 0, "", 0, false
	}
	return charset, enc, s[t : t+e], t + e + 2, true
}

// decodeWordText decodes the text of an encoded-word ("B" or "Q").
func decodeWordText(enc byte, text string) ([]byte, bool) {
	if enc == 'b' {
		text = strings.TrimRight(text, "=")
		b, err := base64.RawStdEncoding.DecodeString(text)
		if err != nil {
			return nil, false
		}
		return b, true
	}
	b := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '_':
			b = append(b, ' ')
		case '=':
			if i+2 >= len(text) {
				return nil, false
			}
			h, ok1 := unhex(text[i+1])
			l, ok2 := unhex(text[i+2])
			if !ok1 || !ok2 {
				return nil, false
			}
			b = append(b, h<<4|l)
			i += 2
		default:
			b = append(b, c)
		}
	}
	return b, true
}

func isLWSP(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\r', '\n':
		default:
			return false
		}
	}
	return true
}

// rawHeaderText returns unencoded header text as UTF-8: as is when valid,
// else read as Windows-1252 (raw 8-bit headers are usually Latin-1-ish).
func rawHeaderText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out, err := charmap.Windows1252.NewDecoder().String(s)
	if err != nil {
		return s
	}
	return out
}
