// Package transport owns what the IMAP and SMTP layers both need to reach a
// mail server: the security mode, the client TLS configuration (with one
// session cache for the process, so that new connections resume), a TCP dial
// (and, for implicit TLS, the handshake) bounded by a context, and one
// classification of dial and TLS failures into mailerr errors, with the
// cause kept for the log.
//
// It speaks no mail protocol: STARTTLS, greetings and logins belong to
// internal/mailbox and internal/submission. It knows nothing of MCP, and its
// messages state facts without naming any tool.
package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/egress"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Security says how a connection to a mail server is protected.
type Security string

const (
	TLS      Security = "tls"      // implicit TLS from the first byte (IMAP 993, SMTP 465)
	StartTLS Security = "starttls" // plain connect, then STARTTLS before any login (IMAP 143, SMTP 587)
	Plain    Security = "plain"    // no TLS at all: local development only
)

// Endpoint says where a mail server is and how to reach it.
type Endpoint struct {
	Host     string
	Port     int
	Security Security
	// TLS is the client TLS configuration; see ClientTLS.
	TLS *tls.Config
	// ALPN is the protocol name offered with implicit TLS ("imap", "smtp"),
	// unless TLS sets NextProtos itself.
	ALPN string
	// Server is how messages and steps name the server ("the SMTP server");
	// "the mail server" when empty.
	Server string
	// Observer, when set, is told how dials and logins end (metrics).
	Observer Observer
	// PublicOnly dials only public addresses (egress): for a host a
	// caller named, not one the operator configured.
	PublicOnly bool
}

// Addr is host:port.
func (e Endpoint) Addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

func (e Endpoint) server() string {
	if e.Server == "" {
		return "the mail server"
	}
	return e.Server
}

// ConnectStep is the step of opening the TCP connection, in words that
// complete "while ...".
func (e Endpoint) ConnectStep() string { return "connecting to " + e.server() }

// TLSStep is the step of the TLS handshake (implicit or after STARTTLS).
func (e Endpoint) TLSStep() string { return "starting TLS with " + e.server() }

// ClientTLS returns the TLS configuration for a connection to e: a clone of
// e.TLS (never shared, so a handshake cannot change the caller's), with
// ServerName from Host when empty, at least TLS 1.2, the ALPN name
// offered with implicit TLS, and the process's session cache (resumption,
// sessions.go) unless e.TLS brings its own or disables tickets.
func (e Endpoint) ClientTLS() *tls.Config {
	var t *tls.Config
	if e.TLS != nil {
		t = e.TLS.Clone()
	} else {
		t = &tls.Config{}
	}
	if t.MinVersion < tls.VersionTLS12 {
		t.MinVersion = tls.VersionTLS12
	}
	if t.ServerName == "" {
		t.ServerName = e.Host
	}
	if t.NextProtos == nil && e.Security == TLS && e.ALPN != "" {
		t.NextProtos = []string{e.ALPN}
	}
	if t.ClientSessionCache == nil && !t.SessionTicketsDisabled {
		t.ClientSessionCache = endpointSessions{addr: e.Addr()}
	}
	return t
}

// Dial opens a TCP connection to e with keep-alive, and for implicit TLS
// completes the handshake, all bounded by ctx. The connection it returns
// has no deadline set; ending ctx later does not close it. Errors are
// *mailerr.Error: Unavailable for a failure to reach or trust the server,
// Timeout (with the step) when ctx ends first.
func Dial(ctx context.Context, e Endpoint) (_ net.Conn, err error) {
	defer func(start time.Time) { e.Observed(StepDial, start, err) }(time.Now())
	d := net.Dialer{KeepAlive: 30 * time.Second}
	if e.PublicOnly {
		d.Control = egress.Control
	}
	raw, err := d.DialContext(ctx, "tcp", e.Addr())
	if err != nil {
		return nil, e.failure(ctx, e.ConnectStep(), err, e.server()+" could not be reached")
	}
	if e.Security != TLS {
		return raw, nil
	}
	tc := tls.Client(raw, e.ClientTLS())
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, e.failure(ctx, e.TLSStep(), err, "TLS handshake with "+e.server()+" failed (certificate or protocol mismatch)")
	}
	return tc, nil
}

// failure is Classify, with an Unavailable error saying otherwise for what
// it does not recognise.
func (e Endpoint) failure(ctx context.Context, step string, err error, otherwise string) *mailerr.Error {
	if me := e.Classify(ctx, step, err); me != nil {
		return me
	}
	return mailerr.Wrap(mailerr.Unavailable, err, otherwise)
}

// Classify turns a failure to reach or secure a connection to e into a
// *mailerr.Error: a Timeout naming step when ctx has ended (whatever err
// says, the closed socket is then the context's doing); Unavailable for a
// host name that does not resolve, a refused or unreachable address, a
// connection reset or ended during step (cause "closed"), or a TLS problem (untrusted or wrong certificate, no TLS on the port, no
// common parameters). It returns nil when err is none of these, so that the
// protocol layers can classify the rest. The error wraps err, for
// mailerr.Cause and the log.
func (e Endpoint) Classify(ctx context.Context, step string, err error) *mailerr.Error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return mailerr.TimedOut(ctx, step)
	}
	unavailable := func(cause, msg string) *mailerr.Error {
		me := mailerr.Wrap(mailerr.Unavailable, err, msg)
		me.Cause = cause
		return me
	}
	if msg := e.tlsProblem(err); msg != "" {
		return unavailable("tls", msg)
	}
	var dnsErr *net.DNSError
	if e.PublicOnly {
		// A host a caller named: a name that does not resolve and one that
		// resolves to an address it may not reach read the same, so that
		// the answer tells nobody which names exist (the log has the cause).
		switch {
		case errors.As(err, &dnsErr):
			return unavailable("dns", e.server()+" could not be reached")
		case errors.Is(err, egress.ErrNotPublic):
			return unavailable("not_public", e.server()+" could not be reached")
		}
	}
	switch {
	case broken(err):
		// A reset or an end of the stream in the middle of a handshake is
		// the connection failing (a server restarting, a proxy or firewall
		// dropping it), not a certificate or protocol mismatch: trying
		// again can work, changing the settings would not help.
		return unavailable("closed", "the connection to "+e.server()+" broke while "+step+" (reset or closed before the exchange finished)")
	case errors.As(err, &dnsErr):
		return unavailable("dns", e.server()+"'s host name could not be resolved")
	case errors.Is(err, syscall.ECONNREFUSED):
		return unavailable("dial_refused", e.server()+" could not be reached (connection refused)")
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return unavailable("dial_unreachable", e.server()+" could not be reached (no route to its address)")
	}
	return nil
}

// broken reports a connection that the peer or the network ended: a
// reset, a write to a closed connection, or the stream ending early.
func broken(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// tlsProblem is the message for a TLS failure, or "". x509 errors arrive
// wrapped in *tls.CertificateVerificationError; the specific ones come
// first.
func (e Endpoint) tlsProblem(err error) string {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
		alert     tls.AlertError
		op        *net.OpError
	)
	failed := "TLS handshake with " + e.server() + " failed: "
	switch {
	case errors.As(err, &unknownCA):
		return failed + "its certificate is not signed by a trusted authority (a private CA must be configured as MAIL_CA_FILE)"
	case errors.As(err, &hostname):
		return failed + "its certificate is not valid for its host name"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return failed + "its certificate has expired or is not yet valid"
	case errors.As(err, &invalid):
		return failed + "its certificate is not valid for this use"
	case errors.As(err, &verify):
		return failed + "its certificate could not be verified"
	case errors.As(err, &record):
		return failed + "it does not speak TLS on this port; check that the security setting (tls or starttls) matches the port"
	case errors.As(err, &alert), errors.As(err, &op) && op.Op == "remote error":
		// crypto/tls reports an alert from the server as a net.OpError
		// "remote error" around an unexported type; AlertError is QUIC's.
		return failed + "it refused the handshake (no common protocol version, cipher or application protocol)"
	}
	return ""
}

// Watched is a connection that notes whether the server has sent anything,
// so that a protocol layer can tell a server that never greeted from one
// that stopped answering later (go-imap and go-smtp read the greeting and
// send STARTTLS in one call). Answered may be asked from any goroutine.
type Watched struct {
	net.Conn
	answered atomic.Bool
}

// Watch wraps c.
func Watch(c net.Conn) *Watched { return &Watched{Conn: c} }

func (w *Watched) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if n > 0 {
		w.answered.Store(true)
	}
	return n, err
}

// Answered says whether any byte has been read.
func (w *Watched) Answered() bool { return w.answered.Load() }
