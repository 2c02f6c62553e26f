package mailmsg

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestForwardSubject(t *testing.T) {
	for in, want := range map[string]string{
		"Quartalszahlen":        "Fwd: Quartalszahlen",
		"Fwd: Quartalszahlen":   "Fwd: Quartalszahlen",
		"FW: Fwd:  fwd : Reise": "Fwd: Reise",
		"WG: Termin":            "Fwd: Termin",
		"Re: Fwd: x":            "Fwd: Re: Fwd: x",
		"Trip report":           "Fwd: Trip report",
		"  ":                    "Fwd: ",
		"Fwdx: not a marker":    "Fwd: Fwdx: not a marker",
	} {
		if got := ForwardSubject(in); got != want {
			t.Errorf("ForwardSubject(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestForwardedBody(t *testing.T) {
	date := time.Date(2026, 11, 3, 9, 30, 0, 0, time.FixedZone("", 3600))
	got := ForwardedBody("See below.\r\n", Forwarded{
		From: []Address{{Name: "Carol", Email: "carol@example.test"}}, To: []Address{{Email: "a@example.test"}},
		Date: date, Subject: "Zahlen\u202e",
	}, "body\n")
	want := "See below.\n\n---------- Forwarded message ----------\nFrom: Carol <carol@example.test>\nDate: Tue, 03 Nov 2026 09:30:00 +0100\nSubject: Zahlen\nTo: a@example.test\n\nbody\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

// A draft Compose wrote comes back as it went in (its Bcc included), and
// a draft from another client gives up its inline image as an attachment.
func TestParseDraftRoundTrip(t *testing.T) {
	in := Draft{
		From: Address{Name: "Alice Ä", Email: "alice@example.test"}, To: []Address{{Name: "Bob", Email: "bob@example.test"}},
		Cc: []Address{{Email: "c@example.test"}}, Bcc: []Address{{Email: "secret@example.test"}}, ReplyTo: []Address{{Email: "r@example.test"}},
		Subject: "Grüße ✓", Text: "Hallo\nWelt\n", HTML: "<p>Hallo</p>", InReplyTo: "b@x", References: []string{"a@x"},
		Tags: []string{"agent-x"}, SentCopy: true,
		Attachments: []OutAttachment{{Filename: "daten ü.bin", Data: []byte{0, 1, 2, 255}}, {Filename: "notes.txt", ContentType: "text/plain", Data: []byte("plain\n")}},
	}
	raw, id, err := Compose(in)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseDraft(raw)
	if err != nil {
		t.Fatal(err)
	}
	if p.MessageID != id || p.From != in.From || !slices.Equal(p.To, in.To) || !slices.Equal(p.Cc, in.Cc) || !slices.Equal(p.Bcc, in.Bcc) || !slices.Equal(p.ReplyTo, in.ReplyTo) {
		t.Errorf("addresses: %+v", p.Draft)
	}
	if p.Subject != in.Subject || strings.ReplaceAll(p.Text, "\r\n", "\n") != in.Text || p.HTML != in.HTML || p.InReplyTo != "b@x" || !slices.Equal(p.References, []string{"a@x", "b@x"}) || !slices.Equal(p.Tags, in.Tags) {
		t.Errorf("fields: %+v", p.Draft)
	}
	if len(p.Attachments) != 2 || p.Attachments[0].Filename != "daten ü.bin" || !bytes.Equal(p.Attachments[0].Data, in.Attachments[0].Data) ||
		p.Attachments[1].ContentType != "text/plain; charset=utf-8" || string(p.Attachments[1].Data) != "plain\n" || len(p.Warnings) != 0 {
		t.Errorf("attachments: %+v warnings %v", p.Attachments, p.Warnings)
	}
	// Composed again: valid, with no Bcc header unless a Sent copy.
	p.Draft.SentCopy, p.Draft.MessageID = false, ""
	out, _, err := Compose(p.Draft)
	if err != nil || bytes.Contains(out, []byte("secret@example.test")) {
		t.Fatalf("recomposed: %v\n%s", err, out)
	}

	related := "From: a@example.test\r\nTo: b@example.test\r\nSubject: x\r\nMIME-Version: 1.0\r\nContent-Type: multipart/related; boundary=r\r\n\r\n" +
		"--r\r\nContent-Type: text/html; charset=iso-8859-1\r\n\r\n<p>Gr\xfc\xdfe <img src=\"cid:logo\"></p>\r\n" +
		"--r\r\nContent-Type: image/png\r\nContent-ID: <logo>\r\nContent-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo=\r\n--r--\r\n"
	p, err = ParseDraft([]byte(related))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.HTML, "Grüße") || len(p.Attachments) != 1 || p.Attachments[0].ContentType != "image/png" || len(p.Warnings) != 1 {
		t.Errorf("related: html %q attachments %+v warnings %v", p.HTML, p.Attachments, p.Warnings)
	}
}
