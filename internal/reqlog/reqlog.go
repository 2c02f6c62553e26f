// Package reqlog carries the per-request record that the HTTP layer's one
// log line per request is made from: the request id, and the tool name and
// outcome that the tool layer fills in. It also tags every log line written
// with a request's context with that request's id. It holds no credentials.
package reqlog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
)

// Record is filled in while one HTTP request is served.
type Record struct {
	ID string

	mu      sync.Mutex
	tool    string
	outcome string
	user    string
	cause   string
}

// New makes a Record with the given id, or a random one if id is empty.
func New(id string) *Record {
	if id == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	return &Record{ID: id}
}

type ctxKey struct{}

// NewContext returns ctx carrying r.
func NewContext(ctx context.Context, r *Record) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// FromContext returns the request's Record, or nil outside a request.
func FromContext(ctx context.Context) *Record {
	r, _ := ctx.Value(ctxKey{}).(*Record)
	return r
}

// SetTool records the tool being called.
func (r *Record) SetTool(name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.tool = name
	r.mu.Unlock()
}

// SetOutcome records the call's outcome ("ok", or an error kind). The first
// outcome set wins, so the most specific classification is kept.
func (r *Record) SetOutcome(o string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.outcome == "" {
		r.outcome = o
	}
	r.mu.Unlock()
}

// SetUser records which mailbox user the request acted for.
func (r *Record) SetUser(u string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.user = u
	r.mu.Unlock()
}

// SetCause records the class of a connection failure (mailerr.Cause:
// dial_refused, tls, timeout, auth...), so the request's info-level line
// says why the mail server was unavailable. "" leaves it unchanged.
func (r *Record) SetCause(c string) {
	if r == nil || c == "" {
		return
	}
	r.mu.Lock()
	if r.cause == "" {
		r.cause = c
	}
	r.mu.Unlock()
}

// Cause returns the recorded failure class, or "".
func (r *Record) Cause() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cause
}

// Fields returns tool, outcome and user.
func (r *Record) Fields() (tool, outcome, user string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tool, r.outcome, r.user
}

// Handler adds request_id to every record logged with a request's context.
type Handler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h Handler) Handle(ctx context.Context, rec slog.Record) error {
	if r := FromContext(ctx); r != nil {
		rec.AddAttrs(slog.String("request_id", r.ID))
	}
	return h.Handler.Handle(ctx, rec)
}

// WithAttrs implements slog.Handler.
func (h Handler) WithAttrs(as []slog.Attr) slog.Handler { return Handler{h.Handler.WithAttrs(as)} }

// WithGroup implements slog.Handler.
func (h Handler) WithGroup(name string) slog.Handler { return Handler{h.Handler.WithGroup(name)} }
