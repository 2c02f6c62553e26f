package outbox_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/faultproxy"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/submission"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// smtpFaults is a fault proxy in front of the stack's implicit-TLS
// submission port (Postfix), with the stack's own certificate, and an
// Outbox that sends through it.
func smtpFaults(t *testing.T, s *mailtest.Stack) (*faultproxy.Proxy, *outbox.Outbox) {
	t.Helper()
	crt, err := tls.LoadX509KeyPair(filepath.Join(s.Dir, "etc", "cert.pem"), filepath.Join(s.Dir, "etc", "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(faultproxy.Config{Target: s.SubmissionsAddr(),
		ServerTLS: &tls.Config{Certificates: []tls.Certificate{crt}}, ClientTLS: s.TLSConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	log := slog.New(slog.DiscardHandler)
	mb := mailbox.New(mailbox.Config{Host: s.Host, Port: s.IMAPSPort, Security: transport.TLS, TLS: s.TLSConfig(), Timeout: 20 * time.Second},
		pool.Config{MaxTotal: 8, MaxPerGroup: 4, IdleTimeout: time.Minute, MaxLifetime: time.Hour}, log)
	t.Cleanup(func() { mb.Close(context.Background()) })
	sub := submission.New(submission.Config{Host: p.Host(), Port: p.Port(), Security: transport.TLS, TLS: s.TLSConfig(), Timeout: 20 * time.Second}, log)
	return p, outbox.New(outbox.Config{IdempotencySecret: []byte(strings.Repeat("f", 32))}, mb, sub, log)
}

// dot is the line that ends a DATA.
func dot(line []byte) bool { return string(line) == ".\r\n" }

// dataCmd is the DATA command.
func dataCmd(line []byte) bool { return strings.EqualFold(string(line), "DATA\r\n") }

// sentFlags returns the flags of each copy in alice's Sent whose Subject
// is subject.
func sentFlags(t *testing.T, s *mailtest.Stack, subject string) [][]imap.Flag {
	t.Helper()
	c, err := imapclient.DialTLS(s.IMAPSAddr(), &imapclient.Options{TLSConfig: s.TLSConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(mailtest.Alice, mailtest.AlicePassword).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select("Sent", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	d, err := c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: subject}}}, nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(d.AllUIDs()) == 0 {
		return nil
	}
	msgs, err := c.Fetch(imap.UIDSetNum(d.AllUIDs()...), &imap.FetchOptions{Flags: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]imap.Flag
	for _, m := range msgs {
		out = append(out, m.Flags)
	}
	return out
}

func flagged(flags []imap.Flag) bool {
	return slices.Contains(flags, imap.FlagFlagged) && slices.ContainsFunc(flags, func(f imap.Flag) bool {
		return strings.EqualFold(string(f), mailbox.UnconfirmedKeyword)
	})
}

// A send whose answer is lost after Postfix took the message (the proxy
// resets the connection after the final dot): the error says it may have
// been sent and gives no advice to send again; without a key its Sent
// copy is filed all the same, flagged for checking (what the error says
// of it is true), and the message is at the recipient exactly once.
func TestUnconfirmedSendWithoutKeyFilesItsCopy(t *testing.T) {
	s := mailtest.Shared(t)
	p, o := smtpFaults(t, s)
	creds := credentials.New(mailtest.Alice, mailtest.AlicePassword)
	subject := fmt.Sprintf("lost answer %d", time.Now().UnixNano())
	fired := p.Arm(faultproxy.Fault{Match: dot, Action: faultproxy.LoseAnswer})
	_, err := o.Send(context.Background(), creds, outbox.Message{To: []string{mailtest.Bob}, Subject: subject, Text: "once"})
	select {
	case <-fired:
	default:
		t.Fatal("the fault did not fire")
	}
	text := mailerr.Message(err)
	for _, want := range []string{"may have been sent", "flagged for checking", "in Sent", "Sending it again may deliver it twice"} {
		if !strings.Contains(text, want) {
			t.Errorf("message %q does not say %q", text, want)
		}
	}
	if strings.Contains(text, "try again") || strings.Contains(text, "nothing was sent") {
		t.Errorf("message %q contradicts itself", text)
	}
	copies := sentFlags(t, s, subject)
	if len(copies) != 1 || !flagged(copies[0]) {
		t.Fatalf("Sent copies %v, want one, \\Flagged and %s", copies, mailbox.UnconfirmedKeyword)
	}
	id := text[strings.Index(text, "Message-ID <")+len("Message-ID <"):]
	id = id[:strings.Index(id, ">")]
	if n := countByID(t, s, mailtest.Bob, "INBOX", id, 300*time.Millisecond); n != 1 {
		t.Fatalf("%d delivered, want 1 (Postfix had the message)", n)
	}
}

// With a key: the lost answer leaves the copy marked and flagged; the
// retry with the key sends nothing and says what is known (the answer was
// lost), not that a send is under way; the message is delivered once. A
// connection broken before the dot (the proxy resets at DATA) is "nothing
// was sent", withdraws the copy, and the retry with the key sends it.
func TestUnconfirmedSendWithKeySaysWhatIsKnown(t *testing.T) {
	s := mailtest.Shared(t)
	p, o := smtpFaults(t, s)
	creds := credentials.New(mailtest.Alice, mailtest.AlicePassword)
	subject := fmt.Sprintf("keyed lost answer %d", time.Now().UnixNano())
	key := "k-" + subject
	id, err := outbox.IdempotentID(o, creds, key)
	if err != nil {
		t.Fatal(err)
	}
	msg := outbox.Message{To: []string{mailtest.Bob}, Subject: subject, Text: "once", IdempotencyKey: key}
	p.Arm(faultproxy.Fault{Match: dot, Action: faultproxy.LoseAnswer})
	_, err = o.Send(context.Background(), creds, msg)
	text := mailerr.Message(err)
	for _, want := range []string{"may have been sent", "flagged for checking", "a retry with the same idempotency_key will not send it again"} {
		if !strings.Contains(text, want) {
			t.Errorf("first send: %q does not say %q", text, want)
		}
	}
	for range 2 {
		_, err = o.Send(context.Background(), creds, msg)
		text = mailerr.Message(err)
		if mailerr.KindOf(err) != mailerr.Permanent || !strings.Contains(text, "the mail server's answer was lost") || !strings.Contains(text, "flagged for checking") {
			t.Errorf("retry with the key: %v %q, want what is known: the answer was lost", mailerr.KindOf(err), text)
		}
		if strings.Contains(text, "under way") {
			t.Errorf("retry with the key: %q says a send is under way, and none is", text)
		}
	}
	if copies := sentFlags(t, s, subject); len(copies) != 1 || !flagged(copies[0]) {
		t.Fatalf("Sent copies %v, want one, flagged", copies)
	}
	if n := countByID(t, s, mailtest.Bob, "INBOX", id, 300*time.Millisecond); n != 1 {
		t.Fatalf("%d delivered, want 1", n)
	}

	// Broken before the dot: nothing was sent, nothing is left, a retry
	// with the key sends it (once).
	subject2 := subject + " (data)"
	key2 := "k-" + subject2
	id2, _ := outbox.IdempotentID(o, creds, key2)
	msg2 := outbox.Message{To: []string{mailtest.Bob}, Subject: subject2, Text: "once", IdempotencyKey: key2}
	p.Arm(faultproxy.Fault{Match: dataCmd, Action: faultproxy.LoseAnswer})
	_, err = o.Send(context.Background(), creds, msg2)
	if text := mailerr.Message(err); !strings.HasSuffix(text, "nothing was sent") || strings.Contains(text, "may have been sent") {
		t.Fatalf("reset at DATA: %v %q, want nothing was sent", mailerr.KindOf(err), text)
	}
	if copies := sentFlags(t, s, subject2); len(copies) != 0 {
		t.Fatalf("a send that sent nothing left %d Sent copies", len(copies))
	}
	res, err := o.Send(context.Background(), creds, msg2)
	if err != nil || res.Duplicate {
		t.Fatalf("retry after nothing was sent: %+v %v", res, err)
	}
	if n := countByID(t, s, mailtest.Bob, "INBOX", id2, 300*time.Millisecond); n != 1 {
		t.Fatalf("%d delivered, want 1", n)
	}
}
