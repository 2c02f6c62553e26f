package mailbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Security says how the IMAP connection is protected.
type Security string

const (
	TLS      Security = "tls"
	StartTLS Security = "starttls"
	Plain    Security = "plain"
)

// Config says how to reach the IMAP server.
type Config struct {
	Host     string
	Port     int
	Security Security
	// TLS is the client TLS configuration; ServerName is set from Host when empty.
	TLS *tls.Config
	// Timeout bounds every operation (dial and login included) unless the
	// caller's context ends first.
	Timeout time.Duration
	// AllowPlaintextAuth permits LOGIN on an unencrypted connection.
	AllowPlaintextAuth bool
	// Guard admits each login and learns its outcome (the login-failure
	// back-off); nil admits all.
	Guard *guard.Guard
}

func (c Config) addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// Conn is one logged-in IMAP connection. It remembers which mailbox is
// selected so that the next call on the same folder skips the SELECT: with
// Dovecot the first FETCH after a SELECT costs time in proportion to the
// folder size (NOTES.md).
type Conn struct {
	c *imapclient.Client

	// Only the goroutine holding the pool lease touches these.
	selected    string // mailbox name as sent to the server, "" if none
	selectedRW  bool   // selected read-write (SELECT) rather than EXAMINE
	uidValidity uint32
	closeOnce   sync.Once
}

// Close closes the network connection at once (no LOGOUT).
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() { err = c.c.Close() })
	return err
}

// Logout says goodbye to the server, bounded by ctx, then closes.
func (c *Conn) Logout(ctx context.Context) {
	_ = bridge(ctx, c, func() error { return c.c.Logout().Wait() })
	c.Close()
}

// Client returns the go-imap client, for this package's operations.
func (c *Conn) client() *imapclient.Client { return c.c }

// bridge runs op on conn and closes conn if ctx ends first: go-imap takes no
// context and would otherwise wait forever on a silent server. An error
// caused by the context ending is reported as a timeout or cancellation.
func bridge(ctx context.Context, conn *Conn, op func() error) error {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	err := op()
	if !stop() {
		// The context ended while op ran and conn is closed: whatever op
		// returned, the cause is the context.
		return contextError(ctx)
	}
	return err
}

func contextError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return mailerr.Wrap(mailerr.Timeout, ctx.Err(), "the mail server did not answer in time; try again")
	}
	return mailerr.Wrap(mailerr.Timeout, ctx.Err(), "the request was cancelled")
}

// dial opens a connection and logs in with creds, all under ctx.
func dial(ctx context.Context, cfg Config, creds credentials.Credentials) (*Conn, error) {
	if cfg.Security == Plain && !cfg.AllowPlaintextAuth {
		return nil, mailerr.New(mailerr.Internal, "the gateway is configured for unencrypted IMAP without allowing plain-text logins")
	}
	// In back-off the mail server is not contacted at all.
	attempt, err := cfg.Guard.BeginLogin(ctx, creds.User)
	if err != nil {
		return nil, err
	}
	conn, err := dialAndLogin(ctx, cfg, creds)
	switch {
	case err == nil:
		attempt.Succeeded()
	case refusedLogin(err):
		attempt.Refused()
	default:
		attempt.Abandoned()
	}
	return conn, err
}

// refusedLogin says whether err is the server refusing the user name or
// password (a NO to LOGIN), as opposed to a network or server failure.
func refusedLogin(err error) bool {
	var ie *imap.Error
	return mailerr.KindOf(err) == mailerr.Auth && errors.As(err, &ie) && ie.Code != imap.ResponseCodePrivacyRequired
}

func dialAndLogin(ctx context.Context, cfg Config, creds credentials.Credentials) (*Conn, error) {
	d := net.Dialer{KeepAlive: 30 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", cfg.addr())
	if err != nil {
		return nil, dialError(ctx, err)
	}
	tlsConf := cfg.tlsConfig()
	opts := &imapclient.Options{TLSConfig: tlsConf, WordDecoder: mailmsg.WordDecoder()}
	var netConn net.Conn = raw
	if cfg.Security == TLS {
		tc := tls.Client(raw, tlsConf)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, tlsError(ctx, err)
		}
		netConn = tc
	}
	// Until the login is done, ctx ending closes the socket: go-imap sets
	// its own read deadlines, so a deadline on the socket would not hold.
	stop := context.AfterFunc(ctx, func() { netConn.Close() })
	conn, err := greetAndLogin(netConn, opts, cfg.Security, creds)
	if !stop() {
		if conn != nil {
			conn.Close()
		}
		return nil, contextError(ctx)
	}
	if err != nil {
		netConn.Close()
		return nil, err
	}
	return conn, nil
}

// greetAndLogin waits for the greeting (and upgrades with STARTTLS when
// asked), then logs in. It blocks until done or the socket is closed.
func greetAndLogin(netConn net.Conn, opts *imapclient.Options, security Security, creds credentials.Credentials) (*Conn, error) {
	var c *imapclient.Client
	if security == StartTLS {
		var err error
		if c, err = imapclient.NewStartTLS(netConn, opts); err != nil {
			return nil, mailerr.Wrap(mailerr.Unavailable, err, "could not start TLS with the mail server (STARTTLS)")
		}
	} else {
		c = imapclient.New(netConn, opts)
	}
	conn := &Conn{c: c}
	if err := c.WaitGreeting(); err != nil {
		conn.Close()
		return nil, mailerr.Wrap(mailerr.Unavailable, err, "the mail server did not greet properly")
	}
	if c.State() == imap.ConnStateAuthenticated {
		return conn, nil // PREAUTH (refused by go-imap after STARTTLS)
	}
	if c.Caps().Has(imap.CapLoginDisabled) {
		conn.Close()
		return nil, mailerr.New(mailerr.Auth, "the mail server refuses logins on this connection (LOGINDISABLED); check IMAP_SECURITY")
	}
	if err := c.Login(creds.User, creds.Password()).Wait(); err != nil {
		conn.Close()
		return nil, loginError(err)
	}
	return conn, nil
}

func (c Config) tlsConfig() *tls.Config {
	var t *tls.Config
	if c.TLS != nil {
		t = c.TLS.Clone()
	} else {
		t = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if t.ServerName == "" {
		t.ServerName = c.Host
	}
	if t.NextProtos == nil && c.Security == TLS {
		t.NextProtos = []string{"imap"}
	}
	return t
}

func dialError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return contextError(ctx)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return mailerr.Wrap(mailerr.Unavailable, err, "the mail server's host name could not be resolved")
	}
	return mailerr.Wrap(mailerr.Unavailable, err, "the mail server could not be reached; try again later")
}

func tlsError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return contextError(ctx)
	}
	return mailerr.Wrap(mailerr.Unavailable, err, "TLS handshake with the mail server failed (certificate or protocol mismatch)")
}

// loginError classifies a failed LOGIN. A NO answer is an authentication
// failure whether or not the server sent the AUTHENTICATIONFAILED code;
// UNAVAILABLE means the server cannot log anyone in right now.
func loginError(err error) error {
	var ie *imap.Error
	if errors.As(err, &ie) {
		switch ie.Code {
		case imap.ResponseCodeUnavailable:
			return mailerr.Wrap(mailerr.Temporary, err, "the mail server cannot log you in right now; try again later")
		case imap.ResponseCodePrivacyRequired:
			return mailerr.Wrap(mailerr.Auth, err, "the mail server requires an encrypted connection for login")
		}
		if ie.Type == imap.StatusResponseTypeNo {
			return mailerr.Wrap(mailerr.Auth, err, "authentication failed: the mail server rejected the user name or password")
		}
	}
	return mailerr.Wrap(mailerr.Unavailable, err, fmt.Sprintf("login failed: %s", "the mail server closed the connection or answered unexpectedly"))
}
