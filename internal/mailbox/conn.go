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
	// AuthServIDs are the authserv-ids of the operator's own receiving
	// servers (AUTHSERV_ID): a read trusts the Authentication-Results
	// fields they wrote, and no others (mailwork.go).
	AuthServIDs []string
	// Observer, when set, is told how dials and logins end (metrics).
	Observer transport.Observer
	// Route, when set, says where a credential's mail host is (its Host,
	// when not "", for a login of its Provider): the hosts of sign-in
	// providers and those MAIL_HOSTS allows. Its errors are mailerr
	// errors. Without it only the host above is served.
	Route func(host, provider string) (transport.Endpoint, error)

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
	// uidNext is the selected folder's UIDNEXT when it was selected (0:
	// not said): what the session's view holds lies below it (fresh.go).
	uidNext uint32
	// modSeqs: the selected folder keeps mod-sequences (its select
	// answered HIGHESTMODSEQ, not NOMODSEQ: RFC 7162).
	modSeqs   bool
	role      string  // special-use role of the selected mailbox (folders.go), "" if none
	srv       *Server // what is known about the server (server.go), nil until learned
	host      *hostState
	closeOnce sync.Once

	// The call's opening (opening.go): the select it sent and not yet
	// read, then its answer for the operation; the changes the server
	// reported on its own, and their count when the opening went out.
	inflight *selecting
	opened   *openResult
	changes  changeCounter
	mark     uint64
	// gains counts the changes that may have made a message unread, and
	// gainMark is its count when the opening went out (staleUnread).
	gains    changeCounter
	gainMark uint64
	// watching: the tap watches this call's opening (opening.fetchless).
	watching bool
	// refreshed: this call's opening sent a NOOP ahead of its commands
	// on the open folder (the operation asks Conn.stale instead of
	// waiting for a NOOP of its own).
	refreshed bool
	// sentName is the Sent folder found on this connection (its user's),
	// "" until found.
	sentName string
	// tap reads a conditional STORE's whole answer (consume.go); nil on
	// a connection made without one.
	tap *modifiedTap
	// For what the server does with commands sent behind a LOGIN
	// (pipelining.go): the greeting, and the probe that went behind this
	// connection's LOGIN, until it is judged (nil when none did).
	greet *greetingConn
	probe *loginProbe
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

// dial opens a connection and logs in with creds, all under ctx. The
// opening ctx carries (withOpening), if any, goes out behind the LOGIN
// (sendLogin) as far as the folder's name and what is known of the host
// allow, and is left for the operation to read.
func dial(ctx context.Context, cfg Config, creds credentials.Credentials) (*Conn, error) {
	return dialLogin(ctx, cfg, creds, nil, openingFrom(ctx))
}

// dialOwn is dial with tune adjusting the client's options (nil: none),
// for connections outside the pool: options are fixed when the client is
// made (a handler for unsolicited responses, a tap on the wire).
func dialOwn(ctx context.Context, cfg Config, creds credentials.Credentials, tune func(*imapclient.Options)) (*Conn, error) {
	return dialLogin(ctx, cfg, creds, tune, nil)
}

// dialLogin dials and logs in, telling the login guard how the login
// ended; o goes ahead as in dial.
func dialLogin(ctx context.Context, cfg Config, creds credentials.Credentials, tune func(*imapclient.Options), o *opening) (*Conn, error) {
	if cfg.Security == transport.Plain && !cfg.AllowPlaintextAuth {
		return nil, mailerr.New(mailerr.Internal, "the gateway is configured for unencrypted IMAP without allowing plain-text logins")
	}
	// In back-off the mail server is not contacted at all.
	attempt, err := cfg.Guard.BeginLogin(ctx, creds)
	if err != nil {
		return nil, err
	}
	conn, err := dialAndLogin(ctx, cfg, creds, tune, o)
	switch {
	case err == nil:
		attempt.Succeeded(ctx)
	case refusedLogin(err):
		attempt.Refused(ctx)
	default:
		attempt.Abandoned(ctx)
	}
	return conn, err
}

// refusedLogin says whether err is the server refusing the user name or
// password (a NO to LOGIN), as opposed to a network or server failure.
func refusedLogin(err error) bool {
	var ie *imap.Error
	return mailerr.KindOf(err) == mailerr.Auth && errors.As(err, &ie) && ie.Code != imap.ResponseCodePrivacyRequired
}

func dialAndLogin(ctx context.Context, cfg Config, creds credentials.Credentials, tune func(*imapclient.Options), o *opening) (_ *Conn, err error) {
	ep := cfg.endpoint()
	netConn, err := transport.Dial(ctx, ep)
	if err != nil {
		return nil, err
	}
	defer func(start time.Time) { ep.Observed(transport.StepLogin, start, err) }(time.Now())
	conn := &Conn{host: cfg.state, tap: &modifiedTap{}, greet: &greetingConn{Conn: netConn}}
	opts := &imapclient.Options{TLSConfig: ep.ClientTLS(), WordDecoder: mailmsg.WordDecoder(),
		UnilateralDataHandler: countChanges(&conn.changes, &conn.gains), DebugWriter: conn.tap}
	if tune != nil {
		conn.tap = nil
		opts.DebugWriter = nil
		tune(opts)
	}
	// Until the login is done, ctx ending closes the socket: go-imap sets
	// its own read deadlines, so a deadline on the socket would not hold.
	// greetAndLogin runs on this goroutine, so step is safe to read after.
	step := ep.ConnectStep()
	stop := context.AfterFunc(ctx, func() { netConn.Close() })
	err = greetAndLogin(ctx, ep, conn.greet, opts, creds, conn, o, &step)
	if !stop() {
		if conn.c != nil {
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
// asked), then logs in on conn, keeping *step at what it is doing. It
// blocks until done or the socket is closed. The opening o, when there is
// one, goes behind the LOGIN (sendLogin) and is left unread.
//
// Once TLS is up (implicit TLS, or STARTTLS done) the LOGIN does not wait
// for the greeting or for the capabilities: the server has proved who it
// is in the handshake, so the password goes to the right place, and the
// LOGIN leaves with the end of the handshake instead of one or two round
// trips later. (A server that says LOGINDISABLED there refuses the LOGIN,
// and that refusal is reported as LOGINDISABLED.) Without TLS (plain) the
// greeting's capabilities are read first, so that no password is sent
// where the server says LOGINDISABLED. AUTHENTICATE waits for the greeting:
// go-imap picks SASL-IR from it, and blocks the connection until the SASL
// exchange ends, so nothing can follow it in the same flight (after a
// refused token the server reads the next line as the SASL answer, RFC
// 7628 3.2.3, so nothing should).
func greetAndLogin(ctx context.Context, ep transport.Endpoint, netConn net.Conn, opts *imapclient.Options, creds credentials.Credentials, conn *Conn, o *opening, step *string) error {
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
				return me
			}
			return mailerr.Wrap(mailerr.Unavailable, err, "could not start TLS with the mail server (STARTTLS)")
		}
	} else {
		c = imapclient.New(netConn, opts)
	}
	conn.c = c
	password := creds.Mechanism() != credentials.MechOAuth
	var login *imapclient.Command
	if password && ep.Security != transport.Plain {
		login = sendLogin(c, creds, conn, o)
	}
	if err := c.WaitGreeting(); err != nil {
		conn.Close()
		return mailerr.Wrap(mailerr.Unavailable, err, "the mail server did not greet properly")
	}
	if login == nil && c.State() == imap.ConnStateAuthenticated {
		return nil // PREAUTH (refused by go-imap after STARTTLS)
	}
	*step = stepLogin
	if !password {
		if err := authenticateOAuth(c, creds); err != nil {
			conn.Close()
			return err
		}
		return nil
	}
	if login == nil {
		if c.Caps().Has(imap.CapLoginDisabled) {
			conn.Close()
			return errLoginDisabled()
		}
		login = sendLogin(c, creds, conn, o)
	}
	if err := login.Wait(); err != nil {
		switch {
		case preauthenticated(c, err):
			return nil
		case c.Caps().Has(imap.CapLoginDisabled):
			conn.Close()
			return errLoginDisabled()
		default:
			conn.Close()
			return loginError(err)
		}
	}
	return nil
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

// sendLogin sends LOGIN without waiting for its answer and, behind it,
// the opening o when the server is known to keep commands sent there
// (pipelining.go) and the folder's name may go before the capabilities
// are known. RFC 9051 5.5 lets a client send commands without waiting; a
// server runs commands that depend on an earlier one in order (Dovecot
// hands what follows a LOGIN to the imap process it starts), and if the
// LOGIN fails, they fail as commands of a connection that is not logged
// in, and the connection is closed. On a server not known yet, a probe
// goes behind the LOGIN instead, unless the greeting, already read, says
// who it is.
func sendLogin(c *imapclient.Client, creds credentials.Credentials, conn *Conn, o *opening) *imapclient.Command {
	login := c.Login(creds.User, creds.Password())
	srv := conn.host.server()
	switch {
	case srv.keepsAfterLogin():
		if o == nil || o.folder != "" && !goesAhead(o.folder) {
			return login
		}
		if o.folder != "" {
			conn.inflight = startSelect(c, o.folder, !o.rw, o.condStore, srv.HasSpecialUse())
		}
		if o.send != nil {
			o.send(conn, srv.caps)
		}
		o.sentWith = conn
	case !srv.afterLoginKnown() && afterLoginOf(conn.greet.greeting(), "greeting") == nil:
		conn.probe = startProbe(c)
	}
	return login
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
