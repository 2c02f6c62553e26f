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
	// RecordsRoot is the folder under which the claim records of
	// Consume's idempotency key live (AGENTS_FOLDER; default
	// Agents), in the personal namespace.
	RecordsRoot string
	// Observer, when set, is told how dials and logins end (metrics).
	Observer transport.Observer
	// Route, when set, says where a credential's mail host is (its Host,
	// when not ""): the hosts of sign-in providers and those MAIL_HOSTS
	// allows. Its errors are mailerr errors. Without it only the host
	// above is served.
	Route func(host string) (transport.Endpoint, error)

	// For one host's connections (Client.hostConfig): dial only public
	// addresses, and the state of what is learned about the host.
	publicOnly bool
	state      *hostState
}

func (c Config) endpoint() transport.Endpoint {
	return transport.Endpoint{Host: c.Host, Port: c.Port, Security: c.Security, TLS: c.TLS, ALPN: "imap", Observer: c.Observer, PublicOnly: c.publicOnly}
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
	role        string  // special-use role of the selected mailbox (folders.go), "" if none
	srv         *Server // what is known about the server (server.go), nil until learned
	host        *hostState
	closeOnce   sync.Once
}

// place is name as a folder of the server conn talks to, with what is
// known about it (as it is when nothing is: the operations that call it
// have learned the server first).
func (conn *Conn) place(name string) string {
	if s := conn.host.server(); s != nil {
		return s.Namespace.Place(name)
	}
	return normFolder(name)
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

// dial opens a connection and logs in with creds, all under ctx. A folder
// other than "" (an operation about to EXAMINE it) is examined in the
// LOGIN's round trip (sendLogin) when its name allows; step is what that
// operation does, for a timeout while its EXAMINE is awaited.
func dial(ctx context.Context, cfg Config, creds credentials.Credentials, folder, step string) (*Conn, error) {
	conn, ex, err := dialLogin(ctx, cfg, creds, nil, folder)
	if err != nil || ex == nil {
		return conn, err
	}
	if err := bridge(ctx, conn, step, func() error { conn.settle(ex); return nil }); err != nil {
		return nil, err
	}
	return conn, nil
}

// dialOwn is dial with tune adjusting the client's options (nil: none),
// for connections outside the pool: options are fixed when the client is
// made (a handler for unsolicited responses, a tap on the wire).
func dialOwn(ctx context.Context, cfg Config, creds credentials.Credentials, tune func(*imapclient.Options)) (*Conn, error) {
	conn, _, err := dialLogin(ctx, cfg, creds, tune, "")
	return conn, err
}

// dialLogin dials and logs in, telling the login guard how the login
// ended; folder goes ahead as in dial, and the EXAMINE is returned unread.
func dialLogin(ctx context.Context, cfg Config, creds credentials.Credentials, tune func(*imapclient.Options), folder string) (*Conn, *selecting, error) {
	if cfg.Security == transport.Plain && !cfg.AllowPlaintextAuth {
		return nil, nil, mailerr.New(mailerr.Internal, "the gateway is configured for unencrypted IMAP without allowing plain-text logins")
	}
	// In back-off the mail server is not contacted at all.
	attempt, err := cfg.Guard.BeginLogin(ctx, creds)
	if err != nil {
		return nil, nil, err
	}
	conn, ex, err := dialAndLogin(ctx, cfg, creds, tune, folder)
	switch {
	case err == nil:
		attempt.Succeeded()
	case refusedLogin(err):
		attempt.Refused()
	default:
		attempt.Abandoned()
	}
	return conn, ex, err
}

// refusedLogin says whether err is the server refusing the user name or
// password (a NO to LOGIN), as opposed to a network or server failure.
func refusedLogin(err error) bool {
	var ie *imap.Error
	return mailerr.KindOf(err) == mailerr.Auth && errors.As(err, &ie) && ie.Code != imap.ResponseCodePrivacyRequired
}

func dialAndLogin(ctx context.Context, cfg Config, creds credentials.Credentials, tune func(*imapclient.Options), folder string) (_ *Conn, _ *selecting, err error) {
	ep := cfg.endpoint()
	netConn, err := transport.Dial(ctx, ep)
	if err != nil {
		return nil, nil, err
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
	conn, ex, err := greetAndLogin(ctx, ep, netConn, opts, creds, folder, &step)
	if conn != nil {
		conn.host = cfg.state
	}
	if !stop() {
		if conn != nil {
			conn.Close()
		}
		return nil, nil, mailerr.TimedOut(ctx, step)
	}
	if err != nil {
		netConn.Close()
		return nil, nil, err
	}
	return conn, ex, nil
}

// greetAndLogin waits for the greeting (and upgrades with STARTTLS when
// asked), then logs in, keeping *step at what it is doing. It blocks until
// done or the socket is closed. With a folder that goes ahead, the EXAMINE
// is sent behind the LOGIN and returned unread.
//
// With implicit TLS the LOGIN does not wait for the greeting: the server
// has proved who it is in the handshake, so the password goes to the right
// place, and the LOGIN leaves with the end of the handshake instead of one
// round trip later. Without TLS yet (plain, or STARTTLS before its
// answer) the greeting's capabilities are read first, so that no password
// is sent where the server says LOGINDISABLED.
func greetAndLogin(ctx context.Context, ep transport.Endpoint, netConn net.Conn, opts *imapclient.Options, creds credentials.Credentials, folder string, step *string) (*Conn, *selecting, error) {
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
				return nil, nil, me
			}
			return nil, nil, mailerr.Wrap(mailerr.Unavailable, err, "could not start TLS with the mail server (STARTTLS)")
		}
	} else {
		c = imapclient.New(netConn, opts)
	}
	conn := &Conn{c: c}
	password := creds.Mechanism() != credentials.MechOAuth
	var login *imapclient.Command
	var ex *selecting
	if password && ep.Security == transport.TLS {
		login, ex = sendLogin(c, creds, folder)
	}
	if err := c.WaitGreeting(); err != nil {
		conn.Close()
		return nil, nil, mailerr.Wrap(mailerr.Unavailable, err, "the mail server did not greet properly")
	}
	if login == nil && c.State() == imap.ConnStateAuthenticated {
		return conn, nil, nil // PREAUTH (refused by go-imap after STARTTLS)
	}
	*step = stepLogin
	if !password {
		if err := authenticateOAuth(c, creds); err != nil {
			conn.Close()
			return nil, nil, err
		}
		return conn, nil, nil
	}
	if login == nil {
		if c.Caps().Has(imap.CapLoginDisabled) {
			conn.Close()
			return nil, nil, errLoginDisabled()
		}
		login, ex = sendLogin(c, creds, folder)
	}
	if err := login.Wait(); err != nil {
		switch {
		case preauthenticated(c, err):
		case c.Caps().Has(imap.CapLoginDisabled):
			conn.Close()
			return nil, nil, errLoginDisabled()
		default:
			conn.Close()
			return nil, nil, loginError(err)
		}
	}
	return conn, ex, nil
}

// preauthenticated says whether a LOGIN that failed with err was sent
// before a PREAUTH greeting: the server then calls it out of place (BAD)
// and the connection is logged in (or, with the EXAMINE behind it done,
// in its folder). A NO is a refused login whatever the state says.
func preauthenticated(c *imapclient.Client, err error) bool {
	var ie *imap.Error
	st := c.State()
	return errors.As(err, &ie) && ie.Type == imap.StatusResponseTypeBad &&
		(st == imap.ConnStateAuthenticated || st == imap.ConnStateSelected)
}

func errLoginDisabled() error {
	return mailerr.New(mailerr.Auth, "the mail server refuses logins on this connection (LOGINDISABLED); check IMAP_SECURITY")
}

// sendLogin sends LOGIN without waiting for its answer and, when folder
// goes ahead, the EXAMINE and LIST behind it. RFC 9051 5.5 lets a client
// send commands without waiting; a server runs commands that depend on an
// earlier one in order (Dovecot hands what follows a LOGIN to the imap
// process it starts), and if the LOGIN fails, they fail as commands of a
// connection that is not logged in, and the connection is closed.
func sendLogin(c *imapclient.Client, creds credentials.Credentials, folder string) (*imapclient.Command, *selecting) {
	login := c.Login(creds.User, creds.Password())
	if !goesAhead(folder) {
		return login, nil
	}
	// Whether the server has SPECIAL-USE is known only after the LOGIN:
	// the LIST goes anyway, and finishSelect ignores it if not.
	return login, startSelect(c, folder, true, true)
}

// goesAhead says whether folder may be sent before the server's
// capabilities are known: go-imap writes a name in modified UTF-7, or in
// UTF-8 once the server has IMAP4rev2 or UTF8=ACCEPT; printable ASCII
// without "&" is the same either way.
func goesAhead(folder string) bool {
	if folder == "" {
		return false
	}
	for i := 0; i < len(folder); i++ {
		if b := folder[i]; b < 0x20 || b > 0x7e || b == '&' {
			return false
		}
	}
	return true
}

// settle waits for the EXAMINE sent ahead and records the folder as
// selected, as sel does. A failed EXAMINE selects nothing: the operation's
// own EXAMINE then fails and is reported exactly as on a connection that
// was already open.
func (conn *Conn) settle(ex *selecting) { conn.finishSelect(ex) }

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
