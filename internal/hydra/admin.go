package hydra

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client is an OAuth client registered at Hydra.
type Client struct {
	ID, Secret string // Secret is "" for a public client
	// RedirectURIs must match the redirect_uri of a request exactly.
	RedirectURIs []string
	// Scopes the client may ask for (Hydra refuses others with
	// invalid_scope). Default: openid offline_access email.
	Scopes []string
	// Public: no secret (token_endpoint_auth_method none), PKCE only.
	Public bool
	// SecretPost sends the secret in the form body (client_secret_post)
	// instead of HTTP Basic (client_secret_basic, the default).
	SecretPost bool
	// Pairwise gives this client pairwise subject identifiers: the ID
	// token's sub is then an opaque value per client (as at Microsoft)
	// and only the email claim names the mailbox; introspection still
	// answers the real subject in sub, with obfuscated_subject beside it.
	Pairwise bool
	// AccessTTL and RefreshTTL override Options.AccessTTL and RefreshTTL
	// for this client's tokens (from the code and from refreshes); 0 keeps
	// them.
	AccessTTL, RefreshTTL time.Duration
	// Name is shown on the login page.
	Name string
}

// CreateClient registers a client for the authorization-code flow with
// refresh tokens and returns it with the ID and secret Hydra made.
func (s *Server) CreateClient(ctx context.Context, c Client) (Client, error) {
	if len(c.RedirectURIs) == 0 {
		return c, errors.New("hydra: CreateClient: no redirect URI")
	}
	if len(c.Scopes) == 0 {
		c.Scopes = []string{"openid", "offline_access", "email"}
	}
	auth := "client_secret_basic"
	switch {
	case c.Public:
		auth = "none"
	case c.SecretPost:
		auth = "client_secret_post"
	}
	subject := "public"
	if c.Pairwise {
		subject = "pairwise"
	}
	body := map[string]any{
		"client_name":                c.Name,
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"redirect_uris":              c.RedirectURIs,
		"scope":                      strings.Join(c.Scopes, " "),
		"token_endpoint_auth_method": auth,
		"subject_type":               subject,
	}
	if c.AccessTTL > 0 {
		body["authorization_code_grant_access_token_lifespan"] = c.AccessTTL.String()
		body["refresh_token_grant_access_token_lifespan"] = c.AccessTTL.String()
	}
	if c.RefreshTTL > 0 {
		body["authorization_code_grant_refresh_token_lifespan"] = c.RefreshTTL.String()
		body["refresh_token_grant_refresh_token_lifespan"] = c.RefreshTTL.String()
	}
	var out struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	if err := s.do(ctx, http.MethodPost, s.AdminURL+"/admin/clients", body, http.StatusCreated, &out); err != nil {
		return c, err
	}
	c.ID, c.Secret = out.ID, out.Secret
	if c.Public {
		c.Secret = ""
	}
	return c, nil
}

// DeleteClient removes a client; its tokens stop working.
func (s *Server) DeleteClient(ctx context.Context, id string) error {
	return s.do(ctx, http.MethodDelete, s.AdminURL+"/admin/clients/"+url.PathEscape(id), nil, http.StatusNoContent, nil)
}

// RevokeConsent withdraws subject's consent to clientID, as a user does
// in their account settings: Hydra deletes the access and refresh tokens
// issued under it, so introspection answers {"active":false} for them and
// a refresh fails with invalid_grant. subject is the mailbox address.
func (s *Server) RevokeConsent(ctx context.Context, subject, clientID string) error {
	q := url.Values{"subject": {strings.ToLower(subject)}, "client": {clientID}}
	return s.do(ctx, http.MethodDelete, s.AdminURL+"/admin/oauth2/auth/sessions/consent?"+q.Encode(), nil, http.StatusNoContent, nil)
}

// RevokeLogin ends subject's login sessions at Hydra (a remembered login
// is forgotten); tokens are not touched.
func (s *Server) RevokeLogin(ctx context.Context, subject string) error {
	q := url.Values{"subject": {strings.ToLower(subject)}}
	return s.do(ctx, http.MethodDelete, s.AdminURL+"/admin/oauth2/auth/sessions/login?"+q.Encode(), nil, http.StatusNoContent, nil)
}

// Introspection is Hydra's RFC 7662 answer (the fields Dovecot may use are
// the top-level strings: nested objects such as ext are ignored by
// Dovecot 2.3).
type Introspection struct {
	Active            bool           `json:"active"`
	Subject           string         `json:"sub"`
	ObfuscatedSubject string         `json:"obfuscated_subject"`
	ClientID          string         `json:"client_id"`
	Scope             string         `json:"scope"`
	TokenUse          string         `json:"token_use"` // access_token, refresh_token
	Expires           int64          `json:"exp"`
	IssuedAt          int64          `json:"iat"`
	Issuer            string         `json:"iss"`
	Audience          []string       `json:"aud"`
	Ext               map[string]any `json:"ext"`
}

// Introspect asks Hydra about a token, as Dovecot does.
func (s *Server) Introspect(ctx context.Context, token string) (Introspection, error) {
	var in Introspection
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.IntrospectionURL(), strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return in, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if err := s.send(req, http.StatusOK, &in); err != nil {
		return in, err
	}
	return in, nil
}

// The login and consent requests of Hydra's admin API (the fields the app
// uses).
type loginRequest struct {
	Challenge string   `json:"challenge"`
	Skip      bool     `json:"skip"`
	Subject   string   `json:"subject"`
	Scopes    []string `json:"requested_scope"`
	Client    struct {
		ID   string `json:"client_id"`
		Name string `json:"client_name"`
	} `json:"client"`
	OIDC struct {
		LoginHint string `json:"login_hint"`
	} `json:"oidc_context"`
}

// ConsentRequest is what a client asked a user to grant.
type ConsentRequest struct {
	Subject  string   `json:"subject"` // the mailbox address, lower-cased
	ClientID string   `json:"-"`
	Scopes   []string `json:"requested_scope"`
	Audience []string `json:"requested_access_token_audience"`
	// Skip: Hydra remembers an earlier consent of this user to this
	// client for these scopes.
	Skip bool `json:"skip"`
	// Granted is what the app granted (nil: refused). Filled in by the app.
	Granted []string `json:"-"`
}

func (s *Server) flowURL(kind, action, challenge string) string {
	u := s.AdminURL + "/admin/oauth2/auth/requests/" + kind
	if action != "" {
		u += "/" + action
	}
	return u + "?" + url.Values{kind + "_challenge": {challenge}}.Encode()
}

type redirect struct {
	To string `json:"redirect_to"`
}

func (s *Server) acceptLogin(ctx context.Context, challenge, subject string) (string, error) {
	var r redirect
	err := s.do(ctx, http.MethodPut, s.flowURL("login", "accept", challenge),
		map[string]any{"subject": subject, "remember": false}, http.StatusOK, &r)
	return r.To, err
}

func (s *Server) rejectFlow(ctx context.Context, kind, challenge, code, desc string) (string, error) {
	var r redirect
	err := s.do(ctx, http.MethodPut, s.flowURL(kind, "reject", challenge),
		map[string]any{"error": code, "error_description": desc}, http.StatusOK, &r)
	return r.To, err
}

func (s *Server) acceptConsent(ctx context.Context, challenge, subject string, req ConsentRequest, grant []string) (string, error) {
	idToken := map[string]any{}
	for _, sc := range grant {
		if sc == "email" { // as at real providers: the address only with the email scope
			idToken["email"] = subject
			idToken["email_verified"] = true
		}
	}
	audience := req.Audience
	if audience == nil {
		audience = []string{}
	}
	var r redirect
	err := s.do(ctx, http.MethodPut, s.flowURL("consent", "accept", challenge), map[string]any{
		"grant_scope":                 grant,
		"grant_access_token_audience": audience,
		"remember":                    true,
		"remember_for":                0, // until revoked
		"session": map[string]any{
			"id_token":     idToken,
			"access_token": map[string]any{"email": subject}, // introspection's ext
		},
	}, http.StatusOK, &r)
	return r.To, err
}

// send does req and decodes a JSON answer with status want into v.
func (s *Server) send(req *http.Request, want int, v any) error {
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("hydra: %w", err)
	}
	defer resp.Body.Close()
	return decodeAnswer(resp, want, v)
}
