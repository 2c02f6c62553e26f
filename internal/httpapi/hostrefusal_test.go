package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// hostsSaying refuses every host with err; Canonical is the name itself.
type hostsSaying struct{ err error }

func (h hostsSaying) Check(context.Context, string) error { return h.err }
func (h hostsSaying) Canonical(host string) string        { return host }

// TestRefusedHostOneStatus: a refused x-imap-host is 403 whatever the
// reason the hosts give (not allowed, not found in DNS, not a public
// address): a different status for a name that does not resolve told an
// anonymous caller which names exist.
func TestRefusedHostOneStatus(t *testing.T) {
	for _, err := range []error{
		mailerr.New(mailerr.Forbidden, "refused"),
		mailerr.New(mailerr.Unavailable, "refused"), // what a DNS failure was
	} {
		var s seen
		h := New(Options{MaxRequestBytes: 1 << 20, MaxInflightRequests: 8, MaxBufferedBytes: 4 << 20,
			BodyReadTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler), Hosts: hostsSaying{err}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.called = true }))
		w := post(h, listBody, map[string]string{"x-imap-user": "alice", "x-imap-pass": "pw", "x-imap-host": "mail.example.test"})
		if w.Code != http.StatusForbidden || s.called {
			t.Errorf("%v: %d %s (reached MCP: %v), want 403", mailerr.KindOf(err), w.Code, w.Body, s.called)
		}
	}
}
