package oauth

import (
	"encoding/json"
	"net/http"
	"strings"
)

// protectedResource serves RFC 9728 metadata. The path-suffixed form
// (/.well-known/oauth-protected-resource/mcp) describes /mcp, the
// resource clients use; the bare form describes the gateway as a whole
// (RFC 9728 §3.3: the resource must be the URL the suffix was taken from).
func (s *Server) protectedResource(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	resource := s.issuer
	switch suffix := strings.TrimPrefix(r.URL.Path, "/.well-known/oauth-protected-resource"); suffix {
	case "", "/":
	case "/mcp":
		resource = s.resource
	default:
		http.NotFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 resource,
		"authorization_servers":    []string{s.issuer},
		"scopes_supported":         scopesSupported,
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "mailbox-mcp",
	})
}

// authorizationServer serves RFC 8414 metadata (also at the OpenID path,
// which some clients try first; it is the same OAuth document, and says
// nothing about ID tokens).
func (s *Server) authorizationServer(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         s.issuer,
		"authorization_endpoint":                         s.issuer + "/authorize",
		"token_endpoint":                                 s.issuer + "/token",
		"registration_endpoint":                          s.issuer + "/register",
		"scopes_supported":                               scopesSupported,
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"code_challenge_methods_supported":               []string{"S256"},
		"client_id_metadata_document_supported":          true,
		"authorization_response_iss_parameter_supported": true,
	})
}

// getOnly answers CORS preflights and refuses methods other than GET/HEAD.
// The documents are public: any origin may read them.
func getOnly(w http.ResponseWriter, r *http.Request) bool {
	cors(w, r)
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return true
	case http.MethodOptions:
		w.WriteHeader(http.StatusNoContent)
		return false
	}
	w.Header().Set("Allow", "GET, HEAD, OPTIONS")
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "invalid_request", "error_description": "use GET"})
	return false
}

// cors lets browser-based clients call the JSON endpoints: they use no
// cookies, so any origin may.
func cors(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Origin") == "" {
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, MCP-Protocol-Version")
	h.Set("Access-Control-Max-Age", "600")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// oauthError writes an RFC 6749 §5.2 error.
func oauthError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}
