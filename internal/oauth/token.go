package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// token is the token endpoint: authorization_code and refresh_token
// grants, for public clients (client_id in the body, no secret).
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	cors(w, r)
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST, OPTIONS")
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "use POST")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 32<<10)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body must be application/x-www-form-urlencoded")
		return
	}
	f := r.PostForm
	for k, v := range f {
		if len(v) > 1 {
			oauthError(w, http.StatusBadRequest, "invalid_request", "a parameter is repeated: "+paramName(k))
			return
		}
	}
	if _, _, ok := r.BasicAuth(); ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "this server has only public clients: send client_id in the body, no secret")
		return
	}
	switch f.Get("grant_type") {
	case "authorization_code":
		s.exchangeCode(w, r)
	case "refresh_token":
		s.refresh(w, r)
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
	}
}

func (s *Server) exchangeCode(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	g, err := s.cfg.Sealer.OpenGrant(credentials.KindCode, f.Get("code"), s.now())
	switch {
	case errors.Is(err, credentials.ErrGrantExpired):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the authorization code has expired (codes last 60 seconds): sign in again")
		return
	case err != nil:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the authorization code is not valid here")
		return
	case f.Get("client_id") != g.ClientID:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the authorization code was issued to another client")
		return
	case f.Get("redirect_uri") != "" && f.Get("redirect_uri") != g.RedirectURI:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri does not match the authorization request")
		return
	case !pkceValue(f.Get("code_verifier")) || !s256Matches(f.Get("code_verifier"), g.Challenge):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code_challenge")
		return
	case !s.ourResource(f.Get("resource")):
		oauthError(w, http.StatusBadRequest, "invalid_target", "this server issues tokens only for "+s.resource)
		return
	case !s.used.Use(g.ID, g.Expires, s.now()):
		s.log.WarnContext(r.Context(), "authorization code replayed", "client_registered", strings.HasPrefix(g.ClientID, string(credentials.KindClient)))
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the authorization code has already been used")
		return
	}
	s.issue(w, g)
}

func (s *Server) refresh(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	g, err := s.cfg.Sealer.OpenGrant(credentials.KindRefresh, f.Get("refresh_token"), s.now())
	switch {
	case errors.Is(err, credentials.ErrGrantExpired):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token has expired: sign in again")
		return
	case err != nil:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token is not valid here")
		return
	case f.Get("client_id") != g.ClientID:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token was issued to another client")
		return
	case !s.ourResource(f.Get("resource")):
		oauthError(w, http.StatusBadRequest, "invalid_target", "this server issues tokens only for "+s.resource)
		return
	}
	if sc := f.Get("scope"); sc != "" {
		asked, ok := s.parseScope(sc)
		if !ok || !narrower(asked, g.Creds.Scope) {
			oauthError(w, http.StatusBadRequest, "invalid_scope", "a refresh may keep or narrow the scope, not widen it")
			return
		}
		g.Creds.Scope = asked
	}
	if !s.used.Use(g.ID, g.Expires, s.now()) {
		s.log.WarnContext(r.Context(), "refresh token reused")
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token has already been used (each refresh returns a new one): sign in again")
		return
	}
	s.issue(w, g)
}

// issue answers with a new access token and a new refresh token for the
// login and scope of g.
func (s *Server) issue(w http.ResponseWriter, g credentials.Grant) {
	now := s.now()
	access, err := s.cfg.Sealer.SealGrant(credentials.KindAccess, credentials.Grant{
		ID: credentials.NewGrantID(), Creds: g.Creds, ClientID: g.ClientID, Audience: s.resource, Expires: now.Add(s.cfg.AccessTTL)})
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", "the token could not be made")
		return
	}
	refresh, err := s.cfg.Sealer.SealGrant(credentials.KindRefresh, credentials.Grant{
		ID: credentials.NewGrantID(), Creds: g.Creds, ClientID: g.ClientID, Audience: s.resource, Expires: now.Add(s.cfg.RefreshTTL)})
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", "the token could not be made")
		return
	}
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":  access,
		"token_type":    "Bearer",
		"expires_in":    int(s.cfg.AccessTTL.Seconds()),
		"refresh_token": refresh,
		"scope":         scopeString(g.Creds.Scope),
	})
}

// s256Matches checks a PKCE verifier against its S256 challenge.
func s256Matches(verifier, challenge string) bool {
	sum := sha256.Sum256([]byte(verifier))
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(want), []byte(challenge)) == 1
}

// paramName names a known parameter, and nothing a caller made up.
func paramName(k string) string {
	switch k {
	case "grant_type", "code", "redirect_uri", "client_id", "code_verifier", "refresh_token", "scope", "resource":
		return k
	}
	return "one of them"
}
