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
	return p.any || p.allowed[strings.ToLower(origin)]
}

const corsAllowHeaders = "Content-Type, Accept, Authorization, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-Id, X-Imap-User, X-Imap-Pass, X-Request-Id"

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
			httpError(w, http.StatusForbidden, "origin not allowed; set ALLOWED_ORIGINS to allow it")
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
