package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/submission"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

func TestMain(m *testing.M) { mailtest.Main(m) }

// newOutbox is an Outbox with its own IMAP pool, as one gateway process
// has; send false leaves it without SMTP.
func newOutbox(t *testing.T, s *mailtest.Stack, secret []byte, send bool) *outbox.Outbox {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	mb := mailbox.New(mailbox.Config{Host: s.Host, Port: s.IMAPSPort, Security: transport.TLS, TLS: s.TLSConfig(), Timeout: 20 * time.Second},
		pool.Config{MaxTotal: 8, MaxPerGroup: 4, IdleTimeout: time.Minute, MaxLifetime: time.Hour}, log)
	t.Cleanup(func() { mb.Close(context.Background()) })
	var sub *submission.Client
	if send {
		sub = submission.New(submission.Config{Host: s.Host, Port: s.SubmissionPort, Security: transport.StartTLS, TLS: s.TLSConfig(), Timeout: 20 * time.Second}, log)
	}
	return outbox.New(outbox.Config{IdempotencySecret: secret}, mb, sub, log)
}

// countByID counts the messages with Message-ID id in folder: at once
// when settle is 0, else once one is there (waiting up to 15 s for mail on
// its way) and settle later, so that a second delivery is counted too.
func countByID(t *testing.T, s *mailtest.Stack, user, folder, id string, settle time.Duration) int {
	t.Helper()
	c, err := imapclient.DialTLS(s.IMAPSAddr(), &imapclient.Options{TLSConfig: s.TLSConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(user, s.Users[user]).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	search := func() int {
		c.Noop().Wait()
		d, err := c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: id}}}, nil).Wait()
		if err != nil {
			t.Fatal(err)
		}
		return len(d.AllUIDs())
	}
	if settle == 0 {
		return search()
	}
	for deadline := time.Now().Add(15 * time.Second); search() == 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(settle)
	return search()
}

// Two outboxes with separate pools (as two gateway processes) send with
// the same key at the same moment: exactly one message is delivered and
// one Sent copy kept, every round; the loser reports the winner's
// Message-ID, as a duplicate or as under way.
func TestSendOnceAcrossOutboxes(t *testing.T) {
	s := mailtest.Shared(t)
	secret := []byte(strings.Repeat("k", 32))
	a, b := newOutbox(t, s, secret, true), newOutbox(t, s, secret, true)
	creds := credentials.New(mailtest.Alice, mailtest.AlicePassword)
	for round := range 5 {
		key := fmt.Sprintf("race-%d-%d", time.Now().UnixNano(), round)
		var wg sync.WaitGroup
		results := make([]*outbox.Result, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for i, o := range []*outbox.Outbox{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = o.Send(context.Background(), creds, outbox.Message{To: []string{mailtest.Bob}, Subject: "race " + key, Text: "once", IdempotencyKey: key})
			}()
		}
		close(start)
		wg.Wait()
		var id string
		sent := 0
		for i := range 2 {
			switch {
			case errs[i] != nil && mailerr.KindOf(errs[i]) == mailerr.Temporary && strings.Contains(errs[i].Error(), "under way"):
			case errs[i] != nil:
				t.Fatalf("round %d: send %d: %v", round, i, errs[i])
			case !results[i].Duplicate:
				sent++
				id = results[i].MessageID
			}
		}
		if sent != 1 {
			t.Fatalf("round %d: %d sends reported as sent: %+v %+v / %v %v", round, sent, results[0], results[1], errs[0], errs[1])
		}
		for i := range 2 {
			if results[i] != nil && results[i].MessageID != id {
				t.Errorf("round %d: Message-IDs differ: %s, %s", round, results[i].MessageID, id)
			}
		}
		if n := countByID(t, s, mailtest.Bob, "INBOX", id, 500*time.Millisecond); n != 1 {
			t.Fatalf("round %d: %d messages delivered, want 1", round, n)
		}
		if n := countByID(t, s, mailtest.Alice, "Sent", id, 0); n != 1 {
			t.Fatalf("round %d: %d Sent copies, want 1", round, n)
		}
		// A retry afterwards is a duplicate, from either outbox.
		res, err := b.Send(context.Background(), creds, outbox.Message{To: []string{mailtest.Bob}, Subject: "changed", Text: "x", IdempotencyKey: key})
		if err != nil || !res.Duplicate || res.MessageID != id || res.Subject != "race "+key {
			t.Fatalf("round %d: retry %+v %v", round, res, err)
		}
	}
}

// Drafts need no SMTP server: an Outbox without one saves them.
func TestSaveDraftWithoutSMTP(t *testing.T) {
	s := mailtest.Shared(t)
	o := newOutbox(t, s, nil, false)
	creds := credentials.New(mailtest.Alice, mailtest.AlicePassword)
	if o.CanSend() {
		t.Fatal("an outbox without SMTP says it can send")
	}
	d, err := o.SaveDraft(context.Background(), creds, outbox.Draft{To: []string{mailtest.Bob}, Subject: "no smtp"})
	if err != nil || d.Folder != "Drafts" || d.UID == 0 {
		t.Fatalf("%+v %v", d, err)
	}
	if n := countByID(t, s, mailtest.Alice, "Drafts", d.MessageID, 0); n != 1 {
		t.Fatalf("%d drafts with the Message-ID", n)
	}
	if _, err := o.SendDraft(context.Background(), creds, outbox.DraftSend{UID: d.UID}); mailerr.KindOf(err) != mailerr.Forbidden {
		t.Fatalf("send without SMTP: %v", err)
	}
}

// appendSending files a copy with Message-ID id in alice's Sent, marked as
// being sent since filed.
func appendSending(t *testing.T, s *mailtest.Stack, id string, filed time.Time) {
	t.Helper()
	c, err := imapclient.DialTLS(s.IMAPSAddr(), &imapclient.Options{TLSConfig: s.TLSConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(mailtest.Alice, mailtest.AlicePassword).Wait(); err != nil {
		t.Fatal(err)
	}
	raw := "From: " + mailtest.Alice + "\r\nTo: " + mailtest.Bob + "\r\nSubject: earlier\r\nMessage-ID: <" + id + ">\r\n\r\nx\r\n"
	cmd := c.Append("Sent", int64(len(raw)), &imap.AppendOptions{Flags: []imap.Flag{imap.FlagSeen, mailbox.SendingKeyword}, Time: filed})
	cmd.Write([]byte(raw))
	cmd.Close()
	if _, err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// A copy still marked as being sent stops a retry: as under way while it
// is young, as interrupted (may or may not have been delivered) once it is
// older than a send can take; neither retry sends or leaves a copy. A send
// the server refused withdraws its copy, so the same key can send later.
func TestSendOnceUnfinished(t *testing.T) {
	s := mailtest.Shared(t)
	o := newOutbox(t, s, []byte(strings.Repeat("u", 32)), true)
	creds := credentials.New(mailtest.Alice, mailtest.AlicePassword)
	msg := func(key string, to ...string) outbox.Message {
		return outbox.Message{To: to, Subject: "retry", Text: "x", IdempotencyKey: key}
	}
	for _, c := range []struct {
		age  time.Duration
		kind mailerr.Kind
		says string
	}{{0, mailerr.Temporary, "under way"}, {10 * time.Minute, mailerr.Permanent, "may or may not have been delivered"}} {
		key := fmt.Sprintf("unfinished-%d-%s", time.Now().UnixNano(), c.age)
		id, err := outbox.IdempotentID(o, creds, key)
		if err != nil {
			t.Fatal(err)
		}
		appendSending(t, s, id, time.Now().Add(-c.age).Truncate(time.Second))
		res, err := o.Send(context.Background(), creds, msg(key, mailtest.Bob))
		if res != nil || mailerr.KindOf(err) != c.kind || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), id) {
			t.Fatalf("age %s: %+v %v", c.age, res, err)
		}
		if n := countByID(t, s, mailtest.Alice, "Sent", id, 0); n != 1 {
			t.Errorf("age %s: %d Sent copies, want only the earlier one", c.age, n)
		}
	}

	key := fmt.Sprintf("refused-%d", time.Now().UnixNano())
	id, _ := outbox.IdempotentID(o, creds, key)
	if _, err := o.Send(context.Background(), creds, msg(key, "nobody@example.test")); err == nil || !strings.Contains(err.Error(), "nothing was sent") {
		t.Fatalf("refused recipient: %v", err)
	}
	if n := countByID(t, s, mailtest.Alice, "Sent", id, 0); n != 0 {
		t.Fatalf("%d Sent copies left by a refused send", n)
	}
	res, err := o.Send(context.Background(), creds, msg(key, mailtest.Bob))
	if err != nil || res.Duplicate || res.MessageID != id {
		t.Fatalf("retry after the refusal: %+v %v", res, err)
	}
	if n := countByID(t, s, mailtest.Bob, "INBOX", id, 300*time.Millisecond); n != 1 {
		t.Fatalf("%d delivered", n)
	}
}
