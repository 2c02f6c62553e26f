// Package providers signs people in with the provider of their mailbox
// (Microsoft 365, Google Workspace, or any OpenID provider the operator
// names), as an OAuth client of it: the authorization URL (PKCE, nonce),
// the code exchange, the mailbox address from the ID token (or userinfo),
// and the refresh of the provider's tokens. It keeps nothing about anyone:
// the tokens it returns are the caller's to seal and hand back to the
// client. It knows nothing about IMAP, MCP or the gateway's own grants.
package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Endpoint is a mail server of a provider.
type Endpoint struct {
	Host     string
	Port     int
	Security string // tls (implicit), starttls
}

// Config is one provider, as the operator configures it.
type Config struct {
	// Name identifies it in URLs and sealed grants: microsoft, google,
	// or the operator's (OIDC_NAME lower-cased).
	Name string
	// DisplayName is shown on the sign-in page: "Continue with NAME".
	DisplayName string
	// Issuer is the OpenID issuer whose discovery document names the
	// endpoints and keys.
	Issuer string
	// MultiTenant accepts ID tokens of any tenant of a multi-tenant issuer
	// (Microsoft's common and organizations): their issuer names the
	// user's tenant, https://login.microsoftonline.com/{tid}/v2.0.
	MultiTenant            bool
	ClientID, ClientSecret string
	Scopes                 []string
	// AuthParams are added to the authorization URL (Google's
	// access_type=offline and prompt=consent, which a refresh token needs).
	AuthParams map[string]string
	// EmailClaims are the claims that may hold the mailbox address, in
	// order; the first present one wins.
	EmailClaims []string
	// IMAP and SMTP are where the mailbox is.
	IMAP, SMTP Endpoint
}

// Microsoft is the preset for Microsoft 365 (Exchange Online) under tenant
// ("common", "organizations" or a tenant id).
func Microsoft(tenant, clientID, clientSecret string) Config {
	if tenant == "" {
		tenant = "common"
	}
	return Config{
		Name: "microsoft", DisplayName: "Microsoft",
		Issuer:      "https://login.microsoftonline.com/" + tenant + "/v2.0",
		MultiTenant: tenant == "common" || tenant == "organizations" || tenant == "consumers",
		ClientID:    clientID, ClientSecret: clientSecret,
		Scopes: []string{"https://outlook.office.com/IMAP.AccessAsUser.All", "https://outlook.office.com/SMTP.Send",
			"offline_access", "openid", "email"},
		// The address Exchange logs in with is the UPN, which
		// preferred_username carries when email is not released.
		EmailClaims: []string{"email", "preferred_username", "upn"},
		IMAP:        Endpoint{Host: "outlook.office365.com", Port: 993, Security: "tls"},
		SMTP:        Endpoint{Host: "smtp.office365.com", Port: 587, Security: "starttls"},
	}
}

// Google is the preset for Google Workspace and Gmail.
func Google(clientID, clientSecret string) Config {
	return Config{
		Name: "google", DisplayName: "Google",
		Issuer:   "https://accounts.google.com",
		ClientID: clientID, ClientSecret: clientSecret,
		Scopes:      []string{"https://mail.google.com/", "openid", "email"},
		AuthParams:  map[string]string{"access_type": "offline", "prompt": "consent"},
		EmailClaims: []string{"email"},
		IMAP:        Endpoint{Host: "imap.gmail.com", Port: 993, Security: "tls"},
		SMTP:        Endpoint{Host: "smtp.gmail.com", Port: 465, Security: "tls"},
	}
}

// Tokens are what a provider issued.
type Tokens struct {
	Access  string
	Refresh string // "" when the provider did not return one
	Expiry  time.Time
	// Email is the mailbox address (Exchange only; a refresh leaves it "").
	Email string
}

// Errors the provider's answers map to; their text is safe to show.
var (
	// ErrRefused: the provider refused the code or the refresh token
	// (revoked, expired, the password changed, consent withdrawn).
	ErrRefused = errors.New("the provider refused the sign-in")
	// ErrNoEmail: the provider named no mailbox address.
	ErrNoEmail = errors.New("the provider did not say which mailbox address signed in (no email claim)")
)

// Provider is a configured provider, its discovery done on first use.
type Provider struct {
	cfg  Config
	http *http.Client

	mu       sync.Mutex
	oidc     *oidc.Provider
	verifier *oidc.IDTokenVerifier
}

// New makes a provider; httpClient makes its requests (nil: a 10 s client).
func New(cfg Config, httpClient *http.Client) *Provider {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &Provider{cfg: cfg, http: httpClient}
}

// Config is what the provider was made with.
func (p *Provider) Config() Config { return p.cfg }

// discover fetches the discovery document once (again after a failure).
func (p *Provider) discover(ctx context.Context) (*oidc.Provider, *oidc.IDTokenVerifier, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.oidc != nil {
		return p.oidc, p.verifier, nil
	}
	ctx = oidc.ClientContext(ctx, p.http)
	if p.cfg.MultiTenant {
		// The document's issuer is a template ({tenantid}); each token's
		// is checked in Exchange instead.
		ctx = oidc.InsecureIssuerURLContext(ctx, p.cfg.Issuer)
	}
	op, err := oidc.NewProvider(ctx, p.cfg.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("discovery of %s: %w", p.cfg.Issuer, err)
	}
	p.oidc = op
	p.verifier = op.VerifierContext(oidc.ClientContext(context.Background(), p.http),
		&oidc.Config{ClientID: p.cfg.ClientID, SkipIssuerCheck: p.cfg.MultiTenant})
	return p.oidc, p.verifier, nil
}

func (p *Provider) oauth2(op *oidc.Provider, redirectURI string) *oauth2.Config {
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, Endpoint: op.Endpoint(),
		RedirectURL: redirectURI, Scopes: p.cfg.Scopes}
}

// AuthURL is where to send the person: the provider's authorization
// endpoint with state, the PKCE S256 challenge of verifier, and nonce.
func (p *Provider) AuthURL(ctx context.Context, redirectURI, state, verifier, nonce, loginHint string) (string, error) {
	op, _, err := p.discover(ctx)
	if err != nil {
		return "", err
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)}
	for k, v := range p.cfg.AuthParams {
		opts = append(opts, oauth2.SetAuthURLParam(k, v))
	}
	if loginHint != "" {
		opts = append(opts, oauth2.SetAuthURLParam("login_hint", loginHint))
	}
	return p.oauth2(op, redirectURI).AuthCodeURL(state, opts...), nil
}

// Exchange trades code for tokens, checks the ID token (signature,
// audience, expiry, nonce; the tenant's issuer for a multi-tenant
// provider) and takes the mailbox address from it, or from userinfo when
// userinfo names the same subject. iss is the authorization response's
// iss parameter (RFC 9207, "" when it had none): checked by
// CheckResponseIssuer, and for a multi-tenant provider it must be the ID
// token's own issuer.
func (p *Provider) Exchange(ctx context.Context, redirectURI, code, verifier, nonce, iss string) (*Tokens, error) {
	if err := p.CheckResponseIssuer(ctx, iss); err != nil {
		return nil, err
	}
	op, idv, err := p.discover(ctx)
	if err != nil {
		return nil, err
	}
	ctx = oidc.ClientContext(ctx, p.http)
	tok, err := p.oauth2(op, redirectURI).Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, refusal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, errors.New("the provider returned no ID token (is the openid scope granted?)")
	}
	id, err := idv.Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("the provider's ID token: %w", err)
	}
	if id.Nonce != nonce {
		return nil, errors.New("the provider's ID token is for another sign-in (nonce)")
	}
	if p.cfg.MultiTenant {
		var c struct {
			TID string `json:"tid"`
		}
		id.Claims(&c)
		if c.TID == "" || id.Issuer != p.tenantBase()+"/"+c.TID+"/v2.0" {
			return nil, errors.New("the provider's ID token names an issuer that is not its tenant's")
		}
		if iss != "" && iss != id.Issuer {
			return nil, errors.New("the provider's answer names another issuer (iss) than its ID token")
		}
	}
	email := p.email(id.Claims)
	if email == "" && op.UserInfoEndpoint() != "" {
		info, err := op.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		switch {
		case err != nil:
		case info.Subject != id.Subject:
			// OIDC Core 5.3.4: userinfo of another subject must not be used.
			return nil, errors.New("the provider's userinfo answer is for another subject (sub) than its ID token")
		default:
			email = p.email(info.Claims)
		}
	}
	if email == "" {
		return nil, ErrNoEmail
	}
	return &Tokens{Access: tok.AccessToken, Refresh: tok.RefreshToken, Expiry: tok.Expiry, Email: email}, nil
}

// CheckResponseIssuer checks the iss parameter of an authorization
// response, success or error (RFC 9207, the defence against mix-up):
// when present it must be this provider's issuer (for a multi-tenant
// provider, one of its tenants': Exchange then compares it with the ID
// token's), and it must be present when the provider's discovery says it
// sends it (authorization_response_iss_parameter_supported).
func (p *Provider) CheckResponseIssuer(ctx context.Context, iss string) error {
	op, _, err := p.discover(ctx)
	if err != nil {
		return err
	}
	var doc struct {
		Issuer   string `json:"issuer"`
		SendsISS bool   `json:"authorization_response_iss_parameter_supported"`
	}
	op.Claims(&doc)
	switch {
	case iss == "" && doc.SendsISS:
		return errors.New("the provider's answer has no iss, which its discovery document says it sends (RFC 9207)")
	case iss == "":
		return nil
	case p.cfg.MultiTenant:
		tenant, ok := strings.CutPrefix(iss, p.tenantBase()+"/")
		if tenant, ok = strings.CutSuffix(tenant, "/v2.0"); ok && tenant != "" && !strings.Contains(tenant, "/") {
			return nil
		}
	case iss == doc.Issuer:
		return nil
	}
	return errors.New("the provider's answer names another issuer (iss) than this provider's: it may come from another provider (mix-up)")
}

// tenantBase is a multi-tenant issuer without its tenant and version:
// https://login.microsoftonline.com for .../common/v2.0.
func (p *Provider) tenantBase() string {
	base := strings.TrimSuffix(strings.TrimSuffix(p.cfg.Issuer, "/v2.0"), "/")
	return base[:strings.LastIndex(base, "/")]
}

// email is the first of the configured claims that holds an address. An
// email claim counts only when email_verified is absent (Microsoft sends
// none) or says true: the boolean, or the string "true" some providers
// send; "false", 0, null or anything else is unverified (OIDC Core 5.1).
func (p *Provider) email(claims func(any) error) string {
	var all map[string]any
	if claims(&all) != nil {
		return ""
	}
	if v, ok := all["email_verified"]; ok && !verified(v) {
		delete(all, "email")
	}
	for _, name := range p.cfg.EmailClaims {
		if s, _ := all[name].(string); strings.Contains(s, "@") {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

func verified(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		return strings.EqualFold(v, "true")
	}
	return false
}

// Refresh renews the provider's access token; a provider that rotates
// refresh tokens returns a new one (keep it), else Refresh is "".
func (p *Provider) Refresh(ctx context.Context, refresh string) (*Tokens, error) {
	op, _, err := p.discover(ctx)
	if err != nil {
		return nil, err
	}
	ctx = oidc.ClientContext(ctx, p.http)
	src := p.oauth2(op, "").TokenSource(ctx, &oauth2.Token{RefreshToken: refresh, Expiry: time.Unix(1, 0)})
	tok, err := src.Token()
	if err != nil {
		return nil, refusal(err)
	}
	out := &Tokens{Access: tok.AccessToken, Expiry: tok.Expiry}
	if tok.RefreshToken != refresh {
		out.Refresh = tok.RefreshToken
	}
	return out, nil
}

// refusal maps an OAuth error answer (invalid_grant and the like) to
// ErrRefused; anything else (the provider unreachable) stays as it is.
func refusal(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500 {
		return fmt.Errorf("%w (%s)", ErrRefused, strings.TrimSpace(re.ErrorCode+" "+re.ErrorDescription))
	}
	return err
}
