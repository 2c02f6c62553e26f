package metrics

import (
	"time"
)

// KnownTools declares the tool names the gateway registered: the only
// values the tool label takes. Each gets its series at zero, so that a
// tool never called still shows on a dashboard.
func (m *Metrics) KnownTools(names ...string) {
	if m == nil {
		return
	}
	for _, n := range names {
		m.tools.add(n)
		m.toolCalls.WithLabelValues(n, "ok")
		m.toolSeconds.WithLabelValues(n)
	}
}

// ToolCall records one tool call: its outcome ("ok" or the error kind's
// name) and how long it took.
func (m *Metrics) ToolCall(tool, outcome string, took time.Duration) {
	if m == nil {
		return
	}
	tool = m.tools.of(tool)
	m.toolCalls.WithLabelValues(tool, outcomes.of(outcome)).Inc()
	m.toolSeconds.WithLabelValues(tool).Observe(took.Seconds())
}

// Connection steps ObserveConnect knows.
const (
	StepDial  = "dial"  // TCP connect, and the handshake for implicit TLS
	StepLogin = "login" // greeting, STARTTLS and authentication
)

// ObserveConnect records one step of reaching a mail server: protocol is
// "imap" or "smtp", step StepDial or StepLogin, err nil on success (else
// classified by mailerr.Cause, then by kind). It makes *Metrics a
// transport.Observer.
func (m *Metrics) ObserveConnect(protocol, step string, took time.Duration, err error) {
	if m == nil {
		return
	}
	protocol = protocols.of(protocol)
	switch step {
	case StepDial:
		m.dials.WithLabelValues(protocol, class(err)).Inc()
		m.dialSeconds.WithLabelValues(protocol).Observe(took.Seconds())
	case StepLogin:
		m.logins.WithLabelValues(protocol, class(err)).Inc()
		m.loginSeconds.WithLabelValues(protocol).Observe(took.Seconds())
	}
}

// OAuth records one event of the gateway's OAuth authorization server:
// event is authorize (the sign-in page's login), token (an authorization
// code exchanged) or refresh (a refresh token used); outcome is ok,
// refused (the caller's mistake or a wrong password: invalid_grant, a
// refused login) or error (the gateway or the mail server failed).
func (m *Metrics) OAuth(event, outcome string) {
	if m == nil {
		return
	}
	m.oauthEvents.WithLabelValues(oauthEvents.of(event), oauthOutcomes.of(outcome)).Inc()
}
