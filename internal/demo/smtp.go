package demo

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

func (s *Server) newSMTPServer() *smtp.Server {
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{srv: s, conn: c}, nil
	}))
	srv.Domain = Domain
	srv.MaxMessageBytes = MaxMessageBytes
	srv.MaxRecipients = 100
	srv.AllowInsecureAuth = true // loopback only, see loopbackAddr
	srv.ReadTimeout = 5 * time.Minute
	srv.WriteTimeout = 1 * time.Minute
	srv.EnableSMTPUTF8 = true // messages are stored as they come
	srv.ErrorLog = printfLogger{s.log.With("proto", "smtp")}
	return srv
}

var (
	errAuthRequired = &smtp.SMTPError{
		Code:         530,
		EnhancedCode: smtp.EnhancedCode{5, 7, 0},
		Message:      "Authentication required",
	}
	errNoSuchUser = &smtp.SMTPError{
		Code:         550,
		EnhancedCode: smtp.EnhancedCode{5, 1, 1},
		Message:      "No such user here",
	}
)

// smtpSession is one SMTP connection. go-smtp calls it from the connection's
// goroutine only.
type smtpSession struct {
	srv  *Server
	conn *smtp.Conn
	user *account // set by AUTH

	from    string
	rcpts   []*account
	dropped []string
}

var _ smtp.AuthSession = (*smtpSession)(nil)

func (ss *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (ss *smtpSession) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(identity, username, password string) error {
		acct := ss.srv.accounts[strings.ToLower(username)]
		if acct == nil || !acct.checkPassword(password) ||
			(identity != "" && !strings.EqualFold(identity, username)) {
			ss.srv.log.Info("SMTP AUTH failed", "user", username)
			return smtp.ErrAuthFailed
		}
		ss.user = acct
		return nil
	}), nil
}

func (ss *smtpSession) Mail(from string, opts *smtp.MailOptions) error {
	if ss.user == nil {
		return errAuthRequired
	}
	if !strings.EqualFold(from, ss.user.addr) {
		// A real submission server would refuse; the demo lets it pass so
		// that a gateway's own checks can be seen at work.
		ss.srv.log.Info("SMTP MAIL FROM differs from the authenticated user", "user", ss.user.addr, "from", from)
	}
	ss.from = from
	return nil
}

func (ss *smtpSession) Rcpt(to string, opts *smtp.RcptOptions) error {
	if ss.user == nil {
		return errAuthRequired
	}
	_, domain, ok := strings.Cut(to, "@")
	if !ok || !strings.EqualFold(domain, Domain) {
		ss.dropped = append(ss.dropped, to)
		return nil
	}
	acct := ss.srv.accounts[strings.ToLower(to)]
	if acct == nil {
		return errNoSuchUser
	}
	for _, r := range ss.rcpts {
		if r == acct {
			return nil // one copy per mailbox
		}
	}
	ss.rcpts = append(ss.rcpts, acct)
	return nil
}

func (ss *smtpSession) Data(r io.Reader) error {
	if ss.user == nil {
		return errAuthRequired
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return err // go-smtp maps ErrDataTooLarge to 552
	}
	body = crlf(body)
	now := time.Now()
	id := fmt.Sprintf("%08X", ss.srv.deliveryID.Add(1))
	for _, acct := range ss.rcpts {
		msg := append(ss.traceHeaders(acct.addr, id, now), body...)
		// No flags: new mail is unread. The internal date is the arrival.
		if err := acct.appendMessage(FolderInbox, msg, &imap.AppendOptions{Time: now}); err != nil {
			ss.srv.log.Error("SMTP delivery failed", "id", id, "to", acct.addr, "err", err)
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Delivery failed, try again later"}
		}
		ss.srv.log.Info("SMTP delivered", "id", id, "from", ss.from, "to", acct.addr, "bytes", len(msg))
	}
	for _, to := range ss.dropped {
		ss.srv.log.Info("SMTP recipient outside "+Domain+" accepted and dropped", "id", id, "from", ss.from, "to", to)
	}
	return nil
}

// traceHeaders returns the Return-Path and Received fields a delivering MTA
// prepends (RFC 5321 section 4.4; "ESMTPA" is RFC 3848's authenticated SMTP).
func (ss *smtpSession) traceHeaders(rcpt, id string, now time.Time) []byte {
	helo := ss.conn.Hostname()
	if helo == "" {
		helo = "unknown"
	}
	ip := "127.0.0.1"
	if host, _, err := net.SplitHostPort(ss.conn.Conn().RemoteAddr().String()); err == nil {
		ip = host
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Return-Path: <%s>\r\n", ss.from)
	fmt.Fprintf(&b, "Received: from %s ([%s])\r\n\tby %s (mailbox-mcp demo) with ESMTPA id %s\r\n\tfor <%s>; %s\r\n",
		helo, ip, Domain, id, rcpt, now.Format(time.RFC1123Z))
	return b.Bytes()
}

func (ss *smtpSession) Reset() {
	ss.from = ""
	ss.rcpts = nil
	ss.dropped = nil
}

func (ss *smtpSession) Logout() error { return nil }

// crlf turns bare LF line endings into CRLF, as IMAP requires.
func crlf(b []byte) []byte {
	if !hasBareLF(b) {
		return b
	}
	var out bytes.Buffer
	out.Grow(len(b) + len(b)/40)
	for i, c := range b {
		if c == '\n' && (i == 0 || b[i-1] != '\r') {
			out.WriteByte('\r')
		}
		out.WriteByte(c)
	}
	return out.Bytes()
}

func hasBareLF(b []byte) bool {
	for i, c := range b {
		if c == '\n' && (i == 0 || b[i-1] != '\r') {
			return true
		}
	}
	return false
}
