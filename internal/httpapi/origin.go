package httpapi

import (
	"net/http"
	"strings"
)

// originPolicy decides which browser origins may call /mcp. Requests without
// an Origin header (MCP clients that are not browsers) are not affected.
type originPolicy struct {
	any     bool
	allowed map[string]bool
	// localOnly (loopback bind): "*" means any local origin, and another
	// origin must be listed by name (DNS-rebinding and drive-by protection).
	localOnly bool
}

func newOriginPolicy(origins []string) originPolicy {
	p := originPolicy{allowed: map[string]bool{}}
	for _, o := range origins {
		o = strings.TrimRight(strings.TrimSpace(o), "/")
		if o == "*" {
			p.any = true
		} else if o != "" {
			p.allowed[strings.ToLower(o)] = true
		}
	}
	return p
}

func (p originPolicy) allows(origin string) bool {
	if p.allowed[strings.ToLower(strings.TrimRight(origin, "/"))] {
		return true
	}
	if p.localOnly {
		return isLocalOrigin(origin)
	}
	return p.any
}

const corsAllowHeaders = "Content-Type, Accept, Authorization, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-Id, X-Imap-User, X-Imap-Pass, X-Imap-Oauth-Token, X-Mailbox-Token, X-Mailbox-Agent, X-Request-Id"

// wrap refuses a disallowed Origin with 403, answers CORS preflights, and
// adds CORS headers for allowed origins.
func (p originPolicy) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			if r.Method == http.MethodOptions {
				w.Header().Set("Allow", "POST, OPTIONS")
				w.WriteHeader(http.StatusNoContent)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if !p.allows(origin) {
			msg := "origin not allowed; set ALLOWED_ORIGINS to allow it"
			if p.localOnly {
				msg = "origin not allowed: the gateway listens on a loopback address and accepts browser requests only from local pages or origins listed in ALLOWED_ORIGINS"
			}
			httpError(w, http.StatusForbidden, msg)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, Mcp-Protocol-Version, X-Request-Id")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}
