package transport_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"net"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// dialResumed dials e, reads the greeting line (which also takes in the
// server's TLS 1.3 session tickets) and says whether the handshake resumed.
func dialResumed(t *testing.T, e transport.Endpoint) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := transport.Dial(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	return c.(*tls.Conn).ConnectionState().DidResume
}

// greeter serves TLS with crt and writes one line after the handshake. Its
// connections share one server configuration, and so its ticket keys.
func greeter(t *testing.T, crt tls.Certificate) (string, int) {
	conf := &tls.Config{Certificates: []tls.Certificate{crt}}
	return mailtest.Listen(t, func(c net.Conn) {
		tc := tls.Server(c, conf)
		if tc.Handshake() == nil {
			tc.Write([]byte("* OK ready\r\n"))
		}
		silent(tc)
	})
}

// A second connection to the same server resumes the first one's session,
// and two servers under one name (Dovecot and Postfix on one host) keep
// their own sessions instead of overwriting each other's.
func TestSessionsResumePerEndpoint(t *testing.T) {
	crt, roots := mailtest.Cert(t, time.Now().Add(time.Hour), "localhost")
	aHost, aPort := greeter(t, crt)
	bHost, bPort := greeter(t, crt)
	conf := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	a := transport.Endpoint{Host: aHost, Port: aPort, Security: transport.TLS, TLS: conf}
	b := transport.Endpoint{Host: bHost, Port: bPort, Security: transport.TLS, TLS: conf}
	for i, want := range []bool{false, false, true, true, true, true} {
		e := a
		if i%2 == 1 {
			e = b
		}
		if got := dialResumed(t, e); got != want {
			t.Errorf("dial %d (port %d): resumed %v, want %v", i+1, e.Port, got, want)
		}
	}
}

// A session is offered only under the configuration that would have
// accepted the server anyway: when the roots no longer trust it, the
// handshake fails as a new one would.
func TestResumptionStillVerifies(t *testing.T) {
	crt, roots := mailtest.Cert(t, time.Now().Add(time.Hour), "127.0.0.1")
	host, port := greeter(t, crt)
	e := transport.Endpoint{Host: host, Port: port, Security: transport.TLS, TLS: &tls.Config{RootCAs: roots}}
	dialResumed(t, e)
	if !dialResumed(t, e) {
		t.Fatal("second dial did not resume")
	}
	_, otherRoots := mailtest.Cert(t, time.Now().Add(time.Hour), "127.0.0.1")
	e.TLS = &tls.Config{RootCAs: otherRoots}
	_, err := transport.Dial(context.Background(), e)
	wantErr(t, err, mailerr.Unavailable, "tls", "not signed by a trusted authority")
}

// A configuration with its own cache, or with tickets off, is left so.
func TestClientTLSSessionCache(t *testing.T) {
	e := transport.Endpoint{Host: "imap.example.test", Port: 993, Security: transport.TLS}
	if e.ClientTLS().ClientSessionCache == nil {
		t.Error("no session cache by default")
	}
	own := tls.NewLRUClientSessionCache(1)
	e.TLS = &tls.Config{ClientSessionCache: own}
	if e.ClientTLS().ClientSessionCache != own {
		t.Error("the configuration's own cache was replaced")
	}
	e.TLS = &tls.Config{SessionTicketsDisabled: true}
	if e.ClientTLS().ClientSessionCache != nil {
		t.Error("a cache was set with session tickets disabled")
	}
}

// Against the real servers: Dovecot (IMAPS) and Postfix (SMTPS) on one
// host name both resume, alternating, as the gateway's IMAP and SMTP
// connections do. Dovecot resumes only when the next connection reaches
// the imap-login process that issued the ticket (OpenSSL's ticket keys
// are per process): the stack runs it in high-performance mode
// (service_count = 0), as production setups do; with the default of one
// process per connection nothing resumes.
func TestDovecotAndPostfixResume(t *testing.T) {
	st := mailtest.StartT(t, mailtest.Options{})
	imaps := transport.Endpoint{Host: st.Host, Port: st.IMAPSPort, Security: transport.TLS, TLS: st.TLSConfig(), ALPN: "imap"}
	smtps := transport.Endpoint{Host: st.Host, Port: st.SubmissionsPort, Security: transport.TLS, TLS: st.TLSConfig(), ALPN: "smtp"}
	for i, want := range []bool{false, false, true, true, true, true} {
		e := imaps
		if i%2 == 1 {
			e = smtps
		}
		if got := dialResumed(t, e); got != want {
			t.Errorf("dial %d (%s): resumed %v, want %v", i+1, e.ALPN, got, want)
		}
	}
}
