package providers

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// newOP is a provider for the tests (mailtest.OIDC), its ID tokens for
// the nonce "n" unless a test says otherwise; it takes any code, as often
// as it is sent.
func newOP(t *testing.T) *op {
	o := &op{mailtest.StartOIDC(t)}
	o.Nonce, o.ReuseCodes = "n", true
	return o
}

type op struct{ *mailtest.OIDC }

func (o *op) provider(mod func(*Config)) *Provider {
	cfg := Config{Name: "test", Issuer: o.URL, ClientID: "client", ClientSecret: "secret", Scopes: []string{"openid", "email", "mail"},
		EmailClaims: []string{"email", "preferred_username"}}
	if mod != nil {
		mod(&cfg)
	}
	return New(cfg, o.Client())
}

func TestAuthURL(t *testing.T) {
	o := newOP(t)
	p := o.provider(func(c *Config) { c.AuthParams = map[string]string{"access_type": "offline", "prompt": "consent"} })
	u, err := p.AuthURL(context.Background(), "https://gw.test/authorize/callback", "st", strings.Repeat("v", 43), "n1", "a@x.test")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.Parse(u)
	want := map[string]string{"client_id": "client", "redirect_uri": "https://gw.test/authorize/callback", "state": "st", "nonce": "n1",
		"scope": "openid email mail", "code_challenge_method": "S256", "response_type": "code", "access_type": "offline", "prompt": "consent", "login_hint": "a@x.test"}
	for k, v := range want {
		if got := q.Query().Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if q.Query().Get("code_challenge") == "" || !strings.HasPrefix(u, o.URL+"/auth?") {
		t.Errorf("url %s", u)
	}
}

func TestExchange(t *testing.T) {
	ctx := context.Background()
	noInfo := map[string]any{} // userinfo names the subject and nothing else
	for _, tc := range []struct {
		name   string
		claims map[string]any
		info   map[string]any
		nonce  string
		email  string
		err    string
	}{
		{"email claim", map[string]any{"email": "a@x.test"}, noInfo, "n", "a@x.test", ""},
		{"preferred_username when no email", map[string]any{"preferred_username": "upn@x.test"}, noInfo, "n", "upn@x.test", ""},
		{"an unverified email does not count", map[string]any{"email": "evil@x.test", "email_verified": false, "preferred_username": "real@x.test"}, noInfo, "n", "real@x.test", ""},
		{"userinfo when the token has none", map[string]any{}, map[string]any{"email": "info@x.test"}, "n", "info@x.test", ""},
		{"another sign-in's nonce", map[string]any{"email": "a@x.test"}, noInfo, "other", "", "nonce"},
		// email_verified is a boolean (OIDC Core 5.1); anything but true
		// (or the string "true" some providers send) is not verified.
		{`email_verified "false" as a string`, map[string]any{"email": "evil@x.test", "email_verified": "false", "preferred_username": "real@x.test"}, noInfo, "n", "real@x.test", ""},
		{`email_verified "FALSE"`, map[string]any{"email": "evil@x.test", "email_verified": "FALSE"}, noInfo, "n", "", "no email"},
		{"email_verified 0", map[string]any{"email": "evil@x.test", "email_verified": 0}, noInfo, "n", "", "no email"},
		{"email_verified null", map[string]any{"email": "evil@x.test", "email_verified": nil}, noInfo, "n", "", "no email"},
		{`email_verified "true" as a string`, map[string]any{"email": "a@x.test", "email_verified": "true"}, noInfo, "n", "a@x.test", ""},
		{"email_verified true", map[string]any{"email": "a@x.test", "email_verified": true}, noInfo, "n", "a@x.test", ""},
		// Userinfo counts only for the ID token's subject (OIDC Core
		// 5.3.4), and its email_verified as the token's does.
		{"userinfo of another subject", map[string]any{}, map[string]any{"sub": "victim", "email": "victim@x.test"}, "n", "", "subject"},
		{`userinfo email_verified "false"`, map[string]any{}, map[string]any{"email": "evil@x.test", "email_verified": "false"}, "n", "", "no email"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOP(t)
			o.Claims, o.InfoClaims, o.Nonce = tc.claims, tc.info, tc.nonce
			toks, err := o.provider(nil).Exchange(ctx, "https://gw.test/cb", "code", strings.Repeat("v", 43), "n", "")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v %v, want an error about %s", toks, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if toks.Email != tc.email || toks.Access != "at1" || toks.Refresh != "rt1" || time.Until(toks.Expiry) < 9*time.Minute {
				t.Fatalf("tokens %+v", toks)
			}
			if o.LastForm.Get("code_verifier") != strings.Repeat("v", 43) {
				t.Errorf("the exchange did not send the PKCE verifier: %v", o.LastForm)
			}
		})
	}
}

// TestMultiTenant: an issuer such as Microsoft's common accepts a token
// whose issuer is its tenant's, and refuses one that names another.
func TestMultiTenant(t *testing.T) {
	o := newOP(t)
	base := o.URL
	for _, tc := range []struct {
		iss, tid string
		ok       bool
	}{
		{base + "/t1/v2.0", "t1", true},
		{base + "/t2/v2.0", "t1", false},
		{"https://evil.test/t1/v2.0", "t1", false},
	} {
		o.Issuer = tc.iss
		o.Claims = map[string]any{"email": "a@x.test", "tid": tc.tid}
		p := New(Config{Name: "ms", Issuer: base + "/common/v2.0", MultiTenant: true, ClientID: "client", EmailClaims: []string{"email"}}, o.Client())
		_, err := p.Exchange(context.Background(), "https://gw.test/cb", "c", strings.Repeat("v", 43), "n", "")
		if (err == nil) != tc.ok {
			t.Errorf("issuer %s tid %s: %v", tc.iss, tc.tid, err)
		}
	}
}

// TestResponseIssuer: the iss parameter of the provider's answer (RFC
// 9207) must be the provider's issuer; it must be there when discovery
// says it is sent; for a multi-tenant provider it must be the ID token's
// tenant issuer.
func TestResponseIssuer(t *testing.T) {
	ctx := context.Background()
	o := newOP(t)
	o.Claims = map[string]any{"email": "a@x.test"}
	p := o.provider(nil)
	for _, tc := range []struct {
		iss       string
		advertise bool
		ok        bool
	}{
		{"", false, true},
		{o.URL, false, true},
		{o.URL, true, true},
		{"", true, false},
		{"https://evil.test", false, false},
		{o.URL + "/", false, false},
		{"https://evil.test", true, false},
	} {
		o.AdvertiseISS = tc.advertise
		p = o.provider(nil) // discovery is read once per provider
		_, err := p.Exchange(ctx, "https://gw.test/cb", "c", strings.Repeat("v", 43), "n", tc.iss)
		if (err == nil) != tc.ok {
			t.Errorf("iss %q, advertised %v: %v", tc.iss, tc.advertise, err)
		}
		if err := p.CheckResponseIssuer(ctx, tc.iss); (err == nil) != tc.ok {
			t.Errorf("CheckResponseIssuer(%q), advertised %v: %v", tc.iss, tc.advertise, err)
		}
	}
	// Multi-tenant: the tenant's issuer, and only the ID token's.
	o.AdvertiseISS = false
	o.Issuer = o.URL + "/t1/v2.0"
	o.Claims = map[string]any{"email": "a@x.test", "tid": "t1"}
	ms := New(Config{Name: "ms", Issuer: o.URL + "/common/v2.0", MultiTenant: true, ClientID: "client", EmailClaims: []string{"email"}}, o.Client())
	for iss, ok := range map[string]bool{"": true, o.URL + "/t1/v2.0": true, o.URL + "/t2/v2.0": false, "https://evil.test/t1/v2.0": false, o.URL + "/t1/x/v2.0": false} {
		if _, err := ms.Exchange(ctx, "https://gw.test/cb", "c", strings.Repeat("v", 43), "n", iss); (err == nil) != ok {
			t.Errorf("multi-tenant iss %q: %v", iss, err)
		}
	}
}

func TestRefresh(t *testing.T) {
	o := newOP(t)
	p := o.provider(nil)
	toks, err := p.Refresh(context.Background(), "rt1")
	if err != nil || toks.Access != "at2" || toks.Refresh != "" {
		t.Fatalf("no rotation: %+v %v", toks, err)
	}
	o.Rotate = true
	if toks, err = p.Refresh(context.Background(), "rt1"); err != nil || toks.Refresh != "rt2" {
		t.Fatalf("rotation: %+v %v", toks, err)
	}
	o.Refused = true
	if _, err = p.Refresh(context.Background(), "rt1"); !errors.Is(err, ErrRefused) {
		t.Fatalf("revoked: %v", err)
	}
	o.Close()
	if _, err = p.Refresh(context.Background(), "rt1"); err == nil || errors.Is(err, ErrRefused) {
		t.Fatalf("provider down: %v (must not read as a refusal)", err)
	}
}

func TestPresets(t *testing.T) {
	ms := Microsoft("", "id", "secret")
	if ms.Issuer != "https://login.microsoftonline.com/common/v2.0" || !ms.MultiTenant || ms.IMAP.Host != "outlook.office365.com" || ms.SMTP.Port != 587 ||
		!strings.Contains(strings.Join(ms.Scopes, " "), "IMAP.AccessAsUser.All") || !strings.Contains(strings.Join(ms.Scopes, " "), "offline_access") {
		t.Errorf("microsoft %+v", ms)
	}
	if one := Microsoft("0000-tenant", "id", ""); one.MultiTenant || !strings.Contains(one.Issuer, "0000-tenant") {
		t.Errorf("a tenant id: %+v", one)
	}
	g := Google("id", "secret")
	if g.AuthParams["access_type"] != "offline" || g.AuthParams["prompt"] != "consent" || g.IMAP.Host != "imap.gmail.com" || g.Scopes[0] != "https://mail.google.com/" {
		t.Errorf("google %+v", g)
	}
}
