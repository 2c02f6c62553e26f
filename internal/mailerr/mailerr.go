// Package mailerr is the error type shared by the mail layers and the tools:
// a Kind for deciding what to do, a Msg safe to show the user, the cause Err
// for the log, and two facts the tool layer turns into advice: what the
// error is about (Subject) and what was under way when time ran out (Step).
// Messages state facts; they never name a tool or tell the caller what to
// call next (only internal/tools does). It must stay free of I/O and of
// other project packages.
package mailerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// Kind classifies an error by what the caller can do about it.
type Kind int

const (
	Internal      Kind = iota // a bug or an unexpected server answer: generic text to the user
	BadInput                  // the caller's arguments are wrong
	Auth                      // the mail server refused the login
	NoCredentials             // the request carries no credentials
	NotFound                  // folder or message does not exist
	Busy                      // pool or server busy: retry later
	Timeout                   // the operation ran past its deadline
	Unavailable               // the mail server cannot be reached
	Temporary                 // the server said try again later (e.g. SMTP 4xx)
	Permanent                 // the server refused for good (e.g. SMTP 5xx)
	TooLarge                  // a size limit was hit
	RateLimited               // the gateway's own limits
	Forbidden                 // the gateway's policy does not allow this call
)

var kindNames = map[Kind]string{
	Internal: "internal", BadInput: "bad_input", Auth: "auth_failed", NoCredentials: "no_credentials",
	NotFound: "not_found", Busy: "busy", Timeout: "timeout", Unavailable: "unavailable",
	Temporary: "temporary", Permanent: "permanent", TooLarge: "too_large", RateLimited: "rate_limited",
	Forbidden: "forbidden",
}

func (k Kind) String() string { return kindNames[k] }

// Subject says what an error is about, so that the tool layer can add the
// advice that fits (which tool lists folders, how to make a new token).
type Subject string

const (
	SubjectFolder  Subject = "folder"  // a folder that does not exist or cannot be opened
	SubjectMessage Subject = "message" // a message UID that is not (or no longer) there
	SubjectToken   Subject = "token"   // a credentials token that cannot be opened
	SubjectCursor  Subject = "cursor"  // a paging cursor that no longer applies
	SubjectScope   Subject = "scope"   // a credentials token's scope
)

// Error is a classified error. Msg goes to the client; Err only to the log.
type Error struct {
	Kind Kind
	Msg  string
	Err  error
	// Subject is what the error is about, when that matters for advice.
	Subject Subject
	// Step is what was under way when a Timeout happened, in words that
	// complete "while ..." ("logging in to the mail server").
	Step string
	// Cause is the class of a connection failure for the log (see Cause),
	// set by the layer that recognised it (transport: dns, dial_refused,
	// dial_unreachable, tls).
	Cause string
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// New makes an Error with a user-facing message.
func New(kind Kind, msg string) *Error { return &Error{Kind: kind, Msg: msg} }

// Newf is New with formatting.
func Newf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Wrap attaches a user-facing message and a kind to a cause.
func Wrap(kind Kind, err error, msg string) *Error { return &Error{Kind: kind, Msg: msg, Err: err} }

// About sets the error's Subject and returns it.
func (e *Error) About(s Subject) *Error { e.Subject = s; return e }

// KindOf returns the Kind of err, Internal when it carries none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// SubjectOf returns the Subject of err, "" when it carries none.
func SubjectOf(err error) Subject {
	var e *Error
	if errors.As(err, &e) {
		return e.Subject
	}
	return ""
}

// StepOf returns the Step of err, "" when it carries none.
func StepOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Step
	}
	return ""
}

// Message is what a user may be shown for err: its Msg, or a generic
// sentence for unclassified errors (whose text may hold server internals).
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Msg != "" {
		return e.Msg
	}
	return "internal error; the gateway's log has the details"
}

// TimedOut is the error for ctx ending while step was under way: a Timeout
// whose message says which step, and whether the deadline passed or the
// caller went away.
func TimedOut(ctx context.Context, step string) *Error {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	msg := "the mail server did not answer in time"
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		msg = "the request was cancelled"
	}
	if step != "" {
		msg += " while " + step
	}
	return &Error{Kind: Timeout, Msg: msg, Err: cause, Step: step}
}

// Cause names the class of a connection failure for the log, without
// secrets: what the layer that recognised it recorded (dns, dial_refused,
// dial_unreachable, tls), else auth, timeout, closed, or "" when err is
// none of these.
func Cause(err error) string {
	for x := err; x != nil; x = errors.Unwrap(x) {
		if e, ok := x.(*Error); ok && e.Cause != "" {
			return e.Cause
		}
	}
	var netErr net.Error
	switch {
	case err == nil:
		return ""
	case KindOf(err) == Auth:
		return "auth"
	case KindOf(err) == Timeout, errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "closed"
	}
	return ""
}
