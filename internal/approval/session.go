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

// WithElicit returns ctx marked as coming from a client that can show its
// user a form.
func WithElicit(ctx context.Context) context.Context {
	return context.WithValue(ctx, elicitKey{}, true)
}

// CanElicit reports whether ctx was marked by WithElicit.
func CanElicit(ctx context.Context) bool {
	v, _ := ctx.Value(elicitKey{}).(bool)
	return v
}

type sessionPayload struct {
	A string `json:"a"`
	N string `json:"n"`
}

// NewSession makes a session id for a client of account that can show
// forms.
func (a *Approvals) NewSession(account string) (string, error) {
	plain, err := json.Marshal(sessionPayload{A: account, N: nonce()})
	if err != nil {
		return "", err
	}
	return a.sealer.SealOAuth(credentials.KindApprovalSession, plain)
}

// IsSession reports whether id looks like a session id NewSession makes.
func IsSession(id string) bool { return strings.HasPrefix(id, string(credentials.KindApprovalSession)) }

// OpenSession reports whether id was made here for account.
func (a *Approvals) OpenSession(id, account string) bool {
	plain, err := a.sealer.OpenOAuth(credentials.KindApprovalSession, id)
	if err != nil {
		return false
	}
	var p sessionPayload
	return json.Unmarshal(plain, &p) == nil && p.N != "" && account != "" && p.A == account
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
