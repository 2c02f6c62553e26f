package submission

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/emersion/go-smtp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// phase is where in the conversation a Send is; it decides what an error
// means for the user.
type phase int

const (
	phaseConnect phase = iota // dial, TLS, greeting, EHLO, STARTTLS
	phaseAuth
	phaseMail
	phaseRcpt
	phaseData    // DATA and the message bytes
	phaseDataEnd // the final dot went out: the answer decides whether it was sent
	phaseDone
)

func (p phase) String() string {
	return [...]string{"connect", "auth", "mail", "rcpt", "data", "data-end", "done"}[p]
}

// mayHaveBeenSent is added to errors after the whole message, final dot
// included, was written and no answer came: the server may have taken it.
// It is a fact, not advice: whether sending again is safe depends on what
// the caller has (an idempotency key, the Sent copy), which this layer
// does not know.
const mayHaveBeenSent = "; the whole message had been transmitted, so it may have been sent"

// nothingSent is added where the server cannot have taken the message:
// it refused it, or the final dot never reached it (a server discards a
// DATA without its end).
const nothingSent = "; nothing was sent"

// contextError is the error for ctx ending while step of phase p was under
// way.
func contextError(ctx context.Context, p phase, step string) error {
	return sentOrNot(mailerr.TimedOut(ctx, step), p)
}

// timeoutError is the error for a socket deadline (go-smtp's own) passing
// while step of phase p was under way.
func timeoutError(err error, p phase, step string) error {
	return sentOrNot(&mailerr.Error{Kind: mailerr.Timeout, Err: err, Step: step,
		Msg: "the mail server did not answer in time while " + step}, p)
}

// sentOrNot completes a timeout's message with whether the message may have
// gone out.
func sentOrNot(e *mailerr.Error, p phase) *mailerr.Error {
	if p == phaseDataEnd {
		e.Msg += mayHaveBeenSent
	} else {
		e.Msg += nothingSent
	}
	return e
}

// isTimeout reports a socket deadline (go-smtp sets its own per command).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// classify turns an error of phase p into a *mailerr.Error. subject is the
// address the failed command was about, if any.
func classify(p phase, err error, subject string) error {
	var me *mailerr.Error
	if errors.As(err, &me) {
		return err
	}
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return serverError(p, se, subject)
	}
	if p == phaseDataEnd {
		return mailerr.Wrap(mailerr.Unavailable, err, "the connection to the mail server broke before it confirmed the message"+mayHaveBeenSent)
	}
	if isNetError(err) {
		return mailerr.Wrap(mailerr.Unavailable, err, "the connection to the mail server broke"+nothingSent)
	}
	return mailerr.Wrap(mailerr.Unavailable, err, "the mail server answered in a way the gateway does not understand"+nothingSent)
}

// serverError classifies an SMTP reply by its code and enhanced code.
func serverError(p phase, se *smtp.SMTPError, subject string) error {
	why := reply(se)
	switch {
	case p == phaseAuth && se.Code == 538:
		return mailerr.Wrap(mailerr.Auth, se, "the mail server requires an encrypted connection for login; check the SMTP security setting")
	case p == phaseAuth && se.Code/100 == 5:
		// 535 5.7.8 bad credentials, 534 mechanism too weak, 530, 504...
		return mailerr.Wrap(mailerr.Auth, se, "authentication failed: the mail server rejected the user name or password")
	case tooLarge(se):
		return mailerr.Wrap(mailerr.TooLarge, se, fmt.Sprintf("the message is too large for the mail server (%s)", why))
	case se.Code/100 == 4:
		return mailerr.Wrap(mailerr.Temporary, se, fmt.Sprintf("temporary failure (%s)%s", why, nothingSent))
	case se.Code/100 != 5:
		return mailerr.Wrap(mailerr.Unavailable, se, fmt.Sprintf("the mail server answered unexpectedly (%s); nothing was sent", why))
	}
	switch p {
	case phaseConnect:
		return mailerr.Wrap(mailerr.Permanent, se, fmt.Sprintf("the mail server refused the connection (%s)", why))
	case phaseMail:
		return mailerr.Wrap(mailerr.Permanent, se, fmt.Sprintf("the mail server refused the sender address %s (%s)", subject, why))
	case phaseRcpt:
		return mailerr.Wrap(mailerr.Permanent, se, fmt.Sprintf("the mail server refused the recipient %s (%s)", subject, why))
	default:
		return mailerr.Wrap(mailerr.Permanent, se, fmt.Sprintf("the mail server refused the message (%s)", why))
	}
}

// tooLarge reports a permanent size refusal: any X.3.4 ("message too big
// for system") or X.2.3 ("message length exceeds administrative limit",
// RFC 3463), or 552 (RFC 5321 "exceeded storage allocation") without an
// enhanced code that says something else (5.2.2 is a full mailbox).
func tooLarge(se *smtp.SMTPError) bool {
	if se.Code/100 != 5 {
		return false
	}
	if ec := se.EnhancedCode; hasEnhanced(se) {
		return ec[1] == 3 && ec[2] == 4 || ec[1] == 2 && ec[2] == 3 || se.Code == 552 && ec[1] == 0 && ec[2] == 0
	}
	return se.Code == 552
}

func hasEnhanced(se *smtp.SMTPError) bool {
	ec := se.EnhancedCode
	return ec[0] >= 2 && ec[0] <= 5 && ec[1] >= 0 && ec[2] >= 0
}

// recipientsError is the error when every recipient was refused.
func recipientsError(rej []Rejection) error {
	kind := mailerr.Permanent
	for _, r := range rej {
		if r.Code/100 == 4 {
			kind = mailerr.Temporary
		}
	}
	const maxListed = 10
	var list []string
	for i, r := range rej {
		if i == maxListed {
			list = append(list, fmt.Sprintf("and %d more", len(rej)-maxListed))
			break
		}
		list = append(list, fmt.Sprintf("%s (%d %s)", r.Address, r.Code, r.Message))
	}
	var msg string
	if len(rej) == 1 {
		msg = "the mail server refused the recipient " + list[0] + "; nothing was sent"
	} else {
		msg = "the mail server refused every recipient; nothing was sent: " + strings.Join(list, "; ")
	}
	if kind == mailerr.Temporary {
		msg = "temporary failure (" + strings.TrimPrefix(msg, "the mail server ") + ")"
	}
	var causes []error
	for _, r := range rej {
		causes = append(causes, &smtp.SMTPError{Code: r.Code, Message: r.Address + ": " + r.Message})
	}
	return mailerr.Wrap(kind, errors.Join(causes...), msg)
}

// reply formats a server answer for the user: "550 5.1.1 reason".
func reply(se *smtp.SMTPError) string {
	return fmt.Sprintf("%d %s", se.Code, reason(se))
}

// reason is the server's text, shortened to one line of printable ASCII,
// after the enhanced code when the server sent one.
func reason(se *smtp.SMTPError) string {
	msg, _, _ := strings.Cut(se.Message, "\n")
	msg = strings.TrimSpace(msg)
	// Postfix starts with "<rcpt>: ", which the caller names already.
	if strings.HasPrefix(msg, "<") {
		if i := strings.Index(msg, ">: "); i > 0 {
			msg = msg[i+3:]
		}
	}
	msg = printable(msg, 160)
	if hasEnhanced(se) {
		ec := se.EnhancedCode
		msg = strings.TrimSpace(fmt.Sprintf("%d.%d.%d %s", ec[0], ec[1], ec[2], msg))
	}
	if msg == "" {
		msg = "no reason given"
	}
	return msg
}

// printable keeps printable ASCII of s, at most max bytes.
func printable(s string, max int) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < max; i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f {
			c = ' '
		}
		b.WriteByte(c)
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	if len(s) > max {
		out += "..."
	}
	return out
}

// isNetError reports a broken or closed connection.
func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// refusedAuth says whether err is the server refusing the user name or
// password (a 5xx to AUTH other than 538, "encryption required"), as opposed
// to a network or server failure.
func refusedAuth(err error) bool {
	var se *smtp.SMTPError
	return mailerr.KindOf(err) == mailerr.Auth && errors.As(err, &se) && se.Code != 538
}
