package mailbox

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
)

func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

func withParams(kv ...string) partOpt {
	return func(p *imap.BodyStructureSinglePart) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Params[kv[i]] = kv[i+1]
		}
	}
}

// preview reads the first text part out of the first bytes of part 1, as
// the list FETCH returns them; Dovecot tests in tests/ check the same
// against real messages.
func TestPreview(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("Grüße aus Köln! ", 200)))
	alt := crlf(`--b-alternative
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

Hallo Bob, sch=C3=B6ne Gr=C3=BC=C3=9Fe!
--b-alternative
Content-Type: text/html

<p>Hallo</p>
--b-alternative--
`)
	for _, tc := range []struct {
		name string
		bs   imap.BodyStructure
		head string
		want string // prefix of the preview; "" for none
	}{
		{"single text/plain", leaf("text/plain"), "Just one line.\r\n", "Just one line."},
		{"single base64 UTF-8 cut mid-group", leaf("text/plain", encoded("base64", 4000), withParams("charset", "utf-8")), b64[:previewBytes-1], "Grüße aus Köln! Grüße"},
		{"HTML only", leaf("text/html"), "<html><head><style>p{color:red}</style></head><body><h1>Release notes</h1><p>All fixed", "Release notes All fixed"},
		{"mixed: alternative first, then a PDF", multi("mixed",
			multi("alternative", leaf("text/plain", encoded("quoted-printable", 50), withParams("charset", "utf-8")), leaf("text/html")),
			leaf("application/pdf", disp("attachment", "a.pdf"))), alt, "Hallo Bob, schöne Grüße!"},
		{"mixed: text first", multi("mixed", leaf("text/plain"), leaf("application/pdf", named("a.pdf"))), "See the report.", "See the report."},
		{"alternative: the plain text", multi("alternative", leaf("text/plain"), leaf("text/html")), "Plain words", "Plain words"},
		{"attachment first: none", multi("mixed", leaf("application/pdf", named("a.pdf")), leaf("text/plain")), "%PDF-1.4", ""},
		{"alternative with the plain text second: none", multi("alternative", leaf("text/html"), leaf("text/plain")), "<p>html</p>", ""},
		{"nothing fetched", leaf("text/plain"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := preview(tc.bs, []byte(tc.head))
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
				t.Errorf("preview %q, want it to start with %q", got, tc.want)
			}
		})
	}
}
