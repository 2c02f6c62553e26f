package mailmsg

import (
	"encoding/base64"
	"strings"
	"testing"
)

// crlf turns the \n line breaks of a test message into CRLF.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

func TestNestedBody(t *testing.T) {
	// The body of part 1 of multipart/mixed > multipart/related >
	// multipart/alternative > text/plain, as BODY[1] returns it.
	related := crlf(`--rel
Content-Type: multipart/alternative; boundary="alt"

--alt
Content-Type: text/plain; charset=utf-8

Hello from the plain part.
--alt
Content-Type: text/html

<p>Hello</p>
--alt--
--rel
Content-Type: image/png
Content-ID: <x>

iVBORw0KGgo=
--rel--
`)
	down := []Nested{{"rel", 1}, {"alt", 1}}
	for _, tc := range []struct {
		name string
		head string
		path []Nested
		want string
	}{
		{"whole", related, down, "Hello from the plain part."},
		{"second alternative", related, []Nested{{"rel", 1}, {"alt", 2}}, "<p>Hello</p>"},
		{"sibling", related, []Nested{{"rel", 2}}, "iVBORw0KGgo="},
		{"no steps", "raw", nil, "raw"},
		{"cut in the body", related[:strings.Index(related, "plain part")], down, "Hello from the "},
		{"cut in the part's header", related[:strings.Index(related, "charset")], down, ""},
		{"no such child", related, []Nested{{"rel", 5}}, ""},
		{"wrong boundary", related, []Nested{{"nope", 1}}, ""},
		{"no boundary", related, []Nested{{"", 1}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(NestedBody([]byte(tc.head), tc.path)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecodeTextHead(t *testing.T) {
	utf8Text := "Grüße aus Köln, 日本語のテキスト"
	b64 := base64.StdEncoding.EncodeToString([]byte(utf8Text))
	for _, tc := range []struct {
		name string
		head string
		part Part
		want string
	}{
		{"base64 cut inside a group", b64[:len(b64)-3], Part{Encoding: "base64", Charset: "utf-8"}, "Grüße aus Köln, 日本語のテキス"}, // ト cut
		{"base64 with line breaks", b64[:20] + "\r\n" + b64[20:30], Part{Encoding: "BASE64", Charset: "utf-8"}, "Grüße aus Köln,"},
		{"quoted-printable cut after =", "Gr=C3=BC=C3=9Fe =", Part{Encoding: "quoted-printable", Charset: "utf-8"}, "Grüße"},
		{"quoted-printable cut after =C", "Gr=C3=BC=C3=9Fe =C", Part{Encoding: "quoted-printable", Charset: "utf-8"}, "Grüße"},
		{"quoted-printable cut inside a character", "Gr=C3=BC=C3", Part{Encoding: "quoted-printable", Charset: "utf-8"}, "Grü"},
		{"8bit cut inside a character", "Köln \xe6\x97", Part{Encoding: "8bit", Charset: "utf-8"}, "Köln"},
		{"HTML cut inside a tag", "<style>p{}</style><p>Release <b>notes</b> are <a hr", Part{MediaType: "text/html"}, "Release notes are"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DecodeTextHead([]byte(tc.head), tc.part)
			if strings.TrimSpace(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			checkClean(t, "DecodeTextHead", got)
		})
	}
}
