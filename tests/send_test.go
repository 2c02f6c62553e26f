package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message/mail"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

const (
	alice = mailtest.Alice
	carol = "carol@example.test"
)

// sendStack is a private stack (sending changes mailboxes other tests count)
// with a third user for blind copies.
func sendStack(t *testing.T) *mailtest.Stack {
	return mailtest.StartT(t, mailtest.Options{Users: map[string]string{carol: "carolpw"}})
}

// smtpEnv points the gateway at the stack's submission port: STARTTLS
// (SMTP_TLS=true on a port other than 465) with the stack's CA.
func smtpEnv(s *mailtest.Stack, extra ...string) []string {
	return append([]string{"SMTP_HOST=127.0.0.1", "SMTP_PORT=" + strconv.Itoa(s.SubmissionPort), "SMTP_TLS=true"}, extra...)
}

// stored is one message as Dovecot holds it, read with a bare client.
type stored struct {
	uid   imap.UID
	flags []imap.Flag
	raw   []byte
	hdr   mail.Header
}

func (m stored) has(f imap.Flag) bool { return slices.Contains(m.flags, f) }

// findByMessageID waits until folder of c holds the message with id and
// returns it, read with BODY.PEEK[] (so reading it changes nothing).
func findByMessageID(t *testing.T, c *imapclient.Client, folder, id string) stored {
	t.Helper()
	if _, err := c.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatalf("EXAMINE %s: %v", folder, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		d, err := c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: id}}}, nil).Wait()
		if err != nil {
			t.Fatalf("SEARCH: %v", err)
		}
		if uids := d.AllUIDs(); len(uids) > 0 {
			if len(uids) != 1 {
				t.Fatalf("%d messages with Message-ID %s in %s", len(uids), id, folder)
			}
			return fetchStored(t, c, uids[0])
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message with Message-ID %s in %s", id, folder)
		}
		time.Sleep(50 * time.Millisecond)
		c.Noop().Wait()
	}
}

func fetchStored(t *testing.T, c *imapclient.Client, uid imap.UID) stored {
	t.Helper()
	sec := &imap.FetchItemBodySection{Peek: true}
	bufs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, Flags: true, BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
	if err != nil || len(bufs) != 1 {
		t.Fatalf("FETCH %d: %v (%d)", uid, err, len(bufs))
	}
	m := stored{uid: uid, flags: bufs[0].Flags, raw: bufs[0].FindBodySection(sec)}
	mr, err := mail.CreateReader(bytes.NewReader(m.raw))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	m.hdr = mr.Header
	return m
}

// parts returns the decoded text/plain, text/html and attachment bodies.
func parts(t *testing.T, raw []byte) (text, html string, atts map[string][]byte) {
	t.Helper()
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	atts = map[string][]byte{}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p.Body)
		switch h := p.Header.(type) {
		case *mail.InlineHeader:
			ct, _, _ := h.ContentType()
			if ct == "text/html" {
				html = string(b)
			} else {
				text = string(b)
			}
		case *mail.AttachmentHeader:
			name, _ := h.Filename()
			atts[name] = b
		}
	}
	return text, html, atts
}

func addrs(t *testing.T, h mail.Header, key string) []string {
	t.Helper()
	list, err := h.AddressList(key)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	var out []string
	for _, a := range list {
		out = append(out, strings.ToLower(a.Address))
	}
	return out
}

func count(t *testing.T, s *mailtest.Stack, user, folder string) int {
	t.Helper()
	n, err := s.MessageCount(user, folder)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func sendCall(t *testing.T, c interface {
	CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
}, name string, args map[string]any) tools.SendResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out tools.SendResult
	mailtest.Decode(t, res, &out)
	return out
}

func toolNames(t *testing.T, url string, headers map[string]string) map[string]mcp.Tool {
	t.Helper()
	c := mailtest.MCPClient(t, url, headers, "")
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]mcp.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	return out
}

func TestSendThroughPostfix(t *testing.T) {
	s := sendStack(t)

	t.Run("smtp tools only with SMTP_HOST", func(t *testing.T) {
		without := toolNames(t, startGateway(t, s).URL, nil)
		with := toolNames(t, startGateway(t, s, smtpEnv(s)...).URL, nil)
		for _, name := range []string{"smtp_send_email", "smtp_reply_email"} {
			if _, ok := without[name]; ok {
				t.Errorf("%s listed without SMTP_HOST", name)
			}
			tool, ok := with[name]
			if !ok {
				t.Fatalf("%s not listed with SMTP_HOST", name)
			}
			a := tool.Annotations
			if *a.ReadOnlyHint || *a.DestructiveHint || *a.IdempotentHint || !*a.OpenWorldHint || tool.OutputSchema.Type != "object" {
				t.Errorf("%s: annotations %+v, output schema %q", name, a, tool.OutputSchema.Type)
			}
			if !strings.Contains(tool.Description, "768 KiB") || !strings.Contains(tool.Description, "MAX_REQUEST_BYTES") {
				t.Errorf("%s does not state the attachment cap: %s", name, tool.Description)
			}
		}
	})

	g := startGateway(t, s, smtpEnv(s)...)
	ac := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")

	t.Run("send with non-ASCII subject, HTML, binary attachment and bcc", func(t *testing.T) {
		blob := make([]byte, 200_000)
		r := rand.New(rand.NewPCG(4, 2))
		for i := range blob {
			blob[i] = byte(r.Uint32())
		}
		blob = append(blob, "\r\n.\r\n"...) // an SMTP end-of-data lookalike
		const subject = "Quartalsbericht Grüße — 日本語 ✓ für Bob"
		res := sendCall(t, ac, "smtp_send_email", map[string]any{
			"to": []any{"Bob Builder <" + bob + ">"}, "bcc": []any{carol},
			"subject": subject, "text": "Hallo Bob,\nanbei der Bericht.\n", "html": "<p>Hallo <b>Bob</b>, anbei der Bericht.</p>",
			"attachments": []any{map[string]any{"filename": "bericht-ü.bin", "content_type": "application/octet-stream", "content_base64": base64.StdEncoding.EncodeToString(blob)}},
		})
		if !slices.Equal(res.Accepted, []string{bob, carol}) || res.MessageID == "" || len(res.Rejected) != 0 {
			t.Fatalf("result: %+v", res)
		}
		if !res.SentCopy.Saved || res.SentCopy.Folder != "Sent" || res.SentCopy.UID == 0 {
			t.Fatalf("sent copy: %+v", res.SentCopy)
		}

		for _, user := range []string{bob, carol} {
			m := findByMessageID(t, direct(t, s, user), "INBOX", res.MessageID)
			got, err := m.hdr.Subject()
			if err != nil || got != subject {
				t.Errorf("%s: subject %q (%v), want %q", user, got, err, subject)
			}
			if m.hdr.Has("Bcc") || bytes.Contains(m.raw, []byte(carol)) && user == bob || bytes.Contains(bytes.ToLower(m.raw), []byte("\nbcc:")) {
				t.Errorf("%s's copy shows the Bcc recipient:\n%s", user, m.raw[:min(len(m.raw), 2000)])
			}
			if to := addrs(t, m.hdr, "To"); !slices.Equal(to, []string{bob}) {
				t.Errorf("%s: To %v", user, to)
			}
			text, html, atts := parts(t, m.raw)
			if !strings.Contains(text, "anbei der Bericht") || !strings.Contains(html, "<b>Bob</b>") {
				t.Errorf("%s: text %q html %q", user, text, html)
			}
			if !bytes.Equal(atts["bericht-ü.bin"], blob) {
				t.Errorf("%s: attachment differs: %d bytes, want %d (names %v)", user, len(atts["bericht-ü.bin"]), len(blob), len(atts))
			}
			if m.has(imap.FlagSeen) {
				t.Errorf("%s: delivered mail is already \\Seen", user)
			}
		}
		// The sender's copy: same message, \Seen, and (as mail clients do)
		// the Bcc header so alice can see who got a blind copy.
		sc := findByMessageID(t, direct(t, s, alice), "Sent", res.MessageID)
		if sc.uid != imap.UID(res.SentCopy.UID) || !sc.has(imap.FlagSeen) {
			t.Errorf("Sent copy uid %d flags %v, result says uid %d", sc.uid, sc.flags, res.SentCopy.UID)
		}
		if bcc := addrs(t, sc.hdr, "Bcc"); !slices.Equal(bcc, []string{carol}) {
			t.Errorf("Sent copy Bcc %v", bcc)
		}
		if _, _, atts := parts(t, sc.raw); !bytes.Equal(atts["bericht-ü.bin"], blob) {
			t.Error("Sent copy attachment differs")
		}
	})

	t.Run("header injection refused, nothing sent", func(t *testing.T) {
		before := count(t, s, bob, "INBOX")
		for _, args := range []map[string]any{
			{"to": []any{bob}, "subject": "Hi\r\nBcc: evil@example.test", "text": "x"},
			{"to": []any{bob}, "subject": "Hi", "text": "x", "from": "Alice\r\nBcc: evil@example.test <" + alice + ">"},
			{"to": []any{bob + "\r\nBcc: evil@example.test"}, "subject": "Hi", "text": "x"},
			{"to": []any{bob}, "subject": "Hi", "text": "x", "attachments": []any{map[string]any{"filename": "a\r\nBcc: evil@example.test", "content_base64": "YQ=="}}},
			{"to": []any{bob}, "subject": "Hi", "text": "x", "attachments": []any{map[string]any{"filename": "a.bin", "content_base64": "%%%"}}},
			{"to": []any{"bob at example"}, "subject": "Hi", "text": "x"},
		} {
			res := mailtest.Call(t, ac, "smtp_send_email", args)
			if !res.IsError {
				t.Fatalf("accepted: %v -> %s", args, mailtest.Text(res))
			}
			if txt := mailtest.Text(res); !strings.Contains(txt, "line breaks") && !strings.Contains(txt, "base64") && !strings.Contains(txt, "not a valid email address") {
				t.Errorf("unclear error: %s", txt)
			}
		}
		// A marker sent afterwards arrives alone: nothing of the above was
		// queued ahead of it.
		marker := sendCall(t, ac, "smtp_send_email", map[string]any{"to": []any{bob}, "subject": "marker", "text": "marker"})
		findByMessageID(t, direct(t, s, bob), "INBOX", marker.MessageID)
		time.Sleep(300 * time.Millisecond)
		if after := count(t, s, bob, "INBOX"); after != before+1 {
			t.Fatalf("bob's INBOX went from %d to %d, want %d (only the marker)", before, after, before+1)
		}
		if b, _ := s.Doveadm("search", "-u", bob, "mailbox", "INBOX", "header", "Bcc", "evil"); strings.TrimSpace(b) != "" {
			t.Fatalf("an injected message arrived: %s", b)
		}
	})

	t.Run("reply and reply-all", func(t *testing.T) {
		orig := "Message-ID: <orig-42@example.test>\r\n" +
			"From: Carol <" + carol + ">\r\n" +
			"To: Alice <" + alice + ">, " + bob + "\r\n" +
			"Cc: dave@elsewhere.test, ALICE@example.test\r\n" +
			"Subject: RE: Aw: Re: Quartalszahlen\r\n" +
			"Date: Mon, 02 Nov 2026 10:00:00 +0100\r\n" +
			"In-Reply-To: <mid-2@example.test>\r\n" +
			"References: <root-1@example.test>\r\n <mid-2@example.test>\r\n" +
			"\r\nHow do the numbers look?\r\n"
		n := count(t, s, alice, "INBOX")
		if err := s.Deliver(carol, []string{alice}, []byte(orig)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.WaitMessages(alice, "INBOX", n+1, 15*time.Second); err != nil {
			t.Fatal(err)
		}
		d := direct(t, s, alice)
		o := findByMessageID(t, d, "INBOX", "orig-42@example.test")
		if o.has(imap.FlagSeen) || o.has(imap.FlagAnswered) {
			t.Fatalf("seeded message flags %v", o.flags)
		}

		check := func(res tools.SendResult, user string, wantTo, wantCc []string) {
			t.Helper()
			if res.Subject != "Re: Quartalszahlen" || res.InReplyTo != "orig-42@example.test" || res.Original == nil || !res.Original.Answered || !res.SentCopy.Saved {
				t.Fatalf("result: %+v", res)
			}
			m := findByMessageID(t, direct(t, s, user), "INBOX", res.MessageID)
			subj, _ := m.hdr.Subject()
			irt, _ := m.hdr.MsgIDList("In-Reply-To")
			refs, _ := m.hdr.MsgIDList("References")
			if subj != "Re: Quartalszahlen" || !slices.Equal(irt, []string{"orig-42@example.test"}) ||
				!slices.Equal(refs, []string{"root-1@example.test", "mid-2@example.test", "orig-42@example.test"}) {
				t.Errorf("%s got subject %q In-Reply-To %v References %v", user, subj, irt, refs)
			}
			if to := addrs(t, m.hdr, "To"); !slices.Equal(to, wantTo) {
				t.Errorf("To %v, want %v", to, wantTo)
			}
			var cc []string
			if m.hdr.Has("Cc") {
				cc = addrs(t, m.hdr, "Cc")
			}
			if !slices.Equal(cc, wantCc) {
				t.Errorf("Cc %v, want %v", cc, wantCc)
			}
		}

		res := sendCall(t, ac, "smtp_reply_email", map[string]any{"uid": int(o.uid), "text": "Looks good."})
		if !slices.Equal(res.Accepted, []string{carol}) {
			t.Errorf("reply accepted %v", res.Accepted)
		}
		check(res, carol, []string{carol}, nil)

		res = sendCall(t, ac, "smtp_reply_email", map[string]any{"uid": int(o.uid), "text": "Thanks all.", "reply_all": true, "folder": "INBOX"})
		if !slices.Equal(res.Accepted, []string{carol, bob, "dave@elsewhere.test"}) {
			t.Errorf("reply-all accepted %v", res.Accepted)
		}
		check(res, bob, []string{carol}, []string{bob, "dave@elsewhere.test"})

		// The original: \Answered, and still unread.
		o = findByMessageID(t, d, "INBOX", "orig-42@example.test")
		if !o.has(imap.FlagAnswered) || o.has(imap.FlagSeen) {
			t.Fatalf("original flags after the replies: %v", o.flags)
		}
		// Both replies were filed in alice's Sent.
		findByMessageID(t, d, "Sent", res.MessageID)

		// A reply to a message that does not exist sends nothing.
		r := mailtest.Call(t, ac, "smtp_reply_email", map[string]any{"uid": 999999, "text": "x"})
		if !r.IsError || !strings.Contains(mailtest.Text(r), "no message with UID 999999") {
			t.Fatalf("missing original: %s", mailtest.Text(r))
		}
	})

	t.Run("SMTP errors by class", func(t *testing.T) {
		// 5xx for the only recipient: permanent, names it, nothing sent.
		r := mailtest.Call(t, ac, "smtp_send_email", map[string]any{"to": []any{"nobody@example.test"}, "subject": "x", "text": "x"})
		if txt := mailtest.Text(r); !r.IsError || !strings.Contains(txt, "nobody@example.test") || !strings.Contains(txt, "550") || !strings.Contains(txt, "nothing was sent") {
			t.Fatalf("unknown recipient: %s", txt)
		}
		// One good and one refused recipient: sent to the good one, the
		// refused one reported.
		res := sendCall(t, ac, "smtp_send_email", map[string]any{"to": []any{bob, "nobody@example.test"}, "subject": "partial", "text": "x"})
		if !slices.Equal(res.Accepted, []string{bob}) || len(res.Rejected) != 1 || res.Rejected[0].Address != "nobody@example.test" || res.Rejected[0].Code != 550 {
			t.Fatalf("partial: %+v", res)
		}
		findByMessageID(t, direct(t, s, bob), "INBOX", res.MessageID)
		// Wrong password: authentication failed.
		bad := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": alice, "x-imap-pass": "wrong"}, "")
		r = mailtest.Call(t, bad, "smtp_send_email", map[string]any{"to": []any{bob}, "subject": "x", "text": "x"})
		if !r.IsError || !strings.Contains(mailtest.Text(r), "authentication failed") {
			t.Fatalf("wrong password: %s", mailtest.Text(r))
		}
	})

	t.Run("implicit TLS submission port", func(t *testing.T) {
		g2 := startGateway(t, s, "SMTP_HOST=127.0.0.1", "SMTP_PORT="+strconv.Itoa(s.SubmissionsPort), "SMTP_SECURITY=tls")
		c := mailtest.MCPClient(t, g2.URL, userHeaders(s, alice), "")
		res := sendCall(t, c, "smtp_send_email", map[string]any{"to": []any{bob}, "subject": "over implicit TLS", "text": "x"})
		findByMessageID(t, direct(t, s, bob), "INBOX", res.MessageID)
	})

	t.Run("a failed Sent copy does not fail the send", func(t *testing.T) {
		g2 := startGateway(t, s, smtpEnv(s, "SENT_FOLDER=Does Not Exist")...)
		c := mailtest.MCPClient(t, g2.URL, userHeaders(s, alice), "")
		sent := count(t, s, alice, "Sent")
		res := sendCall(t, c, "smtp_send_email", map[string]any{"to": []any{bob}, "subject": "no copy", "text": "x"})
		if res.SentCopy.Saved || !strings.Contains(res.SentCopy.Reason, "Does Not Exist") || !slices.Equal(res.Accepted, []string{bob}) {
			t.Fatalf("result: %+v", res)
		}
		findByMessageID(t, direct(t, s, bob), "INBOX", res.MessageID)
		if got := count(t, s, alice, "Sent"); got != sent {
			t.Errorf("Sent went from %d to %d", sent, got)
		}
	})
}
