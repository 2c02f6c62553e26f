// Package httpapi is the gateway's HTTP surface: the mux (/mcp, /health,
// /attachments/ for download links, /v1/ for the REST mirror) and
// the middleware every request passes before MCP runs: request id and log
// line, panic recovery, the limits on connections, requests in flight and
// buffered bodies, the body checks (size, read deadline, duplicate JSON
// keys), Origin check and CORS, credential headers and the caller's agent
// name (x-mailbox-agent, or ?agent= on /mcp and /v1/). It knows nothing
// about IMAP or SMTP.
package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/approval"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/download"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/reqlog"
)

// Header names carrying mailbox credentials: a user and password, or a
// sealed token (opened by the tool layer).
const (
	HeaderUser  = "X-Imap-User"
	HeaderPass  = "X-Imap-Pass"
	HeaderToken = "X-Mailbox-Token"
	// HeaderHost names the mail host of x-imap-user (MAIL_HOSTS).
	HeaderHost = "X-Imap-Host"
)

// Options configure the HTTP surface.
type Options struct {
	Version         string
	AllowedOrigins  []string // "*" allows any
	MaxRequestBytes int64
	// MaxInflightRequests bounds the /mcp requests served at once; over it
	// a request gets 503 (0: no limit).
	MaxInflightRequests int
	// MaxBufferedBytes bounds the request-body bytes all requests together
	// hold in memory; over it a request gets 503. Each request may hold
	// 16 KiB without drawing on it, so small calls pass even when large
	// bodies have used it up.
	MaxBufferedBytes int64
	// BodyReadTimeout bounds reading one request body (0: no limit).
	BodyReadTimeout time.Duration
	Logger          *slog.Logger
	// Loopback says the server listens on a loopback address only: then
	// /mcp accepts only local Host names (plus AllowedHosts) and local
	// browser origins (plus those listed by name in AllowedOrigins).
	Loopback     bool
	AllowedHosts []string
	// TrustedProxies may name the client in X-Forwarded-For.
	TrustedProxies []netip.Prefix
	// ClientIPv6Prefix is how many leading bits of an IPv6 client address
	// the per-address limits count it by (CLIENT_IPV6_PREFIX; 0: 64).
	ClientIPv6Prefix int
	// REST, when set, is mounted at /v1/ behind the same checks as /mcp
	// (in-flight limit shared with it, Host, Origin, body, client address,
	// credential headers).
	REST http.Handler
	// Attachments, when set, serves attachment download links at
	// /attachments/ behind the Host, Origin, in-flight and client-address
	// checks; it takes no credential headers (the link carries its own).
	Attachments http.Handler
	// PublicURL is the base URL download links are made under; "" derives
	// it from each request (scheme from TLS, or from X-Forwarded-Proto of
	// a trusted proxy; the Host header, which the Host rule has checked).
	PublicURL string
	// OAuth, when set (PUBLIC_URL and OAUTH=on), is the gateway's own
	// authorization server: its paths are served (behind the Host,
	// in-flight and client-address checks), Authorization: Bearer is
	// accepted on /mcp and /v1/, and anonymous /mcp gets 401 (bearer.go).
	OAuth OAuth
	// Approvals, when set (APPROVAL is not off), lets clients of earlier
	// protocols that can show forms be asked (elicit.go); Approval serves
	// the approval page at approval.Prefix behind the Host, in-flight and
	// client-address checks (the link carries its own credentials).
	Approvals *approval.Approvals
	Approval  http.Handler
	// Hosts, when set, lets a request name its mail host (x-imap-host),
	// checked before anything is dialled.
	Hosts Hosts
	// Dependencies are what /health reports besides the gateway itself
	// (the shared memory when REDIS_URL is set).
	Dependencies []Dependency
}

// Dependency is a service the gateway uses whose state /health reports:
// Up is asked on every request, so it must not do I/O.
type Dependency struct {
	Name string
	Up   func() bool
}

// Hosts is what the HTTP layer asks of the served mail hosts.
type Hosts interface {
	// Check says whether host may be used; its errors are mailerr errors,
	// one sentence for every refusal.
	Check(ctx context.Context, host string) error
	// Canonical is host as every per-account key names it ("" for the
	// gateway's own, however it is spelt).
	Canonical(host string) string
}

// New returns the gateway's HTTP handler, with mcp (mcp-go's streamable
// server) mounted at /mcp.
func New(opts Options, mcp http.Handler) http.Handler {
	log := opts.Logger.With("component", "http")
	origins := newOriginPolicy(opts.AllowedOrigins)
	origins.localOnly = opts.Loopback
	hosts := newHostPolicy(opts.Loopback, opts.AllowedHosts)
	mux := http.NewServeMux()
	budget := newByteBudget(opts.MaxBufferedBytes)
	if opts.MaxBufferedBytes <= 0 {
		budget = newByteBudget(1 << 62)
	}
	api := http.NewServeMux()
	base := func(next http.Handler) http.Handler { return withBase(opts.PublicURL, opts.TrustedProxies, next) }
	clientAddr := func(next http.Handler) http.Handler {
		return withClientAddr(opts.TrustedProxies, opts.ClientIPv6Prefix, next)
	}
	api.Handle("/mcp", mcpOnly(clientAddr(base(withBearer(opts.OAuth, false, withCredentials(opts.Hosts, withAgent(false, withElicitSession(opts.Approvals, mcp))))))))
	if opts.REST != nil {
		api.Handle("/v1/", clientAddr(base(withBearer(opts.OAuth, true, withCredentials(opts.Hosts, withAgent(true, opts.REST))))))
	}
	if opts.Attachments != nil {
		api.Handle(download.Prefix, clientAddr(opts.Attachments))
	}
	body := readBody(opts.MaxRequestBytes, budget, opts.BodyReadTimeout, api)
	guarded := limitInflight(opts.MaxInflightRequests, hosts.wrap(origins.wrap(body)))
	mux.Handle("/mcp", guarded)
	if opts.REST != nil {
		mux.Handle("/v1/", guarded)
	}
	if opts.Attachments != nil {
		mux.Handle(download.Prefix, guarded)
	}
	if opts.Approval != nil {
		mux.Handle(approval.Prefix, limitInflight(opts.MaxInflightRequests, hosts.wrap(clientAddr(http.MaxBytesHandler(opts.Approval, 16<<10)))))
	}
	if opts.OAuth != nil {
		signIn := limitInflight(opts.MaxInflightRequests, hosts.wrap(clientAddr(http.MaxBytesHandler(opts.OAuth, 64<<10))))
		for _, p := range []string{"/.well-known/", "/authorize", "/authorize/callback", "/token", "/register"} {
			mux.Handle(p, signIn)
		}
	}
	mux.HandleFunc("/health", health(opts.Version, opts.Dependencies))
	return logRequests(log, recoverPanics(log, mux))
}

// health answers liveness and readiness checks. It needs no mail server:
// the gateway is stateless and healthy when it can serve HTTP. A
// dependency that is down makes the status "degraded" and names it, with
// 200 all the same: every replica shares it, and taking them all out of
// the load balancer would refuse everything rather than what needs it.
func health(version string, deps []Dependency) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			httpError(w, http.StatusMethodNotAllowed, "use GET")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(healthBody(version, deps))
	}
}

func healthBody(version string, deps []Dependency) []byte {
	h := map[string]string{"status": "ok", "service": "mailbox-mcp", "version": version}
	for _, d := range deps {
		h[d.Name] = "ok"
		if !d.Up() {
			h[d.Name] = "degraded"
			h["status"] = "degraded"
		}
	}
	body, _ := json.Marshal(h)
	return body
}

// mcpOnly refuses what a stateless server without streams cannot do: GET
// would open a notification stream (disabled, see NOTES.md). A POST's
// JSON answer goes out with its length (sized).
func mcpOnly(next http.Handler) http.Handler {
	post := sized(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			post.ServeHTTP(w, r)
		case http.MethodGet, http.MethodDelete:
			w.Header().Set("Allow", "POST, OPTIONS")
			httpError(w, http.StatusMethodNotAllowed, "this server is stateless: use POST for every MCP request (no GET notification stream, no sessions to delete)")
		default:
			w.Header().Set("Allow", "POST, OPTIONS")
			httpError(w, http.StatusMethodNotAllowed, "use POST")
		}
	})
}

// withCredentials puts the credentials of the request's headers into its
// context: x-imap-user and x-imap-pass, or a sealed token in
// x-mailbox-token (left unopened: the tool layer opens it, so that a bad
// token is a tool error). Half a pair, both kinds at once, or a NUL byte
// is refused: each is always a client mistake, or an attack.
func withCredentials(mailHosts Hosts, next http.Handler) http.Handler {
	// An OAuth access token for the mail server itself (Gmail, Microsoft
	// 365), sent with x-imap-user instead of x-imap-pass.
	const headerOAuthToken = "X-Imap-Oauth-Token"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass := strings.TrimSpace(r.Header.Get(HeaderUser)), r.Header.Get(HeaderPass)
		host := strings.TrimSpace(r.Header.Get(HeaderHost))
		if host != "" {
			// The host a login is for: allowed, and resolving to a
			// public address unless the operator allows otherwise,
			// before anything is dialled. Every refusal is one status
			// and one sentence: it must not tell which names exist.
			switch {
			case user == "":
				httpError(w, http.StatusBadRequest, "x-imap-host goes with x-imap-user and x-imap-pass (or x-imap-oauth-token); a token or a sign-in carries its own host")
				return
			case mailHosts == nil:
				httpError(w, http.StatusForbidden, "this gateway serves one mail host: drop x-imap-host")
				return
			}
			if err := mailHosts.Check(r.Context(), host); err != nil {
				httpError(w, http.StatusForbidden, mailerr.Message(err))
				return
			}
			host = mailHosts.Canonical(host)
		}
		token := strings.TrimSpace(r.Header.Get(HeaderToken))
		oauth := strings.TrimSpace(r.Header.Get(headerOAuthToken))
		if strings.ContainsRune(user, 0) || strings.ContainsRune(pass, 0) || strings.ContainsRune(token, 0) {
			httpError(w, http.StatusBadRequest, "a NUL byte is not allowed in x-imap-user, x-imap-pass or x-mailbox-token")
			return
		}
		ctx := r.Context()
		switch {
		case oauth != "" && (pass != "" || token != ""):
			httpError(w, http.StatusBadRequest, "send x-imap-oauth-token (with x-imap-user) instead of x-imap-pass or x-mailbox-token, not together with either")
			return
		case oauth != "" && user == "":
			httpError(w, http.StatusBadRequest, "x-imap-oauth-token needs x-imap-user: the mailbox address the access token was issued for")
			return
		case oauth != "" && !credentials.ValidAccessToken(oauth):
			httpError(w, http.StatusBadRequest, "x-imap-oauth-token is not an OAuth access token: it must be printable ASCII without spaces (send the token itself, without \"Bearer \")")
			return
		case oauth != "":
			c := credentials.NewOAuth(user, oauth)
			c.Host = host
			ctx = credentials.NewContext(ctx, c)
			reqlog.FromContext(ctx).SetUser(user)
		case token != "" && (user != "" || pass != ""):
			httpError(w, http.StatusBadRequest, "send either x-mailbox-token or x-imap-user and x-imap-pass, not both")
			return
		case token != "":
			ctx = credentials.NewTokenContext(ctx, token)
		case user == "" && pass == "":
		case user == "" || pass == "":
			httpError(w, http.StatusBadRequest, "send both x-imap-user and x-imap-pass, or neither")
			return
		default:
			c := credentials.New(user, pass)
			c.Host = host
			ctx = credentials.NewContext(ctx, c)
			reqlog.FromContext(ctx).SetUser(user)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// logRequests gives every request an id and writes one log line when it ends.
func logRequests(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !requestIDPattern.MatchString(id) {
			id = ""
		}
		rec := reqlog.New(id)
		w.Header().Set("X-Request-Id", rec.ID)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		ctx := reqlog.NewContext(r.Context(), rec)
		// Deferred, so that a response broken off on purpose (a download
		// that failed half-way panics with http.ErrAbortHandler) is logged.
		defer func() {
			if r.URL.Path != "/health" { // probes every few seconds would drown the log
				logRequest(ctx, log, r, sw, rec, start)
			}
		}()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// logRequest writes the one log line of a request.
func logRequest(ctx context.Context, log *slog.Logger, r *http.Request, sw *statusWriter, rec *reqlog.Record, start time.Time) {
	tool, outcome, user := rec.Fields()
	path := r.URL.Path
	// A download link and an approval link are credentials: their paths
	// are logged without the token.
	for _, secret := range []string{download.Prefix, approval.Prefix} {
		if strings.HasPrefix(path, secret) {
			path = secret + "…"
		}
	}
	attrs := []any{
		"method", r.Method, "path", path, "status", sw.status,
		"duration_ms", float64(time.Since(start).Microseconds()) / 1000,
	}
	if tool != "" {
		attrs = append(attrs, "tool", tool)
	}
	if outcome != "" {
		attrs = append(attrs, "outcome", outcome)
	}
	if user != "" {
		attrs = append(attrs, "user", user)
	}
	if cause := rec.Cause(); cause != "" {
		attrs = append(attrs, "cause", cause)
	}
	log.InfoContext(ctx, "request", attrs...)
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Flush lets SSE responses through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recoverPanics turns a panic in a handler into a 500 and a log line, so one
// bad request never takes the process down.
func recoverPanics(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.ErrorContext(r.Context(), "panic serving request", "panic", v)
				httpError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// withBase puts the gateway's external base URL into the request context,
// for the download links tools hand out: public when set (PUBLIC_URL),
// else the scheme of this connection (or the X-Forwarded-Proto a trusted
// proxy set: its right-most value, which that proxy wrote) and the Host
// header, which hostPolicy has already checked.
func withBase(public string, trusted []netip.Prefix, next http.Handler) http.Handler {
	public = strings.TrimRight(public, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := public
		if base == "" && r.Host != "" {
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			if a := remoteIP(r.RemoteAddr); a.IsValid() && slices.ContainsFunc(trusted, func(p netip.Prefix) bool { return p.Contains(a) }) {
				protos := strings.Split(strings.Join(r.Header.Values("X-Forwarded-Proto"), ","), ",")
				switch p := strings.ToLower(strings.TrimSpace(protos[len(protos)-1])); p {
				case "http", "https":
					scheme = p
				}
			}
			base = scheme + "://" + r.Host
		}
		if base != "" {
			r = r.WithContext(download.WithBase(r.Context(), base))
		}
		next.ServeHTTP(w, r)
	})
}
