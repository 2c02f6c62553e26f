package hydra

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"time"
)

// AuthRequest is a client's authorization request (code flow, PKCE S256).
type AuthRequest struct {
	Client      Client
	RedirectURI string   // "": Client.RedirectURIs[0]
	Scopes      []string // nil: Client.Scopes
	// State, Nonce and Verifier (the PKCE code verifier) are made at
	// random by AuthCodeURL when empty.
	State, Nonce, Verifier string
	LoginHint              string     // prefills the login form
	Extra                  url.Values // more query parameters (prompt, ...)
}

// AuthCodeURL returns the authorization URL for req, and req with its
// redirect URI, scopes, state, nonce and verifier filled in.
func (s *Server) AuthCodeURL(req AuthRequest) (string, AuthRequest) {
	if req.RedirectURI == "" && len(req.Client.RedirectURIs) > 0 {
		req.RedirectURI = req.Client.RedirectURIs[0]
	}
	if req.Scopes == nil {
		req.Scopes = req.Client.Scopes
	}
	if req.State == "" {
		req.State = randomHex(16)
	}
	if req.Nonce == "" {
		req.Nonce = randomHex(16)
	}
	if req.Verifier == "" {
		req.Verifier = randomHex(32) // 64 characters of [0-9a-f]: RFC 7636's alphabet
	}
	sum := sha256.Sum256([]byte(req.Verifier))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {req.Client.ID},
		"redirect_uri":          {req.RedirectURI},
		"scope":                 {strings.Join(req.Scopes, " ")},
		"state":                 {req.State},
		"nonce":                 {req.Nonce},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	if req.LoginHint != "" {
		q.Set("login_hint", req.LoginHint)
	}
	for k, v := range req.Extra {
		q[k] = v
	}
	return s.AuthURL() + "?" + q.Encode(), req
}

// SignIn is a browser's walk from startURL (an authorization URL of Hydra,
// or any page that leads there): it follows redirects with a fresh cookie
// jar, fills in and submits the login form for user and password when the
// login app shows it (with AutoLogin set it does not), and stops at the
// first redirect to a URL that starts with stopAt (usually the client's
// redirect URI), which it returns without fetching it. An error page, a
// refused password or a walk that does not get there is an error.
func (s *Server) SignIn(ctx context.Context, startURL, user, password, stopAt string) (*url.URL, error) {
	jar, _ := cookiejar.New(nil)
	var stop *url.URL
	browser := &http.Client{
		Jar:     jar,
		Timeout: 30 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), stopAt) {
				stop = req.URL
				return http.ErrUseLastResponse
			}
			if len(via) > 20 {
				return errors.New("hydra: SignIn: more than 20 redirects")
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, startURL, nil)
	if err != nil {
		return nil, err
	}
	for step := 0; step < 5; step++ {
		resp, err := browser.Do(req)
		if err != nil {
			return nil, fmt.Errorf("hydra: SignIn: %w", err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if stop != nil {
			return stop, nil
		}
		page := resp.Request.URL
		onForm := resp.StatusCode == http.StatusOK && strings.HasPrefix(page.String(), s.AppURL+"/login") &&
			bytes.Contains(body, []byte(`name="login_challenge"`))
		if !onForm {
			return nil, fmt.Errorf("hydra: SignIn: stopped at %s (status %d) before reaching %s: %s",
				page.Redacted(), resp.StatusCode, stopAt, bytes.TrimSpace(body[:min(len(body), 500)]))
		}
		if bytes.Contains(body, []byte(`id="error"`)) {
			return nil, fmt.Errorf("hydra: SignIn: the login app refused %s's password", user)
		}
		if user == "" {
			return nil, errors.New("hydra: SignIn: the login form was shown and no user was given (or set AutoLogin)")
		}
		challenge := page.Query().Get("login_challenge")
		if challenge == "" {
			challenge = extractChallenge(body)
		}
		form := url.Values{"login_challenge": {challenge}, "email": {user}, "password": {password}, "action": {"login"}}
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, s.AppURL+"/login", strings.NewReader(form.Encode()))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return nil, errors.New("hydra: SignIn: the login form came back five times")
}

// extractChallenge takes the login_challenge from the form's hidden field.
func extractChallenge(body []byte) string {
	const marker = `name="login_challenge" value="`
	_, rest, ok := bytes.Cut(body, []byte(marker))
	if !ok {
		return ""
	}
	v, _, _ := bytes.Cut(rest, []byte(`"`))
	return string(v)
}

// CallbackCode checks the redirect a sign-in ended at: the state must be
// state, and it must carry a code (an error=… redirect is returned as an
// *OAuthError).
func CallbackCode(u *url.URL, state string) (string, error) {
	q := u.Query()
	if e := q.Get("error"); e != "" {
		return "", &OAuthError{Code: e, Description: q.Get("error_description")}
	}
	if q.Get("state") != state {
		return "", fmt.Errorf("hydra: callback state %q, want %q", q.Get("state"), state)
	}
	code := q.Get("code")
	if code == "" {
		return "", fmt.Errorf("hydra: callback without a code: %s", u.Redacted())
	}
	return code, nil
}

// Tokens is a token endpoint's answer.
type Tokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	IDToken      string `json:"id_token"`
	TokenType    string `json:"token_type"`
	Scope        string `json:"scope"`
	ExpiresIn    int    `json:"expires_in"`
	// Expiry is when the access token expires (from ExpiresIn).
	Expiry time.Time `json:"-"`
}

// IDClaims decodes the ID token's claims WITHOUT checking its signature
// (the gateway checks it with the provider's JWKS; a test reads what the
// provider said).
func (t Tokens) IDClaims() (map[string]any, error) {
	parts := strings.Split(t.IDToken, ".")
	if len(parts) != 3 {
		return nil, errors.New("hydra: the ID token is not a JWS")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("hydra: ID token: %w", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, fmt.Errorf("hydra: ID token: %w", err)
	}
	return claims, nil
}

// OAuthError is an OAuth error answer (RFC 6749 5.2) or error redirect.
type OAuthError struct {
	Status      int // HTTP status; 0 for a redirect
	Code        string
	Description string
}

func (e *OAuthError) Error() string {
	return fmt.Sprintf("oauth error %s: %s (status %d)", e.Code, e.Description, e.Status)
}

// Exchange trades an authorization code for tokens, as client c.
func (s *Server) Exchange(ctx context.Context, c Client, code, verifier, redirectURI string) (Tokens, error) {
	return s.token(ctx, c, url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"code_verifier": {verifier},
		"redirect_uri":  {redirectURI},
	})
}

// Refresh uses a refresh token. Hydra rotates refresh tokens: the answer
// holds a new one, and the old one is dead (using it again revokes the
// whole chain).
func (s *Server) Refresh(ctx context.Context, c Client, refreshToken string) (Tokens, error) {
	return s.token(ctx, c, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}})
}

func (s *Server) token(ctx context.Context, c Client, form url.Values) (Tokens, error) {
	var t Tokens
	if c.Public || c.SecretPost {
		form.Set("client_id", c.ID)
		if c.SecretPost {
			form.Set("client_secret", c.Secret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.TokenURL(), strings.NewReader(form.Encode()))
	if err != nil {
		return t, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if !c.Public && !c.SecretPost {
		// RFC 6749 2.3.1: both form-encoded before Basic
		req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	}
	start := time.Now()
	if err := s.send(req, http.StatusOK, &t); err != nil {
		return t, err
	}
	if t.ExpiresIn > 0 {
		t.Expiry = start.Add(time.Duration(t.ExpiresIn) * time.Second)
	}
	return t, nil
}

// decodeAnswer decodes a JSON answer with status want into v; an OAuth
// error body becomes an *OAuthError, anything else an error with the body.
func decodeAnswer(resp *http.Response, want int, v any) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("hydra: %s %s: %w", resp.Request.Method, resp.Request.URL.Redacted(), err)
	}
	if resp.StatusCode != want {
		var oe struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(data, &oe) == nil && oe.Error != "" {
			return &OAuthError{Status: resp.StatusCode, Code: oe.Error, Description: oe.Description}
		}
		return fmt.Errorf("hydra: %s %s: status %d: %s", resp.Request.Method, resp.Request.URL.Redacted(), resp.StatusCode, bytes.TrimSpace(data))
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			return fmt.Errorf("hydra: %s %s: %w", resp.Request.Method, resp.Request.URL.Redacted(), err)
		}
	}
	return nil
}

// Login runs the whole authorization-code flow for user as client c (the
// first redirect URI, the client's scopes unless scopes are given): the
// authorization URL, the login app (the password from Options.Users),
// consent, and the code exchange.
func (s *Server) Login(ctx context.Context, c Client, user string, scopes ...string) (Tokens, error) {
	req := AuthRequest{Client: c}
	if len(scopes) > 0 {
		req.Scopes = scopes
	}
	authURL, req := s.AuthCodeURL(req)
	cb, err := s.SignIn(ctx, authURL, user, s.users[strings.ToLower(user)], req.RedirectURI)
	if err != nil {
		return Tokens{}, err
	}
	code, err := CallbackCode(cb, req.State)
	if err != nil {
		return Tokens{}, err
	}
	return s.Exchange(ctx, c, code, req.Verifier, req.RedirectURI)
}
