package mailmsg

import (
	"bytes"
	"io"
	"mime"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	// Registers every charset with go-message (message.CharsetReader), for
	// any other package in the binary that reads mail with go-message.
	_ "github.com/emersion/go-message/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// specialCharset marks a label decodeWith handles itself; its embedded
// Encoding is nil and never used.
type specialCharset struct {
	encoding.Encoding
	name string
}

var (
	asciiLabel encoding.Encoding = &specialCharset{name: "us-ascii"} // UTF-8 if valid, else Windows-1252
	utf8Label  encoding.Encoding = &specialCharset{name: "utf-8"}    // as is
	utf7Label  encoding.Encoding = &specialCharset{name: "utf-7"}    // RFC 2152, still seen in spam and old Outlook
)

// charsetAliases maps labels seen in real mail that ianaindex and htmlindex
// miss or map badly. ISO-8859-1 and ASCII decode as Windows-1252, as browsers
// do: mail labelled Latin-1 often has Windows-1252 quotes and dashes. GB2312
// decodes as GBK, its superset.
var charsetAliases = func() map[string]encoding.Encoding {
	groups := []struct {
		enc    encoding.Encoding
		labels string
	}{
		{utf8Label, "utf-8 utf8 x-utf_8j unicode-1-1-utf-8"},
		{asciiLabel, "us-ascii ascii ansi_x3.4-1968 us iso646-us csascii cp367 ibm367"},
		{charmap.Windows1252, "iso-8859-1 iso8859-1 iso_8859-1 latin1 l1 8859-1 iso-ir-100 cp819 ibm819 ansi_x3.110-1983 windows-1252 cp1252 x-cp1252"},
		{simplifiedchinese.GBK, "gb2312 csgb2312 euc-cn x-euc-cn cn-gb gb_2312-80 gbk x-gbk cp936 ms936 windows-936"},
		{japanese.ShiftJIS, "shift_jis shift-jis sjis x-sjis ms_kanji csshiftjis cp932 ms932 windows-31j x-ms-cp932"},
		{japanese.ISO2022JP, "iso-2022-jp csiso2022jp"},
		{korean.EUCKR, "euc-kr ks_c_5601-1987 ks_c_5601 ksc5601 ksc_5601 cp949 ms949 windows-949 x-windows-949 uhc"},
		{traditionalchinese.Big5, "big5 x-big5 cn-big5 big5-hkscs cp950 ms950"},
		{charmap.KOI8R, "koi8-r koi8r cskoi8r"},
		{utf7Label, "utf-7 unicode-1-1-utf-7 csunicode11utf7 x-utf-7"},
	}
	m := map[string]encoding.Encoding{}
	for _, g := range groups {
		for _, l := range strings.Fields(g.labels) {
			m[l] = g.enc
		}
	}
	return m
}()

// normCharset turns a charset label as found in mail into a lookup key:
// unquoted, trimmed, lower case, without an RFC 2231 language suffix.
func normCharset(label string) string {
	label = strings.Trim(strings.TrimSpace(label), `"'`)
	if i := strings.IndexByte(label, '*'); i >= 0 {
		label = label[:i]
	}
	return strings.ToLower(strings.TrimSpace(label))
}

// lookupCharset finds the decoder for a charset label; ok is false when the
// label is unknown or names an encoding x/text only decodes to U+FFFD.
func lookupCharset(label string) (encoding.Encoding, bool) {
	name := normCharset(label)
	if name == "" {
		return asciiLabel, true
	}
	if enc, ok := charsetAliases[name]; ok {
		return enc, true
	}
	if len(name) > 64 {
		return nil, false
	}
	// Same chain as go-message/charset.Reader.
	enc, _ := ianaindex.MIME.Encoding(name)
	if enc == nil {
		enc, _ = ianaindex.MIME.Encoding("cs" + name)
	}
	if enc == nil {
		enc, _ = htmlindex.Get(name)
	}
	if enc == nil || enc == encoding.Replacement {
		return nil, false
	}
	return enc, true
}

// decodeCharset converts b from the charset to UTF-8 (possibly still with
// invalid sequences; Sanitize replaces those). ok is false when the charset
// is unknown: then b was decoded as UTF-8 if valid, else as Windows-1252, and
// guess names what was used.
func decodeCharset(b []byte, label string) (s string, guess string, ok bool) {
	enc, ok := lookupCharset(label)
	if !ok {
		if utf8.Valid(b) {
			return string(b), "UTF-8", false
		}
		return decodeWith(charmap.Windows1252, b), "Windows-1252", false
	}
	return decodeWith(enc, b), "", true
}

func decodeWith(enc encoding.Encoding, b []byte) string {
	switch enc {
	case utf8Label:
		return string(b)
	case asciiLabel:
		if utf8.Valid(b) {
			return string(b)
		}
		enc = charmap.Windows1252
	case utf7Label:
		return decodeUTF7(b)
	}
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		// x/text decoders replace bad input with U+FFFD; an error here is
		// unexpected, so keep what we can.
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	return string(out)
}

// decodeUTF7 decodes RFC 2152 UTF-7. Bytes outside ASCII become U+FFFD.
func decodeUTF7(b []byte) string {
	var out strings.Builder
	out.Grow(len(b))
	for i := 0; i < len(b); {
		c := b[i]
		i++
		if c != '+' {
			if c >= utf8.RuneSelf {
				out.WriteRune(utf8.RuneError)
			} else {
				out.WriteByte(c)
			}
			continue
		}
		if i < len(b) && b[i] == '-' {
			out.WriteByte('+')
			i++
			continue
		}
		var units []uint16
		var bits uint32
		nbits := 0
		for i < len(b) {
			v := base64Value(b[i])
			if v < 0 {
				break
			}
			bits = bits<<6 | uint32(v)
			nbits += 6
			if nbits >= 16 {
				nbits -= 16
				units = append(units, uint16(bits>>nbits))
				bits &= 1<<nbits - 1
			}
			i++
		}
		if i < len(b) && b[i] == '-' {
			i++
		}
		out.WriteString(string(utf16.Decode(units)))
	}
	return out.String()
}

// WordDecoder returns a mime.WordDecoder that knows every charset this
// package knows (for go-imap's Options.WordDecoder). It never fails on a
// charset: an unknown one is decoded as UTF-8 if valid, else as
// Windows-1252. The standard library decodes UTF-8, ISO-8859-1 (as true
// Latin-1, not Windows-1252) and US-ASCII words itself. Its output is not
// sanitised: pass it through SanitizeLine, or use DecodeHeader instead.
func WordDecoder() *mime.WordDecoder {
	return &mime.WordDecoder{CharsetReader: charsetReader}
}

func charsetReader(label string, input io.Reader) (io.Reader, error) {
	b, err := io.ReadAll(io.LimitReader(input, 1<<20))
	if err != nil {
		return nil, err
	}
	s, _, _ := decodeCharset(b, label)
	return strings.NewReader(s), nil
}

// sniffHTMLCharset looks for <meta charset=...> or <meta http-equiv
// content="...; charset=..."> near the start of an HTML document.
func sniffHTMLCharset(b []byte) string {
	if len(b) > 4096 {
		b = b[:4096]
	}
	lower := bytes.ToLower(b)
	for off := 0; ; {
		i := bytes.Index(lower[off:], []byte("charset="))
		if i < 0 {
			return ""
		}
		i += off
		off = i + len("charset=")
		meta := bytes.LastIndex(lower[:i], []byte("<meta"))
		if meta < 0 || bytes.IndexByte(lower[meta:i], '>') >= 0 {
			continue
		}
		v := lower[off:]
		v = bytes.TrimLeft(v, `"' `)
		end := 0
		for end < len(v) && end < 40 && (isAlnum(v[end]) || strings.IndexByte("-_.:", v[end]) >= 0) {
			end++
		}
		if end > 0 {
			return string(v[:end])
		}
	}
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
