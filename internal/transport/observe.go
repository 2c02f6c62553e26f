package transport

import "time"

// Observer learns how the steps of reaching a mail server end, for
// metrics. It is told only the protocol (the Endpoint's ALPN name, "imap"
// or "smtp"), the step ("dial": TCP connect and, for implicit TLS, the
// handshake; "login": greeting, STARTTLS and authentication on the open
// connection), how long it took and the error: never who or with what.
type Observer interface {
	ObserveConnect(protocol, step string, took time.Duration, err error)
}

// Steps an Observer is told about.
const (
	StepDial  = "dial"
	StepLogin = "login"
)

// Observed tells e.Observer (when set) that step began at start and ended
// with err, and returns err, so that a call site can wrap a return.
func (e Endpoint) Observed(step string, start time.Time, err error) error {
	if e.Observer != nil {
		e.Observer.ObserveConnect(e.ALPN, step, time.Since(start), err)
	}
	return err
}
