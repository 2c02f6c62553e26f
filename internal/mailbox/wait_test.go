package mailbox

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// memServer runs an in-process IMAP server (IMAP4rev1 and IDLE, no
// ESEARCH) with one user, and returns a Client for it and a function that
// appends a message as another session would.
func memServer(t *testing.T) (*Client, credentials.Credentials, func(raw string)) {
	t.Helper()
	mem := imapmemserver.New()
	u := imapmemserver.NewUser("u@example.test", "pw")
	if err := u.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(u)
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIdle: {}},
		InsecureAuth: true,
		Logger:       nopLogger{},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().(*net.TCPAddr)
	c := New(Config{Host: "127.0.0.1", Port: addr.Port, Security: transport.Plain, AllowPlaintextAuth: true, Timeout: 5 * time.Second},
		pool.Config{}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { c.Close(context.Background()) })
	d, err := imapclient.DialInsecure(ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Login("u@example.test", "pw").Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	add := func(raw string) {
		raw = strings.ReplaceAll(raw, "\n", "\r\n")
		cmd := d.Append("INBOX", int64(len(raw)), nil)
		cmd.Write([]byte(raw))
		cmd.Close()
		if _, err := cmd.Wait(); err != nil {
			t.Error(err)
		}
	}
	return c, credentials.New("u@example.test", "pw"), add
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
func (nopLogger) Println(...any)        {}

const memMsg = "From: Peer <peer@example.org>\nSubject: %s\nX-Mailbox-Tags: %s\n\nhello\n"

// A wait wakes on mail from another session, in IDLE and polling, returns
// only what matches, oldest first, and moves its cursor past what it
// looked at.
func TestWaitWakes(t *testing.T) {
	for _, poll := range []time.Duration{0, 50 * time.Millisecond} {
		c, creds, add := memServer(t)
		c.SetWaitPoll(poll)
		add(strings.NewReplacer("%s", "old").Replace(memMsg))
		type out struct {
			res *WaitResult
			err error
		}
		ch := make(chan out, 1)
		go func() {
			res, err := c.Wait(context.Background(), creds, WaitOptions{Tag: "go", Timeout: 5 * time.Second}, nil)
			ch <- out{res, err}
		}()
		time.Sleep(200 * time.Millisecond)
		add("From: a@example.org\nSubject: not tagged\n\nx\n")
		time.Sleep(100 * time.Millisecond)
		add("From: a@example.org\nSubject: wanted\nX-Mailbox-Tags: go, now\n\nx\n")
		select {
		case o := <-ch:
			if o.err != nil {
				t.Fatal(o.err)
			}
			if o.res.TimedOut || len(o.res.Messages) != 1 || o.res.Messages[0].Subject != "wanted" || o.res.Messages[0].UID != 3 || o.res.NextSinceUID != 3 {
				t.Fatalf("poll %v: %+v", poll, o.res)
			}
		case <-time.After(4 * time.Second):
			t.Fatalf("poll %v: the wait did not wake", poll)
		}
		// From the old cursor, both are there already: returned at once, oldest first.
		res, err := c.Wait(context.Background(), creds, WaitOptions{SinceUID: new(uint32(1)), Timeout: time.Second}, nil)
		if err != nil || len(res.Messages) != 2 || res.Messages[0].UID != 2 || res.Messages[1].UID != 3 || res.TimedOut {
			t.Fatalf("poll %v: %+v %v", poll, res, err)
		}
	}
}

// Cancelling ends the wait at once, progress is called while waiting, and
// the count of waits goes back to zero.
func TestWaitCancelAndProgress(t *testing.T) {
	c, creds, _ := memServer(t)
	defer func(d time.Duration) { progressInterval = d }(progressInterval)
	progressInterval = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	calls := make(chan struct{}, 100)
	go func() {
		_, err := c.Wait(ctx, creds, WaitOptions{Timeout: time.Minute}, func() { calls <- struct{}{} })
		done <- err
	}()
	for c.Waiting() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if mailerr.KindOf(err) != mailerr.Timeout || !strings.Contains(mailerr.Message(err), "cancelled while waiting for new mail") {
			t.Errorf("%v", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("took %v", took)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the cancelled wait did not return")
	}
	if n := c.Waiting(); n != 0 {
		t.Errorf("%d waits counted after the end", n)
	}
	if len(calls) < 3 {
		t.Errorf("progress called %d times in 100 ms with a 20 ms interval", len(calls))
	}
}

func TestWaitOptionsChecked(t *testing.T) {
	c, creds, _ := memServer(t)
	for _, o := range []WaitOptions{{Timeout: -time.Second}, {Timeout: 2 * time.Hour}, {Tag: "Not A Tag"}, {From: "a\r\nb"}} {
		if _, err := c.Wait(context.Background(), creds, o, nil); mailerr.KindOf(err) != mailerr.BadInput {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// The caps count per account however the name is spelt, name the cap that
// refused, and free their place when a wait ends.
func TestWaitStateCaps(t *testing.T) {
	ws := &waitState{total: 3, perUser: 2, byUser: map[string]int{}, stop: make(chan struct{})}
	r1, err := ws.acquire(credentials.Account(" Bob@Example.test"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.acquire(credentials.Account("bob@example.test")); err != nil {
		t.Fatal(err)
	}
	_, err = ws.acquire(credentials.Account("BOB@example.test"))
	var me *mailerr.Error
	if !errors.As(err, &me) || me.Kind != mailerr.Busy || me.Msg != "too many waits at once for this account (the limit is 2); retry when one of them has ended" {
		t.Fatalf("%v", err)
	}
	if _, err := ws.acquire("ann@example.test"); err != nil {
		t.Fatal(err)
	}
	_, err = ws.acquire("cy@example.test")
	if mailerr.KindOf(err) != mailerr.Busy || !strings.Contains(mailerr.Message(err), "on this gateway (the limit is 3)") {
		t.Fatalf("%v", err)
	}
	r1()
	r1() // a second release changes nothing
	if _, err := ws.acquire("cy@example.test"); err != nil || ws.n != 3 || ws.byUser["bob@example.test"] != 1 {
		t.Fatalf("after a release: %v, %d waits, %v", err, ws.n, ws.byUser)
	}
}
