package mailmsg

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
)

// charsetSamples are texts with the charset label used in mail and the
// x/text encoder that produces real bytes in that charset.
var charsetSamples = []struct {
	charset string
	enc     encoding.Encoding
	text    string
}{
	{"ISO-8859-1", charmap.ISO8859_1, "Grüße aus Köln, café"},
	{"ISO-8859-2", charmap.ISO8859_2, "Zażółć gęślą jaźń"},
	{"ISO-8859-5", charmap.ISO8859_5, "Привет, мир"},
	{"ISO-8859-7", charmap.ISO8859_7, "Καλημέρα κόσμε"},
	{"ISO-8859-8", charmap.ISO8859_8, "שלום עולם"},
	{"ISO-8859-9", charmap.ISO8859_9, "Günaydın dünya, şğı"},
	{"ISO-8859-15", charmap.ISO8859_15, "Prix : 5 € pour l'œuvre"},
	{"windows-1250", charmap.Windows1250, "Příliš žluťoučký kůň"},
	{"windows-1251", charmap.Windows1251, "Съешь же ещё этих булок"},
	{"windows-1252", charmap.Windows1252, "“Smart quotes” – €5 … café"},
	{"windows-1253", charmap.Windows1253, "Ελληνικά γράμματα"},
	{"windows-1256", charmap.Windows1256, "مرحبا بالعالم"},
	{"KOI8-R", charmap.KOI8R, "Привет, мир! Съешь ещё ╓╖"}, // ╓╖ are є ї in KOI8-U
	{"KOI8-U", charmap.KOI8U, "Привіт, світе"},
	{"ISO-2022-JP", japanese.ISO2022JP, "こんにちは、世界。日本語のメール"},
	{"Shift_JIS", japanese.ShiftJIS, "日本語のテキスト、カタカナ ｶﾀｶﾅ"},
	{"EUC-JP", japanese.EUCJP, "日本語のテキスト"},
	{"GB2312", simplifiedchinese.GBK, "你好，世界。中文邮件"}, // GB2312 characters encode the same in GBK
	{"GBK", simplifiedchinese.GBK, "你好，世界。镕鎔"},
	{"GB18030", simplifiedchinese.GB18030, "你好，世界 😀"},
	{"Big5", traditionalchinese.Big5, "繁體中文郵件"},
	{"EUC-KR", korean.EUCKR, "안녕하세요 세계"},
	{"ks_c_5601-1987", korean.EUCKR, "안녕하세요"},
	{"UTF-8", unicode.UTF8, "héllo wörld 😀 日本"},
}

func encodeSample(t testing.TB, enc encoding.Encoding, s string) []byte {
	t.Helper()
	b, err := enc.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatalf("encoding %q: %v", s, err)
	}
	return b
}

// qWord encodes raw bytes as an RFC 2047 "Q" encoded-word.
func qWord(charset string, raw []byte) string {
	var b strings.Builder
	b.WriteString("=?" + charset + "?Q?")
	for _, c := range raw {
		switch {
		case c == ' ':
			b.WriteByte('_')
		case c > ' ' && c < 0x7F && c != '=' && c != '?' && c != '_':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	b.WriteString("?=")
	return b.String()
}

func bWord(charset string, raw []byte) string {
	return "=?" + charset + "?B?" + base64.StdEncoding.EncodeToString(raw) + "?="
}

func TestDecodeHeaderCharsets(t *testing.T) {
	for _, cs := range charsetSamples {
		raw := encodeSample(t, cs.enc, cs.text)
		tests := []struct {
			name  string
			input string
			want  string
		}{
			{cs.charset + " B", bWord(cs.charset, raw), cs.text},
			{cs.charset + " Q", qWord(cs.charset, raw), cs.text},
			{cs.charset + " lower-case label and encoding", strings.Replace(bWord(strings.ToLower(cs.charset), raw), "?B?", "?b?", 1), cs.text},
			{cs.charset + " with plain text around", "Re: " + qWord(cs.charset, raw) + " (2)", "Re: " + cs.text + " (2)"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if got := DecodeHeader(tt.input); got != tt.want {
					t.Errorf("DecodeHeader(%q) = %q, want %q", tt.input, got, tt.want)
				}
			})
		}
	}
}

func TestDecodeHeader(t *testing.T) {
	utf8Word := func(s string) string { return bWord("UTF-8", []byte(s)) }
	nihon := []byte("日本")
	jis := encodeSample(t, japanese.ISO2022JP, "日本語")
	gbk := encodeSample(t, simplifiedchinese.GBK, "中文")
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"plain ascii", "Lunch tomorrow?", "Lunch tomorrow?"},
		{"empty", "", ""},
		{"white space between words dropped", utf8Word("Grüße") + " \r\n " + utf8Word(" aus Köln"), "Grüße aus Köln"},
		{"text between words kept", utf8Word("a") + " and " + utf8Word("b"), "a and b"},
		{"utf-8 character split across two words", bWord("UTF-8", nihon[:4]) + " " + bWord("UTF-8", nihon[4:]), "日本"},
		{"gbk character split across two words", bWord("GBK", gbk[:1]) + " " + bWord("GBK", gbk[1:]), "中文"},
		{"iso-2022-jp words", bWord("ISO-2022-JP", jis) + " " + bWord("ISO-2022-JP", jis), "日本語日本語"},
		{"different charsets side by side", qWord("ISO-8859-1", []byte("caf\xe9")) + " " + utf8Word(" 😀"), "café 😀"},
		{"underscore is a space in Q", "=?UTF-8?Q?hello_world?=", "hello world"},
		{"missing base64 padding", "=?UTF-8?B?w6k?=", "é"},
		{"RFC 2231 language in word", "=?UTF-8*en?Q?caf=C3=A9?=", "café"},
		{"bad base64 kept raw", "=?UTF-8?B?@@@?= ok", "=?UTF-8?B?@@@?= ok"},
		{"bad Q escape kept raw", "=?UTF-8?Q?a=ZZ?=", "=?UTF-8?Q?a=ZZ?="},
		{"unknown encoding letter kept raw", "=?UTF-8?X?abc?=", "=?UTF-8?X?abc?="},
		{"unterminated word kept raw", "=?UTF-8?Q?abc", "=?UTF-8?Q?abc"},
		{"not a word", "a =? b ?= c", "a =? b ?= c"},
		{"unknown charset, utf-8 bytes", "=?x-unknown?Q?caf=C3=A9?=", "café"},
		{"unknown charset, latin-1 bytes", "=?x-unknown?Q?caf=E9?=", "café"},
		{"iso-8859-1 label decodes windows-1252 quotes", "=?ISO-8859-1?Q?=93hi=94?=", "“hi”"},
		{"utf-7", "=?UTF-7?Q?Hi_+AOk-t+AOk-?=", "Hi été"},
		{"raw latin-1 header", "caf\xe9 cr\xe8me", "café crème"},
		{"raw utf-8 header", "Grüße 😀", "Grüße 😀"},
		{"folded header", "Hello\r\n World", "Hello World"},
		{"newline in word cannot fake a header", "=?UTF-8?Q?hi=0AFrom:_boss@example.com?=", "hi From: boss@example.com"},
		{"bidi override in word removed", "=?UTF-8?Q?invoice=E2=80=AEfdp.exe?=", "invoicefdp.exe"},
		{"zero width in word removed", "=?UTF-8?Q?pay=E2=80=8Bpal?=", "paypal"},
		{"control chars removed", "=?UTF-8?Q?a=00b=07c?=", "abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DecodeHeader(tt.input); got != tt.want {
				t.Errorf("DecodeHeader(%q) = %q, want %q", tt.input, got, tt.want)
			}
		})
	}
}

func TestWordDecoder(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"koi8-r", bWord("KOI8-R", encodeSample(t, charmap.KOI8R, "Привет")), "Привет"},
		{"shift_jis", bWord("Shift_JIS", encodeSample(t, japanese.ShiftJIS, "日本語")), "日本語"},
		{"big5", bWord("Big5", encodeSample(t, traditionalchinese.Big5, "繁體")), "繁體"},
		{"unknown charset does not fail", "=?x-klingon?Q?caf=C3=A9?=", "café"},
	}
	dec := WordDecoder()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dec.DecodeHeader(tt.input)
			if err != nil || got != tt.want {
				t.Errorf("DecodeHeader(%q) = %q, %v; want %q", tt.input, got, err, tt.want)
			}
		})
	}
}

// Inputs built to make a naive scanner quadratic must stay fast.
func TestDecodeHeaderLinear(t *testing.T) {
	const n = 1 << 20
	tests := []struct {
		name  string
		input string
	}{
		{"many word starts", strings.Repeat("=?", n/2)},
		{"word starts with a far end", strings.Repeat("=?a?b?aa", n/8) + "?="},
		{"long q text", "=?utf-8?q?" + strings.Repeat("a", n)},
		{"many valid words", strings.Repeat("=?utf-8?q?a?= ", n/14)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			out := DecodeHeader(tt.input)
			if d := time.Since(start); d > 60*time.Second { // catches quadratic paths, not a speed target
				t.Errorf("took %v on %d bytes", d, len(tt.input))
			}
			checkClean(t, "DecodeHeader", out)
		})
	}
}
