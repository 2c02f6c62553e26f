// Package oauth makes the gateway its own OAuth 2.1 authorization server,
// for MCP clients that add a server by URL and sign in: the metadata
// documents (RFC 9728, RFC 8414), client registration (Client ID Metadata
// Documents and stateless dynamic registration), the sign-in page at
// /authorize, and /token. Every code and token it issues carries the
// sealed login (credentials.Sealer), so nothing about a user is stored;
// the only memory it keeps is which codes were redeemed and the
// generation each sign-in's next refresh must present (single use,
// bounded, failing closed: see ledger), in the memory.Store it is given
// (this process's, or Redis shared by every replica), and a short cache
// of fetched client metadata documents. It checks a login through the Verifier it is
// given and knows nothing about IMAP itself; what it fetches for a client
// goes only to public addresses (internal/egress).
package oauth

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/egress"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
	"github.com/mailbox-mcp/mailbox-mcp/internal/providers"
)

// Verifier checks a login at the mail server (a real IMAP login); its
// errors are mailerr errors.
type Verifier interface {
	Verify(ctx context.Context, creds credentials.Credentials) error
}

// Config configures the authorization server.
type Config struct {
	// Issuer is PUBLIC_URL: the issuer identifier and the base of every
	// endpoint. The protected resource is Issuer + "/mcp".
	Issuer string
	Sealer *credentials.Sealer
	// IMAP checks the login on the sign-in page.
	IMAP Verifier
	// SMTP, when set, also checks the login when mail.send is asked.
	SMTP Verifier
	// CanSend says sending is configured (SMTP_HOST); without it
	// mail.send is never granted.
	CanSend bool
	// Operator is MAILBOX_ACCESS: the highest level a token may carry.
	Operator   access.Level
	AccessTTL  time.Duration
	RefreshTTL time.Duration
	// HTTPClient fetches client metadata documents; nil makes one that
	// connects only to public addresses (egress.HTTPClient), with a 5 s
	// timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time // tests; nil means time.Now
	// Observe, when set, counts sign-ins and token requests: event is
	// authorize, token or refresh; outcome ok, refused or error.
	Observe func(event, outcome string)
	// Guard rate-limits the sign-in server per account and per client
	// address (nil: no limit).
	Guard *guard.Guard
	// Memory keeps the ledger (nil: a memory of this process's own).
	Memory memory.Store
	// MaxGrants bounds this process's memory of redeemed codes and live
	// sign-ins, and of provider sign-ins under way (0: DefaultMaxGrants;
	// Redis is bounded by its maxmemory); when it is full and nothing has
	// expired, new sign-ins are refused for a while rather than anything
	// forgotten.
	MaxGrants int
	// GrantsPerAccount is how many live sign-ins one account keeps (0:
	// DefaultGrantsPerAccount); a new one replaces its least recently
	// refreshed.
	GrantsPerAccount int
	// Providers are offered on the sign-in page ("Continue with ..."),
	// in this order.
	Providers []*providers.Provider
	// Hosts, when set, lets a password sign-in name its mail host (the
	// page's host field), or have one suggested from the address.
	Hosts Hosts
	// Identified, when set, ends a provider sign-in started by
	// StartIdentity for another page of the gateway: who is the mailbox
	// the provider vouched for (its address and host; the provider's
	// access token, unused there), returnTo the path it was started for.
	Identified func(w http.ResponseWriter, r *http.Request, who credentials.Credentials, returnTo string)
}

// Hosts is what the sign-in page asks of the served mail hosts.
type Hosts interface {
	// Check says whether host may be used (mailerr errors).
	Check(ctx context.Context, host string) error
	// Suggest names the host for a mail address, "" when none.
	Suggest(ctx context.Context, address string) string
	// Patterns says whether hosts other than the default may be named.
	Patterns() bool
	// Canonical is host as every per-account key names it ("" for the
	// gateway's own, however it is spelt).
	Canonical(host string) string
}

// Defaults of Config's bounds.
const (
	DefaultMaxGrants        = 250_000
	DefaultGrantsPerAccount = 64
)

// Server is the authorization server. It is an http.Handler for the
// paths in Paths.
type Server struct {
	cfg      Config
	issuer   string
	resource string
	now      func() time.Time
	log      *slog.Logger
	ledger   *ledger // codes redeemed, and each sign-in's refresh generation
	clients  *clientCache
	mux      *http.ServeMux
}

// Lifetimes that are not configurable.
const (
	codeTTL = 60 * time.Second
	formTTL = 15 * time.Minute
)

// New makes the authorization server.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, issuer: strings.TrimRight(cfg.Issuer, "/"), now: cfg.Now, log: cfg.Logger}
	s.resource = s.issuer + "/mcp"
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "oauth")
	if s.cfg.HTTPClient == nil {
		s.cfg.HTTPClient = egress.HTTPClient(egress.Options{Timeout: 5 * time.Second})
	}
	if s.cfg.MaxGrants <= 0 {
		s.cfg.MaxGrants = DefaultMaxGrants
	}
	if s.cfg.GrantsPerAccount <= 0 {
		s.cfg.GrantsPerAccount = DefaultGrantsPerAccount
	}
	if s.cfg.Memory == nil {
		s.cfg.Memory = memory.NewLocal(s.now)
	}
	s.ledger = newLedger(s.cfg.Memory, s.cfg.MaxGrants, s.cfg.GrantsPerAccount)
	s.clients = newClientCache(1000, 5*time.Minute)
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-protected-resource", s.protectedResource)
	mux.HandleFunc("/.well-known/oauth-protected-resource/", s.protectedResource)
	mux.HandleFunc("/.well-known/oauth-authorization-server", s.authorizationServer)
	mux.HandleFunc("/.well-known/oauth-authorization-server/", s.authorizationServer)
	mux.HandleFunc("/.well-known/openid-configuration", s.authorizationServer)
	mux.HandleFunc("/register", s.register)
	mux.HandleFunc("/authorize", s.authorize)
	mux.HandleFunc(CallbackPath, s.callback)
	mux.HandleFunc("/token", s.token)
	s.mux = mux
	return s
}

// Paths are the paths the server answers, for the gateway's mux ("/.well-known/"
// is a prefix).
var Paths = []string{"/.well-known/", "/register", "/authorize", CallbackPath, "/token"}

// ServeHTTP serves the metadata documents, /register, /authorize and /token.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Observe == nil || r.Method != http.MethodPost || (r.URL.Path != "/authorize" && r.URL.Path != "/token") {
		s.mux.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	s.mux.ServeHTTP(sw, r)
	event, outcome := "authorize", "refused"
	switch {
	case sw.status >= 500:
		outcome = "error"
	case r.URL.Path == "/token":
		event = "token"
		if r.PostForm.Get("grant_type") == "refresh_token" {
			event = "refresh"
		}
		if sw.status == http.StatusOK {
			outcome = "ok"
		}
	case sw.status/100 == 3:
		// The sign-in page redirects with a code when allowed, with an
		// error when cancelled; it shows itself again on a wrong password.
		if loc, err := url.Parse(sw.Header().Get("Location")); err == nil && loc.Query().Get("code") != "" {
			outcome = "ok"
		}
	}
	s.cfg.Observe(event, outcome)
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// ResourceMetadataURL is where a 401 from /mcp points clients
// (WWW-Authenticate resource_metadata).
func (s *Server) ResourceMetadataURL() string {
	return s.issuer + "/.well-known/oauth-protected-resource/mcp"
}

// Errors OpenAccess refuses a token with; their text is safe to show.
var (
	ErrTokenExpired = errors.New("the access token has expired: refresh it, or sign in again")
	ErrTokenInvalid = errors.New("the access token is not valid here (altered, made by another server or for another resource, or sealed with a key no longer in use): sign in again")
)

// OpenAccess opens an access token sent as Authorization: Bearer and
// returns the login it carries, with its scope. Only a token made for
// this resource opens.
func (s *Server) OpenAccess(token string) (credentials.Credentials, error) {
	g, err := s.cfg.Sealer.OpenGrant(credentials.KindAccess, token, s.now())
	switch {
	case errors.Is(err, credentials.ErrGrantExpired):
		return credentials.Credentials{}, ErrTokenExpired
	case err != nil:
		return credentials.Credentials{}, ErrTokenInvalid
	case g.Audience != s.resource:
		return credentials.Credentials{}, ErrTokenInvalid
	}
	return g.Creds, nil
}

// Resource is the protected resource's identifier (PUBLIC_URL + "/mcp").
func (s *Server) Resource() string { return s.resource }
