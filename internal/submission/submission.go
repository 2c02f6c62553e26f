// Package submission sends mail through an SMTP submission server (RFC 6409)
// with go-smtp: it dials under a context, enforces the TLS policy,
// authenticates with the user's own credentials, sends one message and
// classifies the server's answers as mailerr errors.
//
// It never composes messages (mailmsg does) and never talks MCP. It sends
// the bytes it is given as they are, without SMTPUTF8: messages from
// mailmsg.Compose are ASCII, and envelope addresses must be ASCII too.
package submission

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// DefaultTimeout bounds one Send when Config.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// Config says how to reach the submission server.
type Config struct {
	Host string
	Port int
	// Security is transport.TLS (implicit, port 465), transport.StartTLS
	// (required before AUTH, port 587) or transport.Plain (local
	// development only).
	Security transport.Security
	// TLS is the client TLS configuration; ServerName is set from Host when
	// empty.
	TLS *tls.Config
	// Timeout bounds a whole Send (dial to QUIT) unless the caller's
	// context ends first. Zero means DefaultTimeout.
	Timeout time.Duration
	// AllowPlaintextAuth permits AUTH on an unencrypted connection (Plain).
	// Without it, Plain refuses to send anything.
	AllowPlaintextAuth bool
	// LocalName is the name sent with EHLO; "localhost" when empty. With
	// StartTLS the EHLO before the upgrade always says "localhost" (go-smtp
	// offers no way to change it); the one after says LocalName.
	LocalName string
	// Guard admits each AUTH and learns its outcome, so that sending cannot
	// be used to guess passwords past the login-failure back-off the IMAP
	// side applies; nil admits all.
	Guard *guard.Guard
	// Observer, when set, is told how dials and logins end (metrics).
	Observer transport.Observer
	// Route, when set, says where the submission server of a credential's
	// mail host is (its Host, when not "", for a login of its Provider);
	// an endpoint without a Host means sending is off for that host. Its
	// errors are mailerr errors.
	Route func(host, provider string) (transport.Endpoint, error)

	// dial replaces transport.Dial (tests: a connection that fails a
	// chosen write).
	dial func(context.Context, transport.Endpoint) (net.Conn, error)
}

func (c Config) endpoint() transport.Endpoint {
	return transport.Endpoint{Host: c.Host, Port: c.Port, Security: c.Security, TLS: c.TLS,
		ALPN: "smtp", Server: "the SMTP server", Observer: c.Observer}
}

// endpointFor is where creds' mail is submitted.
func (c Config) endpointFor(creds credentials.Credentials) (transport.Endpoint, error) {
	name := strings.ToLower(strings.TrimSpace(creds.Host))
	if name == "" {
		if c.Host == "" {
			return transport.Endpoint{}, mailerr.New(mailerr.Forbidden, "sending is not set up for this gateway's own mail host (no SMTP_HOST); nothing was sent")
		}
		return c.endpoint(), nil
	}
	if c.Route == nil {
		return transport.Endpoint{}, mailerr.New(mailerr.Forbidden, "this gateway sends mail only for its own mail host")
	}
	ep, err := c.Route(name, creds.Provider)
	if err != nil {
		return ep, err
	}
	if ep.Host == "" {
		return ep, mailerr.New(mailerr.Forbidden, "sending is not set up for the mail host of this login; nothing was sent")
	}
	ep.ALPN, ep.Server, ep.Observer = "smtp", "the SMTP server", c.Observer
	return ep, nil
}

// Client sends mail for many users: each Send is one SMTP session of its
// own, logged in as the user whose credentials it is given. A Client is safe
// for concurrent use.
type Client struct {
	cfg Config
	log *slog.Logger
}

// New makes a Client. A nil log discards.
func New(cfg Config, log *slog.Logger) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.LocalName == "" {
		cfg.LocalName = "localhost"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{cfg: cfg, log: log.With("component", "submission")}
}

// Result is the outcome of a Send that delivered the message to the server
// for at least one recipient.
type Result struct {
	Accepted []string    // recipients the server accepted, in the order given
	Rejected []Rejection // recipients it refused; the message was not sent to them
}

// Rejection is one recipient the server refused.
type Rejection struct {
	Address string
	Code    int    // SMTP reply code, e.g. 550
	Message string // the server's reason: one line of ASCII, enhanced code first when sent, shortened
}

// Send submits one message: it connects (TLS per Config.Security), logs in
// with creds (AUTH PLAIN, or LOGIN when PLAIN is not offered), and sends msg
// from the envelope sender from to each of rcpts. msg must be a complete
// RFC 5322 message with CRLF line endings; it is sent as is (a reader with a
// Len method, such as *bytes.Reader, lets the server refuse an oversized
// message before it is transmitted).
//
// When some recipients are refused and others accepted, the message is sent
// to the accepted ones and the refused ones are listed in Result.Rejected.
// When all are refused, nothing is sent and the error names them.
//
// Errors are *mailerr.Error with a message safe to show the user: Auth when
// the login is refused, Permanent or Temporary for SMTP 5xx or 4xx answers,
// TooLarge, Unavailable when the server cannot be reached or TLS fails,
// Timeout when ctx or Config.Timeout ends first, BadInput for bad addresses,
// NoCredentials when creds are incomplete. A timeout or broken connection
// after the whole message went out says that it may have been sent.
func (c *Client) Send(ctx context.Context, creds credentials.Credentials, from string, rcpts []string, msg io.Reader) (*Result, error) {
	if !creds.Valid() {
		return nil, mailerr.New(mailerr.NoCredentials, "no mailbox credentials for sending mail")
	}
	if msg == nil {
		return nil, mailerr.New(mailerr.Internal, "no message to send")
	}
	from = strings.TrimSpace(from)
	if err := checkEnvelope("sender", from); err != nil {
		return nil, err
	}
	rcpts, err := normaliseRecipients(rcpts)
	if err != nil {
		return nil, err
	}
	size := int64(-1)
	if l, ok := msg.(interface{ Len() int }); ok {
		size = int64(l.Len())
	}

	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	start := time.Now()
	// In back-off the mail server is not contacted at all.
	ep, err := c.cfg.endpointFor(creds)
	if err == nil {
		err = c.checkConfig(ep)
	}
	if err != nil {
		return nil, err
	}
	attempt, err := c.cfg.Guard.BeginLogin(ctx, creds)
	if err != nil {
		return nil, err
	}
	s := &session{cfg: c.cfg, ep: ep, ctx: ctx}
	res, reply, err := s.send(creds, from, rcpts, msg, size)
	switch {
	case s.phase > phaseAuth:
		attempt.Succeeded(ctx)
	case s.phase == phaseAuth && refusedAuth(err):
		attempt.Refused(ctx)
	default:
		attempt.Abandoned(ctx)
	}
	log := c.log.With("user", creds, "server", s.ep.Addr(), "ms", time.Since(start).Milliseconds())
	if err != nil {
		log.DebugContext(ctx, "submission failed", "stage", s.phase.String(), "cause", mailerr.Cause(err), "err", err)
		return nil, err
	}
	log.InfoContext(ctx, "message submitted", "bytes", s.sent, "accepted", len(res.Accepted),
		"rejected", len(res.Rejected), "reply", reply)
	return res, nil
}

// Verify logs in to the submission server with creds and logs out,
// sending nothing: the sign-in page checks that a login asking to send
// can. The login back-off applies as for Send.
func (c *Client) Verify(ctx context.Context, creds credentials.Credentials) error {
	if !creds.Valid() {
		return mailerr.New(mailerr.NoCredentials, "no mailbox credentials for sending mail")
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	ep, err := c.cfg.endpointFor(creds)
	if err == nil {
		err = c.checkConfig(ep)
	}
	if err != nil {
		return err
	}
	attempt, err := c.cfg.Guard.BeginLogin(ctx, creds)
	if err != nil {
		return err
	}
	s := &session{cfg: c.cfg, ep: ep, ctx: ctx}
	sc, done, err := s.login(creds)
	switch {
	case err == nil:
		attempt.Succeeded(ctx)
		if s.pipe != nil {
			s.pipe.quit()
		} else {
			_ = sc.Quit()
		}
		done()
	case s.phase == phaseAuth && refusedAuth(err):
		attempt.Refused(ctx)
	default:
		attempt.Abandoned(ctx)
	}
	return err
}

func (c *Client) checkConfig(ep transport.Endpoint) error {
	switch ep.Security {
	case transport.TLS, transport.StartTLS:
	case transport.Plain:
		if !c.cfg.AllowPlaintextAuth {
			return mailerr.New(mailerr.Internal, "the gateway is configured for unencrypted SMTP without allowing plain-text logins")
		}
	default:
		return mailerr.Newf(mailerr.Internal, "the gateway's SMTP security setting %q is not one of tls, starttls, plain", string(ep.Security))
	}
	if ep.Port <= 0 || ep.Port > 65535 {
		return mailerr.New(mailerr.Internal, "the gateway has no valid SMTP server address configured")
	}
	return nil
}

// checkEnvelope refuses what cannot go into MAIL FROM:<...> or RCPT
// TO:<...> as is: line breaks and other controls (command injection), angle
// brackets, and non-ASCII (which would need SMTPUTF8).
func checkEnvelope(what, addr string) error {
	if addr == "" {
		return mailerr.Newf(mailerr.BadInput, "the %s address is empty", what)
	}
	for i := 0; i < len(addr); i++ {
		switch c := addr[i]; {
		case c < 0x20 || c == 0x7f:
			return mailerr.Newf(mailerr.BadInput, "the %s address contains a line break or control character", what)
		case c >= 0x80:
			return mailerr.Newf(mailerr.BadInput, "the %s address %q is not ASCII; addresses with non-ASCII characters would need SMTPUTF8, which this gateway does not use", what, addr)
		case c == '<' || c == '>':
			return mailerr.Newf(mailerr.BadInput, "the %s address %q must be given without angle brackets", what, addr)
		}
	}
	if len(addr) > 254 {
		return mailerr.Newf(mailerr.BadInput, "the %s address is longer than 254 characters", what)
	}
	return nil
}

// normaliseRecipients checks rcpts and drops duplicates (compared
// case-insensitively), keeping the first spelling.
func normaliseRecipients(rcpts []string) ([]string, error) {
	if len(rcpts) == 0 {
		return nil, mailerr.New(mailerr.BadInput, "no recipients")
	}
	out := make([]string, 0, len(rcpts))
	seen := make(map[string]bool, len(rcpts))
	for _, r := range rcpts {
		r = strings.TrimSpace(r)
		if err := checkEnvelope("recipient", r); err != nil {
			return nil, err
		}
		if k := strings.ToLower(r); !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// session is one Send's SMTP conversation.
type session struct {
	cfg   Config
	ep    transport.Endpoint
	ctx   context.Context
	phase phase
	// greeted, when set, says whether the server has said anything; until
	// it has, a STARTTLS that times out was still connecting.
	greeted func() bool
	sent    int64 // message bytes written
	// pipe is the connection under go-smtp when the session owns it
	// (pipeline.go); nil after STARTTLS.
	pipe *pipe
	// wire is the connection as dialled, noting failed writes.
	wire *wire
}

// wire notes whether a write to the server failed. When the write that
// carries the final dot fails, its last bytes never reached the server,
// which discards a DATA without its end (with TLS, an incomplete record
// cannot even be read): nothing was sent, whatever else happens.
type wire struct {
	net.Conn
	failed atomic.Bool
}

func (w *wire) Write(b []byte) (int, error) {
	n, err := w.Conn.Write(b)
	if err != nil {
		w.failed.Store(true)
	}
	return n, err
}

// send runs the conversation. go-smtp takes no context: the connection is
// closed when ctx ends, which ends whatever go-smtp is waiting for.
func (s *session) send(creds credentials.Credentials, from string, rcpts []string, msg io.Reader, size int64) (*Result, string, error) {
	sc, done, err := s.login(creds)
	if err != nil {
		return nil, "", err
	}
	defer done()
	res, reply, err := s.transaction(sc, from, rcpts, msg, size)
	if err != nil {
		return nil, "", err
	}
	// The message is accepted: a failed QUIT changes nothing, and is
	// not waited for where the session owns the connection.
	if s.pipe != nil {
		s.pipe.quit()
	} else {
		_ = sc.Quit()
	}
	return res, reply, nil
}

// login dials, secures the connection and authenticates; done closes it.
func (s *session) login(creds credentials.Credentials) (sc *smtp.Client, done func(), err error) {
	s.phase = phaseConnect
	dial := transport.Dial
	if s.cfg.dial != nil {
		dial = s.cfg.dial
	}
	conn, err := dial(s.ctx, s.ep)
	if err != nil {
		var me *mailerr.Error
		if errors.As(err, &me) {
			return nil, nil, sentOrNot(me, s.phase)
		}
		return nil, nil, err
	}
	// Closing the TCP connection under TLS breaks any read or write at
	// once; tls.Conn.Close would first try to send an alert.
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	stop := context.AfterFunc(s.ctx, func() { raw.Close() })
	closeRaw := func() { stop(); raw.Close() }

	loginStart := time.Now()
	if sc, err = s.connect(conn); err != nil {
		closeRaw()
		return nil, nil, s.ep.Observed(transport.StepLogin, loginStart, err)
	}
	done = func() { sc.Close(); closeRaw() }
	if err := s.ep.Observed(transport.StepLogin, loginStart, s.auth(sc, creds)); err != nil {
		done()
		return nil, nil, err
	}
	return sc, done, nil
}

// connect does STARTTLS (the TLS handshake of implicit TLS is done by
// transport.Dial) and EHLO, and checks that the connection is encrypted
// unless plain text is allowed.
func (s *session) connect(conn net.Conn) (*smtp.Client, error) {
	var sc *smtp.Client
	s.wire = &wire{Conn: conn}
	if s.ep.Security == transport.StartTLS {
		// go-smtp's only STARTTLS entry point: greeting, EHLO localhost,
		// STARTTLS, or an error when the server does not offer it. The
		// handshake itself happens at the EHLO below.
		w := transport.Watch(s.wire)
		s.greeted = w.Answered
		var err error
		if sc, err = smtp.NewClientStartTLS(w, s.ep.ClientTLS()); err != nil {
			return nil, s.startTLSError(err)
		}
	} else {
		s.pipe = &pipe{Conn: s.wire}
		sc = smtp.NewClient(s.pipe)
	}
	// go-smtp puts these deadlines on the socket per command. The context
	// (which ends at Timeout at the latest) should be what ends a Send:
	// leave it a margin.
	sc.CommandTimeout = s.cfg.Timeout + 5*time.Second
	sc.SubmissionTimeout = s.cfg.Timeout + 5*time.Second
	if err := sc.Hello(s.cfg.LocalName); err != nil {
		sc.Close()
		return nil, s.fail(err, "")
	}
	st, ok := sc.TLSConnectionState()
	if tc, isTLS := conn.(*tls.Conn); isTLS && s.pipe != nil {
		// Implicit TLS: go-smtp sees the pipe, not the TLS connection.
		st, ok = tc.ConnectionState(), true
	}
	if (!ok || !st.HandshakeComplete) && !s.cfg.AllowPlaintextAuth {
		sc.Close()
		return nil, mailerr.New(mailerr.Internal, "refusing to log in to the mail server over an unencrypted connection")
	}
	return sc, nil
}

// startTLSError classifies a failed STARTTLS. go-smtp reports a server
// that does not offer STARTTLS with an untyped error, so everything that is
// not a server answer, a network failure or the context ending lands in one
// message that says both.
func (s *session) startTLSError(err error) error {
	var se *smtp.SMTPError
	if errors.As(err, &se) || s.ctx.Err() != nil || isNetError(err) {
		return s.fail(err, "")
	}
	return mailerr.Wrap(mailerr.Unavailable, err,
		"the mail server does not offer STARTTLS (or the STARTTLS exchange failed); refusing to send the password without encryption. Check the SMTP security setting and port (starttls on 587, tls on 465)")
}

// auth logs in with AUTH PLAIN, or AUTH LOGIN when PLAIN is not offered.
func (s *session) auth(sc *smtp.Client, creds credentials.Credentials) error {
	s.phase = phaseAuth
	if ok, _ := sc.Extension("AUTH"); !ok {
		return mailerr.New(mailerr.Unavailable,
			"the mail server does not offer authentication on this connection; check the SMTP port and security setting (submission is usually starttls on 587 or tls on 465)")
	}
	if creds.Mechanism() == credentials.MechOAuth {
		return s.authOAuth(sc, creds)
	}
	var mech sasl.Client
	switch {
	case sc.SupportsAuth(sasl.Plain):
		mech = sasl.NewPlainClient("", creds.User, creds.Password())
	case sc.SupportsAuth(sasl.Login):
		mech = &loginClient{user: creds.User, pass: creds.Password()}
	default:
		_, mechs := sc.Extension("AUTH")
		return mailerr.Newf(mailerr.Unavailable,
			"the mail server offers no password login this gateway supports (PLAIN or LOGIN); it offers: %s", printable(mechs, 80))
	}
	if err := sc.Auth(mech); err != nil {
		return s.failPolitely(sc, err, "")
	}
	return nil
}

// authOAuth logs in with an access token: AUTH OAUTHBEARER, or XOAUTH2
// when only that is offered.
func (s *session) authOAuth(sc *smtp.Client, creds credentials.Credentials) error {
	_, offered := sc.Extension("AUTH")
	if !credentials.ValidAccessToken(creds.AccessToken()) {
		return mailerr.New(mailerr.Auth, "the OAuth access token is malformed: an access token is printable ASCII without spaces")
	}
	mech, ok := creds.OAuthSASL(strings.Fields(offered))
	if !ok {
		return mailerr.Newf(mailerr.Unavailable,
			"the mail server offers no OAuth login (AUTH OAUTHBEARER or XOAUTH2), so an access token cannot be used for sending; it offers: %s", printable(offered, 80))
	}
	if err := sc.Auth(mech); err != nil {
		me := s.failPolitely(sc, err, "")
		if refusedAuth(me) {
			return mailerr.Wrap(mailerr.Auth, err, oauthRefused)
		}
		return me
	}
	return nil
}

// oauthRefused is the sentence for a refused access token.
const oauthRefused = "authentication failed: the mail server refused the OAuth access token (it has expired, was revoked, lacks the mail-sending scope, or belongs to another user); get a fresh access token from the provider and try again"

// transaction sends MAIL FROM, RCPT TO for each recipient, and the message.
func (s *session) transaction(sc *smtp.Client, from string, rcpts []string, msg io.Reader, size int64) (*Result, string, error) {
	s.phase = phaseMail
	opts := &smtp.MailOptions{} // never UTF8: see the package comment
	if size >= 0 {
		if max, ok := sc.MaxMessageSize(); ok && max > 0 && size > int64(max) {
			_ = sc.Quit()
			return nil, "", mailerr.Newf(mailerr.TooLarge,
				"the message is too large for the mail server (%d bytes; it accepts at most %d)", size, max)
		}
		opts.Size = size
	}
	if ok, _ := sc.Extension("PIPELINING"); ok && s.pipe != nil {
		lines := []string{mailCommand(sc, from, opts.Size)}
		for _, r := range rcpts {
			lines = append(lines, "RCPT TO:<"+r+">")
		}
		if err := s.pipe.ahead(append(lines, "DATA")); err != nil {
			return nil, "", s.fail(err, "")
		}
	}
	if err := sc.Mail(from, opts); err != nil {
		if s.drain(sc, rcpts) {
			return nil, "", s.failPolitely(sc, err, from)
		}
		return nil, "", s.fail(err, from)
	}

	s.phase = phaseRcpt
	res := &Result{}
	for _, r := range rcpts {
		err := sc.Rcpt(r, nil)
		if err == nil {
			res.Accepted = append(res.Accepted, r)
			continue
		}
		var se *smtp.SMTPError
		if !errors.As(err, &se) || se.Code == 421 {
			return nil, "", s.fail(err, r) // the connection is gone
		}
		res.Rejected = append(res.Rejected, Rejection{Address: r, Code: se.Code, Message: reason(se)})
	}
	if len(res.Accepted) == 0 {
		if s.drain(sc, nil) {
			_ = sc.Quit()
		}
		return nil, "", recipientsError(res.Rejected)
	}

	s.phase = phaseData
	w, err := sc.Data()
	if err != nil {
		return nil, "", s.failPolitely(sc, err, "")
	}
	cr := &countingReader{r: msg}
	if _, err := io.Copy(w, cr); err != nil {
		if cr.err != nil {
			// Without the final dot the server discards what it got.
			sc.Close()
			return nil, "", mailerr.Wrap(mailerr.Internal, cr.err, "could not read the message to send; nothing was sent")
		}
		return nil, "", s.fail(err, "")
	}
	s.sent = cr.n
	s.phase = phaseDataEnd
	resp, err := w.CloseWithResponse()
	if err != nil {
		if s.wire.failed.Load() {
			// The write of the final dot failed (the server reset the
			// connection, or the call's end closed it while the server
			// was not reading): the server never had the whole message.
			s.phase = phaseData
		}
		return nil, "", s.failPolitely(sc, err, "")
	}
	s.phase = phaseDone
	return res, printable(resp.StatusText, 200), nil
}

// fail classifies err. An error that is not a server answer, met after ctx
// ended, is the context's doing: the connection was closed under go-smtp.
func (s *session) fail(err error, subject string) error {
	var se *smtp.SMTPError
	if !errors.As(err, &se) {
		if s.ctx.Err() != nil {
			return contextError(s.ctx, s.phase, s.step())
		}
		if isTimeout(err) {
			return timeoutError(err, s.phase, s.step())
		}
		// A TLS failure can only be the handshake (after STARTTLS): later,
		// a broken connection must keep the "may have been sent" warning.
		if s.phase == phaseConnect {
			if me := s.ep.Classify(s.ctx, s.step(), err); me != nil {
				return sentOrNot(me, s.phase)
			}
		}
	}
	return classify(s.phase, err, subject)
}

// step is what the session is doing, for a timeout to name.
func (s *session) step() string {
	switch s.phase {
	case phaseConnect:
		if s.greeted != nil && s.greeted() {
			return s.ep.TLSStep() // STARTTLS, and the handshake at the EHLO after it
		}
		return s.ep.ConnectStep()
	case phaseAuth:
		return "logging in to the SMTP server"
	case phaseMail, phaseRcpt:
		return "sending the envelope"
	case phaseData:
		return "sending the message"
	default:
		return "waiting for the SMTP server to confirm the message"
	}
}

// drain reads the answers to the commands that went ahead of a failure
// (the RCPTs of rcpts and the DATA), each written by go-smtp and dropped by
// the pipe, and says whether the connection is in order for a QUIT. A DATA
// the server takes all the same (it must not, RFC 2920 3.1) leaves it in
// no order: the caller closes it, and nothing is sent.
func (s *session) drain(sc *smtp.Client, rcpts []string) bool {
	if s.pipe == nil || s.pipe.pending() == 0 {
		return true
	}
	for _, r := range rcpts {
		if s.pipe.pending() > 1 {
			_ = sc.Rcpt(r, nil)
		}
	}
	if s.pipe.pending() == 1 {
		if _, err := sc.Data(); err == nil {
			return false
		}
	}
	return s.pipe.pending() == 0
}

// failPolitely is fail, saying QUIT first when the server answered (the
// connection is still in order), so that it logs a clean end.
func (s *session) failPolitely(sc *smtp.Client, err error, subject string) error {
	out := s.fail(err, subject)
	var se *smtp.SMTPError
	if errors.As(err, &se) && se.Code != 421 {
		_ = sc.Quit()
	}
	return out
}

// countingReader counts bytes and keeps the reader's own error apart from
// the connection's.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

// loginClient is SASL LOGIN (draft-murchison-sasl-login) that answers the
// first challenge with the user name and the second with the password,
// whatever their text: servers word the prompts differently, and go-sasl's
// client only accepts "Password:" after an initial response some servers
// do not take.
type loginClient struct {
	user, pass string
	step       int
}

func (a *loginClient) Start() (string, []byte, error) { return sasl.Login, nil, nil }

func (a *loginClient) Next([]byte) ([]byte, error) {
	a.step++
	switch a.step {
	case 1:
		return []byte(a.user), nil
	case 2:
		return []byte(a.pass), nil
	}
	return nil, errors.New("AUTH LOGIN: unexpected third challenge")
}
