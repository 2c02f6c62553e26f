package tests

import (
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// forwardOriginal is a multipart message from carol to alice with a text
// body, an HTML alternative and a binary attachment (base64, 76-character
// lines).
func forwardOriginal(id, subject string, blob []byte) string {
	b64 := base64.StdEncoding.EncodeToString(blob)
	var lines []string
	for len(b64) > 76 {
		lines = append(lines, b64[:76])
		b64 = b64[76:]
	}
	lines = append(lines, b64)
	return "Message-ID: <" + id + ">\r\n" +
		"From: Carol Example <" + carol + ">\r\n" +
		"To: Alice <" + alice + ">\r\n" +
		"Cc: dave@elsewhere.test\r\n" +
		"Subject: " + subject + "\r\n" +
		"Date: Tue, 03 Nov 2026 09:30:00 +0100\r\n" +
		"MIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=\"outer\"\r\n\r\n" +
		"--outer\r\nContent-Type: multipart/alternative; boundary=\"alt\"\r\n\r\n" +
		"--alt\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nDie Zahlen für Q3 sind da.\r\n" +
		"--alt\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Die Zahlen f&uuml;r <b>Q3</b> sind da.</p>\r\n" +
		"--alt--\r\n" +
		"--outer\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"zahlen.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		strings.Join(lines, "\r\n") + "\r\n--outer--\r\n"
}

// smtp_forward_email against Dovecot and Postfix: "Fwd:" once, the quoted
// header block and the original's text below the sender's words, the
// attachment carried byte for byte (or left out, or refused over the
// limit, nothing sent), References naming the original, the original
// left unread.
func TestForward(t *testing.T) {
	s := sendStack(t)
	g := startGateway(t, s, smtpEnv(s)...)
	ac := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")
	d := direct(t, s, alice)
	blob := randomBlob(200_000, 5)
	n := count(t, s, alice, "INBOX")
	if err := s.Deliver(carol, []string{alice}, []byte(forwardOriginal("fwd-orig-1@example.test", "FW: Quartalszahlen", blob))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitMessages(alice, "INBOX", n+1, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	o := findByMessageID(t, d, "INBOX", "fwd-orig-1@example.test")

	t.Run("with attachment", func(t *testing.T) {
		var res tools.SendResult
		mailtest.Decode(t, mailtest.Call(t, ac, "smtp_forward_email", map[string]any{
			"uid": int(o.uid), "to": []any{"Bob <" + bob + ">"}, "text": "Siehe unten, bitte prüfen.",
		}), &res)
		if res.Subject != "Fwd: Quartalszahlen" || res.Forwarded == nil || res.Forwarded.Attachments != 1 || !slices.Equal(res.Accepted, []string{bob}) || !res.SentCopy.Saved {
			t.Fatalf("result %+v (forwarded %+v)", res, res.Forwarded)
		}
		m := findByMessageID(t, direct(t, s, bob), "INBOX", res.MessageID)
		subj, _ := m.hdr.Subject()
		refs, _ := m.hdr.MsgIDList("References")
		if subj != "Fwd: Quartalszahlen" || !slices.Equal(refs, []string{"fwd-orig-1@example.test"}) || m.hdr.Has("In-Reply-To") {
			t.Errorf("subject %q References %v In-Reply-To %q", subj, refs, m.hdr.Get("In-Reply-To"))
		}
		text, _, atts := parts(t, m.raw)
		text = strings.ReplaceAll(text, "\r\n", "\n")
		for _, want := range []string{
			"Siehe unten, bitte prüfen.\n\n---------- Forwarded message ----------\n",
			"From: Carol Example <" + carol + ">\n",
			"Date: Tue, 03 Nov 2026 09:30:00 +0100\n",
			"Subject: FW: Quartalszahlen\n",
			"To: Alice <" + alice + ">\n",
			"Cc: dave@elsewhere.test\n",
			"\n\nDie Zahlen für Q3 sind da.",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("forwarded text lacks %q:\n%s", want, text)
			}
		}
		if got := atts["zahlen.bin"]; sha256.Sum256(got) != sha256.Sum256(blob) {
			t.Errorf("attachment: %d bytes, SHA-256 differs (want %d bytes)", len(got), len(blob))
		}
		if fl, _ := draftFlags(t, d, "INBOX", uint32(o.uid)); slices.Contains(fl, imap.FlagSeen) {
			t.Errorf("forwarding marked the original as read: %v", fl)
		}
	})

	t.Run("include_attachments false, Fwd: not doubled", func(t *testing.T) {
		var res tools.SendResult
		mailtest.Decode(t, mailtest.Call(t, ac, "smtp_forward_email", map[string]any{
			"uid": int(o.uid), "to": []any{bob}, "include_attachments": false,
		}), &res)
		m := findByMessageID(t, direct(t, s, bob), "INBOX", res.MessageID)
		if _, _, atts := parts(t, m.raw); len(atts) != 0 || res.Forwarded.Attachments != 0 {
			t.Errorf("attachments carried: %d", len(atts))
		}
		again := appendTo(t, d, "INBOX", "From: "+carol+"\r\nTo: "+alice+"\r\nSubject: Fwd: Fwd: Reise\r\nMessage-ID: <fwd-2@example.test>\r\n\r\nx\r\n")
		mailtest.Decode(t, mailtest.Call(t, ac, "smtp_forward_email", map[string]any{"uid": int(again), "to": []any{bob}}), &res)
		if res.Subject != "Fwd: Reise" {
			t.Errorf("subject %q", res.Subject)
		}
	})

	t.Run("attachments over the limit: refused, nothing sent", func(t *testing.T) {
		small := startGateway(t, s, smtpEnv(s, "MAX_ATTACHMENT_BYTES=100000")...)
		c := mailtest.MCPClient(t, small.URL, userHeaders(s, alice), "")
		before := count(t, s, bob, "INBOX")
		res := mailtest.Call(t, c, "smtp_forward_email", map[string]any{"uid": int(o.uid), "to": []any{bob}})
		if txt := mailtest.Text(res); !res.IsError || !strings.Contains(txt, "include_attachments=false") || !strings.Contains(txt, "nothing was sent") {
			t.Fatalf("over the limit: %s", txt)
		}
		var ok tools.SendResult
		mailtest.Decode(t, mailtest.Call(t, c, "smtp_forward_email", map[string]any{"uid": int(o.uid), "to": []any{bob}, "include_attachments": false}), &ok)
		findByMessageID(t, direct(t, s, bob), "INBOX", ok.MessageID)
		if after := count(t, s, bob, "INBOX"); after != before+1 {
			t.Errorf("bob's INBOX went from %d to %d, want only the text-only forward", before, after)
		}
	})

	t.Run("HTML-only original is converted", func(t *testing.T) {
		uid := appendTo(t, d, "INBOX", "From: "+carol+"\r\nTo: "+alice+"\r\nSubject: Newsletter\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><body><h1>Neu</h1><p>Ein <a href=\"https://example.test/x\">Link</a>.</p></body></html>\r\n")
		var res tools.SendResult
		mailtest.Decode(t, mailtest.Call(t, ac, "smtp_forward_email", map[string]any{"uid": int(uid), "to": []any{bob}}), &res)
		m := findByMessageID(t, direct(t, s, bob), "INBOX", res.MessageID)
		text, html, _ := parts(t, m.raw)
		if !strings.Contains(text, "Neu") || !strings.Contains(text, "https://example.test/x") || strings.Contains(text, "<p>") || html != "" {
			t.Errorf("text %q html %q", text, html)
		}
	})
}
