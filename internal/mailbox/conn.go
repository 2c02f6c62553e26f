package mailbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// Config says how to reach the IMAP server.
type Config struct {
	Host     string
	Port     int
	Security transport.Security
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
	// TrashFolder and DraftsFolder name those folders (TRASH_FOLDER,
	// DRAFTS_FOLDER); "" finds them by special use, then by usual names.
	TrashFolder, DraftsFolder string
	// Observer, when set, is told how dials and logins end (metrics).
	Observer transport.Observer
}

func (c Config) endpoint() transport.Endpoint {
	return transport.Endpoint{Host: c.Host, Port: c.Port, Security: c.Security, TLS: c.TLS, ALPN: "imap", Observer: c.Observer}
}

// Steps of a connection's life that a timeout can name; connecting and
// starting TLS come from the transport.Endpoint.
const (
	stepWait   = "waiting for a free mail connection"
	stepLogin  = "logging in to the mail server"
	stepCheck  = "checking an idle mail connection"
	stepLogout = "logging out of the mail server"
)

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
	role        string // special-use role of the selected mailbox (folders.go), "" if none
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
	_ = bridge(ctx, c, stepLogout, func() error { return c.c.Logout().Wait() })
	c.Close()
}

// Client returns the go-imap client, for this package's operations.
func (c *Conn) client() *imapclient.Client { return c.c }

// bridge runs op on conn and closes conn if ctx ends first: go-imap takes no
// context and would otherwise wait forever on a silent server. An error
// caused by the context ending is reported as a timeout or cancellation
// while step.
func bridge(ctx context.Context, conn *Conn, step string, op func() error) error {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	err := op()
	if !stop() {
		// The context ended while op ran and conn is closed: whatever op
		// returned, the cause is the context.
		return mailerr.TimedOut(ctx, step)
	}
	return err
}

// dial opens a connection and logs in with creds, all under ctx.
func dial(ctx context.Context, cfg Config, creds credentials.Credentials) (*Conn, error) {
	return dialOwn(ctx, cfg, creds, nil)
}

// dialOwn is dial with tune adjusting the client's options (nil: none),
// for connections outside the pool: options are fixed when the client is
// made (a handler for unsolicited responses, a tap on the wire).
func dialOwn(ctx context.Context, cfg Config, creds credentials.Credentials, tune func(*imapclient.Options)) (*Conn, error) {
	if cfg.Security == transport.Plain && !cfg.AllowPlaintextAuth {
		return nil, mailerr.New(mailerr.Internal, "the gateway is configured for unencrypted IMAP without allowing plain-text logins")
	}
	// In back-off the mail server is not contacted at all.
	attempt, err := cfg.Guard.BeginLogin(ctx, creds)
	if err != nil {
		return nil, err
	}
	conn, err := dialAndLogin(ctx, cfg, creds, tune)
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

func dialAndLogin(ctx context.Context, cfg Config, creds credentials.Credentials, tune func(*imapclient.Options)) (_ *Conn, err error) {
	ep := cfg.endpoint()
	netConn, err := transport.Dial(ctx, ep)
	if err != nil {
		return nil, err
	}
	defer func(start time.Time) { ep.Observed(transport.StepLogin, start, err) }(time.Now())
	opts := &imapclient.Options{TLSConfig: ep.ClientTLS(), WordDecoder: mailmsg.WordDecoder()}
	if tune != nil {
		tune(opts)
	}
	// Until the login is done, ctx ending closes the socket: go-imap sets
	// its own read deadlines, so a deadline on the socket would not hold.
	// greetAndLogin runs on this goroutine, so step is safe to read after.
	step := ep.ConnectStep()
	stop := context.AfterFunc(ctx, func() { netConn.Close() })
	conn, err := greetAndLogin(ctx, ep, netConn, opts, creds, &step)
	if !stop() {
		if conn != nil {
			conn.Close()
		}
		return nil, mailerr.TimedOut(ctx, step)
	}
	if err != nil {
		netConn.Close()
		return nil, err
	}
	return conn, nil
}

// greetAndLogin waits for the greeting (and upgrades with STARTTLS when
// asked), then logs in, keeping *step at what it is doing. It blocks until
// done or the socket is closed.
func greetAndLogin(ctx context.Context, ep transport.Endpoint, netConn net.Conn, opts *imapclient.Options, creds credentials.Credentials, step *string) (*Conn, error) {
	var c *imapclient.Client
	if ep.Security == transport.StartTLS {
		// go-imap sends STARTTLS without waiting for the greeting: until
		// the server has said something, it is still being connected to.
		w := transport.Watch(netConn)
		*step = ep.TLSStep()
		var err error
		if c, err = imapclient.NewStartTLS(w, opts); err != nil {
			if !w.Answered() {
				*step = ep.ConnectStep()
			}
			if me := ep.Classify(ctx, *step, err); me != nil {
				return nil, me
			}
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
	*step = stepLogin
	if creds.Mechanism() == credentials.MechOAuth {
		if err := authenticateOAuth(c, creds); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
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

// authenticateOAuth logs in with an access token: AUTHENTICATE OAUTHBEARER
// or XOAUTH2, whichever the server advertises (LOGINDISABLED does not
// apply: it is about LOGIN only).
func authenticateOAuth(c *imapclient.Client, creds credentials.Credentials) error {
	if !credentials.ValidAccessToken(creds.AccessToken()) {
		return mailerr.New(mailerr.Auth, "the OAuth access token is malformed: an access token is printable ASCII without spaces")
	}
	offered := c.Caps().AuthMechanisms()
	mech, ok := creds.OAuthSASL(offered)
	if !ok {
		slices.Sort(offered)
		return mailerr.Newf(mailerr.Auth,
			"the mail server offers no OAuth login (AUTH=OAUTHBEARER or AUTH=XOAUTH2), so an access token cannot be used here; it offers: %s",
			mechanismList(offered))
	}
	if err := c.Authenticate(mech); err != nil {
		return oauthLoginError(err)
	}
	return nil
}

// mechanismList names the SASL mechanisms a server offers, for an error.
func mechanismList(offered []string) string {
	if len(offered) == 0 {
		return "no SASL mechanism at all"
	}
	list := strings.Join(offered, " ")
	if len(list) > 120 {
		list = list[:120] + "…"
	}
	return list
}

// oauthLoginError is loginError for AUTHENTICATE with an access token: a
// refusal says the token was refused, since expiry and a missing scope are
// what usually cause it.
func oauthLoginError(err error) error {
	me := loginError(err)
	var ie *imap.Error
	if mailerr.KindOf(me) == mailerr.Auth && errors.As(err, &ie) && ie.Code != imap.ResponseCodePrivacyRequired {
		return mailerr.Wrap(mailerr.Auth, err, oauthRefused)
	}
	return me
}

// oauthRefused is the sentence for a refused access token.
const oauthRefused = "authentication failed: the mail server refused the OAuth access token (it has expired, was revoked, lacks the mail scope, or belongs to another user); get a fresh access token from the provider and try again"

// loginError classifies a failed LOGIN. A NO answer is an authentication
// failure whether or not the server sent the AUTHENTICATIONFAILED code,
// except with a code that says the password was not the problem (RFC 5530):
// UNAVAILABLE (the server cannot log anyone in right now), LIMIT (Dovecot's
// per-user connection limit, mail_max_userip_connections) and INUSE. Those
// are Temporary, so they never count toward the login back-off.
func loginError(err error) error {
	var ie *imap.Error
	if errors.As(err, &ie) {
		switch ie.Code {
		case imap.ResponseCodeUnavailable:
			return mailerr.Wrap(mailerr.Temporary, err, "the mail server cannot log you in right now; try again later")
		case imap.ResponseCodeLimit:
			return mailerr.Wrap(mailerr.Temporary, err, "the mail server refused: too many connections for this account; try again shortly")
		case imap.ResponseCodeInUse:
			return mailerr.Wrap(mailerr.Temporary, err, "the mail server refused: the mailbox is in use; try again shortly")
		case imap.ResponseCodePrivacyRequired:
			return mailerr.Wrap(mailerr.Auth, err, "the mail server requires an encrypted connection for login")
		}
		if ie.Type == imap.StatusResponseTypeNo {
			return mailerr.Wrap(mailerr.Auth, err, "authentication failed: the mail server rejected the user name or password")
		}
	}
	return mailerr.Wrap(mailerr.Unavailable, err, fmt.Sprintf("login failed: %s", "the mail server closed the connection or answered unexpectedly"))
}
