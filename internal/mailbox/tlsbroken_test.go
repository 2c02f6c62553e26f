package mailbox_test

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// reset ends c with a TCP reset (SO_LINGER 0).
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// A connection reset or ended in the middle of the TLS handshake (implicit
// TLS, or right after STARTTLS) is reported as a broken connection, never
// as a certificate or protocol mismatch, and the pool keeps nothing.
func TestBrokenHandshakeIsAConnectionFailure(t *testing.T) {
	handshake := func(end func(net.Conn)) func(net.Conn) {
		return func(c net.Conn) { _, _ = c.Read(make([]byte, 4096)); end(c) }
	}
	afterStartTLS := func(end func(net.Conn)) func(net.Conn) {
		return func(c net.Conn) {
			c.Write([]byte("* OK [CAPABILITY IMAP4rev1 STARTTLS] ready\r\n"))
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				tag, cmd, _ := strings.Cut(sc.Text(), " ")
				if strings.EqualFold(cmd, "STARTTLS") {
					c.Write([]byte(tag + " OK begin TLS\r\n"))
					_, _ = c.Read(make([]byte, 4096)) // the ClientHello
					end(c)
					return
				}
			}
		}
	}
	closeIt := func(c net.Conn) { c.Close() }
	for _, tc := range []struct {
		name  string
		sec   transport.Security
		serve func(net.Conn)
	}{
		{"tls, reset", transport.TLS, handshake(reset)},
		{"tls, eof", transport.TLS, handshake(closeIt)},
		{"starttls, reset", transport.StartTLS, afterStartTLS(reset)},
		{"starttls, eof", transport.StartTLS, afterStartTLS(closeIt)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, port := mailtest.Listen(t, tc.serve)
			c := newClient(t, host, port, tc.sec, 5*time.Second, pool.Config{MaxTotal: 2, MaxPerGroup: 1})
			err := verify(c, user)
			var me *mailerr.Error
			if !errors.As(err, &me) {
				t.Fatalf("error %T %v, want a *mailerr.Error", err, err)
			}
			if me.Kind != mailerr.Unavailable || mailerr.Cause(err) != "closed" {
				t.Errorf("kind %v cause %q, want unavailable, closed: %v", me.Kind, mailerr.Cause(err), err)
			}
			if want := "the connection to the mail server broke while starting TLS with the mail server"; !strings.Contains(me.Msg, want) {
				t.Errorf("message %q does not say %q", me.Msg, want)
			}
			for _, wrong := range []string{"certificate", "mismatch", "could not start TLS"} {
				if strings.Contains(me.Msg, wrong) {
					t.Errorf("message %q blames the settings (%q) for a broken connection", me.Msg, wrong)
				}
			}
			if st := c.Stats(); st.Opened != 0 || st.Idle != 0 || st.InUse != 0 {
				t.Errorf("pool after the failure: %+v", st)
			}
		})
	}
}
