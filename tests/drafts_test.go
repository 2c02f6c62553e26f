package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// randomBlob is n pseudo-random bytes (seeded: the same every run).
func randomBlob(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// draftFlags returns the flags of uid in folder, and false when there is
// no such message: read with a fresh EXAMINE, so it sees every change.
func draftFlags(t *testing.T, d *imapclient.Client, folder string, uid uint32) ([]imap.Flag, bool) {
	t.Helper()
	if _, err := d.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	bufs, err := d.Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{UID: true, Flags: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bufs {
		if uint32(b.UID) == uid {
			return b.Flags, true
		}
	}
	return nil, false
}

// appendTo appends raw to folder of d with flags and returns its UID.
func appendTo(t *testing.T, d *imapclient.Client, folder, raw string, flags ...imap.Flag) uint32 {
	t.Helper()
	cmd := d.Append(folder, int64(len(raw)), &imap.AppendOptions{Flags: flags})
	cmd.Write([]byte(raw))
	cmd.Close()
	data, err := cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return uint32(data.UID)
}

// Drafts against Dovecot and Postfix: saved with \Draft in Drafts (Bcc
// kept there), threaded, replaced exactly, refused without changing
// anything, and sent: delivered without a Bcc header, the draft removed,
// the original of a reply draft flagged \Answered.
func TestDrafts(t *testing.T) {
	s := sendStack(t)
	g := startGateway(t, s, smtpEnv(s, "MAILBOX_ACCESS=organize")...)
	ac := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")
	d := direct(t, s, alice)
	blob := randomBlob(60_000, 11)
	save := func(args map[string]any) outbox.SavedDraft {
		t.Helper()
		var out outbox.SavedDraft
		mailtest.Decode(t, mailtest.Call(t, ac, "imap_save_draft", args), &out)
		return out
	}

	var saved outbox.SavedDraft
	t.Run("save: \\Draft \\Seen in Drafts, Bcc kept, attachment intact", func(t *testing.T) {
		saved = save(map[string]any{
			"to": []any{"Bob <" + bob + ">"}, "bcc": []any{carol}, "subject": "Entwurf ✓ Bericht",
			"text": "Hallo Bob,\nanbei.\n", "html": "<p>Hallo <b>Bob</b></p>",
			"attachments": []any{map[string]any{"filename": "daten.bin", "content_base64": base64.StdEncoding.EncodeToString(blob)}},
		})
		if saved.Folder != "Drafts" || saved.UID == 0 || saved.MessageID == "" || saved.Attachments != 1 {
			t.Fatalf("result: %+v", saved)
		}
		m := findByMessageID(t, d, "Drafts", saved.MessageID)
		if uint32(m.uid) != saved.UID || !m.has(imap.FlagDraft) || !m.has(imap.FlagSeen) {
			t.Fatalf("stored uid %d flags %v, result uid %d", m.uid, m.flags, saved.UID)
		}
		if bcc := addrs(t, m.hdr, "Bcc"); !slices.Equal(bcc, []string{carol}) {
			t.Errorf("draft Bcc %v", bcc)
		}
		text, html, atts := parts(t, m.raw)
		if !strings.Contains(text, "anbei") || !strings.Contains(html, "<b>Bob</b>") || sha256.Sum256(atts["daten.bin"]) != sha256.Sum256(blob) {
			t.Errorf("draft body %q %q, attachment %d bytes", text, html, len(atts["daten.bin"]))
		}
	})

	t.Run("threaded draft: In-Reply-To, References, Re: subject, To the sender", func(t *testing.T) {
		n := count(t, s, alice, "INBOX")
		orig := "Message-ID: <draft-orig-1@example.test>\r\nFrom: Carol <" + carol + ">\r\nTo: " + alice + "\r\n" +
			"Subject: Termin morgen\r\nReferences: <root-9@example.test>\r\nIn-Reply-To: <root-9@example.test>\r\nDate: Mon, 02 Nov 2026 10:00:00 +0100\r\n\r\nPasst 10 Uhr?\r\n"
		if err := s.Deliver(carol, []string{alice}, []byte(orig)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.WaitMessages(alice, "INBOX", n+1, 15*time.Second); err != nil {
			t.Fatal(err)
		}
		o := findByMessageID(t, d, "INBOX", "draft-orig-1@example.test")
		r := save(map[string]any{"in_reply_to_uid": int(o.uid), "text": "Ja, passt."})
		if r.Subject != "Re: Termin morgen" || r.InReplyTo != "draft-orig-1@example.test" || !slices.Equal(r.To, []string{"Carol <" + carol + ">"}) {
			t.Fatalf("result %+v", r)
		}
		m := findByMessageID(t, d, "Drafts", r.MessageID)
		irt, _ := m.hdr.MsgIDList("In-Reply-To")
		refs, _ := m.hdr.MsgIDList("References")
		subj, _ := m.hdr.Subject()
		if !slices.Equal(irt, []string{"draft-orig-1@example.test"}) || !slices.Equal(refs, []string{"root-9@example.test", "draft-orig-1@example.test"}) || subj != "Re: Termin morgen" {
			t.Errorf("In-Reply-To %v References %v Subject %q", irt, refs, subj)
		}
		if fl, _ := draftFlags(t, d, "INBOX", uint32(o.uid)); slices.Contains(fl, imap.FlagSeen) || slices.Contains(fl, imap.FlagAnswered) {
			t.Errorf("saving a reply draft changed the original: %v", fl)
		}

		// Sending it answers the original.
		var res tools.SendResult
		mailtest.Decode(t, mailtest.Call(t, ac, "smtp_send_draft", map[string]any{"uid": int(r.UID)}), &res)
		if res.Original == nil || !res.Original.Answered || res.Original.UID != uint32(o.uid) {
			t.Fatalf("original: %+v", res.Original)
		}
		if fl, _ := draftFlags(t, d, "INBOX", uint32(o.uid)); !slices.Contains(fl, imap.FlagAnswered) {
			t.Errorf("original flags after sending the reply draft: %v", fl)
		}
		got := findByMessageID(t, direct(t, s, carol), "INBOX", res.MessageID)
		if irt, _ := got.hdr.MsgIDList("In-Reply-To"); !slices.Equal(irt, []string{"draft-orig-1@example.test"}) {
			t.Errorf("delivered In-Reply-To %v", irt)
		}
	})

	t.Run("replace_uid removes exactly the old draft", func(t *testing.T) {
		other := save(map[string]any{"subject": "another draft", "text": "stays"})
		first := save(map[string]any{"to": []any{bob}, "subject": "v1", "text": "first"})
		before := count(t, s, alice, "Drafts")
		second := save(map[string]any{"to": []any{bob}, "subject": "v2", "text": "second", "replace_uid": int(first.UID)})
		if second.Replaced != first.UID || second.UID == first.UID {
			t.Fatalf("result %+v", second)
		}
		if _, ok := draftFlags(t, d, "Drafts", first.UID); ok {
			t.Error("the replaced draft is still there")
		}
		if fl, ok := draftFlags(t, d, "Drafts", second.UID); !ok || !slices.Contains(fl, imap.FlagDraft) {
			t.Errorf("new draft: %v %v", ok, fl)
		}
		if _, ok := draftFlags(t, d, "Drafts", other.UID); !ok {
			t.Error("another draft was removed")
		}
		if after := count(t, s, alice, "Drafts"); after != before {
			t.Errorf("Drafts went from %d to %d messages, want the same", before, after)
		}
	})

	t.Run("replace_uid of a non-draft or missing message: refused, nothing changed", func(t *testing.T) {
		plain := appendTo(t, d, "Drafts", "From: "+alice+"\r\nSubject: not a draft\r\n\r\nx\r\n", imap.FlagSeen)
		before := count(t, s, alice, "Drafts")
		for _, c := range []struct {
			uid  uint32
			says string
		}{{plain, "not a draft"}, {999999, "no message with UID 999999"}} {
			res := mailtest.Call(t, ac, "imap_save_draft", map[string]any{"subject": "replacement", "text": "x", "replace_uid": int(c.uid)})
			if txt := mailtest.Text(res); !res.IsError || !strings.Contains(txt, c.says) || !strings.Contains(txt, "nothing was saved") {
				t.Errorf("replace_uid %d: %s", c.uid, txt)
			}
		}
		if after := count(t, s, alice, "Drafts"); after != before {
			t.Errorf("Drafts went from %d to %d messages", before, after)
		}
		if _, ok := draftFlags(t, d, "Drafts", plain); !ok {
			t.Error("the non-draft was removed")
		}
	})

	t.Run("send: delivered without Bcc header, attachment intact, draft removed, Sent copy", func(t *testing.T) {
		if saved.UID == 0 {
			t.Skip("the save subtest failed")
		}
		var res tools.SendResult
		mailtest.Decode(t, mailtest.Call(t, ac, "smtp_send_draft", map[string]any{"uid": int(saved.UID)}), &res)
		if !slices.Equal(res.Accepted, []string{bob, carol}) || res.Subject != "Entwurf ✓ Bericht" || res.Draft == nil || !res.Draft.Removed || !res.SentCopy.Saved {
			t.Fatalf("result %+v", res)
		}
		if res.MessageID == saved.MessageID {
			t.Error("the message sent reuses the draft's Message-ID")
		}
		for _, user := range []string{bob, carol} {
			m := findByMessageID(t, direct(t, s, user), "INBOX", res.MessageID)
			if m.hdr.Has("Bcc") || bytes.Contains(bytes.ToLower(m.raw), []byte("\nbcc:")) || user == bob && bytes.Contains(m.raw, []byte(carol)) {
				t.Errorf("%s's copy shows the Bcc recipient", user)
			}
			_, _, atts := parts(t, m.raw)
			if sha256.Sum256(atts["daten.bin"]) != sha256.Sum256(blob) {
				t.Errorf("%s: attachment differs (%d bytes)", user, len(atts["daten.bin"]))
			}
		}
		if _, ok := draftFlags(t, d, "Drafts", saved.UID); ok {
			t.Error("the draft is still in Drafts")
		}
		sc := findByMessageID(t, d, "Sent", res.MessageID)
		if bcc := addrs(t, sc.hdr, "Bcc"); !slices.Equal(bcc, []string{carol}) {
			t.Errorf("Sent copy Bcc %v", bcc)
		}
	})

	t.Run("send of a missing or non-draft UID: nothing sent", func(t *testing.T) {
		plain := appendTo(t, d, "Drafts", "From: "+alice+"\r\nTo: "+bob+"\r\nSubject: no draft flag\r\n\r\nx\r\n", imap.FlagSeen)
		before := count(t, s, bob, "INBOX")
		for _, uid := range []uint32{plain, 999999} {
			res := mailtest.Call(t, ac, "smtp_send_draft", map[string]any{"uid": int(uid)})
			if txt := mailtest.Text(res); !res.IsError || !strings.Contains(txt, "nothing was sent") {
				t.Errorf("uid %d: %s", uid, txt)
			}
		}
		time.Sleep(500 * time.Millisecond)
		if after := count(t, s, bob, "INBOX"); after != before {
			t.Errorf("bob's INBOX went from %d to %d", before, after)
		}
		if _, ok := draftFlags(t, d, "Drafts", plain); !ok {
			t.Error("the non-draft was removed")
		}
	})

	t.Run("without SMTP_HOST drafts are saved, not sent", func(t *testing.T) {
		g2 := startGateway(t, s, "MAILBOX_ACCESS=organize")
		names := toolNames(t, g2.URL, userHeaders(s, alice))
		if _, ok := names["imap_save_draft"]; !ok {
			t.Fatal("imap_save_draft not listed without SMTP_HOST")
		}
		if _, ok := names["smtp_send_draft"]; ok {
			t.Error("smtp_send_draft listed without SMTP_HOST")
		}
		c := mailtest.MCPClient(t, g2.URL, userHeaders(s, alice), "")
		var r outbox.SavedDraft
		mailtest.Decode(t, mailtest.Call(t, c, "imap_save_draft", map[string]any{"to": []any{bob}, "subject": "offline", "text": "x"}), &r)
		findByMessageID(t, d, "Drafts", r.MessageID)
	})
}
