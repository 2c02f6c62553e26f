package oauth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/providers"
)

// Sign-in with the mailbox's provider ("Continue with Microsoft"): the
// sign-in page sends the person to the provider with PKCE and a sealed
// state that carries the MCP client's pending authorization; the
// provider sends them back to CallbackPath, where the code is exchanged,
// the mailbox address taken from the ID token, the provider's access
// token proven with a real IMAP login (XOAUTH2/OAUTHBEARER), and then our
// own code issued as for a password. The provider's refresh token travels
// sealed in our grants; nothing is stored.

// CallbackPath is where providers send the person back: the redirect URI
// to register at each provider is PUBLIC_URL + CallbackPath.
const CallbackPath = "/authorize/callback"

// providerCookie binds a provider round trip to the browser that started
// it. It is SameSite=Lax: the way back is a top-level navigation from the
// provider's site, which a Strict cookie would not come with.
const providerCookie = "mbx_provider"

// providerTTL bounds the time a person may spend at the provider.
const providerTTL = 15 * time.Minute

// providerState is sealed into the state parameter of the provider round
// trip (KindProviderState).
type providerState struct {
	Req request `json:"q"`
	// Return, when set, makes the round trip a sign-in for another page of
	// the gateway (the approval page, at this path): it ends in
	// Config.Identified, not in a code for an MCP client.
	Return   string `json:"rt,omitempty"`
	Provider string `json:"p"`
	Verifier string `json:"v"` // our PKCE verifier at the provider
	Nonce    string `json:"n"` // the ID token's nonce, and the cookie's value
	Exp      int64  `json:"exp"`
}

func (s *Server) provider(name string) *providers.Provider {
	for _, p := range s.cfg.Providers {
		if p.Config().Name == name {
			return p
		}
	}
	return nil
}

// canSend says whether a login of provider ("" for a password) can send:
// SMTP_HOST for the gateway's own host, the provider's SMTP host for its.
func (s *Server) canSend(provider string) bool {
	if provider == "" {
		return s.cfg.CanSend
	}
	p := s.provider(provider)
	return p != nil && p.Config().SMTP.Host != ""
}

// anyCanSend says whether some way of signing in here can send.
func (s *Server) anyCanSend() bool {
	if s.cfg.CanSend {
		return true
	}
	for _, p := range s.cfg.Providers {
		if p.Config().SMTP.Host != "" {
			return true
		}
	}
	return false
}

func (s *Server) callbackURL() string { return s.issuer + CallbackPath }

// ProviderButton is one "Continue with" of the sign-in page.
type ProviderButton struct{ Name, Display string }

// ProviderButtons are the providers offered, in order.
func (s *Server) ProviderButtons() []ProviderButton {
	var out []ProviderButton
	for _, p := range s.cfg.Providers {
		out = append(out, ProviderButton{Name: p.Config().Name, Display: p.Config().DisplayName})
	}
	return out
}

// StartIdentity sends a person to provider name to learn which mailbox
// they are, for another page of the gateway (the approval page): when the
// provider has said, Config.Identified gets it with returnTo. hint is the
// mailbox address expected.
func (s *Server) StartIdentity(w http.ResponseWriter, r *http.Request, name, hint, returnTo string) {
	p := s.provider(name)
	if p == nil || s.cfg.Identified == nil {
		s.errorPage(w, http.StatusBadRequest, "This gateway does not sign in with that provider.")
		return
	}
	if !s.pageLimit(w, r, "Too many sign-in attempts from your network. Wait a minute and try again.", s.errorPage, s.cfg.Guard.AllowSignInFrom) {
		return
	}
	s.goToProvider(w, r, providerState{Return: returnTo}, p, hint, func(msg string) { s.errorPage(w, http.StatusBadGateway, msg) })
}

// startProvider sends the person to provider p for the pending request.
func (s *Server) startProvider(w http.ResponseWriter, r *http.Request, req request, form string, p *providers.Provider) {
	show := func(w http.ResponseWriter, status int, msg string) { s.signInPage(w, status, req, form, "", msg) }
	if !s.pageLimit(w, r, "Too many sign-in attempts from your network. Wait a minute and try again.", show, s.cfg.Guard.AllowSignInFrom) {
		return
	}
	s.goToProvider(w, r, providerState{Req: req}, p, strings.TrimSpace(r.PostForm.Get("username")), func(msg string) {
		s.signInPage(w, http.StatusOK, req, form, "", msg)
	})
}

// goToProvider completes st for provider p and sends the person there;
// fail shows a sentence instead.
func (s *Server) goToProvider(w http.ResponseWriter, r *http.Request, st providerState, p *providers.Provider, hint string, fail func(string)) {
	st.Provider, st.Verifier, st.Nonce, st.Exp = p.Config().Name, randomVerifier(), randomHex(), s.now().Add(providerTTL).Unix()
	plain, _ := json.Marshal(st)
	state, err := s.cfg.Sealer.SealOAuth(credentials.KindProviderState, plain)
	clear(plain)
	if err != nil {
		fail("This sign-in request is too large.")
		return
	}
	u, err := p.AuthURL(r.Context(), s.callbackURL(), state, st.Verifier, st.Nonce, hint)
	if err != nil {
		s.log.ErrorContext(r.Context(), "provider discovery failed", "provider", st.Provider, "err", err)
		fail(p.Config().DisplayName + " cannot be reached just now. Try again in a moment.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: providerCookie, Value: st.Nonce, Path: "/authorize", MaxAge: int(providerTTL.Seconds()),
		HttpOnly: true, Secure: strings.HasPrefix(s.issuer, "https://"), SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, u, http.StatusFound)
}

// callback takes the person back from the provider.
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		s.errorPage(w, http.StatusMethodNotAllowed, "Go back to your app and start the sign-in again.")
		return
	}
	q := r.URL.Query()
	plain, err := s.cfg.Sealer.OpenOAuth(credentials.KindProviderState, q.Get("state"))
	var st providerState
	if err != nil || json.Unmarshal(plain, &st) != nil || st.Nonce == "" {
		s.errorPage(w, http.StatusBadRequest, "This sign-in did not start here (or its link was altered). Go back to your app and start the sign-in again.")
		return
	}
	cookie, err := r.Cookie(providerCookie)
	switch {
	case err != nil || cookie.Value != st.Nonce:
		s.errorPage(w, http.StatusForbidden, "This sign-in was not started in this browser (or cookies are off). Go back to your app and start the sign-in again.")
		return
	case !s.now().Before(time.Unix(st.Exp, 0)):
		s.errorPage(w, http.StatusBadRequest, "This sign-in took too long. Go back to your app and start it again.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: providerCookie, Path: "/authorize", MaxAge: -1})
	req := st.Req
	p := s.provider(st.Provider)
	if p == nil {
		s.errorPage(w, http.StatusBadRequest, "This gateway no longer signs in with that provider.")
		return
	}
	// The answer must come from this provider (RFC 9207), the error
	// answers too.
	if err := p.CheckResponseIssuer(r.Context(), q.Get("iss")); err != nil {
		s.log.WarnContext(r.Context(), "provider sign-in refused", "provider", st.Provider, "err", err)
		s.errorPage(w, http.StatusBadGateway, p.Config().DisplayName+" did not complete the sign-in. Go back to your app and try again.")
		return
	}
	if e := q.Get("error"); e != "" {
		if st.Return != "" {
			s.errorPage(w, http.StatusForbidden, "The sign-in at "+p.Config().DisplayName+" was not completed, so nothing can be shown or approved. Open the approval link again to retry.")
			return
		}
		// The person said no at the provider (or it refused): tell the app.
		s.ledger.once(context.WithoutCancel(r.Context()), st.Nonce, time.Unix(st.Exp, 0))
		s.redirectError(w, r, req.RedirectURI, req.State, "access_denied", "the sign-in at "+p.Config().DisplayName+" was not completed")
		return
	}
	if !s.pageLimit(w, r, "Too many sign-in attempts from your network. Wait a minute and start again.", s.errorPage, s.cfg.Guard.AllowSignInFrom) {
		return
	}
	// The state is used once: a provider that lets its code be exchanged
	// again must not make this callback issue a second code.
	if err := s.ledger.once(context.WithoutCancel(r.Context()), st.Nonce, time.Unix(st.Exp, 0)); err != nil {
		var later *laterError
		switch {
		case errors.As(err, &later):
			retryAfter(w, later.RetryAfter)
			s.errorPage(w, http.StatusServiceUnavailable, later.page())
		case errors.Is(err, errStateUsed):
			s.errorPage(w, http.StatusBadRequest, "This sign-in link has already been used. Go back to your app and start the sign-in again.")
		default:
			s.log.ErrorContext(r.Context(), "provider state not recorded", "err", err)
			retryAfter(w, 5*time.Second)
			s.errorPage(w, http.StatusServiceUnavailable, "The sign-in could not be recorded. Wait a few seconds and start again.")
		}
		return
	}
	toks, err := p.Exchange(r.Context(), s.callbackURL(), q.Get("code"), st.Verifier, st.Nonce, q.Get("iss"))
	if err != nil {
		s.log.WarnContext(r.Context(), "provider sign-in failed", "provider", st.Provider, "err", err)
		msg := p.Config().DisplayName + " did not complete the sign-in. Go back to your app and try again."
		if errors.Is(err, providers.ErrNoEmail) {
			msg = p.Config().DisplayName + " did not say which mailbox signed in. The operator must let the app read your email address (the email or openid scope)."
		}
		s.errorPage(w, http.StatusBadGateway, msg)
		return
	}
	if !s.pageLimit(w, r, "Too many sign-in attempts for this mailbox. Wait a minute and start again.", s.errorPage, func(ctx context.Context) (time.Duration, error) {
		return s.cfg.Guard.AllowSignInAs(ctx, toks.Email)
	}) {
		return
	}
	creds := credentials.NewOAuth(toks.Email, toks.Access)
	creds.Host, creds.Provider = p.Config().IMAP.Host, st.Provider
	if s.cfg.Hosts != nil {
		creds.Host = s.cfg.Hosts.Canonical(creds.Host)
	}
	if st.Return != "" {
		// The provider said which mailbox this person is: that is all the
		// other page needs (no code, no grant).
		s.log.InfoContext(r.Context(), "identified at provider", "provider", st.Provider)
		s.cfg.Identified(w, r, creds, st.Return)
		return
	}
	creds.Scope = req.scope()
	creds.Scope.NoSend = creds.Scope.NoSend || !s.canSend(st.Provider)
	if toks.Refresh == "" {
		// The sign-in then lasts as long as the provider's access token
		// (Google gives a refresh token only with access_type=offline).
		s.log.WarnContext(r.Context(), "provider returned no refresh token", "provider", st.Provider)
	}
	if status, msg := s.checkLogin(w, r, creds); msg != "" {
		if status == http.StatusServiceUnavailable {
			s.errorPage(w, status, msg)
			return
		}
		s.errorPage(w, http.StatusBadGateway, "Your mailbox did not accept the sign-in from "+p.Config().DisplayName+": "+msg)
		return
	}
	code, err := s.cfg.Sealer.SealGrant(credentials.KindCode, credentials.Grant{
		ID: credentials.NewGrantID(), Creds: creds, ClientID: req.ClientID, RedirectURI: req.RedirectURI,
		Challenge: req.Challenge, Audience: s.resource, Expires: s.now().Add(codeTTL),
		Provider: st.Provider, ProviderRefresh: toks.Refresh, ProviderExpires: toks.Expiry,
	})
	if err != nil {
		s.log.ErrorContext(r.Context(), "provider grant could not be sealed", "provider", st.Provider, "err", err)
		s.errorPage(w, http.StatusInternalServerError, "The sign-in could not be completed (the provider's tokens are too large to carry).")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: formCookie, Path: "/authorize", MaxAge: -1})
	s.log.InfoContext(r.Context(), "signed in", "client", req.ClientName, "provider", st.Provider, "scope", creds.Scope.String())
	s.redirect(w, r, req.RedirectURI, url.Values{"code": {code}, "state": optional(req.State), "iss": {s.issuer}})
}

// refreshAtProvider renews the provider's tokens of grant g (a refresh at
// our /token): the new access token goes into the new grant, and a
// rotated refresh token replaces the old one.
func (s *Server) refreshAtProvider(r *http.Request, g *credentials.Grant) error {
	p := s.provider(g.Provider)
	if p == nil {
		return errProviderGone
	}
	if g.ProviderRefresh == "" {
		return errNoProviderRefresh
	}
	toks, err := p.Refresh(r.Context(), g.ProviderRefresh)
	if err != nil {
		return err
	}
	was := g.Creds
	g.Creds = credentials.NewOAuth(was.User, toks.Access)
	g.Creds.Host, g.Creds.Provider, g.Creds.Scope = was.Host, was.Provider, was.Scope
	g.ProviderExpires = toks.Expiry
	if toks.Refresh != "" {
		g.ProviderRefresh = toks.Refresh
	}
	return nil
}

var (
	errProviderGone      = mailerr.New(mailerr.Forbidden, "this gateway no longer signs in with the provider of this sign-in: sign in again")
	errNoProviderRefresh = mailerr.New(mailerr.Forbidden, "the provider gave no refresh token for this sign-in, so it cannot be renewed: sign in again")
)

// randomVerifier is a PKCE verifier: 43 unreserved characters.
func randomVerifier() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("oauth: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
