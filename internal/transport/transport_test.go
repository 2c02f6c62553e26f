package transport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// wantErr checks that err is a *mailerr.Error of kind whose message holds
// every one of contains, and whose cause mailerr.Cause files under cause
// ("-": not checked).
func wantErr(t *testing.T, err error, kind mailerr.Kind, cause string, contains ...string) *mailerr.Error {
	t.Helper()
	var me *mailerr.Error
	if !errors.As(err, &me) {
		t.Fatalf("error %T %v, want a *mailerr.Error", err, err)
	}
	if me.Kind != kind {
		t.Errorf("kind %v, want %v: %v", me.Kind, kind, err)
	}
	for _, s := range contains {
		if !strings.Contains(me.Msg, s) {
			t.Errorf("message %q does not contain %q", me.Msg, s)
		}
	}
	if got := mailerr.Cause(err); cause != "-" && got != cause {
		t.Errorf("mailerr.Cause = %q, want %q (err %v)", got, cause, err)
	}
	if kind != mailerr.Timeout && me.Err == nil {
		t.Errorf("the underlying error is not kept: %v", err)
	}
	return me
}

// silent holds the connection open and never writes.
func silent(c net.Conn) { _, _ = c.Read(make([]byte, 1<<16)) }

// tlsServer serves TLS with crt (offering protos by ALPN) and writes
// "hello" after the handshake.
func tlsServer(t *testing.T, crt tls.Certificate, protos ...string) (string, int) {
	conf := &tls.Config{Certificates: []tls.Certificate{crt}, NextProtos: protos}
	return mailtest.Listen(t, func(c net.Conn) {
		tc := tls.Server(c, conf)
		if tc.Handshake() == nil {
			tc.Write([]byte("hello"))
		}
		silent(tc)
	})
}

func refusedPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func TestDialRefused(t *testing.T) {
	for _, sec := range []transport.Security{transport.TLS, transport.StartTLS, transport.Plain} {
		e := transport.Endpoint{Host: "127.0.0.1", Port: refusedPort(t), Security: sec}
		_, err := transport.Dial(context.Background(), e)
		wantErr(t, err, mailerr.Unavailable, "dial_refused", "the mail server could not be reached", "refused")
	}
}

func TestDialDNSFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := transport.Endpoint{Host: "no-such-host.invalid", Port: 993, Security: transport.TLS, Server: "the IMAP server"}
	_, err := transport.Dial(ctx, e)
	wantErr(t, err, mailerr.Unavailable, "dns", "the IMAP server's host name could not be resolved")
}

func TestDialTLSProblems(t *testing.T) {
	good, trusted := mailtest.Cert(t, time.Now().Add(time.Hour), "127.0.0.1")
	expired, trustedExpired := mailtest.Cert(t, time.Now().Add(-time.Hour), "127.0.0.1")
	other, trustedOther := mailtest.Cert(t, time.Now().Add(time.Hour), "imap.elsewhere.example")
	plainHost, plainPort := mailtest.Listen(t, func(c net.Conn) { c.Write([]byte("* OK IMAP ready\r\n")); silent(c) })
	for _, tc := range []struct {
		name  string
		crt   tls.Certificate
		roots *x509.CertPool
		alpn  string
		want  string
		cause string
	}{
		{"untrusted", good, nil, "", "not signed by a trusted authority (a private CA must be configured as MAIL_CA_FILE)", "tls"},
		{"wrong host name", other, trustedOther, "", "not valid for its host name", "tls"},
		{"expired", expired, trustedExpired, "", "expired", "tls"},
		// mailerr.Cause does not know crypto/tls's "remote error" yet.
		{"no common application protocol", good, trusted, "imap", "refused the handshake", "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, port := tlsServer(t, tc.crt, "smtp")
			e := transport.Endpoint{Host: host, Port: port, Security: transport.TLS, ALPN: tc.alpn,
				TLS: &tls.Config{RootCAs: tc.roots}}
			_, err := transport.Dial(context.Background(), e)
			me := wantErr(t, err, mailerr.Unavailable, tc.cause, "TLS handshake with the mail server failed", tc.want)
			if strings.Contains(me.Msg, "imap_") || strings.Contains(me.Msg, "smtp_") {
				t.Errorf("message names a tool: %q", me.Msg)
			}
		})
	}
	t.Run("plain server on the port", func(t *testing.T) {
		e := transport.Endpoint{Host: plainHost, Port: plainPort, Security: transport.TLS, TLS: &tls.Config{RootCAs: trusted}}
		_, err := transport.Dial(context.Background(), e)
		wantErr(t, err, mailerr.Unavailable, "tls", "does not speak TLS on this port")
	})
	t.Run("trusted", func(t *testing.T) {
		host, port := tlsServer(t, good, "imap")
		e := transport.Endpoint{Host: host, Port: port, Security: transport.TLS, ALPN: "imap", TLS: &tls.Config{RootCAs: trusted}}
		c, err := transport.Dial(context.Background(), e)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		st := c.(*tls.Conn).ConnectionState()
		if !st.HandshakeComplete || st.NegotiatedProtocol != "imap" || st.Version < tls.VersionTLS12 {
			t.Errorf("handshake %v, ALPN %q, version %x", st.HandshakeComplete, st.NegotiatedProtocol, st.Version)
		}
		buf := make([]byte, 5)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(buf); err != nil || string(buf) != "hello" {
			t.Errorf("read %q, %v", buf, err)
		}
	})
}

// STARTTLS and plain connections come back unencrypted: the protocol
// layers upgrade them.
func TestDialPlainAndStartTLS(t *testing.T) {
	host, port := mailtest.Listen(t, func(c net.Conn) { c.Write([]byte("* OK ready\r\n")); silent(c) })
	for _, sec := range []transport.Security{transport.StartTLS, transport.Plain} {
		c, err := transport.Dial(context.Background(), transport.Endpoint{Host: host, Port: port, Security: sec})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.(*tls.Conn); ok {
			t.Errorf("%s: got a TLS connection", sec)
		}
		buf := make([]byte, 12)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(buf); err != nil || string(buf) != "* OK ready\r\n" {
			t.Errorf("%s: read %q, %v", sec, buf, err)
		}
		c.Close()
	}
}

// A server that accepts and never answers holds the handshake until the
// deadline, and the error says that was the step.
func TestSilentServerTimesOutNamingTheStep(t *testing.T) {
	host, port := mailtest.Listen(t, silent)
	e := transport.Endpoint{Host: host, Port: port, Security: transport.TLS, Server: "the SMTP server"}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := transport.Dial(ctx, e)
	took := time.Since(start)
	me := wantErr(t, err, mailerr.Timeout, "timeout", "did not answer in time while starting TLS with the SMTP server")
	if me.Step != "starting TLS with the SMTP server" || me.Step != e.TLSStep() {
		t.Errorf("step %q", me.Step)
	}
	if took < 250*time.Millisecond || took > 2*time.Second {
		t.Errorf("took %v, want about 300ms", took)
	}
}

// A context that has already ended stops the dial itself.
func TestEndedContextStopsTheDial(t *testing.T) {
	host, port := mailtest.Listen(t, silent)
	e := transport.Endpoint{Host: host, Port: port, Security: transport.Plain}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := transport.Dial(ctx, e)
	me := wantErr(t, err, mailerr.Timeout, "timeout", "the request was cancelled while connecting to the mail server")
	if me.Step != e.ConnectStep() {
		t.Errorf("step %q, want %q", me.Step, e.ConnectStep())
	}
	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err = transport.Dial(ctx, e)
	wantErr(t, err, mailerr.Timeout, "timeout", "did not answer in time while connecting to the mail server")
}

// Errors Classify does not recognise are left to the protocol layer.
func TestClassifyLeavesTheRest(t *testing.T) {
	e := transport.Endpoint{Host: "h", Port: 1}
	if me := e.Classify(context.Background(), e.ConnectStep(), errors.New("something else")); me != nil {
		t.Errorf("classified an unknown error: %v", me)
	}
	if me := e.Classify(context.Background(), e.ConnectStep(), nil); me != nil {
		t.Errorf("classified nil: %v", me)
	}
}

func TestClientTLS(t *testing.T) {
	base := &tls.Config{MinVersion: tls.VersionTLS10}
	e := transport.Endpoint{Host: "imap.example.test", Port: 993, Security: transport.TLS, TLS: base, ALPN: "imap"}
	got := e.ClientTLS()
	if got == base || base.ServerName != "" || base.NextProtos != nil || base.MinVersion != tls.VersionTLS10 {
		t.Fatal("the caller's configuration was changed or shared")
	}
	if got.ServerName != "imap.example.test" || got.MinVersion != tls.VersionTLS12 || fmt.Sprint(got.NextProtos) != "[imap]" {
		t.Errorf("ServerName %q MinVersion %x NextProtos %v", got.ServerName, got.MinVersion, got.NextProtos)
	}
	e.TLS = &tls.Config{ServerName: "localhost", MinVersion: tls.VersionTLS13}
	e.Security = transport.StartTLS
	got = e.ClientTLS()
	if got.ServerName != "localhost" || got.MinVersion != tls.VersionTLS13 || got.NextProtos != nil {
		t.Errorf("ServerName %q MinVersion %x NextProtos %v", got.ServerName, got.MinVersion, got.NextProtos)
	}
	if e.TLS = nil; e.ClientTLS().MinVersion != tls.VersionTLS12 {
		t.Error("no TLS config: MinVersion below 1.2")
	}
}

func ExampleEndpoint_ClientTLS() {
	e := transport.Endpoint{Host: "mail.example.com", Port: 465, Security: transport.TLS, ALPN: "smtp", Server: "the SMTP server"}
	c := e.ClientTLS()
	fmt.Println(e.Addr(), c.ServerName, c.NextProtos, c.MinVersion == tls.VersionTLS12)
	fmt.Println(e.ConnectStep() + "; " + e.TLSStep())
	// Output:
	// mail.example.com:465 mail.example.com [smtp] true
	// connecting to the SMTP server; starting TLS with the SMTP server
}

func TestWatched(t *testing.T) {
	host, port := mailtest.Listen(t, func(c net.Conn) {
		c.Read(make([]byte, 1)) // speak only when spoken to
		c.Write([]byte("220 hi\r\n"))
		silent(c)
	})
	c, err := transport.Dial(context.Background(), transport.Endpoint{Host: host, Port: port, Security: transport.Plain})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := transport.Watch(c)
	if w.Answered() {
		t.Fatal("answered before the server wrote")
	}
	w.Write([]byte("x"))
	w.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := w.Read(make([]byte, 8)); err != nil || !w.Answered() {
		t.Fatalf("read %v, answered %v", err, w.Answered())
	}
}

// TestPublicOnlyRefusalsReadAlike: for a host a caller named (PublicOnly),
// a name that does not resolve and one that resolves to an address the
// gateway may not reach get the same sentence: the dial is no DNS oracle.
func TestPublicOnlyRefusalsReadAlike(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var msgs []string
	for _, host := range []string{"no-such-host.invalid", "127.0.0.1", "localhost"} {
		_, err := transport.Dial(ctx, transport.Endpoint{Host: host, Port: refusedPort(t), Security: transport.TLS, Server: "the IMAP server", PublicOnly: true})
		if mailerr.KindOf(err) != mailerr.Unavailable {
			t.Fatalf("%s: %v", host, err)
		}
		msgs = append(msgs, mailerr.Message(err))
	}
	for _, m := range msgs[1:] {
		if m != msgs[0] {
			t.Fatalf("refusals differ: %q", msgs)
		}
	}
}

// resetAfterHello reads the client's first flight (the ClientHello) and
// resets the connection (SO_LINGER 0), as a server restarting or a proxy
// dropping the connection does.
func resetAfterHello(c net.Conn) {
	_, _ = c.Read(make([]byte, 4096))
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// closeAfterHello reads the ClientHello and closes the connection cleanly
// (the client reads EOF).
func closeAfterHello(c net.Conn) {
	_, _ = c.Read(make([]byte, 4096))
	c.Close()
}

// A reset or an EOF in the middle of the TLS handshake is a connection
// failure (cause "closed", the step named), never a certificate or
// protocol mismatch: the settings are right, and trying again can work.
func TestDialBrokenDuringHandshake(t *testing.T) {
	for name, serve := range map[string]func(net.Conn){"reset": resetAfterHello, "eof": closeAfterHello} {
		t.Run(name, func(t *testing.T) {
			host, port := mailtest.Listen(t, serve)
			e := transport.Endpoint{Host: host, Port: port, Security: transport.TLS, Server: "the IMAP server"}
			_, err := transport.Dial(context.Background(), e)
			me := wantErr(t, err, mailerr.Unavailable, "closed", "the connection to the IMAP server broke while starting TLS with the IMAP server")
			for _, wrong := range []string{"certificate", "protocol", "mismatch", "TLS handshake with the IMAP server failed"} {
				if strings.Contains(me.Msg, wrong) {
					t.Errorf("message %q blames the settings (%q) for a broken connection", me.Msg, wrong)
				}
			}
		})
	}
}
