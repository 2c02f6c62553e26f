package oauth

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/providers"
)

// providerTokens is a Verifier that takes the test provider's access token
// (at1) for any address, as a mail server that trusts the provider would.
type providerTokens struct{}

func (providerTokens) Verify(_ context.Context, c credentials.Credentials) error {
	if c.Mechanism() == credentials.MechOAuth && c.AccessToken() == "at1" {
		return nil
	}
	return mailerr.New(mailerr.Auth, "token refused")
}

// startProviderServer is a sign-in server whose one provider ("test",
// shown as Test) is o.
func startProviderServer(t *testing.T, o *mailtest.OIDC) *testServer {
	t.Helper()
	p := providers.New(providers.Config{Name: "test", DisplayName: "Test", Issuer: o.URL, ClientID: "gw", ClientSecret: "secret",
		Scopes: []string{"openid", "email"}, EmailClaims: []string{"email"},
		IMAP: providers.Endpoint{Host: "imap.provider.test", Port: 993, Security: "tls"}}, o.Client())
	return startServer(t, Config{IMAP: providerTokens{}, Providers: []*providers.Provider{p}}, "192.0.2.40")
}

// toProvider opens the sign-in page and chooses "Continue with Test": the
// provider's authorization URL.
func (ts *testServer) toProvider(t *testing.T) string {
	t.Helper()
	form := ts.openForm(t, ts.authorizeURL(nil))
	resp, err := ts.client.PostForm(ts.url+"/authorize", url.Values{"form": {form}, "action": {"provider:test"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("continue with the provider: %d", resp.StatusCode)
	}
	return resp.Header.Get("Location")
}

// authorizeURL is /authorize for the registered client, with changes.
func (ts *testServer) authorizeURL(change func(url.Values)) string {
	q := url.Values{"response_type": {"code"}, "client_id": {ts.id}, "redirect_uri": {redirect}, "scope": {"mail.read"},
		"code_challenge": {challengeOf(strings.Repeat("v", 43))}, "code_challenge_method": {"S256"}, "state": {"client-state"}}
	if change != nil {
		change(q)
	}
	return ts.url + "/authorize?" + q.Encode()
}

// openForm GETs the sign-in page and returns its sealed form.
func (ts *testServer) openForm(t *testing.T, u string) string {
	t.Helper()
	resp, err := ts.client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := formValue.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no sign-in form: %d %s", resp.StatusCode, body)
	}
	return html.UnescapeString(string(m[1]))
}

// atProvider follows the provider's authorization URL (it signs in at
// once) and returns where it sends the browser back: the callback URL.
func atProvider(t *testing.T, authURL string) string {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get("Location")
}

// get GETs u with the browser's cookies and returns the status, the
// redirect (if any) and the body.
func (ts *testServer) get(t *testing.T, u string, cookies ...*http.Cookie) (int, *url.URL, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	return resp.StatusCode, loc, string(body)
}

// providerCookie is the cookie that binds the provider round trip to the
// browser, as the jar holds it now.
func (ts *testServer) providerCookie(t *testing.T) *http.Cookie {
	t.Helper()
	u, _ := url.Parse(ts.url + "/authorize/callback")
	for _, c := range ts.client.Jar.Cookies(u) {
		if c.Name == providerCookie {
			return c
		}
	}
	t.Fatal("no provider cookie")
	return nil
}

// TestProviderCallbackSingleUse: a provider that lets a code be exchanged
// twice (some do) must not make the gateway issue two codes: the state of
// a provider round trip is used once, even when the browser's cookie
// comes back with the replay.
func TestProviderCallbackSingleUse(t *testing.T) {
	o := mailtest.StartOIDC(t)
	o.ReuseCodes = true
	o.Claims = map[string]any{"email": "alice@x.test"}
	ts := startProviderServer(t, o)
	callback := atProvider(t, ts.toProvider(t))
	cookie := ts.providerCookie(t)
	status, loc, body := ts.get(t, callback)
	if status != http.StatusFound || loc.Query().Get("code") == "" {
		t.Fatalf("first callback: %d %s %.300s", status, loc, body)
	}
	// The replay, with the cookie the jar has dropped since.
	status, loc, body = ts.get(t, callback, cookie)
	if loc.Query().Get("code") != "" || status != http.StatusBadRequest || !strings.Contains(body, "already been used") {
		t.Fatalf("the replayed callback: %d %s %.300s", status, loc, body)
	}
	if o.Exchanges != 1 {
		t.Errorf("the provider's code was exchanged %d times, want 1", o.Exchanges)
	}
}

// TestProviderCallbackIssuer: the provider's answer is checked for its
// iss parameter (RFC 9207): another issuer's, or none from a provider that
// says it sends one, issues nothing, success and error answers alike.
func TestProviderCallbackIssuer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		iss       string
		advertise bool
		ok        bool
	}{
		{"no iss from a provider that does not send it", "", false, true},
		{"its own iss", "SELF", true, true},
		{"another issuer's iss", "https://evil.test", false, false},
		{"no iss from a provider that sends it", "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := mailtest.StartOIDC(t)
			o.Claims = map[string]any{"email": "alice@x.test"}
			o.ISS, o.AdvertiseISS = strings.ReplaceAll(tc.iss, "SELF", o.URL), tc.advertise
			ts := startProviderServer(t, o)
			status, loc, body := ts.get(t, atProvider(t, ts.toProvider(t)))
			if got := loc.Query().Get("code") != ""; got != tc.ok {
				t.Fatalf("code issued: %v, want %v (%d %s %.300s)", got, tc.ok, status, loc, body)
			}
			if !tc.ok && (status != http.StatusBadGateway || !strings.Contains(body, "did not complete the sign-in")) {
				t.Errorf("refusal: %d %.300s", status, body)
			}
			if tc.ok && loc.Query().Get("iss") != ts.issuer {
				t.Errorf("our own answer's iss: %q, want %q", loc.Query().Get("iss"), ts.issuer)
			}
		})
	}
	// An error answer (the person said no at the provider) that names
	// another issuer is not passed on to the client.
	o := mailtest.StartOIDC(t)
	ts := startProviderServer(t, o)
	back, _ := url.Parse(atProvider(t, ts.toProvider(t)))
	q := back.Query()
	q.Del("code")
	q.Set("error", "access_denied")
	q.Set("iss", "https://evil.test")
	back.RawQuery = q.Encode()
	if status, loc, body := ts.get(t, back.String()); status != http.StatusBadGateway || loc.String() != "" {
		t.Fatalf("an error answer from another issuer: %d %s %.300s", status, loc, body)
	}
	// The same with the provider's own iss goes to the client as
	// access_denied, with ours.
	back, _ = url.Parse(atProvider(t, ts.toProvider(t)))
	q = back.Query()
	q.Del("code")
	q.Set("error", "access_denied")
	back.RawQuery = q.Encode()
	status, loc, body := ts.get(t, back.String())
	if status != http.StatusFound || loc.Query().Get("error") != "access_denied" || loc.Query().Get("iss") != ts.issuer || loc.Query().Get("state") != "client-state" {
		t.Fatalf("the person said no: %d %s %.300s", status, loc, body)
	}
}
