package mailbox

import (
	"bufio"
	"context"
	"crypto/tls"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// tlsConfigs makes a self-signed certificate for 127.0.0.1: the server's
// configuration and a client configuration that trusts it.
func tlsConfigs(t *testing.T) (server, client *tls.Config) {
	crt, roots := mailtest.Cert(t, time.Now().Add(time.Hour), "127.0.0.1")
	return &tls.Config{Certificates: []tls.Certificate{crt}}, &tls.Config{RootCAs: roots}
}

var someone = credentials.New("u@example.test", "pw")

// scripted is an IMAP server that waits up to early for a command before
// it greets (sending what arrived to first), then answers LOGIN with login
// EXAMINE and LIST with OK (an empty INBOX), LOGOUT with BYE, and anything
// else with BAD. It returns when the client closes the connection.
func scripted(greeting, login string, early time.Duration, first chan<- string) func(net.Conn) {
	return func(c net.Conn) {
		defer c.Close() // hang up once the script is done
		lines := make(chan string, 8)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		got := ""
		select {
		case got = <-lines:
		case <-time.After(early):
		}
		first <- got
		c.Write([]byte(greeting + "\r\n"))
		for line := got; ; {
			if line != "" {
				tag, cmd, _ := strings.Cut(line, " ")
				switch verb, _, _ := strings.Cut(strings.ToUpper(cmd), " "); verb {
				case "LOGIN":
					c.Write([]byte(tag + " " + login + "\r\n"))
				case "EXAMINE":
					c.Write([]byte("* 0 EXISTS\r\n* OK [UIDVALIDITY 7] ok\r\n" + tag + " OK [READ-ONLY] done\r\n"))
				case "LIST":
					c.Write([]byte("* LIST () \"/\" INBOX\r\n" + tag + " OK done\r\n"))
				case "LOGOUT":
					c.Write([]byte("* BYE\r\n" + tag + " OK bye\r\n"))
				default:
					c.Write([]byte(tag + " BAD unexpected\r\n"))
				}
			}
			var ok bool
			if line, ok = <-lines; !ok {
				return
			}
		}
	}
}

// With implicit TLS the LOGIN leaves with the end of the handshake, before
// the greeting (one round trip less); on a connection not yet encrypted it
// waits for the greeting, whose LOGINDISABLED must be seen first.
func TestLoginDoesNotWaitForTheGreeting(t *testing.T) {
	serverTLS, clientTLS := tlsConfigs(t)
	for _, tc := range []struct {
		sec       transport.Security
		wantEarly bool
	}{
		{transport.TLS, true},
		{transport.Plain, false},
	} {
		t.Run(string(tc.sec), func(t *testing.T) {
			first := make(chan string, 4)
			serve := scripted("* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN] ready", "OK [CAPABILITY IMAP4rev1] in", 300*time.Millisecond, first)
			if tc.sec == transport.TLS {
				plain := serve
				serve = func(c net.Conn) { plain(tls.Server(c, serverTLS)) }
			}
			host, port := mailtest.Listen(t, serve)
			c := New(Config{Host: host, Port: port, Security: tc.sec, TLS: clientTLS, AllowPlaintextAuth: true, Timeout: 5 * time.Second},
				pool.Config{MaxTotal: 1, MaxPerGroup: 1}, slog.New(slog.DiscardHandler))
			t.Cleanup(func() { c.Close(context.Background()) })
			if err := c.Verify(context.Background(), someone); err != nil {
				t.Fatal(err)
			}
			got := <-first
			if early := strings.Contains(got, " LOGIN "); early != tc.wantEarly {
				t.Errorf("before the greeting the server read %q; want a LOGIN there: %v", got, tc.wantEarly)
			}
		})
	}
}

// The greeting still decides over a LOGIN sent before it: LOGINDISABLED
// gives the same error as when it stopped the LOGIN (and, not being a
// refused password, never counts toward the back-off); after PREAUTH the
// needless LOGIN's BAD does not matter, and the EXAMINE behind it stands.
func TestGreetingDecidesOverAnEarlyLogin(t *testing.T) {
	serverTLS, clientTLS := tlsConfigs(t)
	for _, tc := range []struct {
		name, greeting, login string
		wantErr               string
	}{
		{"LOGINDISABLED", "* OK [CAPABILITY IMAP4rev1 LOGINDISABLED] ready", "NO logins are disabled",
			"the mail server refuses logins on this connection (LOGINDISABLED); check IMAP_SECURITY"},
		{"PREAUTH", "* PREAUTH [CAPABILITY IMAP4rev1] welcome", "BAD already authenticated", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := make(chan string, 4)
			serve := scripted(tc.greeting, tc.login, 0, first)
			host, port := mailtest.Listen(t, func(c net.Conn) { serve(tls.Server(c, serverTLS)) })
			g := guard.New(guard.Config{FailuresPerUser: 1, FailuresPerAccount: 1, Delay: time.Minute})
			c := New(Config{Host: host, Port: port, Security: transport.TLS, TLS: clientTLS, Timeout: 5 * time.Second, Guard: g},
				pool.Config{MaxTotal: 1, MaxPerGroup: 1}, slog.New(slog.DiscardHandler))
			t.Cleanup(func() { c.Close(context.Background()) })
			ctx := guard.WithClientAddr(context.Background(), "192.0.2.1")
			for i := range 2 {
				err := c.doIn(ctx, someone, "INBOX", "examining", func(ctx context.Context, conn *Conn) error {
					if conn.selected != "INBOX" {
						t.Errorf("call %d: INBOX not selected ahead", i+1)
					}
					_, err := conn.examine("INBOX")
					return err
				})
				if tc.wantErr == "" {
					if err != nil {
						t.Fatalf("call %d: %v", i+1, err)
					}
					continue
				}
				if mailerr.KindOf(err) != mailerr.Auth || mailerr.Message(err) != tc.wantErr {
					t.Fatalf("call %d: %v %q, want Auth %q (%v)", i+1, mailerr.KindOf(err), mailerr.Message(err), tc.wantErr, err)
				}
			}
		})
	}
}
