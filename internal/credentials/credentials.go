// Package credentials owns a request's mailbox credentials: the Credentials
// type (which redacts itself in logs), the sealed token format that carries
// them between calls, and the request-context key they travel under. It never
// writes a credential anywhere: not to disk, not to a log.
package credentials

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
)

// Credentials are one mailbox login: a user name with either a password or
// an OAuth access token (for providers such as Gmail and Microsoft 365,
// which take one through SASL XOAUTH2 or OAUTHBEARER). The secret is
// unexported so that it can only be read on purpose, with Password or
// AccessToken.
type Credentials struct {
	User     string
	password string // the password, or the access token when oauth
	oauth    bool
	// Scope is what the caller's token narrows the operator's permissions
	// to; zero for credentials from headers.
	Scope access.Scope
	// Agent is the caller's agent name within the mailbox ("" for none):
	// from the x-mailbox-agent header, ?agent= on the MCP URL, or sealed
	// in the token. Checked where it is used (agents.CheckName).
	Agent string
	// Host is the mail host the login is for: "" for the gateway's default
	// (IMAP_HOST), else a provider's host or one MAIL_HOSTS allows. Where
	// it is allowed, and how it is reached, is the hosts package's to say.
	Host string
	// Provider names the sign-in provider (microsoft, google, the
	// operator's) whose sign-in issued the access token these credentials
	// carry; "" for any other login. A provider's own mail host serves
	// only its sign-ins (the hosts package).
	Provider string
	// Expires is when these credentials stop being valid through the
	// gateway: the expiry of the sign-in grant (OAuth access token) or of
	// the credentials token they came from; zero for none. Anything made
	// from them (a token, a download link) expires no later.
	Expires time.Time
}

// New makes Credentials from a user name and a password.
func New(user, password string) Credentials {
	return Credentials{User: user, password: password}
}

// NewOAuth makes Credentials from a user name and an OAuth 2.0 access token
// issued for the mail server (scope https://mail.google.com/ at Google,
// IMAP.AccessAsUser.All and SMTP.Send at Microsoft). The gateway only
// presents the token; getting and refreshing it is the client's job.
func NewOAuth(user, accessToken string) Credentials {
	return Credentials{User: user, password: accessToken, oauth: true}
}

// Mechanism is how a credential proves itself to the mail server.
type Mechanism int

const (
	// MechPassword is a password: IMAP LOGIN, SMTP AUTH PLAIN or LOGIN.
	MechPassword Mechanism = iota
	// MechOAuth is an OAuth access token: SASL OAUTHBEARER (RFC 7628) or
	// XOAUTH2, whichever the server offers.
	MechOAuth
)

func (m Mechanism) String() string {
	if m == MechOAuth {
		return "oauth"
	}
	return "password"
}

// Mechanism tells the login layer how to log in with c.
func (c Credentials) Mechanism() Mechanism {
	if c.oauth {
		return MechOAuth
	}
	return MechPassword
}

// Password returns the password, for the login itself and nothing else;
// "" for OAuth credentials, so that a token is never sent as a password.
func (c Credentials) Password() string {
	if c.oauth {
		return ""
	}
	return c.password
}

// AccessToken returns the OAuth access token, for the login itself and
// nothing else; "" for password credentials.
func (c Credentials) AccessToken() string {
	if !c.oauth {
		return ""
	}
	return c.password
}

// Valid reports whether both parts are present.
func (c Credentials) Valid() bool { return c.User != "" && c.password != "" }

// String hides the secret, so fmt and %v never print it.
func (c Credentials) String() string { return c.User + " (" + c.secretName() + " redacted)" }

// GoString hides the secret from %#v too.
func (c Credentials) GoString() string {
	field := "password"
	if c.oauth {
		field = "accessToken"
	}
	return "credentials.Credentials{User:" + fmt.Sprintf("%q", c.User) + ", " + field + ":REDACTED}"
}

func (c Credentials) secretName() string {
	if c.oauth {
		return "access token"
	}
	return "password"
}

// LogValue makes slog print only the user.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.User) }

// Format keeps every fmt verb away from the password.
func (c Credentials) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprint(f, c.GoString())
		return
	}
	fmt.Fprint(f, c.String())
}

// poolSecret makes pool keys unguessable: a key is an HMAC of the whole
// credential under a secret that exists only in this process's memory.
var poolSecret = func() []byte {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("credentials: no randomness: " + err.Error())
	}
	return b
}()

// Key identifies this exact login at host (host, user, kind of secret and
// the secret), for the connection pool: a wrong password never maps to a
// logged-in connection, and neither does another token, nor a password
// that happens to equal a token.
func (c Credentials) Key(host string) string {
	m := hmac.New(sha256.New, poolSecret)
	for _, s := range []string{host, c.User, c.Mechanism().String(), c.password} {
		fmt.Fprintf(m, "%d:%s", len(s), s)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// AccountKey names the account these credentials log in to, across
// hosts: the host and the canonical user name. Every per-user limit and
// the pool's per-user bound are keyed on it, so the same name at two
// hosts is two accounts.
func (c Credentials) AccountKey() string {
	if c.Host == "" {
		return Account(c.User)
	}
	return strings.ToLower(c.Host) + "\x00" + Account(c.User)
}

// Account is the canonical form of a user name: trimmed and lower-cased,
// the way mail servers usually fold it (Dovecot's default
// auth_username_format %Lu), so that "ALICE@x" and "alice@x" name one
// account. Every per-user limit is keyed on it; the pool's reuse key (Key)
// keeps the name exactly as given.
func Account(user string) string { return strings.ToLower(strings.TrimSpace(user)) }

type ctxKey struct{}

// NewContext returns ctx carrying c.
func NewContext(ctx context.Context, c Credentials) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// FromContext returns the credentials in ctx, if any.
func FromContext(ctx context.Context) (Credentials, bool) {
	c, ok := ctx.Value(ctxKey{}).(Credentials)
	return c, ok && c.Valid()
}

type tokenKey struct{}

// NewTokenContext returns ctx carrying a sealed token sent in a header
// (x-mailbox-token), still unopened: the tool layer opens it, so that a bad
// token is answered as a tool error.
func NewTokenContext(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, tokenKey{}, token)
}

// TokenFromContext returns the header token in ctx, if any.
func TokenFromContext(ctx context.Context) (string, bool) {
	t, ok := ctx.Value(tokenKey{}).(string)
	return t, ok && t != ""
}

// agentName is an agent name: lower-case letters, digits, '.', '_' and
// '-', 1 to 40 characters, not starting with '.' (reserved for the
// gateway's own folders, such as .state). It lives here because the HTTP
// layer, tokens and the agents package all check it, and only this
// package is below all three.
var agentName = regexp.MustCompile(`^[a-z0-9_-][a-z0-9._-]{0,39}$`)

// AgentNameRule says what an agent name is, for error sentences; what
// carried the bad name (a header, an argument) is the caller's to add.
const AgentNameRule = "an agent name is 1 to 40 lower-case letters, digits, '.', '_' and '-', not starting with '.' (e.g. backend, frontend-2, planner.v1)"

// ValidAgentName reports whether name is an agent name.
func ValidAgentName(name string) bool { return agentName.MatchString(name) }

type agentKey struct{}

// NewAgentContext returns ctx carrying the caller's agent name as the
// request named it (x-mailbox-agent header or ?agent=), already checked
// by the HTTP layer. A token's own agent is joined to it by the tool layer.
func NewAgentContext(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, agentKey{}, name)
}

// AgentFromContext returns the request's agent name, if it named one.
func AgentFromContext(ctx context.Context) (string, bool) {
	n, ok := ctx.Value(agentKey{}).(string)
	return n, ok && n != ""
}
