package mailbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// readSequential is Read as it was before the guess: header and structure,
// then the text parts, one FETCH after the other.
func readSequential(cl *imapclient.Client, folder string, uid uint32, offset, maxChars int) (*Message, error) {
	m, bs, err := fetchHeaderAndStructure(cl, folder, uid)
	if err != nil {
		return nil, err
	}
	atts := attachmentParts(bs)
	body, warnings, err := fetchBody(cl, uid, bs, bodyTexts(bs), atts, textPartCap(offset, maxChars), &m.TextFrom)
	if err != nil {
		return nil, err
	}
	for _, a := range atts {
		m.Attachments = append(m.Attachments, a.Attachment)
	}
	m.Warnings = append(m.Warnings, warnings...)
	m.TotalChars = len([]rune(body))
	m.Offset = offset
	var next int
	m.Text, m.Truncated, next = truncateForTest(body, offset, maxChars)
	if m.Truncated {
		m.NextOffset = next
	}
	return m, nil
}

func truncateForTest(body string, offset, maxChars int) (string, bool, int) {
	r := []rune(body)
	if offset > len(r) {
		offset = len(r)
	}
	end := min(len(r), offset+maxChars)
	return string(r[offset:end]), end < len(r), end
}

// Against Dovecot: readMessage, which asks for part 1 with the header and
// structure, returns exactly what the two FETCHes one after the other
// return, for every shape of message (the text in part 1 or elsewhere,
// small or larger than the guess, with attachments whose size BINARY
// gives), and needs one FETCH for a small single-part message.
func TestReadGuessAgainstDovecot(t *testing.T) {
	st := mailtest.StartT(t, mailtest.Options{})
	text := func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "line %d of the body, grüße.\r\n", i)
		}
		return b.String()
	}
	pdf := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("%PDF-1.4 binary"), 400))
	hdr := "From: Alice <alice@example.test>\r\nTo: bob@example.test\r\nSubject: shape %d\r\nDate: Mon, 23 Nov 2026 10:00:00 +0000\r\nReferences: <a@x> <b@x>\r\nMIME-Version: 1.0\r\n"
	shapes := []string{
		"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" + text(2000),
		"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" + text(guessBytes+5000),
		"Content-Type: text/html; charset=utf-8\r\n\r\n<p>Hello <b>Bob</b></p>\r\n",
		"Content-Type: multipart/mixed; boundary=m\r\n\r\n--m\r\nContent-Type: text/plain\r\n\r\nSee the PDF.\r\n--m\r\nContent-Type: application/pdf; name=a.pdf\r\nContent-Disposition: attachment; filename=a.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\n" + pdf + "\r\n--m--\r\n",
		"Content-Type: multipart/mixed; boundary=m\r\n\r\n--m\r\nContent-Type: application/pdf; name=a.pdf\r\nContent-Disposition: attachment; filename=a.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\n" + pdf + "\r\n--m\r\nContent-Type: text/plain\r\n\r\nThe text comes second.\r\n--m--\r\n",
		"Content-Type: multipart/alternative; boundary=a\r\n\r\n--a\r\nContent-Type: text/plain\r\n\r\nPlain first.\r\n--a\r\nContent-Type: text/html\r\n\r\n<p>HTML second</p>\r\n--a--\r\n",
		"Content-Type: multipart/alternative; boundary=a\r\n\r\n--a\r\nContent-Type: text/html\r\n\r\n<p>HTML first</p>\r\n--a\r\nContent-Type: text/plain\r\n\r\nPlain second.\r\n--a--\r\n",
		"Content-Type: multipart/mixed; boundary=m\r\n\r\n--m\r\nContent-Type: multipart/alternative; boundary=a\r\n\r\n--a\r\nContent-Type: text/plain\r\n\r\nNested plain.\r\n--a\r\nContent-Type: text/html\r\n\r\n<p>Nested</p>\r\n--a--\r\n--m\r\nContent-Type: text/plain\r\n\r\nA second text.\r\n--m--\r\n",
		"Content-Type: text/plain\r\n\r\n   \r\n",
	}
	wire := &mailtest.LogBuffer{}
	cfg := Config{Host: st.Host, Port: st.IMAPSPort, Security: transport.TLS, TLS: st.TLSConfig(), Timeout: 10 * time.Second}
	conn, err := dialOwn(context.Background(), cfg, credentials.New(mailtest.Bob, mailtest.BobPassword), func(o *imapclient.Options) { o.DebugWriter = wire })
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := conn.client()
	const folder = "GuessShapes"
	if err := cl.Create(folder, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	for i, body := range shapes {
		raw := fmt.Sprintf(hdr, i) + body
		cmd := cl.Append(folder, int64(len(raw)), nil)
		cmd.Write([]byte(raw))
		cmd.Close()
		if _, err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.examine(folder); err != nil {
		t.Fatal(err)
	}
	for i := range shapes {
		uid := uint32(i + 1)
		for _, w := range []struct{ offset, maxChars int }{{0, DefaultMaxChars}, {10, 50}} {
			want, err := readSequential(cl, folder, uid, w.offset, w.maxChars)
			if err != nil {
				t.Fatal(err)
			}
			before := len(wire.String())
			got, err := readMessage(cl, folder, uid, w.offset, w.maxChars)
			if err != nil {
				t.Fatalf("shape %d: %v", i, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("shape %d (offset %d): pipelined read\n%+v\nsequential read\n%+v", i, w.offset, got, want)
			}
			if i == 0 && w.offset == 0 {
				// A small single-part message: one FETCH, one round trip.
				if n := strings.Count(wire.String()[before:], "UID FETCH"); n != 1 {
					t.Errorf("a small single-part message: %d FETCHes, want 1:\n%.600s", n, wire.String()[before:])
				}
			}
		}
	}
	// A UID that is not there: the same error both ways.
	_, want := readSequential(cl, folder, 999, 0, DefaultMaxChars)
	_, got := readMessage(cl, folder, 999, 0, DefaultMaxChars)
	if want == nil || got == nil || got.Error() != want.Error() {
		t.Errorf("missing UID: %v, sequential %v", got, want)
	}
	// The connection is still in step: a NOOP answers.
	if err := cl.Noop().Wait(); err != nil {
		t.Errorf("after the reads: %v", err)
	}
}
