package oauth

import (
	"context"
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
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
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
	next := credentials.Grant{Creds: g.Creds, ClientID: g.ClientID, Expires: s.now().Add(s.cfg.RefreshTTL),
		Provider: g.Provider, ProviderRefresh: g.ProviderRefresh, ProviderExpires: g.ProviderExpires}
	next.Family, next.Ledger, err = s.ledger.exchange(context.WithoutCancel(r.Context()), g.ID, g.Expires, g.Creds.AccountKey(), next.Expires)
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
	// The decision is made whole even if the client goes: a refresh
	// applied and not answered must not look to the store like one that
	// never happened.
	next.Expires = s.now().Add(s.cfg.RefreshTTL)
	next.Ledger, err = s.ledger.refresh(context.WithoutCancel(r.Context()), next.Family, g.Gen, g.Ledger, g.Creds.AccountKey(), next.Expires)
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
	wait, err := s.cfg.Guard.AllowSignInAs(r.Context(), account)
	return s.limited(w, r, wait, err, "for this account")
}

// admitFrom applies the sign-in rate limit of the client's address.
func (s *Server) admitFrom(w http.ResponseWriter, r *http.Request) bool {
	wait, err := s.cfg.Guard.AllowSignInFrom(r.Context())
	return s.limited(w, r, wait, err, "from this address")
}

// limited answers 429 past a sign-in limit, and 503 when the limit could
// not be checked (the shared memory does not answer, REDIS_FAIL=closed).
func (s *Server) limited(w http.ResponseWriter, r *http.Request, wait time.Duration, err error, who string) bool {
	switch {
	case err != nil:
		s.unavailable(w, r, err)
		return false
	case wait <= 0:
		return true
	}
	retryAfter(w, wait)
	oauthError(w, http.StatusTooManyRequests, "slow_down", "too many sign-in requests "+who+"; retry in "+strconv.Itoa(seconds(wait))+" s")
	return false
}

// unavailable answers 503 with Retry-After for a limit that could not be
// checked.
func (s *Server) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	s.log.WarnContext(r.Context(), "sign-in limit unavailable: refused", "err", err)
	retryAfter(w, unavailableWait(err))
	oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the sign-in limits cannot be checked just now (the memory this server shares with its replicas does not answer), so nothing was done; try again in a few seconds")
}

// unavailableWait is the Retry-After of a store's refusal.
func unavailableWait(err error) time.Duration {
	if d, ok := memory.RetryAfter(err); ok {
		return d
	}
	return 5 * time.Second
}

// recorded answers a ledger refusal: invalid_grant for a used code or
// refresh token, 503 with Retry-After when the ledger cannot decide now.
func (s *Server) recorded(w http.ResponseWriter, r *http.Request, err error) bool {
	var later *laterError
	switch {
	case err == nil:
		return true
	case errors.As(err, &later):
		if later.down {
			s.log.WarnContext(r.Context(), "sign-in memory unavailable: refusing", "err", later.err)
		} else {
			s.log.WarnContext(r.Context(), "sign-in memory full: refusing new sign-ins", "retry_after", later.RetryAfter, "account", later.account)
		}
		retryAfter(w, later.RetryAfter)
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", later.Error())
	case errors.Is(err, errCodeUsed), errors.Is(err, errReused), errors.Is(err, errRevoked), errors.Is(err, errEnded):
		oauthError(w, http.StatusBadRequest, "invalid_grant", err.Error())
	default:
		// The store failed otherwise (the request's own end, a bug):
		// nothing was issued.
		s.log.ErrorContext(r.Context(), "sign-in memory failed", "err", err)
		retryAfter(w, 5*time.Second)
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the sign-in could not be recorded, so nothing was issued; try again in a few seconds")
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
	// The refresh token expires with its family's memory (g.Expires), and
	// names that memory (g.Ledger).
	refresh, err := s.cfg.Sealer.SealGrant(credentials.KindRefresh, credentials.Grant{
		ID: credentials.NewGrantID(), Creds: g.Creds, ClientID: g.ClientID, Audience: s.resource, Expires: g.Expires,
		Family: g.Family, Gen: g.Gen, Ledger: g.Ledger, Provider: g.Provider, ProviderRefresh: g.ProviderRefresh, ProviderExpires: g.ProviderExpires})
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

// pageLimit applies sign-in limits (each check takes one request from
// its bucket) for a page: true when the request may go on, else the page
// is shown: 429 with Retry-After and tooMany ("{seconds}" there is the
// wait) past a limit, 503 when a limit cannot be checked (the shared
// memory does not answer, REDIS_FAIL=closed).
func (s *Server) pageLimit(w http.ResponseWriter, r *http.Request, tooMany string, show func(w http.ResponseWriter, status int, msg string),
	checks ...func(context.Context) (time.Duration, error)) bool {
	var wait time.Duration
	for _, check := range checks {
		d, err := check(r.Context())
		if err != nil {
			s.log.WarnContext(r.Context(), "sign-in limit unavailable: refused", "err", err)
			retryAfter(w, unavailableWait(err))
			show(w, http.StatusServiceUnavailable, "This server cannot check sign-ins just now (its shared memory does not answer). Wait a few seconds and try again.")
			return false
		}
		wait = max(wait, d)
	}
	if wait <= 0 {
		return true
	}
	retryAfter(w, wait)
	show(w, http.StatusTooManyRequests, strings.ReplaceAll(tooMany, "{seconds}", strconv.Itoa(seconds(wait))))
	return false
}
