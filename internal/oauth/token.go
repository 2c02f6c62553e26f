package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/providers"
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
	if !s.admitFrom(w, r) {
		return
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
	case err != nil, g.Audience != s.resource:
		// A code made by another gateway with the same key (another
		// PUBLIC_URL) is not valid here.
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the authorization code is not valid here")
		return
	case !s.admit(w, r, g.Creds.User):
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
	}
	now := s.now()
	next := credentials.Grant{Creds: g.Creds, ClientID: g.ClientID, Family: credentials.NewGrantID(),
		Provider: g.Provider, ProviderRefresh: g.ProviderRefresh, ProviderExpires: g.ProviderExpires}
	err = s.ledger.exchange(g.ID, g.Expires, next.Family, g.Creds.AccountKey(), now.Add(s.cfg.RefreshTTL), now)
	if errors.Is(err, errCodeUsed) {
		s.log.WarnContext(r.Context(), "authorization code replayed", "client_registered", strings.HasPrefix(g.ClientID, string(credentials.KindClient)))
	}
	if !s.recorded(w, r, err) {
		return
	}
	s.issue(w, next)
}

func (s *Server) refresh(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	g, err := s.cfg.Sealer.OpenGrant(credentials.KindRefresh, f.Get("refresh_token"), s.now())
	switch {
	case errors.Is(err, credentials.ErrGrantExpired):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token has expired: sign in again")
		return
	case err != nil, g.Audience != s.resource:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token is not valid here")
		return
	case !s.admit(w, r, g.Creds.User):
		return
	case f.Get("client_id") != g.ClientID:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token was issued to another client")
		return
	case !s.ourResource(f.Get("resource")):
		oauthError(w, http.StatusBadRequest, "invalid_target", "this server issues tokens only for "+s.resource)
		return
	}
	next := credentials.Grant{Creds: g.Creds, ClientID: g.ClientID, Family: g.Family, Gen: g.Gen + 1,
		Provider: g.Provider, ProviderRefresh: g.ProviderRefresh, ProviderExpires: g.ProviderExpires}
	if next.Family == "" {
		next.Family = g.ID // made before families: its own id names one
	}
	if sc := f.Get("scope"); sc != "" {
		asked, ok := s.parseScope(sc)
		if !ok || !narrower(asked, g.Creds.Scope) {
			oauthError(w, http.StatusBadRequest, "invalid_scope", "a refresh may keep or narrow the scope, not widen it")
			return
		}
		next.Creds.Scope = asked
	}
	if next.Provider != "" {
		// A provider's sign-in: renew its tokens there first (nothing is
		// kept here, so that is the only way to a fresh access token). A
		// provider that cannot be reached leaves the refresh token
		// unused, so that the client can try again.
		if err := s.refreshAtProvider(r, &next); err != nil {
			if errors.Is(err, providers.ErrRefused) || mailerr.KindOf(err) == mailerr.Forbidden {
				s.log.InfoContext(r.Context(), "provider refused a refresh", "provider", next.Provider)
				oauthError(w, http.StatusBadRequest, "invalid_grant", "the provider no longer accepts this sign-in (revoked, password changed or consent withdrawn): sign in again")
				return
			}
			s.log.WarnContext(r.Context(), "provider refresh failed", "provider", next.Provider, "err", err)
			retryAfter(w, 30*time.Second)
			oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the provider cannot be reached to renew the sign-in; try again later")
			return
		}
	}
	now := s.now()
	err = s.ledger.refresh(next.Family, g.Gen, g.Ledger, g.Creds.AccountKey(), now.Add(s.cfg.RefreshTTL), now)
	if errors.Is(err, errReused) {
		s.log.WarnContext(r.Context(), "refresh token reused: sign-in revoked")
	}
	if !s.recorded(w, r, err) {
		return
	}
	s.issue(w, next)
}

// admit applies the sign-in rate limit of account; past it, it answers
// 429 with Retry-After.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, account string) bool {
	return s.limited(w, s.cfg.Guard.AllowSignInAs(account), "for this account")
}

// admitFrom applies the sign-in rate limit of the client's address.
func (s *Server) admitFrom(w http.ResponseWriter, r *http.Request) bool {
	return s.limited(w, s.cfg.Guard.AllowSignInFrom(r.Context()), "from this address")
}

func (s *Server) limited(w http.ResponseWriter, wait time.Duration, who string) bool {
	if wait <= 0 {
		return true
	}
	retryAfter(w, wait)
	oauthError(w, http.StatusTooManyRequests, "slow_down", "too many sign-in requests "+who+"; retry in "+strconv.Itoa(seconds(wait))+" s")
	return false
}

// recorded answers a ledger refusal: invalid_grant for a used code or
// refresh token, 503 with Retry-After when the ledger is full.
func (s *Server) recorded(w http.ResponseWriter, r *http.Request, err error) bool {
	var full *fullError
	switch {
	case err == nil:
		return true
	case errors.As(err, &full):
		s.log.WarnContext(r.Context(), "sign-in memory full: refusing new sign-ins", "retry_after", full.RetryAfter)
		retryAfter(w, full.RetryAfter)
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", full.Error())
	default:
		oauthError(w, http.StatusBadRequest, "invalid_grant", err.Error())
	}
	return false
}

func retryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(seconds(d)))
}

// providerSkew is how much earlier than the provider's access token ours
// expires: the client refreshes before the provider's token is refused.
const providerSkew = 30 * time.Second

// seconds rounds d up to whole seconds, at least one.
func seconds(d time.Duration) int { return max(1, int((d+time.Second-1)/time.Second)) }

// issue answers with a new access token and a refresh token of g's family
// and generation, for the login of g with its scope capped at what this
// gateway allows (MAILBOX_ACCESS, and sending only when configured): a
// grant made elsewhere, or before the operator lowered the level, never
// carries more here.
func (s *Server) issue(w http.ResponseWriter, g credentials.Grant) {
	now := s.now()
	if s.cfg.Operator != 0 && g.Creds.Scope.Level > s.cfg.Operator {
		g.Creds.Scope.Level = s.cfg.Operator
	}
	if g.Creds.Scope.Level == 0 {
		g.Creds.Scope.Level = s.cfg.Operator
	}
	g.Creds.Scope.NoSend = g.Creds.Scope.NoSend || !s.canSend(g.Provider)
	expires := now.Add(s.cfg.AccessTTL)
	if !g.ProviderExpires.IsZero() {
		// Our access token carries the provider's: it lasts no longer
		// (a little less, so that the client refreshes before the mail
		// server would refuse the provider's).
		skew := min(providerSkew, g.ProviderExpires.Sub(now)/4)
		if end := g.ProviderExpires.Add(-skew); end.Before(expires) {
			expires = end
		}
	}
	access, err := s.cfg.Sealer.SealGrant(credentials.KindAccess, credentials.Grant{
		ID: credentials.NewGrantID(), Creds: g.Creds, ClientID: g.ClientID, Audience: s.resource, Expires: expires,
		Provider: g.Provider, ProviderExpires: g.ProviderExpires})
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", "the token could not be made")
		return
	}
	refresh, err := s.cfg.Sealer.SealGrant(credentials.KindRefresh, credentials.Grant{
		ID: credentials.NewGrantID(), Creds: g.Creds, ClientID: g.ClientID, Audience: s.resource, Expires: now.Add(s.cfg.RefreshTTL),
		Family: g.Family, Gen: g.Gen, Ledger: s.ledger.id, Provider: g.Provider, ProviderRefresh: g.ProviderRefresh, ProviderExpires: g.ProviderExpires})
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", "the token could not be made")
		return
	}
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":  access,
		"token_type":    "Bearer",
		"expires_in":    max(1, int(expires.Sub(now).Seconds())),
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
