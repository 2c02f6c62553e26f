package mailbox

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// routedClient is a Client whose own host is an in-process server
// (127.0.0.1, u@example.test / pw) and whose Route sends *.probe.test
// names to addresses of their own, as DNS would: okN to 127.1.0.N, where
// that server listens too; hN to 127.2.x.y, on a port nothing listens
// at (the login never happens). 127.0.0.1 spelt with a final dot goes to
// the default, as hosts.Lookup does.
func routedClient(t *testing.T, g *guard.Guard) *Client {
	t.Helper()
	mem := imapmemserver.New()
	u := imapmemserver.NewUser("u@example.test", "pw")
	u.Create("INBOX", nil)
	mem.AddUser(u)
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps: imap.CapSet{imap.CapIMAP4rev1: {}}, InsecureAuth: true, Logger: nopLogger{},
	})
	ln, err := net.Listen("tcp", ":0") // every loopback address
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	open := ln.Addr().(*net.TCPAddr).Port
	route := func(host, provider string) (transport.Endpoint, error) {
		name := strings.TrimSuffix(strings.ToLower(host), ".")
		switch {
		case name == "127.0.0.1":
			return transport.Endpoint{Host: "127.0.0.1", Port: open, Security: transport.Plain}, nil
		case !strings.HasSuffix(name, ".probe.test"):
			return transport.Endpoint{}, mailerr.New(mailerr.Forbidden, "not served")
		}
		var n int
		if _, err := fmt.Sscanf(name, "ok%d.", &n); err == nil {
			return transport.Endpoint{Host: fmt.Sprintf("127.1.0.%d", n+1), Port: open, Security: transport.Plain}, nil
		}
		fmt.Sscanf(name, "h%d.", &n)
		return transport.Endpoint{Host: fmt.Sprintf("127.2.%d.%d", n/250, n%250+1), Port: closedPort, Security: transport.Plain}, nil
	}
	c := New(Config{Host: "127.0.0.1", Port: open, Security: transport.Plain, AllowPlaintextAuth: true, Timeout: 5 * time.Second,
		Route: route, Guard: g}, pool.Config{MaxTotal: 8, MaxPerGroup: 8}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func at(host, user, pass string) credentials.Credentials {
	c := credentials.New(user, pass)
	c.Host = host
	return c
}

// TestHostsLearnedOnlyAfterALogin: names nobody logs in at (a flood of
// distinct names under an allowed pattern, each a failed dial or a
// refused login) leave nothing behind; a host is remembered once a login
// there succeeds, and at most maxHosts are (the least recently used go).
// Before, every name tried was kept for good: 200,000 names grew the
// gateway by 134 MiB.
func TestHostsLearnedOnlyAfterALogin(t *testing.T) {
	defer func(n int) { maxHosts = n }(maxHosts)
	maxHosts = 5
	c := routedClient(t, nil)
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const names = 2000
	for i := range names {
		if err := c.Verify(ctx, at(fmt.Sprintf("h%d.probe.test", i), "u@example.test", "pw")); err == nil {
			t.Fatal("a login at a closed port succeeded")
		}
	}
	for i := range 5 {
		if err := c.Verify(ctx, at(fmt.Sprintf("ok%d.probe.test", i), "u@example.test", "wrong")); mailerr.KindOf(err) != mailerr.Auth {
			t.Fatalf("a wrong password: %v", err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("%d names tried, none logged in at: heap %+d KiB", names+5, (int64(after.HeapAlloc)-int64(before.HeapAlloc))/1024)
	if n := c.hosts.Len(); n != 0 {
		t.Fatalf("%d hosts remembered after %d names nobody logged in at", n, names+5)
	}
	for i := range 8 {
		if err := c.Verify(ctx, at(fmt.Sprintf("ok%d.probe.test", i), "u@example.test", "pw")); err != nil {
			t.Fatalf("login at ok%d: %v", i, err)
		}
	}
	if n := c.hosts.Len(); n != 5 {
		t.Fatalf("%d hosts remembered after 8 logins, want the bound, 5", n)
	}
	if !c.hosts.Contains("127.1.0.8") || c.hosts.Contains("127.1.0.1") { // ok7 and ok0
		t.Errorf("kept %v: want the most recent", c.hosts.Keys())
	}
}

// TestDefaultHostSpeltOtherwiseIsOneAccount: the gateway's own host named
// in another spelling is the same account as no host at all: one login
// back-off (LOGIN_BACKOFF_FAILURES wrong passwords reach the server in
// all, not per spelling). Before, "" and "127.0.0.1" (= IMAP_HOST) were
// two accounts, and let twice the guesses through.
func TestDefaultHostSpeltOtherwiseIsOneAccount(t *testing.T) {
	g := guard.New(guard.Config{FailuresPerUser: 3, Delay: time.Minute, MaxDelay: time.Minute})
	c := routedClient(t, g)
	ctx := guard.WithClientAddr(context.Background(), "192.0.2.9")
	reached := 0
	for i := range 9 {
		host := []string{"", "127.0.0.1", "127.0.0.1."}[i%3]
		err := c.Verify(ctx, at(host, "u@example.test", fmt.Sprint("guess", i)))
		switch mailerr.KindOf(err) {
		case mailerr.Auth:
			reached++
		case mailerr.RateLimited:
		default:
			t.Fatalf("guess %d at %q: %v", i, host, err)
		}
	}
	if reached != 3 {
		t.Fatalf("%d of 9 wrong passwords at the default host in three spellings reached the server, want 3 (LOGIN_BACKOFF_FAILURES)", reached)
	}
}
