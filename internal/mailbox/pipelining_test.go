package mailbox

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/rttproxy"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// pipeServer is one server of TestCommandsBehindLoginPerServer.
type pipeServer struct {
	name     string
	addr     string // host:port the gateway dials
	sec      transport.Security
	tls      *tls.Config
	a, b     credentials.Credentials
	want     afterLogin
	greeting string // a word the server's greeting holds ("": none)
}

// Commands ride behind a LOGIN only on servers known to keep them, per
// server: Dovecot and Cyrus are known by their greeting and keep them;
// Courier is known by its greeting and never gets them, over plain IMAP
// and over TLS (where the LOGIN leaves before the greeting, with a probe
// behind it); a server that says nothing of itself (the demo's go-imap
// server) is probed on its first connection, and a probe finds both
// kinds: the demo as it is, and the demo behind a proxy that drops what
// follows a LOGIN as Courier does. After a first user taught the gateway
// the server, a second user's cold call (a fresh connection) is answered,
// in one round trip fewer where the server keeps the commands.
func TestCommandsBehindLoginPerServer(t *testing.T) {
	st := mailtest.StartT(t, mailtest.Options{})
	cy := mailtest.StartIMAP(t, mailtest.Cyrus, nil)
	co := mailtest.StartIMAP(t, mailtest.Courier, nil)
	dm, err := demo.Start(context.Background(), demo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dm.Close() })
	crt, roots := mailtest.Cert(t, time.Now().Add(time.Hour), "127.0.0.1")
	coTLS := listenAddr(t, tlsInFront(co.Addr(), &tls.Config{Certificates: []tls.Certificate{crt}}))
	dropping := listenAddr(t, dropBehindLogin(dm.IMAPAddr))

	alice, bob := credentials.New(mailtest.Alice, mailtest.AlicePassword), credentials.New(mailtest.Bob, mailtest.BobPassword)
	sAlice, sBob := credentials.New(mailstack.ServerAlice, mailstack.ServerAlicePassword), credentials.New(mailstack.ServerBob, mailstack.ServerBobPassword)
	dAlice, dBob := credentials.New(demo.AliceAddress, demo.AlicePassword), credentials.New(demo.BobAddress, demo.BobPassword)
	for _, s := range []pipeServer{
		{"dovecot", st.IMAPSAddr(), transport.TLS, st.TLSConfig(), alice, bob, afterLogin{true, "greeting"}, "Dovecot"},
		{"cyrus", cy.Addr(), transport.Plain, nil, sAlice, sBob, afterLogin{true, "greeting"}, "Cyrus"},
		{"courier", co.Addr(), transport.Plain, nil, sAlice, sBob, afterLogin{false, "greeting"}, "Courier"},
		{"courier over TLS", coTLS, transport.TLS, &tls.Config{RootCAs: roots}, sAlice, sBob, afterLogin{false, "greeting"}, "Courier"},
		{"demo", dm.IMAPAddr, transport.Plain, nil, dAlice, dBob, afterLogin{true, "probe"}, ""},
		{"demo dropping what follows LOGIN", dropping, transport.Plain, nil, dAlice, dBob, afterLogin{false, "probe"}, ""},
	} {
		t.Run(s.name, func(t *testing.T) {
			rtt := rtProxyFor(t, s.addr)
			host, port, _ := net.SplitHostPort(rtt.Addr())
			p, _ := strconv.Atoi(port)
			c := New(Config{Host: host, Port: p, Security: s.sec, TLS: s.tls, AllowPlaintextAuth: true, Timeout: 5 * time.Second},
				pool.Config{MaxTotal: 4, MaxPerGroup: 2}, slog.New(slog.DiscardHandler))
			t.Cleanup(func() { c.Close(context.Background()) })
			ctx := context.Background()

			// The first user's first call teaches the gateway the server.
			srv, err := c.Server(ctx, s.a)
			if err != nil {
				t.Fatal(err)
			}
			got := srv.afterLogin.Load()
			if got == nil || *got != s.want {
				t.Fatalf("learned %+v, want %+v", got, s.want)
			}

			// The second user's cold call: LOGIN, then EXAMINE and a
			// FETCH, behind the LOGIN only where the server keeps them.
			// (A SEARCH could not go there: go-imap waits for the
			// greeting's capabilities before it sends one.)
			rtt.Reset()
			var msgs []*imapclient.FetchMessageBuffer
			start := time.Now()
			var fetch *imapclient.FetchCommand
			o := &opening{folder: "INBOX", send: func(conn *Conn, _ imap.CapSet) {
				fetch = conn.client().Fetch(imap.UIDSetNum(1), &imap.FetchOptions{UID: true, Flags: true})
			}}
			err = c.doOpen(ctx, s.b, o, "fetching", true, func(ctx context.Context, conn *Conn) error {
				_, err := conn.examine("INBOX")
				got, ferr := fetch.Collect()
				if err != nil {
					return err
				}
				msgs = got
				return ferr
			})
			if err != nil {
				t.Fatalf("the second user's cold call after %v: %v", time.Since(start), err)
			}
			n := rtt.Counts().RoundTrips
			if s.want.keeps {
				want := 2 // the TCP connection, then the LOGIN's flight
				if s.sec == transport.TLS {
					want++ // the TLS handshake
				}
				if n != want {
					t.Errorf("the second user's cold call took %d round trips, want %d", n, want)
				}
			}
			t.Logf("%s: learned %+v; a cold call fetched %d messages in %d round trips (%v)", s.name, *got, len(msgs), n, time.Since(start).Round(time.Millisecond))
		})
	}
}

// rtProxyFor counts the round trips to addr, 8 ms each way: long enough
// that a flight sent at once is never split by scheduling (as in
// tests/roundtrips_test.go).
func rtProxyFor(t *testing.T, addr string) *rttproxy.Proxy {
	t.Helper()
	p, err := rttproxy.Start(addr, 16*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// listenAddr is mailtest.Listen's host:port.
func listenAddr(t *testing.T, serve func(net.Conn)) string {
	host, port := mailtest.Listen(t, serve)
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// tlsInFront ends TLS with cfg and forwards the plain bytes to target.
func tlsInFront(target string, cfg *tls.Config) func(net.Conn) {
	return func(c net.Conn) {
		defer c.Close()
		s, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer s.Close()
		tc := tls.Server(c, cfg)
		go func() { io.Copy(s, tc); s.Close() }()
		io.Copy(tc, s)
	}
}

// dropBehindLogin forwards IMAP to target and, as Courier's imaplogin
// does, drops whatever the client sent behind a LOGIN before the LOGIN's
// answer: the answer is held back until what arrived with the LOGIN is
// thrown away.
func dropBehindLogin(target string) func(net.Conn) {
	return func(c net.Conn) {
		defer c.Close()
		s, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer s.Close()
		var mu sync.Mutex
		loginTag := ""
		answered := make(chan chan struct{}, 1) // the LOGIN's answer is in; close the inner channel to pass it on
		// Either side's end frees the other from waiting (and the
		// listener's cleanup from waiting for both).
		fromClientDone, fromServerDone := make(chan struct{}), make(chan struct{})
		defer close(fromServerDone)
		go func() {
			defer close(fromClientDone)
			defer s.Close()
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				tag, rest, _ := strings.Cut(line, " ")
				login := err == nil && strings.HasPrefix(strings.ToUpper(rest), "LOGIN ")
				if login {
					// Before the LOGIN leaves: its answer can come back
					// before this goroutine runs again.
					mu.Lock()
					loginTag = tag
					mu.Unlock()
				}
				if line != "" {
					if _, werr := io.WriteString(s, line); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
				if !login {
					continue
				}
				// Everything the client sends until it sees the LOGIN's
				// answer went behind the LOGIN: dropped.
				var release chan struct{}
				select {
				case release = <-answered:
				case <-fromServerDone:
					return
				}
				r.Discard(r.Buffered())
				c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				io.Copy(io.Discard, c)
				c.SetReadDeadline(time.Time{})
				close(release)
			}
		}()
		r := bufio.NewReader(s)
		for {
			line, err := r.ReadString('\n')
			mu.Lock()
			tag := loginTag
			mu.Unlock()
			if f := strings.Fields(line); tag != "" && len(f) > 1 && f[0] == tag {
				release := make(chan struct{})
				answered <- release
				select {
				case <-release:
				case <-fromClientDone:
					return
				}
				mu.Lock()
				loginTag = ""
				mu.Unlock()
			}
			if line != "" {
				if _, werr := io.WriteString(c, line); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
}

// Who a server says it is, in its greeting or its ID, and what that tells
// of commands sent behind a LOGIN (the greetings and ID names of the
// servers tested here, and of one that says nothing).
func TestAfterLoginOfIdentity(t *testing.T) {
	for _, tc := range []struct {
		name  string
		keeps *bool
	}{
		{"* OK [CAPABILITY IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE IDLE LITERAL+ AUTH=PLAIN AUTH=LOGIN] Dovecot (Debian) ready.", new(true)},
		{"Dovecot", new(true)},
		{"* OK [CAPABILITY IMAP4rev1 LITERAL+ ID ENABLE AUTH=PLAIN AUTH=LOGIN SASL-IR] mmcp-cyrus Cyrus IMAP 3.6.1-Debian-3.6.1-4+deb12u5 server ready", new(true)},
		{"Cyrus IMAPD", new(true)},
		{"* OK [CAPABILITY IMAP4rev1 UIDPLUS CHILDREN NAMESPACE THREAD=ORDEREDSUBJECT THREAD=REFERENCES SORT QUOTA IDLE ACL ACL2=UNION ENABLE UTF8=ACCEPT] Courier-IMAP ready. Copyright 1998-2019 Double Precision, Inc.  See COPYING for distribution information.", new(false)},
		{"* OK [CAPABILITY IMAP4rev2 IMAP4rev1] IMAP server ready", nil},
		{"", nil},
	} {
		got := afterLoginOf(tc.name, "greeting")
		if (got == nil) != (tc.keeps == nil) || got != nil && got.keeps != *tc.keeps {
			t.Errorf("%.60q: %+v, want keeps %v", tc.name, got, tc.keeps)
		}
	}
}
