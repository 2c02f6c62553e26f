// Package httpapi is the gateway's HTTP surface: the mux (/mcp, /health) and
// the middleware every request passes before MCP runs: request id and log
// line, panic recovery, body limit, Origin check and CORS, and credential
// headers. It knows nothing about IMAP or SMTP.
package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/reqlog"
)

// Header names carrying mailbox credentials.
const (
	HeaderUser = "X-Imap-User"
	HeaderPass = "X-Imap-Pass"
)

// Options configure the HTTP surface.
type Options struct {
	Version         string
	AllowedOrigins  []string // "*" allows any
	MaxRequestBytes int64
	Logger          *slog.Logger
	// Loopback says the server listens on a loopback address only: then
	// /mcp accepts only local Host names (plus AllowedHosts) and local
	// browser origins (plus those listed by name in AllowedOrigins).
	Loopback     bool
	AllowedHosts []string
	// TrustedProxies may name the client in X-Forwarded-For.
	TrustedProxies []netip.Prefix
}

// New returns the gateway's HTTP handler, with mcp (mcp-go's streamable
// server) mounted at /mcp.
func New(opts Options, mcp http.Handler) http.Handler {
	log := opts.Logger.With("component", "http")
	origins := newOriginPolicy(opts.AllowedOrigins)
	origins.localOnly = opts.Loopback
	hosts := newHostPolicy(opts.Loopback, opts.AllowedHosts)
	mux := http.NewServeMux()
	mux.Handle("/mcp", hosts.wrap(origins.wrap(limitBody(opts.MaxRequestBytes, mcpOnly(clientAddr(opts.TrustedProxies, withCredentials(mcp)))))))
	mux.HandleFunc("/health", health(opts.Version))
	return logRequests(log, recoverPanics(log, mux))
}

// health answers liveness and readiness checks. It needs no mail server:
// the gateway is stateless and healthy when it can serve HTTP.
func health(version string) http.HandlerFunc {
	body, _ := json.Marshal(map[string]string{"status": "ok", "service": "mailbox-mcp", "version": version})
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			httpError(w, http.StatusMethodNotAllowed, "use GET")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(body)
	}
}

// mcpOnly refuses what a stateless server without streams cannot do: GET
// would open a notification stream (disabled, see NOTES.md).
func mcpOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			next.ServeHTTP(w, r)
		case http.MethodGet, http.MethodDelete:
			w.Header().Set("Allow", "POST, OPTIONS")
			httpError(w, http.StatusMethodNotAllowed, "this server is stateless: use POST for every MCP request (no GET notification stream, no sessions to delete)")
		default:
			w.Header().Set("Allow", "POST, OPTIONS")
			httpError(w, http.StatusMethodNotAllowed, "use POST")
		}
	})
}

// limitBody reads at most max bytes of the body. A declared Content-Length
// over the limit is refused before reading anything; a chunked body is
// refused as soon as it passes the limit.
func limitBody(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			w.Header().Set("Connection", "close")
			httpError(w, http.StatusRequestEntityTooLarge, "request body too large")
			return
		}
		if r.Body != nil && r.Method == http.MethodPost {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					w.Header().Set("Connection", "close")
					httpError(w, http.StatusRequestEntityTooLarge, "request body too large")
					return
				}
				httpError(w, http.StatusBadRequest, "could not read the request body")
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// withCredentials puts the x-imap-user / x-imap-pass credentials into the
// request context. Half a pair is refused: it is always a client mistake.
func withCredentials(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass := strings.TrimSpace(r.Header.Get(HeaderUser)), r.Header.Get(HeaderPass)
		switch {
		case user == "" && pass == "":
		case user == "" || pass == "":
			httpError(w, http.StatusBadRequest, "send both x-imap-user and x-imap-pass, or neither")
			return
		default:
			ctx := credentials.NewContext(r.Context(), credentials.New(user, pass))
			reqlog.FromContext(ctx).SetUser(user)
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
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
		next.ServeHTTP(sw, r.WithContext(ctx))
		if r.URL.Path == "/health" {
			return // probes every few seconds would drown the log
		}
		tool, outcome, user := rec.Fields()
		attrs := []any{
			"method", r.Method, "path", r.URL.Path, "status", sw.status,
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
		log.InfoContext(ctx, "request", attrs...)
	})
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
