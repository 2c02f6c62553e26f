package providers

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// op is a small OpenID provider for the unit tests (the real one, Hydra,
// is in the integration tests): discovery, keys, a token endpoint that
// answers one code and refresh tokens, and the claims it signs.
type op struct {
	*httptest.Server
	key      *rsa.PrivateKey
	issuer   string // what the ID token says (a tenant's, for multi-tenant)
	claims   map[string]any
	nonce    string
	rotate   bool
	refused  bool // refresh tokens refused (revoked)
	lastForm url.Values
}

func newOP(t *testing.T) *op {
	t.Helper()
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	o := &op{key: key}
	mux := http.NewServeMux()
	o.Server = httptest.NewServer(mux)
	t.Cleanup(o.Close)
	o.issuer = o.URL
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": o.URL, "authorization_endpoint": o.URL + "/auth",
			"token_endpoint": o.URL + "/token", "jwks_uri": o.URL + "/keys", "userinfo_endpoint": o.URL + "/userinfo",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	// As Microsoft's common endpoint: the issuer is a template.
	mux.HandleFunc("/common/v2.0/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": o.URL + "/{tenantid}/v2.0", "authorization_endpoint": o.URL + "/auth",
			"token_endpoint": o.URL + "/token", "jwks_uri": o.URL + "/keys", "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &o.key.PublicKey, KeyID: "k", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("/userinfo", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"sub": "s", "email": "info@x.test"})
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		o.lastForm = r.PostForm
		w.Header().Set("Content-Type", "application/json")
		if r.PostForm.Get("grant_type") == "refresh_token" {
			if o.refused {
				w.WriteHeader(http.StatusBadRequest)
				json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": "revoked"})
				return
			}
			ans := map[string]any{"access_token": "at2", "token_type": "Bearer", "expires_in": 3600}
			if o.rotate {
				ans["refresh_token"] = "rt2"
			}
			json.NewEncoder(w).Encode(ans)
			return
		}
		claims := map[string]any{"iss": o.issuer, "sub": "s", "aud": "client", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "nonce": o.nonce}
		for k, v := range o.claims {
			claims[k] = v
		}
		signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: o.key}, (&jose.SignerOptions{}).WithHeader("kid", "k"))
		idt, _ := jwt.Signed(signer).Claims(claims).Serialize()
		json.NewEncoder(w).Encode(map[string]any{"access_token": "at1", "refresh_token": "rt1", "token_type": "Bearer", "expires_in": 600, "id_token": idt})
	})
	return o
}

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
	for _, tc := range []struct {
		name   string
		claims map[string]any
		nonce  string
		email  string
		err    string
	}{
		{"email claim", map[string]any{"email": "a@x.test"}, "n", "a@x.test", ""},
		{"preferred_username when no email", map[string]any{"preferred_username": "upn@x.test"}, "n", "upn@x.test", ""},
		{"an unverified email does not count", map[string]any{"email": "evil@x.test", "email_verified": false, "preferred_username": "real@x.test"}, "n", "real@x.test", ""},
		{"userinfo when the token has none", map[string]any{}, "n", "info@x.test", ""},
		{"another sign-in's nonce", map[string]any{"email": "a@x.test"}, "other", "", "nonce"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOP(t)
			o.claims, o.nonce = tc.claims, tc.nonce
			toks, err := o.provider(nil).Exchange(ctx, "https://gw.test/cb", "code", strings.Repeat("v", 43), "n")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error about %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if toks.Email != tc.email || toks.Access != "at1" || toks.Refresh != "rt1" || time.Until(toks.Expiry) < 9*time.Minute {
				t.Fatalf("tokens %+v", toks)
			}
			if o.lastForm.Get("code_verifier") != strings.Repeat("v", 43) {
				t.Errorf("the exchange did not send the PKCE verifier: %v", o.lastForm)
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
		o.issuer, o.nonce = tc.iss, "n"
		o.claims = map[string]any{"email": "a@x.test", "tid": tc.tid}
		p := New(Config{Name: "ms", Issuer: base + "/common/v2.0", MultiTenant: true, ClientID: "client", EmailClaims: []string{"email"}}, o.Client())
		_, err := p.Exchange(context.Background(), "https://gw.test/cb", "c", strings.Repeat("v", 43), "n")
		if (err == nil) != tc.ok {
			t.Errorf("issuer %s tid %s: %v", tc.iss, tc.tid, err)
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
	o.rotate = true
	if toks, err = p.Refresh(context.Background(), "rt1"); err != nil || toks.Refresh != "rt2" {
		t.Fatalf("rotation: %+v %v", toks, err)
	}
	o.refused = true
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
