package tests

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// mcpFrom is mailtest.MCPClient with the HTTP connections made from the
// local address ip (any 127.x address works on loopback), so that the
// gateway sees that client address without a proxy.
func mcpFrom(t *testing.T, url, ip string, headers map[string]string) *client.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}}
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers), transport.WithHTTPBasicClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "backoff-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// guessFrom makes n wrong-password calls of tool for user from ip and
// returns how many the mail server refused and how many the back-off held
// back; anything else fails the test.
func guessFrom(t *testing.T, g *gateway, ip, user string, n int, tool string, args map[string]any) (authFailed, backedOff int) {
	t.Helper()
	for i := range n {
		c := mcpFrom(t, g.URL, ip, map[string]string{"x-imap-user": user, "x-imap-pass": fmt.Sprintf("guess-%s-%d", ip, i)})
		res := mailtest.Call(t, c, tool, args)
		switch text := mailtest.Text(res); {
		case !res.IsError:
			t.Fatalf("%s: guess %d succeeded", ip, i)
		case strings.Contains(text, "authentication failed"):
			authFailed++
		case strings.Contains(text, "too many failed logins"):
			backedOff++
		default:
			t.Fatalf("%s: guess %d: unexpected error %q", ip, i, text)
		}
	}
	return authFailed, backedOff
}

// waitCount polls count until it reaches want (servers log a failed login
// when its connection ends) and returns the last value.
func waitCount(count func() int, want int) int {
	n := count()
	for deadline := time.Now().Add(5 * time.Second); n < want && time.Now().Before(deadline); n = count() {
		time.Sleep(100 * time.Millisecond)
	}
	return n
}

// Someone else's guesses do not lock an account's owner out: the back-off
// is kept per account and client address, so 20 wrong passwords from
// 127.0.0.2 (5 reach Dovecot, by its log) leave the owner at 127.0.0.1
// free to read and send. Guesses spread over addresses stop at the
// account's own ceiling, which the owner's proven password passes and an
// unproven login does not.
func TestBackoffPerAccountAndAddress(t *testing.T) {
	const owner, pw = "owner@example.test", "owner-pw"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{owner: pw}})
	g := startGateway(t, s, smtpEnv(s, "LOGIN_BACKOFF_FAILURES=5", "LOGIN_BACKOFF_ACCOUNT_FAILURES=8",
		"LOGIN_BACKOFF_DELAY=30s", "LOGIN_BACKOFF_MAX=30s")...)
	imapBefore, smtpBefore := authAttempts(t, s, owner), smtpAuthFailures(t, s)
	imapSeen := func() int { return authAttempts(t, s, owner) - imapBefore }

	// 1. 20 wrong passwords from one address: 5 reach the server.
	failed, held := guessFrom(t, g, "127.0.0.2", owner, 20, "imap_list_folders", nil)
	seen := waitCount(imapSeen, failed)
	t.Logf("127.0.0.2, 20 wrong passwords: %d refused by Dovecot, %d held back by the gateway; Dovecot logged %d failed logins", failed, held, seen)
	if failed != 5 || held != 15 || seen != 5 {
		t.Fatalf("want 5 tried (and logged by Dovecot) and 15 held back, got %d tried, %d held back, %d logged", failed, held, seen)
	}
	// The guesser's sends are held back too, before Postfix sees them.
	if f, h := guessFrom(t, g, "127.0.0.2", owner, 3, "smtp_send_email",
		map[string]any{"to": []string{mailtest.Bob}, "subject": "guess", "text": "x"}); f != 0 || h != 3 {
		t.Fatalf("sends from the guesser: %d tried, %d held back; want 0 and 3", f, h)
	}

	// The owner, at another address, with the right password: reading and
	// sending work (the password was never used before: nothing proven).
	oc := mcpFrom(t, g.URL, "127.0.0.1", map[string]string{"x-imap-user": owner, "x-imap-pass": pw})
	if res := mailtest.Call(t, oc, "imap_list_folders", nil); res.IsError {
		t.Fatalf("owner's list during the guesser's back-off: %s", mailtest.Text(res))
	}
	res := mailtest.Call(t, oc, "smtp_send_email", map[string]any{"to": []string{mailtest.Bob}, "subject": "still mine", "text": "sent while someone guessed"})
	if res.IsError {
		t.Fatalf("owner's send during the guesser's back-off: %s", mailtest.Text(res))
	}
	if _, err := s.WaitMessages(mailtest.Bob, "INBOX", 1, 30*time.Second); err != nil {
		t.Fatalf("the owner's message did not arrive: %v", err)
	}

	// 2. Spread guessing: 3 more failures from another address bring the
	// account to its ceiling of 8; then a guess from a fresh address is held
	// back without reaching the server.
	if f, h := guessFrom(t, g, "127.0.0.3", owner, 3, "imap_list_folders", nil); f != 3 || h != 0 {
		t.Fatalf("127.0.0.3: %d tried, %d held back; want 3 and 0", f, h)
	}
	if f, h := guessFrom(t, g, "127.0.0.4", owner, 2, "imap_list_folders", nil); f != 0 || h != 2 {
		t.Fatalf("127.0.0.4 at the account's ceiling: %d tried, %d held back; want 0 and 2", f, h)
	}
	// An unproven login (another spelling of the name, never logged in) is
	// held back at the ceiling...
	uc := mcpFrom(t, g.URL, "127.0.0.5", map[string]string{"x-imap-user": "Owner@Example.Test", "x-imap-pass": pw})
	if res := mailtest.Call(t, uc, "imap_list_folders", nil); !res.IsError || !strings.Contains(mailtest.Text(res), "too many failed logins") {
		t.Fatalf("unproven login at the account's ceiling: %q", mailtest.Text(res))
	}
	// ...while the owner's proven password still logs in: a fresh IMAP login
	// (the pool's connection is dropped first) and a send.
	if err := s.Kick(owner); err != nil {
		t.Fatal(err)
	}
	if res := mailtest.Call(t, oc, "imap_list_folders", nil); res.IsError {
		t.Fatalf("owner's proven password at the account's ceiling: %s", mailtest.Text(res))
	}
	if res := mailtest.Call(t, oc, "smtp_send_email", map[string]any{"to": []string{mailtest.Bob}, "subject": "still mine 2", "text": "x"}); res.IsError {
		t.Fatalf("owner's send at the account's ceiling: %s", mailtest.Text(res))
	}
	if _, err := s.WaitMessages(mailtest.Bob, "INBOX", 2, 30*time.Second); err != nil {
		t.Fatalf("the owner's second message did not arrive: %v", err)
	}
	waitCount(imapSeen, 8)
	time.Sleep(500 * time.Millisecond) // a late line would show a guess that got through
	imapTotal, smtpTotal := imapSeen(), smtpAuthFailures(t, s)-smtpBefore
	t.Logf("in all: 30 wrong passwords and 1 unproven login; Dovecot logged %d failed logins, Postfix %d failed AUTHs", imapTotal, smtpTotal)
	if imapTotal != 8 || smtpTotal != 0 {
		t.Fatalf("Dovecot logged %d failed logins (want 8), Postfix %d (want 0)", imapTotal, smtpTotal)
	}
}

// A mail server whose authentication flaps (it refuses the right password
// now and then) does not lock out the other users behind the same client
// address: each success of the flapping user takes that user's failures
// back from the address's count. 5 refusals of the right password,
// interleaved with successes, pass an address threshold of 4; every one
// of them reaches Dovecot (counted in its log), every success succeeds,
// and a colleague behind the same address logs in for the first time
// afterwards. Guesses at other accounts from that address still count:
// 4 of them lock the address out for a login not yet proven.
func TestBackoffForgivesAFlappingServer(t *testing.T) {
	const flap, flapPW = "flap@example.test", "flap-pw"
	const colleague, colleaguePW = "colleague@example.test", "colleague-pw"
	const newcomer, newcomerPW = "newcomer@example.test", "newcomer-pw"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{flap: flapPW, colleague: colleaguePW, newcomer: newcomerPW}})
	g := startGateway(t, s, "LOGIN_BACKOFF_FAILURES=5", "LOGIN_BACKOFF_FAILURES_PER_ADDRESS=4",
		"LOGIN_BACKOFF_DELAY=60s", "LOGIN_BACKOFF_MAX=60s")
	const office = "127.0.0.9"
	before := authAttempts(t, s, flap)
	fc := mcpFrom(t, g.URL, office, map[string]string{"x-imap-user": flap, "x-imap-pass": flapPW})
	for i := range 5 {
		// The server refuses the right password...
		if err := s.SetPassword(flap, "not-what-the-user-has"); err != nil {
			t.Fatal(err)
		}
		res := mailtest.Call(t, fc, "imap_list_folders", nil)
		if text := mailtest.Text(res); !res.IsError || !strings.Contains(text, "authentication failed") {
			t.Fatalf("cycle %d: the server refused the password, the gateway said %q", i, text)
		}
		// ...and accepts it again a moment later.
		if err := s.SetPassword(flap, flapPW); err != nil {
			t.Fatal(err)
		}
		if res := mailtest.Call(t, fc, "imap_list_folders", nil); res.IsError {
			t.Fatalf("cycle %d: the right password, accepted by the server again, was not tried: %s", i, mailtest.Text(res))
		}
		// the next refusal needs a fresh login: drop the pooled connection
		if err := s.Kick(flap); err != nil {
			t.Fatal(err)
		}
	}
	if n := waitCount(func() int { return authAttempts(t, s, flap) - before }, 5); n != 5 {
		t.Fatalf("Dovecot logged %d refused logins of the flapping user, want 5 (every one reached the server)", n)
	}
	cc := mcpFrom(t, g.URL, office, map[string]string{"x-imap-user": colleague, "x-imap-pass": colleaguePW})
	if res := mailtest.Call(t, cc, "imap_list_folders", nil); res.IsError {
		t.Fatalf("a colleague behind the flapping user's address is locked out: %s", mailtest.Text(res))
	}

	// Guesses at 4 other accounts from the same address, no success after
	// them: the address is refused for a login not proven yet.
	for i := range 4 {
		if f, h := guessFrom(t, g, office, fmt.Sprintf("nobody%d@example.test", i), 1, "imap_list_folders", nil); f != 1 || h != 0 {
			t.Fatalf("guess %d: %d tried, %d held back; want 1 and 0", i, f, h)
		}
	}
	nc := mcpFrom(t, g.URL, office, map[string]string{"x-imap-user": newcomer, "x-imap-pass": newcomerPW})
	if res := mailtest.Call(t, nc, "imap_list_folders", nil); !res.IsError || !strings.Contains(mailtest.Text(res), "too many failed logins") {
		t.Fatalf("4 guesses at other accounts from one address: %q, want the address's back-off", mailtest.Text(res))
	}
}
