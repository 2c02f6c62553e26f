package approval

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// A client of a protocol before 2026-07-28 declares that it can show its
// user a form (elicitation) once, in initialize; a stateless server has
// forgotten it by the next call. The HTTP layer therefore answers such an
// initialize with an Mcp-Session-Id of its own that carries the fact
// sealed, bound to the caller's account, with a random part: the client
// sends it with every later request, and mcp-go, which keys the client's
// answers to a form on the session id, then routes each answer to this
// client's waiting call and no other. Nothing is stored.

type elicitKey struct{}

// Modes are the kinds of elicitation a client declared it can show its
// user: a form (accept or decline, in the client), and a URL the client
// opens for the person, never showing it to the model (MCP 2025-11-25).
type Modes struct{ Form, URL bool }

// Any reports whether the client can ask its user at all.
func (m Modes) Any() bool { return m.Form || m.URL }

// WithElicit returns ctx marked as coming from a client that can show its
// user what m says.
func WithElicit(ctx context.Context, m Modes) context.Context {
	return context.WithValue(ctx, elicitKey{}, m)
}

// ElicitModes is what WithElicit marked ctx with.
func ElicitModes(ctx context.Context) Modes {
	m, _ := ctx.Value(elicitKey{}).(Modes)
	return m
}

type sessionPayload struct {
	A string `json:"a"`
	N string `json:"n"`
	// The modes; a session made before modes were kept says neither,
	// and means a form.
	F bool `json:"f,omitempty"`
	U bool `json:"u,omitempty"`
}

// NewSession makes a session id for a client of account that can show
// its user what m says.
func (a *Approvals) NewSession(account string, m Modes) (string, error) {
	plain, err := json.Marshal(sessionPayload{A: account, N: nonce(), F: m.Form, U: m.URL})
	if err != nil {
		return "", err
	}
	return a.sealer.SealOAuth(credentials.KindApprovalSession, plain)
}

// IsSession reports whether id looks like a session id NewSession makes.
func IsSession(id string) bool { return strings.HasPrefix(id, string(credentials.KindApprovalSession)) }

// OpenSession reports whether id was made here for account, and the
// modes it carries.
func (a *Approvals) OpenSession(id, account string) (Modes, bool) {
	plain, err := a.sealer.OpenOAuth(credentials.KindApprovalSession, id)
	if err != nil {
		return Modes{}, false
	}
	var p sessionPayload
	if json.Unmarshal(plain, &p) != nil || p.N == "" || account == "" || p.A != account {
		return Modes{}, false
	}
	m := Modes{Form: p.F, URL: p.U}
	if !m.Any() {
		m.Form = true
	}
	return m, true
}

// Account is the canonical account of the caller in ctx (headers, sign-in
// or the x-mailbox-token header), "" when there is none or the token does
// not open.
func (a *Approvals) Account(ctx context.Context) string {
	if c, ok := credentials.FromContext(ctx); ok {
		return c.AccountKey()
	}
	if tok, ok := credentials.TokenFromContext(ctx); ok {
		if c, err := a.sealer.Open(tok); err == nil {
			return c.AccountKey()
		}
	}
	return ""
}
