// Package mailerr is the error type shared by the mail layers and the tools:
// a Kind for deciding what to do, a Msg safe to show the user, and the cause
// Err for the log. It must stay free of I/O and of other project packages.
package mailerr

import (
	"errors"
	"fmt"
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
)

var kindNames = map[Kind]string{
	Internal: "internal", BadInput: "bad_input", Auth: "auth_failed", NoCredentials: "no_credentials",
	NotFound: "not_found", Busy: "busy", Timeout: "timeout", Unavailable: "unavailable",
	Temporary: "temporary", Permanent: "permanent", TooLarge: "too_large", RateLimited: "rate_limited",
}

func (k Kind) String() string { return kindNames[k] }

// Error is a classified error. Msg goes to the client; Err only to the log.
type Error struct {
	Kind Kind
	Msg  string
	Err  error
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

// KindOf returns the Kind of err, Internal when it carries none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
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
