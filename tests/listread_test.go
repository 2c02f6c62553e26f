package tests

// The mailbox layer straight against Dovecot, without the tool layer: what
// a list says about each message (preview, has_attachments), the folder's
// role, the decoded sizes of a read's attachments, and errors that state
// facts with a Subject instead of naming tools.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"mime/quotedprintable"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// mailboxClient is a mailbox.Client for the stack's IMAPS port.
func mailboxClient(t *testing.T, s *mailtest.Stack) *mailbox.Client {
	t.Helper()
	c := mailbox.New(mailbox.Config{Host: s.Host, Port: s.IMAPSPort, Security: transport.TLS, TLS: s.TLSConfig(), Timeout: 30 * time.Second},
		pool.Config{}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// scratchFolder creates a folder of its own for the test, deleted after it.
func scratchFolder(t *testing.T, d *imapclient.Client) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.NewReplacer("/", "-").Replace(t.Name()), time.Now().UnixNano())
	if err := d.Create(name, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Delete(name).Wait() })
	return name
}

// appendRaw stores raw (written with \n) in folder with CRLF line breaks.
func appendRaw(t *testing.T, d *imapclient.Client, folder, raw string) uint32 {
	t.Helper()
	raw = strings.ReplaceAll(raw, "\n", "\r\n")
	cmd := d.Append(folder, int64(len(raw)), nil)
	cmd.Write([]byte(raw))
	cmd.Close()
	ad, err := cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return uint32(ad.UID)
}

// wrap76 splits base64 into lines of 76 characters, as mail does.
func wrap76(s string) string { return wrap(s, 76) }

func wrap(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + "\n")
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

func head(subject, contentType string) string {
	return "From: Carol <carol@example.org>\nTo: alice@example.test\nSubject: " + subject +
		"\nDate: Mon, 02 Nov 2026 10:00:00 +0000\nMIME-Version: 1.0\nContent-Type: " + contentType + "\n"
}

// Each message shape gets the preview of its first text part, fetched with
// the list in one round trip.
func TestListPreviewsOfMultipartMessages(t *testing.T) {
	s := mailtest.Shared(t)
	d := direct(t, s, alice)
	folder := scratchFolder(t, d)
	utf8Body := strings.Repeat("Grüße aus Köln, 日本語のテキストです。", 60)
	longQP := strings.Repeat("Hallo Bob, sch=C3=B6ne Gr=C3=BC=C3=9Fe vom Rhein! ", 3)
	pdf := wrap76(base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 not really")))
	for _, m := range []string{
		head("alternative", `multipart/alternative; boundary="a"`) + `
--a
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

` + longQP + `
--a
Content-Type: text/html; charset=utf-8

<p>HTML version</p>
--a--
`,
		head("mixed text first", `multipart/mixed; boundary="m"`) + `
--m
Content-Type: text/plain; charset=utf-8

Please see the attached report.
--m
Content-Type: application/pdf; name="report.pdf"
Content-Disposition: attachment; filename="report.pdf"
Content-Transfer-Encoding: base64

` + pdf + `
--m--
`,
		head("html only", "text/html; charset=utf-8") + `
<html><head><style>p { color: red }</style><script>track()</script></head>
<body><h1>Release notes</h1><p>Everything is <b>fixed</b> &amp; faster.</p></body></html>
`,
		head("base64 utf-8", "text/plain; charset=utf-8") + "Content-Transfer-Encoding: base64\n\n" +
			wrap76(base64.StdEncoding.EncodeToString([]byte(utf8Body))) + "\n",
		head("mixed with alternative inside", `multipart/mixed; boundary="m"`) + `
--m
Content-Type: multipart/alternative; boundary="a"

--a
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: quoted-printable

Sch=F6ne Gr=FC=DFe aus Br=FCssel.
--a
Content-Type: text/html; charset=utf-8

<p>HTML</p>
--a--
--m
Content-Type: application/pdf; name="a.pdf"
Content-Transfer-Encoding: base64

` + pdf + `
--m--
`,
		head("related html with cid image", `multipart/related; boundary="r"`) + `
--r
Content-Type: text/html; charset=utf-8

<p>Look at <img src="cid:logo@x"> our logo.</p>
--r
Content-Type: image/png
Content-ID: <logo@x>
Content-Transfer-Encoding: base64

iVBORw0KGgo=
--r--
`,
		// The first text part is not in part 1: no preview (it would cost
		// another round trip).
		head("attachment first", `multipart/mixed; boundary="m"`) + `
--m
Content-Type: application/pdf; name="a.pdf"
Content-Transfer-Encoding: base64

` + pdf + `
--m
Content-Type: text/plain

Text after the attachment.
--m--
`,
	} {
		appendRaw(t, d, folder, m)
	}

	c := mailboxClient(t, s)
	creds := credentials.New(alice, s.Users[alice])
	page, err := c.ListEmails(context.Background(), creds, mailbox.ListOptions{Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]mailbox.Summary{}
	for _, m := range page.Messages {
		got[m.Subject] = m
	}
	for _, tc := range []struct {
		subject, preview string // preview: its start; "" for none
		attachments      bool
	}{
		{"alternative", "Hallo Bob, schöne Grüße vom Rhein! Hallo Bob", false},
		{"mixed text first", "Please see the attached report.", true},
		{"html only", "Release notes Everything is fixed & faster.", false},
		{"base64 utf-8", "Grüße aus Köln, 日本語のテキストです。Grüße", false},
		{"mixed with alternative inside", "Schöne Grüße aus Brüssel.", true},
		{"related html with cid image", "Look at our logo.", false},
		{"attachment first", "", true},
	} {
		m, ok := got[tc.subject]
		if !ok {
			t.Errorf("%s: not listed", tc.subject)
			continue
		}
		if tc.preview == "" && m.Preview != "" || !strings.HasPrefix(strings.Join(strings.Fields(m.Preview), " "), tc.preview) {
			t.Errorf("%s: preview %q, want it to start with %q", tc.subject, m.Preview, tc.preview)
		}
		if strings.ContainsAny(m.Preview, "<>\uFFFD") || strings.Contains(m.Preview, "color") {
			t.Errorf("%s: markup or garbage in the preview %q", tc.subject, m.Preview)
		}
		if m.HasAttachments != tc.attachments {
			t.Errorf("%s: has_attachments %v, want %v", tc.subject, m.HasAttachments, tc.attachments)
		}
	}
	if p := got["base64 utf-8"].Preview; len([]rune(p)) > 200 || !strings.HasSuffix(p, "…") {
		t.Errorf("a long preview is cut at 200 characters with …: %d, %q", len([]rune(p)), p)
	}
	// Search pages are made the same way.
	found, err := c.Search(context.Background(), creds, mailbox.Query{Subject: "mixed with alternative"}, mailbox.ListOptions{Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	if len(found.Messages) != 1 || !strings.HasPrefix(found.Messages[0].Preview, "Schöne Grüße") || !found.Messages[0].HasAttachments {
		t.Errorf("search: %+v", found.Messages)
	}
}

// A list says which special-use folder it shows, so that the reader of Sent
// or Drafts looks at recipients; the role follows the folder as the pooled
// connection moves between folders.
func TestListAndSearchReportTheFolderRole(t *testing.T) {
	s := mailtest.Shared(t)
	d := direct(t, s, alice)
	plain := scratchFolder(t, d)
	appendRaw(t, d, plain, head("role test", "text/plain")+"\nx\n")
	c := mailboxClient(t, s)
	creds := credentials.New(alice, s.Users[alice])
	ctx := context.Background()
	for _, tc := range []struct{ folder, role string }{
		{"INBOX", "inbox"}, {"Sent", "sent"}, {"Drafts", "drafts"}, {"Trash", "trash"}, {"Junk", "junk"},
		{plain, ""}, {"Sent", "sent"}, {"inbox", "inbox"},
	} {
		page, err := c.ListEmails(ctx, creds, mailbox.ListOptions{Folder: tc.folder, Limit: 1})
		if err != nil {
			t.Fatalf("%s: %v", tc.folder, err)
		}
		if page.Role != tc.role {
			t.Errorf("list of %s: role %q, want %q", tc.folder, page.Role, tc.role)
		}
	}
	page, err := c.Search(ctx, creds, mailbox.Query{Subject: "role test"}, mailbox.ListOptions{Folder: plain})
	if err != nil || page.Role != "" || len(page.Messages) != 1 {
		t.Fatalf("search of %s: %v, role %q, %d messages", plain, err, page.Role, len(page.Messages))
	}
	if page, err = c.Search(ctx, creds, mailbox.Query{Subject: "nothing such"}, mailbox.ListOptions{Folder: "Sent"}); err != nil || page.Role != "sent" {
		t.Fatalf("search of Sent: %v, role %q", err, page.Role)
	}
}

// Attachment sizes are decoded sizes: exact (BINARY.SIZE) for the last
// base64 or quoted-printable part of a message, estimated for earlier ones
// (Dovecot 2.3 answers BINARY.SIZE wrongly for those: see binarySized). And
// a read lists exactly the parts that make a list say has_attachments.
func TestReadAttachmentSizesAreDecoded(t *testing.T) {
	s := mailtest.Shared(t)
	d := direct(t, s, alice)
	if !d.Caps().Has(imap.CapBinary) {
		t.Fatal("Dovecot does not offer BINARY: the test proves nothing")
	}
	folder := scratchFolder(t, d)
	rng := rand.New(rand.NewPCG(1, 2))
	pdf := make([]byte, 10007)
	for i := range pdf {
		pdf[i] = byte(rng.UintN(256))
	}
	img := pdf[:333]
	var qp strings.Builder
	notes := strings.Repeat("Zeile mit Umlauten: äöü ß – und ein sehr langer Satz, der umgebrochen werden muss.\r\n", 30)
	w := quotedprintable.NewWriter(&qp)
	w.Write([]byte(notes))
	w.Close()
	forwardedMsg := "From: x@example.org\nSubject: Weitergeleitet\n\nDer Inhalt."

	// Wrapped at 60 characters, not 76: an estimate would be ~60 bytes off.
	single := appendRaw(t, d, folder, head("one attachment", `multipart/mixed; boundary="m"`)+`
--m
Content-Type: text/plain

The report is attached.
--m
Content-Type: application/pdf; name="report.pdf"
Content-Disposition: attachment; filename="report.pdf"
Content-Transfer-Encoding: base64

`+wrap(base64.StdEncoding.EncodeToString(pdf), 60)+`
--m--
`)
	several := appendRaw(t, d, folder, head("several attachments", `multipart/mixed; boundary="m"`)+`
--m
Content-Type: multipart/related; boundary="r"

--r
Content-Type: text/html; charset=utf-8

<p>See <img src="cid:pic@x"></p>
--r
Content-Type: image/png; name="pic.png"
Content-Disposition: inline; filename="pic.png"
Content-ID: <pic@x>
Content-Transfer-Encoding: base64

`+wrap76(base64.StdEncoding.EncodeToString(img))+`
--r--
--m
Content-Type: application/pdf; name="data.pdf"
Content-Disposition: attachment; filename="data.pdf"
Content-Transfer-Encoding: base64

`+wrap76(base64.StdEncoding.EncodeToString(pdf))+`
--m
Content-Type: text/plain; charset=utf-8
Content-Disposition: attachment; filename="notes.txt"
Content-Transfer-Encoding: quoted-printable

`+strings.ReplaceAll(qp.String(), "\r\n", "\n")+`
--m
Content-Type: message/rfc822

`+forwardedMsg+`
--m--
`)
	broken := appendRaw(t, d, folder, head("broken parts", `multipart/mixed; boundary="m"`)+`
--m
Content-Type: text/plain

The text is fine.
--m
Content-Type: application/octet-stream; name="old.uu"
Content-Transfer-Encoding: x-uuencode

begin 644 old.uu
--m
Content-Type: application/pdf; name="broken.pdf"
Content-Transfer-Encoding: base64

JVBERi0x!!!not*base64***LjQK
--m--
`)
	c := mailboxClient(t, s)
	creds := credentials.New(alice, s.Users[alice])
	ctx := context.Background()
	type want struct {
		part   string
		size   int
		exact  bool // else within 1%
		inline bool
	}
	for _, tc := range []struct {
		uid  uint32
		want map[string]want
	}{
		{single, map[string]want{"report.pdf": {"2", len(pdf), true, false}}},
		{several, map[string]want{
			"pic.png":            {"1.2", len(img), false, true},
			"data.pdf":           {"2", len(pdf), false, false},
			"notes.txt":          {"3", len(notes), true, false}, // its encoded size is 28% more
			"Weitergeleitet.eml": {"4", len(strings.ReplaceAll(forwardedMsg, "\n", "\r\n")), true, false},
		}},
	} {
		m, err := c.Read(ctx, creds, mailbox.ReadOptions{Folder: folder, UID: tc.uid})
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Attachments) != len(tc.want) {
			t.Errorf("%s: attachments %+v, want %d", m.Subject, m.Attachments, len(tc.want))
		}
		for _, a := range m.Attachments {
			w, ok := tc.want[a.Filename]
			if !ok {
				t.Errorf("%s: unexpected attachment %+v", m.Subject, a)
				continue
			}
			off := a.Size - int64(w.size)
			if a.PartID != w.part || a.Inline != w.inline || w.exact && off != 0 || off*100 > int64(w.size) || -off*100 > int64(w.size) {
				t.Errorf("%s: part %s, %d bytes, inline %v; want part %s, %d bytes decoded (exact %v), inline %v",
					a.Filename, a.PartID, a.Size, a.Inline, w.part, w.size, w.exact, w.inline)
			}
		}
	}

	// A part the server cannot decode does not cost the read: the size
	// falls back to the estimate.
	b, err := c.Read(ctx, creds, mailbox.ReadOptions{Folder: folder, UID: broken})
	if err != nil {
		t.Fatalf("read with broken parts: %v", err)
	}
	if b.Text != "The text is fine." || len(b.Attachments) != 2 {
		t.Errorf("read with broken parts: text %q, attachments %+v", b.Text, b.Attachments)
	}
	for _, a := range b.Attachments {
		if a.Size <= 0 {
			t.Errorf("%s: size %d", a.Filename, a.Size)
		}
	}

	// One rule: a list says has_attachments exactly when a read lists some
	// (here every message has some).
	page, err := c.ListEmails(ctx, creds, mailbox.ListOptions{Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	for _, sm := range page.Messages {
		r, err := c.Read(ctx, creds, mailbox.ReadOptions{Folder: folder, UID: sm.UID})
		if err != nil {
			t.Fatal(err)
		}
		if sm.HasAttachments != (len(r.Attachments) > 0) || !sm.HasAttachments {
			t.Errorf("uid %d: has_attachments %v, read lists %d", sm.UID, sm.HasAttachments, len(r.Attachments))
		}
	}
}

// Errors say what is wrong and what it is about; the advice (which tool to
// call) is the tool layer's.
func TestReadAndListErrorsStateFacts(t *testing.T) {
	s := mailtest.Shared(t)
	d := direct(t, s, alice)
	folder := scratchFolder(t, d)
	for range 2 {
		appendRaw(t, d, folder, head("paged", "text/plain")+"\nx\n")
	}
	c := mailboxClient(t, s)
	creds := credentials.New(alice, s.Users[alice])
	ctx := context.Background()
	page, err := c.ListEmails(ctx, creds, mailbox.ListOptions{Folder: folder, Limit: 1})
	if err != nil || page.NextCursor == "" {
		t.Fatalf("no cursor: %v", err)
	}
	_, readMissing := c.Read(ctx, creds, mailbox.ReadOptions{UID: 999999999})
	_, readNoFolder := c.Read(ctx, creds, mailbox.ReadOptions{Folder: "No Such Folder", UID: 1})
	_, listNoFolder := c.ListEmails(ctx, creds, mailbox.ListOptions{Folder: "No Such Folder"})
	_, badUID := c.Read(ctx, creds, mailbox.ReadOptions{})
	_, replyMissing := c.ReplyInfo(ctx, creds, "INBOX", 999999999)
	_, otherFolder := c.ListEmails(ctx, creds, mailbox.ListOptions{Folder: "INBOX", Cursor: page.NextCursor})
	_, garbled := c.ListEmails(ctx, creds, mailbox.ListOptions{Cursor: "not-a-cursor"})
	for _, tc := range []struct {
		name    string
		err     error
		kind    mailerr.Kind
		subject mailerr.Subject
		msg     string
	}{
		{"missing message", readMissing, mailerr.NotFound, mailerr.SubjectMessage, `no message with UID 999999999 in folder "INBOX"; it may have been moved or deleted`},
		{"missing message for a reply", replyMissing, mailerr.NotFound, mailerr.SubjectMessage, `no message with UID 999999999 in folder "INBOX"; it may have been moved or deleted`},
		{"read of a missing folder", readNoFolder, mailerr.NotFound, mailerr.SubjectFolder, `folder "No Such Folder" does not exist`},
		{"list of a missing folder", listNoFolder, mailerr.NotFound, mailerr.SubjectFolder, `folder "No Such Folder" does not exist`},
		{"uid 0", badUID, mailerr.BadInput, "", "uid must be a positive message UID"},
		{"cursor of another folder", otherFolder, mailerr.BadInput, mailerr.SubjectCursor, `this cursor belongs to folder "` + folder + `", not "INBOX"`},
		{"garbled cursor", garbled, mailerr.BadInput, mailerr.SubjectCursor, "invalid cursor"},
	} {
		var me *mailerr.Error
		if !errors.As(tc.err, &me) {
			t.Errorf("%s: %v is not a mailerr.Error", tc.name, tc.err)
			continue
		}
		if me.Kind != tc.kind || me.Subject != tc.subject || !strings.HasPrefix(me.Msg, tc.msg) {
			t.Errorf("%s: %v %q about %q; want %v %q about %q", tc.name, me.Kind, me.Msg, me.Subject, tc.kind, tc.msg, tc.subject)
		}
		if strings.Contains(me.Msg, "imap_") || strings.Contains(me.Msg, "call ") {
			t.Errorf("%s: %q names a tool", tc.name, me.Msg)
		}
	}
}
