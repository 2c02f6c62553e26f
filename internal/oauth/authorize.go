package oauth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

// request is one authorization request, sealed into the sign-in form
// (KindForm) so that the POST needs nothing else and cannot change it.
type request struct {
	Nonce       string `json:"n"` // equals the form cookie: the anti-forgery binding
	ClientID    string `json:"c"`
	ClientName  string `json:"cn"`
	RedirectURI string `json:"r"`
	Challenge   string `json:"cc"`
	State       string `json:"st,omitempty"`
	Level       string `json:"a"`
	Send        bool   `json:"s,omitempty"`
	Exp         int64  `json:"exp"`
}

func (q request) scope() access.Scope {
	l, _ := access.Parse(q.Level)
	return access.Scope{Level: l, NoSend: !q.Send}
}

const formCookie = "mbx_signin"

// authorize serves the sign-in page (GET) and takes its answer (POST).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.authorizeRequest(w, r)
	case http.MethodPost:
		s.authorizeAnswer(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		s.errorPage(w, http.StatusMethodNotAllowed, "Use the link your app opened.")
	}
}

// authorizeRequest checks the request and shows the page. Until the client
// and its redirect URI are known good, errors are shown on a page, never
// redirected (RFC 6749 §4.1.2.1).
func (s *Server) authorizeRequest(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for _, k := range []string{"client_id", "redirect_uri", "response_type", "code_challenge", "code_challenge_method", "state", "scope", "resource"} {
		if len(q[k]) > 1 {
			s.errorPage(w, http.StatusBadRequest, "The sign-in request names "+k+" more than once.")
			return
		}
	}
	c, err := s.lookupClient(r.Context(), q.Get("client_id"))
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "The app that sent you here is not known: "+err.Error()+".")
		return
	}
	redirect := q.Get("redirect_uri")
	if redirect == "" && len(c.RedirectURIs) == 1 {
		redirect = c.RedirectURIs[0]
	}
	if !redirectAllowed(c.RedirectURIs, redirect) {
		s.errorPage(w, http.StatusBadRequest, "The app asked to send you back to an address it has not registered, so this sign-in was stopped.")
		return
	}
	state := q.Get("state")
	// Nothing has been shown yet: the error goes back only to a client
	// known to be at that address (RFC 9700 §4.11: else this page would
	// be an open redirector for anyone who registers a client).
	fail := func(code, desc string) {
		if errorsToClient(c, redirect) {
			s.redirectError(w, r, redirect, state, code, desc)
			return
		}
		s.errorPage(w, http.StatusBadRequest, "The app's sign-in request cannot be used ("+code+": "+desc+"). Nothing was sent back to it: tell the app's makers.")
	}
	switch {
	case q.Get("response_type") != "code":
		fail("unsupported_response_type", "only response_type=code is supported")
		return
	case q.Get("code_challenge_method") != "S256" || !pkceValue(q.Get("code_challenge")):
		fail("invalid_request", "PKCE is required: code_challenge with code_challenge_method=S256")
		return
	case !s.ourResource(q.Get("resource")):
		fail("invalid_target", "this server issues tokens only for "+s.resource)
		return
	}
	sc, ok := s.parseScope(q.Get("scope"))
	if !ok {
		fail("invalid_scope", "supported scopes: "+strings.Join(scopesSupported, " "))
		return
	}
	nonce := randomHex()
	req := request{Nonce: nonce, ClientID: q.Get("client_id"), ClientName: c.Name, RedirectURI: redirect,
		Challenge: q.Get("code_challenge"), State: state, Level: sc.Level.String(), Send: !sc.NoSend,
		Exp: s.now().Add(formTTL).Unix()}
	form, err := s.sealRequest(req)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "The sign-in request is too large.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: formCookie, Value: nonce, Path: "/authorize", MaxAge: int(formTTL.Seconds()),
		HttpOnly: true, Secure: strings.HasPrefix(s.issuer, "https://"), SameSite: http.SameSiteStrictMode})
	s.signInPage(w, http.StatusOK, req, form, "", "")
}

// authorizeAnswer takes the form: Cancel, or Allow with a login that the
// mail server must accept.
func (s *Server) authorizeAnswer(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		s.errorPage(w, http.StatusBadRequest, "The sign-in form could not be read.")
		return
	}
	form := r.PostForm.Get("form")
	req, err := s.openRequest(form)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, err.Error())
		return
	}
	cookie, err := r.Cookie(formCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(cookie.Value), []byte(req.Nonce)) != 1 {
		s.errorPage(w, http.StatusForbidden, "This sign-in form was not opened in this browser (or cookies are off). Go back to your app and start the sign-in again.")
		return
	}
	action := r.PostForm.Get("action")
	if name, ok := strings.CutPrefix(action, "provider:"); ok {
		if p := s.provider(name); p != nil {
			s.startProvider(w, r, req, form, p)
			return
		}
	}
	if action != "allow" {
		s.redirectError(w, r, req.RedirectURI, req.State, "access_denied", "the user cancelled the sign-in")
		return
	}
	user := strings.TrimSpace(r.PostForm.Get("username"))
	pass := r.PostForm.Get("password")
	if user == "" || pass == "" || strings.ContainsRune(user, 0) || strings.ContainsRune(pass, 0) {
		s.signInPage(w, http.StatusOK, req, form, user, "Enter your mail address and password.")
		return
	}
	// Each try reaches the mail server: limited per address and per
	// account (besides the mail layer's back-off after failures).
	show := func(w http.ResponseWriter, status int, msg string) { s.signInPage(w, status, req, form, user, msg) }
	if !s.pageLimit(w, r, "Too many sign-in attempts for this mail address or from your network. Wait {seconds} seconds and try again.", show,
		s.cfg.Guard.AllowSignInFrom, func(ctx context.Context) (time.Duration, error) { return s.cfg.Guard.AllowSignInAs(ctx, user) }) {
		return
	}
	creds := credentials.New(user, pass)
	creds.Scope = req.scope()
	creds.Scope.NoSend = creds.Scope.NoSend || !s.canSend("")
	if s.cfg.Hosts != nil && s.cfg.Hosts.Patterns() {
		host := strings.TrimSpace(r.PostForm.Get("host"))
		if host == "" {
			host = s.cfg.Hosts.Suggest(r.Context(), user)
		}
		if host != "" {
			if err := s.cfg.Hosts.Check(r.Context(), host); err != nil {
				s.signInPage(w, http.StatusOK, req, form, user, capitalize(mailerr.Message(err))+".")
				return
			}
		}
		creds.Host = s.cfg.Hosts.Canonical(host)
	}
	if status, msg := s.checkLogin(w, r, creds); msg != "" {
		s.signInPage(w, status, req, form, user, msg)
		return
	}
	code, err := s.cfg.Sealer.SealGrant(credentials.KindCode, credentials.Grant{
		ID: credentials.NewGrantID(), Creds: creds, ClientID: req.ClientID, RedirectURI: req.RedirectURI,
		Challenge: req.Challenge, Audience: s.resource, Expires: s.now().Add(codeTTL),
	})
	if err != nil {
		s.signInPage(w, http.StatusOK, req, form, user, "This address and password cannot be used here (too long, or not valid text).")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: formCookie, Path: "/authorize", MaxAge: -1})
	s.log.InfoContext(r.Context(), "signed in", "client", req.ClientName, "scope", creds.Scope.String())
	s.redirect(w, r, req.RedirectURI, url.Values{"code": {code}, "state": optional(req.State), "iss": {s.issuer}})
}

// checkLogin logs in to the mail server (IMAP, and SMTP when sending is
// granted and configured): "" when it accepts, else the page's status and
// a sentence for it. A login the back-off could not be checked for (the
// shared memory does not answer, REDIS_FAIL=closed) is 503 with
// Retry-After.
func (s *Server) checkLogin(w http.ResponseWriter, r *http.Request, creds credentials.Credentials) (int, string) {
	check := func(v Verifier) (int, string) {
		err := v.Verify(r.Context(), creds)
		if err == nil {
			return http.StatusOK, ""
		}
		var me *mailerr.Error
		if d, ok := memory.RetryAfter(err); ok {
			s.log.WarnContext(r.Context(), "sign-in refused: the login back-off cannot be checked", "err", err)
			retryAfter(w, d)
			return http.StatusServiceUnavailable, capitalize(mailerr.Message(err)) + ". Wait a few seconds and try again."
		}
		switch {
		case mailerr.KindOf(err) == mailerr.Auth:
			return http.StatusOK, "The mail server did not accept this address and password. If your provider uses app passwords (Gmail, iCloud, Fastmail, Outlook with two-step sign-in), use one here."
		case errors.As(err, &me) && me.Kind != mailerr.Internal:
			return http.StatusOK, me.Msg
		}
		s.log.ErrorContext(r.Context(), "sign-in check failed", "err", err)
		return http.StatusOK, "The mail server could not be reached to check this login. Try again in a moment."
	}
	if status, msg := check(s.cfg.IMAP); msg != "" {
		return status, msg
	}
	if !creds.Scope.NoSend && s.cfg.SMTP != nil {
		return check(s.cfg.SMTP)
	}
	return http.StatusOK, ""
}

func (s *Server) sealRequest(q request) (string, error) {
	plain, err := json.Marshal(q)
	if err != nil {
		return "", err
	}
	return s.cfg.Sealer.SealOAuth(credentials.KindForm, plain)
}

func (s *Server) openRequest(form string) (request, error) {
	bad := errors.New("This sign-in form is not valid here. Go back to your app and start the sign-in again.")
	plain, err := s.cfg.Sealer.OpenOAuth(credentials.KindForm, form)
	if err != nil {
		return request{}, bad
	}
	var q request
	if json.Unmarshal(plain, &q) != nil || q.Nonce == "" || q.ClientID == "" || q.RedirectURI == "" {
		return request{}, bad
	}
	if !s.now().Before(time.Unix(q.Exp, 0)) {
		return request{}, errors.New("This sign-in page has expired. Go back to your app and start the sign-in again.")
	}
	return q, nil
}

// errorsToClient says whether an error found before the person acted may
// go to redirect: a loopback address (the app is on the person's own
// machine), or a client whose metadata document came from its own https
// URL. Any other registration names an address nobody vouches for.
func errorsToClient(c client, redirect string) bool {
	u, err := url.Parse(redirect)
	return c.Fetched || err == nil && u.Scheme == "http" && isLoopback(u.Hostname())
}

// redirectAllowed reports whether uri is one the client registered. For a
// loopback http URI the port may differ (RFC 8252 §7.3: native apps take
// a free port when they start).
func redirectAllowed(registered []string, uri string) bool {
	if uri == "" {
		return false
	}
	for _, r := range registered {
		if r == uri {
			return true
		}
		a, errA := url.Parse(r)
		b, errB := url.Parse(uri)
		if errA == nil && errB == nil && a.Scheme == "http" && b.Scheme == "http" && isLoopback(a.Hostname()) &&
			a.Hostname() == b.Hostname() && a.Path == b.Path && a.RawQuery == b.RawQuery && b.Fragment == "" && b.User == nil {
			return true
		}
	}
	return false
}

func isLoopback(h string) bool {
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// ourResource accepts no resource parameter, this resource, or the
// gateway's base URL (the bare protected-resource document names it).
func (s *Server) ourResource(r string) bool {
	r = strings.TrimRight(r, "/")
	return r == "" || r == s.resource || r == s.issuer
}

func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, uri, state, code, desc string) {
	s.redirect(w, r, uri, url.Values{"error": {code}, "error_description": {desc}, "state": optional(state), "iss": {s.issuer}})
}

func (s *Server) redirect(w http.ResponseWriter, r *http.Request, uri string, params url.Values) {
	u, _ := url.Parse(uri)
	q := u.Query()
	for k, v := range params {
		if len(v) > 0 {
			q[k] = v
		}
	}
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func optional(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}

func randomHex() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("oauth: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// pkceValue checks a code_challenge or code_verifier: 43 to 128 unreserved
// characters (RFC 7636 §4.1).
func pkceValue(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
