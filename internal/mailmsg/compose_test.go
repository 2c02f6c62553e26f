package mailmsg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

const (
	nonASCIISubject  = "Grüße — 日本語 ✓"
	nonASCIIFilename = "Grüße 日本語 ✓ Quartalsbericht mit einem sehr langen Namen, der in Abschnitte muss.pdf"
)

func binaryBlob(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	// every byte value, and sequences that look like line ends and dots
	for i := 0; i < 256 && i < n; i++ {
		b[i] = byte(i)
	}
	return append(b, "\r\n.\r\n\n.\r"...)
}

func fullDraft() Draft {
	return Draft{
		From:    Address{Name: "Jürgen Müller", Email: "juergen@example.test"},
		ReplyTo: []Address{{Name: "Team \"Nord\"", Email: "team@example.test"}},
		To:      []Address{{Name: "Bob", Email: "bob@example.test"}, {Email: "carol@example.test"}},
		Cc:      []Address{{Name: "李 雷", Email: "li@example.test"}},
		Bcc:     []Address{{Name: "Hidden Person", Email: "hidden@example.test"}},
		Subject: nonASCIISubject,
		Text:    "Hallo Bob,\n\nanbei der Bericht. Grüße ✓\n" + strings.Repeat("lange Zeile ", 200) + "\n.\nFrom the start\n",
		HTML:    "<p>Hallo Bob,</p><p>anbei der <b>Bericht</b>. Grüße ✓</p>",
		Attachments: []OutAttachment{
			{Filename: "report.pdf", ContentType: "application/pdf", Data: []byte("%PDF-1.4\n%âãÏÓ\n")},
			{Filename: "blob.bin", ContentType: "", Data: binaryBlob(10000)},
			{Filename: nonASCIIFilename, ContentType: "application/pdf", Data: []byte("second pdf")},
			{Filename: "notes.txt", ContentType: "text/plain; charset=utf-8", Data: []byte("Notizen: ä\n")},
		},
		InReplyTo:  "parent.123@example.test",
		References: []string{"root.1@example.test", "<mid.2@example.test>"},
		Date:       time.Date(2024, 5, 6, 7, 8, 9, 0, time.FixedZone("", 2*3600)),
	}
}

func compose(t *testing.T, d Draft) ([]byte, string) {
	t.Helper()
	raw, id, err := Compose(d)
	if err != nil {
		t.Fatalf("Compose: %v", err)
	}
	checkWire(t, raw)
	return raw, id
}

// checkWire checks what every composed message must be: ASCII, CRLF line
// endings only, no line over 998 bytes.
func checkWire(t *testing.T, raw []byte) {
	t.Helper()
	for i, c := range raw {
		if c >= 0x80 || c == 0 {
			t.Fatalf("byte %d is %#x: the message must be ASCII without NUL", i, c)
		}
		if c == '\n' && (i == 0 || raw[i-1] != '\r') {
			t.Fatalf("bare LF at byte %d", i)
		}
		if c == '\r' && (i+1 == len(raw) || raw[i+1] != '\n') {
			t.Fatalf("bare CR at byte %d", i)
		}
	}
	for n, line := range bytes.Split(raw, []byte("\r\n")) {
		if len(line) > 998 {
			t.Fatalf("line %d is %d bytes long", n+1, len(line))
		}
	}
}

func headerBlock(raw []byte) string {
	h, _, _ := bytes.Cut(raw, []byte("\r\n\r\n"))
	return string(h) + "\r\n"
}

func TestComposeRoundTrip(t *testing.T) {
	d := fullDraft()
	raw, id := compose(t, d)

	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	h := mr.Header
	if s, err := h.Subject(); err != nil || s != nonASCIISubject {
		t.Errorf("Subject = %q, %v", s, err)
	}
	if got := h.Get("Subject"); !isASCII(got) || !strings.Contains(got, "=?utf-8?") {
		t.Errorf("raw Subject %q is not RFC 2047", got)
	}
	if date, err := h.Date(); err != nil || !date.Equal(d.Date) {
		t.Errorf("Date = %v, %v; want %v", date, err, d.Date)
	}
	checkAddrs := func(key string, want []Address) {
		t.Helper()
		got, err := h.AddressList(key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s = %v, want %v", key, got, want)
		}
		for i := range got {
			if got[i].Name != want[i].Name || got[i].Address != want[i].Email {
				t.Errorf("%s[%d] = %q <%s>, want %q <%s>", key, i, got[i].Name, got[i].Address, want[i].Name, want[i].Email)
			}
		}
	}
	checkAddrs("From", []Address{d.From})
	checkAddrs("To", d.To)
	checkAddrs("Cc", d.Cc)
	checkAddrs("Reply-To", d.ReplyTo)
	if h.Has("Bcc") {
		t.Errorf("Bcc header present: %q", h.Get("Bcc"))
	}
	if bytes.Contains(bytes.ToLower(raw), []byte("hidden")) {
		t.Error("the Bcc recipient appears in the message")
	}
	if got, err := h.MessageID(); err != nil || got != id {
		t.Errorf("Message-ID = %q, %v; Compose returned %q", got, err, id)
	}
	if !strings.HasSuffix(id, "@example.test") {
		t.Errorf("Message-ID %q should use the From domain", id)
	}
	if got, _ := h.MsgIDList("In-Reply-To"); len(got) != 1 || got[0] != "parent.123@example.test" {
		t.Errorf("In-Reply-To = %q", got)
	}
	if got, _ := h.MsgIDList("References"); strings.Join(got, " ") != "root.1@example.test mid.2@example.test parent.123@example.test" {
		t.Errorf("References = %q", got)
	}
	hb := headerBlock(raw)
	for _, want := range []string{
		"\r\nIn-Reply-To: <parent.123@example.test>\r\n",
		"\r\nReferences: <root.1@example.test> <mid.2@example.test>\r\n <parent.123@example.test>\r\n",
		"\r\nMime-Version: 1.0\r\n",
	} {
		if !strings.Contains("\r\n"+hb, want) {
			t.Errorf("header lacks %q:\n%s", want, hb)
		}
	}

	var texts []string
	var atts []OutAttachment
	eachPart(t, mr, func(h mail.PartHeader, body []byte) {
		switch ph := h.(type) {
		case *mail.InlineHeader:
			ct, params, _ := ph.ContentType()
			if params["charset"] != "utf-8" || ph.Get("Content-Transfer-Encoding") != "quoted-printable" {
				t.Errorf("text part %s: charset %q, encoding %q", ct, params["charset"], ph.Get("Content-Transfer-Encoding"))
			}
			texts = append(texts, ct+":"+strings.ReplaceAll(string(body), "\r\n", "\n"))
		case *mail.AttachmentHeader:
			name, err := ph.Filename()
			if err != nil {
				t.Errorf("Filename: %v", err)
			}
			ct, _, _ := ph.ContentType()
			if enc := ph.Get("Content-Transfer-Encoding"); enc != "base64" {
				t.Errorf("attachment %q: encoding %q", name, enc)
			}
			atts = append(atts, OutAttachment{Filename: name, ContentType: ct, Data: body})
		}
	})
	wantTexts := []string{"text/plain:" + d.Text, "text/html:" + d.HTML}
	if len(texts) != 2 || texts[0] != wantTexts[0] || texts[1] != wantTexts[1] {
		t.Errorf("text parts:\n got %q\nwant %q", texts, wantTexts)
	}
	if len(atts) != len(d.Attachments) {
		t.Fatalf("%d attachments, want %d", len(atts), len(d.Attachments))
	}
	for i, a := range atts {
		want := d.Attachments[i]
		wantCT, _, _ := mime.ParseMediaType(want.ContentType)
		if want.ContentType == "" {
			wantCT = "application/octet-stream"
		}
		if a.Filename != want.Filename || a.ContentType != wantCT || !bytes.Equal(a.Data, want.Data) {
			t.Errorf("attachment %d: %q %s (%d bytes), want %q %s (%d bytes)", i, a.Filename, a.ContentType, len(a.Data), want.Filename, wantCT, len(want.Data))
		}
	}

	// The structure: mixed( alternative(plain, html), attachments... ).
	if got, want := structure(t, raw), "multipart/mixed(multipart/alternative(text/plain text/html) application/pdf application/octet-stream application/pdf text/plain)"; got != want {
		t.Errorf("structure\n got %s\nwant %s", got, want)
	}
}

// structure describes the MIME tree of raw as "type(child child)".
func structure(t *testing.T, raw []byte) string {
	t.Helper()
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var walk func(e *message.Entity) string
	walk = func(e *message.Entity) string {
		ct, _, _ := e.Header.ContentType()
		mr := e.MultipartReader()
		if mr == nil {
			io.Copy(io.Discard, e.Body)
			return ct
		}
		var kids []string
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			kids = append(kids, walk(p))
		}
		return ct + "(" + strings.Join(kids, " ") + ")"
	}
	return walk(e)
}

func TestComposeShapes(t *testing.T) {
	base := Draft{From: Address{Email: "a@example.test"}, To: []Address{{Email: "b@example.test"}}, Subject: "s"}
	tests := []struct {
		name  string
		edit  func(*Draft)
		want  string
		texts []string // substrings of the decoded text parts
	}{
		{"text only", func(d *Draft) { d.Text = "hello\r\nworld" }, "text/plain", nil},
		{"empty body", func(d *Draft) {}, "text/plain", nil},
		{"text and html", func(d *Draft) { d.Text, d.HTML = "t", "<b>h</b>" }, "multipart/alternative(text/plain text/html)", nil},
		{"html only gets a text part", func(d *Draft) { d.HTML = "<p>Hello <a href=\"https://example.test/x\">there</a></p>" },
			"multipart/alternative(text/plain text/html)", []string{"Hello there (https://example.test/x)"}},
		{"text and attachment", func(d *Draft) {
			d.Text = "t"
			d.Attachments = []OutAttachment{{Filename: "a.bin", Data: []byte{0, 1, 2}}}
		}, "multipart/mixed(text/plain application/octet-stream)", nil},
		{"message/rfc822 attachment", func(d *Draft) {
			d.Attachments = []OutAttachment{{Filename: "fwd.eml", ContentType: "message/rfc822", Data: []byte("Subject: x\n\nbody\n")}}
		}, "multipart/mixed(text/plain message/rfc822)", nil},
		{"8-bit message/rfc822 goes as a file", func(d *Draft) {
			d.Attachments = []OutAttachment{{Filename: "fwd.eml", ContentType: "message/rfc822", Data: []byte("Subject: ä\n\nbody\n")}}
		}, "multipart/mixed(text/plain application/octet-stream)", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := base
			tt.edit(&d)
			raw, _ := compose(t, d)
			if got := structure(t, raw); got != tt.want {
				t.Errorf("structure = %s, want %s", got, tt.want)
			}
			if tt.want == "text/plain" {
				mr, err := mail.CreateReader(bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				ct, params, _ := mr.Header.ContentType()
				if ct != "text/plain" || params["charset"] != "utf-8" || mr.Header.Get("Content-Transfer-Encoding") != "quoted-printable" {
					t.Errorf("top-level %s %v %q", ct, params, mr.Header.Get("Content-Transfer-Encoding"))
				}
				p, err := mr.NextPart()
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(p.Body)
				if want := strings.ReplaceAll(crlfToLF(d.Text), "\n", "\r\n"); string(body) != want {
					t.Errorf("body = %q, want %q", body, want)
				}
			}
			if len(tt.texts) > 0 {
				text := inlineTexts(t, raw)
				for _, s := range tt.texts {
					if !strings.Contains(text, s) {
						t.Errorf("text %q lacks %q", text, s)
					}
				}
			}
		})
	}
}

// eachPart calls f with every part of mr and its decoded body.
func eachPart(t *testing.T, mr *mail.Reader, f func(h mail.PartHeader, body []byte)) {
	t.Helper()
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(p.Body)
		if err != nil {
			t.Fatal(err)
		}
		f(p.Header, body)
	}
}

// inlineTexts is the decoded text of raw's inline parts, as go-message
// reads them.
func inlineTexts(t *testing.T, raw []byte) string {
	t.Helper()
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	eachPart(t, mr, func(h mail.PartHeader, body []byte) {
		if _, ok := h.(*mail.InlineHeader); ok {
			texts = append(texts, string(body))
		}
	})
	return strings.Join(texts, "\n\n")
}

func TestComposeLongValues(t *testing.T) {
	longWord := strings.Repeat("x", 2000)
	d := Draft{
		From:    Address{Name: strings.Repeat("N", 1200), Email: "a@example.test"},
		To:      []Address{{Name: "Mr =?utf-8?q?Evil?=", Email: "b@example.test"}},
		Subject: "start " + longWord + " " + strings.Repeat("ü", 500) + " =?utf-8?q?not_encoded?= end",
		Text:    strings.Repeat("y", 5000),
		Attachments: []OutAttachment{
			{Filename: strings.Repeat("日本語", 100) + ".txt", Data: []byte("a")},
			{Filename: strings.Repeat("f", 1500) + ".bin", Data: []byte("b")},
		},
		References: []string{strings.Repeat("r", 800) + "@example.test", "z@example.test"},
	}
	for i := 0; i < 100; i++ {
		d.References = append(d.References, fmt.Sprintf("%s.%d@example.test", strings.Repeat("q", 60), i))
	}
	raw, _ := compose(t, d)
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := mr.Header.Subject(); s != d.Subject {
		t.Errorf("Subject changed:\n got %q\nwant %q", s, d.Subject)
	}
	from, err := mr.Header.AddressList("From")
	if err != nil || len(from) != 1 || from[0].Name != d.From.Name {
		t.Errorf("From = %v, %v", from, err)
	}
	to, err := mr.Header.AddressList("To")
	if err != nil || len(to) != 1 || to[0].Name != d.To[0].Name {
		t.Errorf("To = %v, %v", to, err)
	}
	refs, err := mr.Header.MsgIDList("References")
	if err != nil || len(refs) != 102 {
		t.Errorf("References: %d ids, %v", len(refs), err)
	}
	var names []string
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ah, ok := p.Header.(*mail.AttachmentHeader); ok {
			name, err := ah.Filename()
			if err != nil {
				t.Error(err)
			}
			names = append(names, name)
		}
	}
	if len(names) != 2 || names[0] != d.Attachments[0].Filename || names[1] != d.Attachments[1].Filename {
		t.Errorf("file names changed: %q", names)
	}
}

func TestComposeMessageID(t *testing.T) {
	d := Draft{From: Address{Email: "a@example.test"}}
	seen := map[string]bool{}
	for i := 0; i < 2000; i++ {
		_, id, err := Compose(d)
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("Message-ID %q repeated after %d messages", id, i)
		}
		seen[id] = true
		if strings.ContainsAny(id, "<> ") || !strings.HasSuffix(id, "@example.test") {
			t.Fatalf("Message-ID %q", id)
		}
	}
	d.MessageIDDomain = "mail.example.org"
	if _, id, err := Compose(d); err != nil || !strings.HasSuffix(id, "@mail.example.org") {
		t.Errorf("with MessageIDDomain: %q, %v", id, err)
	}
	d.MessageIDDomain = "bad domain"
	if _, _, err := Compose(d); mailerr.KindOf(err) != mailerr.BadInput {
		t.Errorf("bad MessageIDDomain: %v", err)
	}
}

// The sender's copy keeps the Bcc header and the given Message-ID; the
// submitted rendering of the same draft has no Bcc.
func TestComposeSentCopy(t *testing.T) {
	d := fullDraft()
	raw, id := compose(t, d)
	d.MessageID, d.SentCopy = "<"+id+">", true
	sent, sentID := compose(t, d)
	if sentID != id {
		t.Fatalf("sent copy Message-ID %q, want %q", sentID, id)
	}
	mr, err := mail.CreateReader(bytes.NewReader(sent))
	if err != nil {
		t.Fatal(err)
	}
	bcc, err := mr.Header.AddressList("Bcc")
	gotID, _ := mr.Header.MessageID()
	if err != nil || len(bcc) != 1 || bcc[0].Address != "hidden@example.test" || bcc[0].Name != "Hidden Person" || gotID != id {
		t.Errorf("sent copy: Bcc %v (%v), Message-ID %q\n%s", bcc, err, gotID, headerBlock(sent))
	}
	if strings.Contains(headerBlock(raw), "Bcc") || strings.Contains(string(raw), "hidden@example.test") {
		t.Error("the submitted rendering names the Bcc recipient")
	}
	d.MessageID = "bad id\r\nX: y"
	if _, _, err := Compose(d); mailerr.KindOf(err) != mailerr.BadInput {
		t.Errorf("bad MessageID accepted: %v", err)
	}
	for id, want := range map[string]bool{"a@b": true, "<a@b>": true, "": false, "a b@c": false, "a<b@c": false, "ä@b": false} {
		if got := ValidMessageID(id); got != want {
			t.Errorf("ValidMessageID(%q) = %v", id, got)
		}
	}
}

func TestComposeDateDefault(t *testing.T) {
	before := time.Now().Truncate(time.Second)
	raw, _ := compose(t, Draft{From: Address{Email: "a@example.test"}})
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	date, err := mr.Header.Date()
	if err != nil || date.Before(before) || date.After(time.Now()) {
		t.Errorf("Date = %v, %v", date, err)
	}
}

func TestComposeErrors(t *testing.T) {
	ok := func() Draft {
		return Draft{From: Address{Email: "a@example.test"}, To: []Address{{Email: "b@example.test"}}}
	}
	tests := []struct {
		name string
		edit func(*Draft)
		want string // in the error message
	}{
		{"subject injection", func(d *Draft) { d.Subject = "hi\r\nBcc: evil@example.test" }, "Subject: line breaks"},
		{"subject LF", func(d *Draft) { d.Subject = "hi\nthere" }, "Subject: line breaks"},
		{"subject NUL", func(d *Draft) { d.Subject = "a\x00b" }, "Subject: NUL"},
		{"subject bell", func(d *Draft) { d.Subject = "a\x07b" }, "U+0007"},
		{"subject bad UTF-8", func(d *Draft) { d.Subject = "a\xffb" }, "not valid UTF-8"},
		{"no from", func(d *Draft) { d.From = Address{} }, "From: the email address is empty"},
		{"from name injection", func(d *Draft) { d.From.Name = "A\r\nBcc: evil@example.test" }, "From: line breaks"},
		{"to email injection", func(d *Draft) { d.To[0].Email = "b@example.test\r\nBcc: evil@example.test" }, "To: line breaks"},
		{"cc not an address", func(d *Draft) { d.Cc = []Address{{Email: "nobody"}} }, "Cc: \"nobody\" is not a valid email address"},
		{"bcc checked too", func(d *Draft) { d.Bcc = []Address{{Email: "x@"}} }, "Bcc:"},
		{"non-ASCII local part", func(d *Draft) { d.To[0].Email = "jürgen@example.test" }, "non-ASCII"},
		{"non-ASCII domain", func(d *Draft) { d.To[0].Email = "j@bücher.example" }, "xn--"},
		{"two addresses in one", func(d *Draft) { d.To[0].Email = "a@example.test> <b@example.test" }, "To:"},
		{"too long", func(d *Draft) { d.To[0].Email = strings.Repeat("a", 250) + "@example.test" }, "longer than"},
		{"bad reference", func(d *Draft) { d.References = []string{"a b@example.test"} }, "References:"},
		{"bad in-reply-to", func(d *Draft) { d.InReplyTo = "x\r\ny" }, "In-Reply-To:"},
		{"attachment name injection", func(d *Draft) {
			d.Attachments = []OutAttachment{{Filename: "a\r\nContent-Type: text/html", Data: []byte("x")}}
		}, "attachment 1 file name: line breaks"},
		{"attachment bad type", func(d *Draft) { d.Attachments = []OutAttachment{{ContentType: "pdf", Data: []byte("x")}} }, "not a valid content type"},
		{"attachment multipart", func(d *Draft) {
			d.Attachments = []OutAttachment{{ContentType: "multipart/mixed; boundary=x", Data: []byte("x")}}
		}, "multipart"},
		{"attachment charset", func(d *Draft) {
			d.Attachments = []OutAttachment{{ContentType: "text/plain; charset=iso-8859-1", Data: []byte("x")}}
		}, "charset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ok()
			tt.edit(&d)
			raw, _, err := Compose(d)
			if err == nil {
				t.Fatalf("no error; message:\n%s", raw)
			}
			if mailerr.KindOf(err) != mailerr.BadInput {
				t.Errorf("kind %v, want bad_input: %v", mailerr.KindOf(err), err)
			}
			if msg := mailerr.Message(err); !strings.Contains(msg, tt.want) {
				t.Errorf("message %q does not contain %q", msg, tt.want)
			}
		})
	}
}

func TestCheckHeaderValue(t *testing.T) {
	good := []string{"", "plain", "tab\there", "Grüße — 日本語 ✓", "emoji 🙂", "\u200b"}
	for _, v := range good {
		if err := CheckHeaderValue("Subject", v); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	bad := []string{"a\r\nBcc: evil@example.test", "a\nb", "a\rb", "a\x00b", "\x1b[31m", "a\x7fb", "a\u0085b", "a\xc3"}
	for _, v := range bad {
		err := CheckHeaderValue("Subject", v)
		if err == nil {
			t.Errorf("%q accepted", v)
			continue
		}
		if msg := mailerr.Message(err); !strings.HasPrefix(msg, "Subject: ") || strings.Contains(msg, v) {
			t.Errorf("%q: message %q should name the field and not echo the value", v, msg)
		}
	}
}

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in   string
		want Address
		err  string
	}{
		{in: "alice@example.test", want: Address{Email: "alice@example.test"}},
		{in: "  Alice Example <alice@example.test> ", want: Address{Name: "Alice Example", Email: "alice@example.test"}},
		{in: `"Example, Alice" <alice@example.test>`, want: Address{Name: "Example, Alice", Email: "alice@example.test"}},
		{in: "=?utf-8?q?J=C3=BCrgen?= <j@example.test>", want: Address{Name: "Jürgen", Email: "j@example.test"}},
		{in: "=?iso-8859-1?q?J=FCrgen?= <j@example.test>", want: Address{Name: "Jürgen", Email: "j@example.test"}},
		{in: "Jürgen <j@example.test>", want: Address{Name: "Jürgen", Email: "j@example.test"}},
		{in: `"john doe"@example.test`, want: Address{Email: `"john doe"@example.test`}},
		{in: "<a@[127.0.0.1]>", want: Address{Email: "a@[127.0.0.1]"}},
		{in: "", err: "To: the address is empty"},
		{in: "alice", err: `To: "alice" is not a valid email address`},
		{in: "Alice <alice@example.test>\r\nBcc: evil@example.test", err: "To: line breaks"},
		{in: "a@example.test, b@example.test", err: "To: "},
		{in: "jürgen@example.test", err: "non-ASCII"},
		{in: "=?utf-8?q?a=0D=0ABcc=3A_x?= <a@example.test>", err: "To: line breaks"},
		{in: "=?utf-8?q?a=07?= <a@example.test>", err: "U+0007"},
	}
	for _, tt := range tests {
		got, err := ParseAddress("To", tt.in)
		if tt.err != "" {
			if err == nil {
				t.Errorf("%q: got %+v, want error %q", tt.in, got, tt.err)
			} else if msg := mailerr.Message(err); !strings.Contains(msg, tt.err) || mailerr.KindOf(err) != mailerr.BadInput {
				t.Errorf("%q: error %q (%v), want %q", tt.in, msg, mailerr.KindOf(err), tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: got %+v, %v; want %+v", tt.in, got, err, tt.want)
			continue
		}
		// What ParseAddress returns, Compose takes.
		if _, _, err := Compose(Draft{From: got}); err != nil {
			t.Errorf("%q: Compose refuses the parsed address: %v", tt.in, err)
		}
	}
}

func TestParseAddressList(t *testing.T) {
	got, err := ParseAddressList("Cc", "a@example.test, Bob <b@example.test>,\"C, D\" <c@example.test>")
	if err != nil {
		t.Fatal(err)
	}
	want := []Address{{Email: "a@example.test"}, {Name: "Bob", Email: "b@example.test"}, {Name: "C, D", Email: "c@example.test"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got, err := ParseAddressList("Cc", "  "); err != nil || got != nil {
		t.Errorf("blank: %v, %v", got, err)
	}
	for _, bad := range []string{"a@example.test, nope", "a@example.test\nb@example.test", "ü@example.test"} {
		if _, err := ParseAddressList("Cc", bad); err == nil || !strings.HasPrefix(mailerr.Message(err), "Cc: ") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestRecipients(t *testing.T) {
	d := Draft{
		To:  []Address{{Email: "a@example.test"}, {Email: " B@example.test "}},
		Cc:  []Address{{Email: "b@example.test"}, {Email: "c@example.test"}},
		Bcc: []Address{{Email: "A@example.test"}, {Email: "d@example.test"}},
	}
	if got := strings.Join(d.Recipients(), " "); got != "a@example.test B@example.test c@example.test d@example.test" {
		t.Errorf("Recipients = %s", got)
	}
}

func TestReplySubject(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "Re: "},
		{"   ", "Re: "},
		{"x", "Re: x"},
		{"Re: x", "Re: x"},
		{"Re: Re: x", "Re: x"},
		{"RE: x", "Re: x"},
		{"re:x", "Re: x"},
		{"Re:Re:RE: x", "Re: x"},
		{"Re[2]: x", "Re: x"},
		{"Re(3): x", "Re: x"},
		{"AW: x", "Re: x"},
		{"Aw: Re: x", "Re: x"},
		{"SV: x", "Re: x"},
		{"Antw: x", "Re: x"},
		{"RE : x", "Re: x"},
		{"  Re:   x  ", "Re: x"},
		{"Re:", "Re: "},
		{"Fwd: x", "Re: Fwd: x"},
		{"Re: Fwd: Re: x", "Re: Fwd: Re: x"},
		{"Regarding: x", "Re: Regarding: x"},
		{"Re x", "Re: Re x"},
		{"Re[]: x", "Re: Re[]: x"},
		{"Re[2 x", "Re: Re[2 x"},
		{"Grüße", "Re: Grüße"},
		{"Re: Grüße — 日本語 ✓", "Re: Grüße — 日本語 ✓"},
	}
	for _, tt := range tests {
		if got := ReplySubject(tt.in); got != tt.want {
			t.Errorf("ReplySubject(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

var addrSpecChars = regexp.MustCompile(`^[\x21-\x7e]+@[\x21-\x7e]+$|^"[\x20-\x7e]*"@[\x21-\x7e]+$`)

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{
		"alice@example.test", "Alice <alice@example.test>", `"a b" <"x y"@example.test>`,
		"=?utf-8?q?J=C3=BCrgen?= <j@example.test>", "=?utf-8?b?5pel5pys6Kqe?= <j@example.test>",
		"a@[127.0.0.1]", "(comment) a@example.test", "x\r\ny", "Mr =?utf-8?q?Evil?= <a@b>",
		`"=?utf-8?q?x?=" <a@b>`, "a@b, c@d", "<>", "\"\\\"\" <a@b>",
		"=?k000?B?71x00020?=<0@0>", // a non-ASCII name with a backslash: net/mail's "Q" word breaks
		"=?utf-8?q?J=C3=BCrgen_\\_(x)?= <a@b>",
		"\"\t\"@0", // a tab in a quoted local part
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress("To", s)
		if err != nil {
			if mailerr.KindOf(err) != mailerr.BadInput {
				t.Fatalf("%q: kind %v: %v", s, mailerr.KindOf(err), err)
			}
			return
		}
		if !isASCII(a.Email) || !addrSpecChars.MatchString(a.Email) {
			t.Fatalf("%q: email %q", s, a.Email)
		}
		if CheckHeaderValue("", a.Name) != nil {
			t.Fatalf("%q: name %q has controls", s, a.Name)
		}
		// It composes, and reads back the same.
		raw, _, err := Compose(Draft{From: a})
		if err != nil {
			t.Fatalf("%q: parsed as %+v, which Compose refuses: %v", s, a, err)
		}
		checkWire(t, raw)
		mr, err := mail.CreateReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		from, err := mr.Header.AddressList("From")
		if err != nil || len(from) != 1 {
			t.Fatalf("%q: From %q reads back as %v, %v", s, mr.Header.Get("From"), from, err)
		}
		back, err := ParseAddress("From", mr.Header.Get("From"))
		if err != nil || back != a {
			t.Fatalf("%q: %+v reads back as %+v, %v (header %q)", s, a, back, err, mr.Header.Get("From"))
		}
	})
}

func FuzzReplySubject(f *testing.F) {
	for _, s := range []string{"", "Re: x", "RE: Re[2]: AW: x", "Re(", "Re[99999999999999999999]: x", "sv :", "\xff", "Re:\u00a0x", "AW:Re: \t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := ReplySubject(s)
		if !strings.HasPrefix(got, "Re: ") {
			t.Fatalf("%q -> %q", s, got)
		}
		if again := ReplySubject(got); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, got, again)
		}
		if _, ok := cutReplyPrefix(strings.TrimLeft(got[len("Re: "):], " \t")); ok {
			t.Fatalf("%q -> %q still has a reply prefix after the first", s, got)
		}
	})
}
