package mailmsg

import (
	"bytes"
	"encoding/base64"
	"mime/quotedprintable"
	"strings"
	"testing"
	"testing/iotest"

	"golang.org/x/text/encoding/charmap"
)

// transferEncode encodes raw bytes with a Content-Transfer-Encoding, with
// CRLF line breaks as on the wire.
func transferEncode(t testing.TB, raw []byte, enc string) []byte {
	t.Helper()
	switch enc {
	case "quoted-printable":
		var b bytes.Buffer
		w := quotedprintable.NewWriter(&b)
		if _, err := w.Write(raw); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	case "base64":
		s := base64.StdEncoding.EncodeToString(raw)
		var b bytes.Buffer
		for len(s) > 76 {
			b.WriteString(s[:76] + "\r\n")
			s = s[76:]
		}
		b.WriteString(s + "\r\n")
		return b.Bytes()
	}
	return raw
}

func TestDecodeTextCharsets(t *testing.T) {
	for _, cs := range charsetSamples {
		body := cs.text + "\r\nSecond line: " + cs.text + "\r\n"
		raw := encodeSample(t, cs.enc, body)
		want := cs.text + "\nSecond line: " + cs.text
		for _, enc := range []string{"quoted-printable", "base64", "8bit"} {
			tests := []struct {
				name  string
				input []byte
				part  Part
				want  string
			}{
				{cs.charset + " " + enc, transferEncode(t, raw, enc), Part{MediaType: "text/plain", Charset: cs.charset, Encoding: enc}, want},
				{cs.charset + " " + enc + " upper-case encoding", transferEncode(t, raw, enc), Part{MediaType: "TEXT/PLAIN", Charset: strings.ToLower(cs.charset), Encoding: strings.ToUpper(enc)}, want},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					got, warnings := DecodeText(bytes.NewReader(tt.input), tt.part)
					if got != tt.want {
						t.Errorf("DecodeText = %q, want %q", got, tt.want)
					}
					if len(warnings) > 0 {
						t.Errorf("unexpected warnings: %q", warnings)
					}
				})
			}
		}
	}
}

func TestDecodeText(t *testing.T) {
	latin1 := []byte("caf\xe9 cr\xe8me")
	tests := []struct {
		name         string
		input        string
		part         Part
		want         string
		wantWarnings []string // substrings, one per expected warning
	}{
		{"plain ascii", "Hello\r\n", Part{}, "Hello", nil},
		{"no charset, utf-8 bytes", "Grüße", Part{MediaType: "text/plain"}, "Grüße", nil},
		{"us-ascii label, utf-8 bytes", "Grüße", Part{Charset: "us-ascii"}, "Grüße", nil},
		{"us-ascii label, latin-1 bytes", string(latin1), Part{Charset: "us-ascii"}, "café crème", nil},
		{"utf-8 label, invalid bytes", "ok\xff\xfe", Part{Charset: "utf-8"}, "ok\uFFFD", nil},
		{"quoted charset label", "Grüße", Part{Charset: `"UTF-8"`}, "Grüße", nil},
		{"unknown charset, utf-8 bytes", "Grüße 😀", Part{Charset: "x-klingon"}, "Grüße 😀", []string{`"x-klingon" is unknown`, "UTF-8"}},
		{"unknown charset, latin-1 bytes", string(latin1), Part{Charset: "x-klingon"}, "café crème", []string{`"x-klingon" is unknown; the text was decoded as Windows-1252`}},
		{"replacement-only charset is unknown", "hello", Part{Charset: "iso-2022-kr"}, "hello", []string{"is unknown"}},
		{"utf-7", "Hi +AOk-t+AOk- +-1", Part{Charset: "utf-7"}, "Hi été +1", nil},
		{"line endings and blank lines", "a\r\n\r\n\r\n\r\n\r\nb\rc  \r\n", Part{}, "a\n\n\nb\nc", nil},
		{"controls and bidi removed", "a\x00b\x1b[31mc\u202Ed\u200Be", Part{}, "ab[31mcde", nil},
		{"qp soft breaks and lower-case hex", "long=\r\n line =c3=a9=\r\n", Part{Charset: "utf-8", Encoding: "quoted-printable"}, "long line é", nil},
		{"qp bad escape kept", "a=ZZb = c", Part{Encoding: "quoted-printable"}, "a=ZZb = c", nil},
		{"qp trailing white space removed", "a   \r\nb\t\r\n", Part{Encoding: "quoted-printable"}, "a\nb", nil},
		{"base64 broken in the middle", "SGVsbG8g!!!V29ybGQ=", Part{Encoding: "base64"}, "Hello World", []string{"invalid base64"}},
		{"base64 concatenated blocks", "SGk=\r\nIHRoZXJl\r\n", Part{Encoding: "base64"}, "Hi there", nil},
		{"base64 truncated", "SGVsbG8gV29y", Part{Encoding: "base64"}, "Hello Wor", nil},
		{"unknown transfer encoding", "plain", Part{Encoding: "x-uuencode"}, "plain", []string{`"x-uuencode" is unknown`}},
		{"not text", "data", Part{MediaType: "application/octet-stream"}, "data", []string{"not text"}},
		{"media type with parameters", "<b>x</b>", Part{MediaType: "Text/HTML; charset=utf-8"}, "x", nil},
		{"html", "<p>Hello <b>world</b></p><script>x()</script>", Part{MediaType: "text/html"}, "Hello world", nil},
		{"html hidden warning", `<p>Hi</p><div style="display:none">psst</div>`, Part{MediaType: "text/html"}, "Hi", []string{"1 HTML element with text was removed"}},
		{"html meta charset", "<meta charset=\"windows-1251\"><p>" + string(encodeSample(t, charmap.Windows1251, "Привет")) + "</p>",
			Part{MediaType: "text/html"}, "Привет", nil},
		{"html meta http-equiv charset", `<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">` + string(latin1),
			Part{MediaType: "text/html"}, "café crème", nil},
		{"html base64 in koi8-r", base64.StdEncoding.EncodeToString(encodeSample(t, charmap.KOI8R, "<p>Привет</p>")),
			Part{MediaType: "text/html", Charset: "koi8-r", Encoding: "base64"}, "Привет", nil},
		{"flowed", "This is a long \r\nparagraph that \r\nflows.\r\n>quoted \r\n>line\r\n \r\n-- \r\nsig", Part{Format: "flowed"},
			"This is a long paragraph that flows.\n> quoted line\n\n--\nsig", nil},
		{"flowed delsp", "abc\r\ndef", Part{Format: "flowed", DelSp: true}, "abc\ndef", nil},
		{"flowed delsp joins", "Mr. Smi \r\nth", Part{Format: "flowed", DelSp: true}, "Mr. Smith", nil},
		{"flowed space-stuffed", " From here\r\n >not a quote", Part{Format: "flowed"}, "From here\n>not a quote", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warnings := DecodeText(strings.NewReader(tt.input), tt.part)
			if got != tt.want {
				t.Errorf("DecodeText(%q, %+v) = %q, want %q", tt.input, tt.part, got, tt.want)
			}
			checkWarnings(t, warnings, tt.wantWarnings)
			checkClean(t, "DecodeText", got)
		})
	}
}

// checkWarnings checks that each want substring appears in some warning
// and that there are no warnings when none are wanted.
func checkWarnings(t *testing.T, got, want []string) {
	t.Helper()
	if len(want) == 0 && len(got) > 0 {
		t.Errorf("unexpected warnings: %q", got)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if strings.Contains(g, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no warning contains %q; warnings: %q", w, got)
		}
	}
	for _, g := range got {
		checkClean(t, "warning", g)
		if !strings.HasSuffix(g, ".") {
			t.Errorf("warning is not a sentence: %q", g)
		}
	}
}

func TestDecodeTextReadError(t *testing.T) {
	r := iotest.TimeoutReader(strings.NewReader("Hello world")) // second read fails
	got, warnings := DecodeText(iotest.OneByteReader(r), Part{})
	if got != "H" {
		t.Errorf("got %q, want the part read before the error", got)
	}
	checkWarnings(t, warnings, []string{"Reading the part failed"})
}

func TestDecodeTextTooLarge(t *testing.T) {
	input := strings.Repeat("a", MaxPartBytes) + "TAIL"
	got, warnings := DecodeText(strings.NewReader(input), Part{})
	if len(got) != MaxPartBytes || strings.Contains(got, "TAIL") {
		t.Errorf("got %d bytes, want the first %d", len(got), MaxPartBytes)
	}
	checkWarnings(t, warnings, []string{"larger than 16 MiB"})
}

func TestDecodeUTF7(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"plain", "Hi Mom", "Hi Mom"},
		{"plus escape", "1 +- 1", "1 + 1"},
		{"rfc 2152 example", "Hi Mom -+Jjo--!", "Hi Mom -☺-!"},
		{"japanese", "+ZeVnLIqe-", "日本語"},
		{"implicit end", "+AGEAYgBj.", "abc."},
		{"8-bit byte", "a\xffb", "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decodeUTF7([]byte(tt.input)); got != tt.want {
				t.Errorf("decodeUTF7(%q) = %q, want %q", tt.input, got, tt.want)
			}
		})
	}
}
