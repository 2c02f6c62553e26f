package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/egress"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/hosts"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// passwords is a Verifier that knows a few logins; it folds the user
// name to lower case, as Dovecot does (%Lu).
type passwords map[string]string

func (p passwords) Verify(_ context.Context, c credentials.Credentials) error {
	if pw, ok := p[strings.ToLower(c.User)]; ok && pw == c.Password() {
		return nil
	}
	return mailerr.New(mailerr.Auth, "wrong password")
}

type testServer struct {
	*Server
	url    string
	client *http.Client
	id     string // a registered client
}

const redirect = "http://127.0.0.1:9/cb"

var testKey = []byte("0123456789abcdef0123456789abcdef")

// startServer runs an authorization server on a loopback listener whose
// issuer is its own URL (or issuer, when given), every request from
// client address addr.
func startServer(t *testing.T, cfg Config, addr string) *testServer {
	t.Helper()
	if cfg.Sealer == nil {
		cfg.Sealer, _ = credentials.NewSealer(testKey)
	}
	if cfg.IMAP == nil {
		cfg.IMAP = passwords{"alice@x.test": "pw-a", "bob@x.test": "pw-b"}
	}
	if cfg.Operator == 0 {
		cfg.Operator = access.Full
	}
	cfg.CanSend = true
	cfg.AccessTTL, cfg.RefreshTTL = time.Hour, 24*time.Hour
	ts := &testServer{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.Server.ServeHTTP(w, r.WithContext(guard.WithClientAddr(r.Context(), addr)))
	}))
	t.Cleanup(hs.Close)
	if cfg.Issuer == "" {
		cfg.Issuer = hs.URL
	}
	ts.Server = New(cfg)
	ts.url = hs.URL
	jar, _ := cookiejar.New(nil)
	ts.client = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var reg struct {
		ClientID string `json:"client_id"`
	}
	resp, err := http.Post(hs.URL+"/register", "application/json", strings.NewReader(`{"client_name":"t","redirect_uris":["`+redirect+`"]}`))
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&reg)
	resp.Body.Close()
	ts.id = reg.ClientID
	return ts
}

var formValue = regexp.MustCompile(`name="form" value="([^"]+)"`)

// signIn runs the sign-in page for user with scope and returns the code
// and its PKCE verifier.
func (ts *testServer) signIn(t *testing.T, user, pass, scope string) (code, verifier string) {
	t.Helper()
	return ts.signInAt(t, user, pass, scope, "")
}

// signInAt is signIn with the page's host field set to host.
func (ts *testServer) signInAt(t *testing.T, user, pass, scope, host string) (code, verifier string) {
	t.Helper()
	verifier = strings.Repeat("v", 20) + fmt.Sprint(time.Now().UnixNano()) + strings.Repeat("w", 20)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {ts.id}, "redirect_uri": {redirect}, "scope": {scope},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	form := ts.openForm(t, ts.url+"/authorize?"+q.Encode())
	resp, err := ts.client.PostForm(ts.url+"/authorize", url.Values{"form": {form}, "username": {user}, "password": {pass}, "action": {"allow"}, "host": {host}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if code = loc.Query().Get("code"); code == "" {
		t.Fatalf("sign-in gave no code: %d %s", resp.StatusCode, loc)
	}
	return code, verifier
}

type answer struct {
	Status       int
	RetryAfter   string
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
	Description  string `json:"error_description"`
}

func (ts *testServer) token(t *testing.T, form url.Values) answer {
	t.Helper()
	if form.Get("client_id") == "" {
		form.Set("client_id", ts.id)
	}
	resp, err := http.PostForm(ts.url+"/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	json.NewDecoder(resp.Body).Decode(&a)
	a.Status, a.RetryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	return a
}

func (ts *testServer) exchange(t *testing.T, code, verifier string) answer {
	return ts.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier}, "redirect_uri": {redirect}})
}

func (ts *testServer) refresh(t *testing.T, rt string) answer {
	return ts.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
}

// TestFullMemoryNeverForgetsAUse: the attack, at a size a test can
// reach. Many sign-ins fill the memory of used codes and live sign-ins;
// then another user's already used refresh token is still refused, the
// newest one of that sign-in still works, and new sign-ins get 503 with
// Retry-After until entries expire.
func TestFullMemoryNeverForgetsAUse(t *testing.T) {
	ts := startServer(t, Config{MaxGrants: 100, GrantsPerAccount: 64}, "192.0.2.1")
	code, v := ts.signIn(t, "alice@x.test", "pw-a", "mail.read")
	first := ts.exchange(t, code, v)
	second := ts.refresh(t, first.RefreshToken)
	if second.Status != 200 {
		t.Fatalf("refresh: %+v", second)
	}
	// Fill it: bob signs in again and again (each is a redeemed code and a
	// sign-in, two entries), from the same sealer as the page would.
	filled := false
	for i := range 200 {
		g := credentials.Grant{ID: credentials.NewGrantID(), Creds: credentials.New(fmt.Sprintf("user%d@x.test", i), "pw"),
			ClientID: ts.id, RedirectURI: redirect, Challenge: challengeOf(v), Audience: ts.resource, Expires: time.Now().Add(time.Minute)}
		c, err := ts.cfg.Sealer.SealGrant(credentials.KindCode, g)
		if err != nil {
			t.Fatal(err)
		}
		a := ts.exchange(t, c, v)
		if a.Status == http.StatusServiceUnavailable {
			if a.Error != "temporarily_unavailable" || a.RetryAfter == "" {
				t.Errorf("full: %+v", a)
			}
			filled = true
			break
		}
		if a.Status != 200 {
			t.Fatalf("sign-in %d: %+v", i, a)
		}
	}
	if !filled {
		t.Fatal("the memory never filled")
	}
	if a := ts.refresh(t, first.RefreshToken); a.Status != 400 || a.Error != "invalid_grant" || !strings.Contains(a.Description, "already been used") {
		t.Fatalf("a used refresh token replayed on a full memory: %+v", a)
	}
	// That reuse revoked alice's sign-in: its newest token is refused too.
	if a := ts.refresh(t, second.RefreshToken); a.Status != 400 || !strings.Contains(a.Description, "revoked") {
		t.Fatalf("the newest token of a revoked sign-in: %+v", a)
	}
}

func challengeOf(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// TestTokenRateLimits: past the per-account rate, /token answers 429 with
// Retry-After, and so it does past the per-address rate for garbage; other
// accounts are not held up by one account's flood.
func TestTokenRateLimits(t *testing.T) {
	g := guard.New(guard.Config{SignInPerAccount: 5, SignInPerAddress: 1000})
	ts := startServer(t, Config{Guard: g}, "192.0.2.2")
	code, v := ts.signIn(t, "alice@x.test", "pw-a", "mail.read")
	a := ts.exchange(t, code, v)
	limited := false
	for range 20 {
		a = ts.refresh(t, a.RefreshToken)
		if a.Status == http.StatusTooManyRequests {
			if a.RetryAfter == "" || a.RetryAfter == "0" {
				t.Errorf("429 without Retry-After: %+v", a)
			}
			limited = true
			break
		}
		if a.Status != 200 {
			t.Fatalf("refresh: %+v", a)
		}
	}
	if !limited {
		t.Fatal("20 refreshes in a row at 5 per minute were all answered")
	}
	// bob is not limited by alice's refreshes.
	code, v = ts.signIn(t, "bob@x.test", "pw-b", "mail.read")
	if b := ts.exchange(t, code, v); b.Status != 200 {
		t.Fatalf("bob after alice's flood: %+v", b)
	}

	// Per address: garbage tokens from one address.
	g2 := guard.New(guard.Config{SignInPerAccount: 1000, SignInPerAddress: 3})
	ts2 := startServer(t, Config{Guard: g2}, "192.0.2.3")
	limited = false
	for range 10 {
		if a := ts2.refresh(t, "ort1.garbage"); a.Status == http.StatusTooManyRequests && a.RetryAfter != "" {
			limited = true
			break
		}
	}
	if !limited {
		t.Fatal("10 garbage refreshes from one address at 3 per minute were all answered")
	}
}

// TestAudience: two gateways with the same key and different PUBLIC_URLs.
// A code and a refresh token issued by one are refused by the other.
func TestAudience(t *testing.T) {
	a := startServer(t, Config{}, "192.0.2.4")
	b := startServer(t, Config{}, "192.0.2.4")
	code, v := a.signIn(t, "alice@x.test", "pw-a", "mail.read mail.full mail.send")
	// b's client id is b's own registration (the same key could open a's).
	got := b.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {v}, "redirect_uri": {redirect}, "client_id": {a.id}})
	if got.Status != 400 || got.Error != "invalid_grant" {
		t.Fatalf("a's code at b: %+v", got)
	}
	tok := a.exchange(t, code, v)
	if tok.Status != 200 {
		t.Fatalf("a's code at a: %+v", tok)
	}
	got = b.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {a.id}})
	if got.Status != 400 || got.Error != "invalid_grant" {
		t.Fatalf("a's refresh token at b: %+v", got)
	}
	if _, err := b.OpenAccess(tok.AccessToken); err == nil {
		t.Fatal("a's access token opened at b")
	}
}

// TestScopeCappedAtOperator: a gateway never issues or reports more than
// its own MAILBOX_ACCESS, even for a refresh token that carries more (made
// before the operator lowered the level).
func TestScopeCappedAtOperator(t *testing.T) {
	sealer, _ := credentials.NewSealer(testKey)
	full := startServer(t, Config{Sealer: sealer}, "192.0.2.5")
	code, v := full.signIn(t, "alice@x.test", "pw-a", "mail.full mail.send")
	tok := full.exchange(t, code, v)
	if tok.Scope != "mail.read mail.organize mail.full mail.send" {
		t.Fatalf("scope at the full gateway: %q", tok.Scope)
	}
	// The same issuer, now at MAILBOX_ACCESS=read and without SMTP.
	read := New(Config{Issuer: full.issuer, Sealer: sealer, Operator: access.Read, CanSend: false, AccessTTL: time.Hour, RefreshTTL: time.Hour, IMAP: passwords{}})
	hs := httptest.NewServer(read)
	defer hs.Close()
	resp, err := http.PostForm(hs.URL+"/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {full.id}})
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	if resp.StatusCode != 200 || a.Scope != "mail.read" {
		t.Fatalf("refresh at the read gateway: %d %+v", resp.StatusCode, a)
	}
	creds, err := read.OpenAccess(a.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if creds.Scope.Level != access.Read || !creds.Scope.NoSend {
		t.Fatalf("access token scope %+v, want read and no sending", creds.Scope)
	}
}

// TestAccessCredentialsExpire: the credentials a bearer token carries
// expire with it, so that what is made from them does too.
func TestAccessCredentialsExpire(t *testing.T) {
	ts := startServer(t, Config{}, "192.0.2.6")
	code, v := ts.signIn(t, "alice@x.test", "pw-a", "mail.read")
	tok := ts.exchange(t, code, v)
	creds, err := ts.OpenAccess(tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(creds.Expires); d <= 0 || d > time.Hour {
		t.Fatalf("credentials expire in %v, want within the access token's hour", d)
	}
}

// TestClientMetadataNeverReachesPrivate: a client_id URL whose name
// resolves to this machine, in each IPv6 spelling that carries IPv4 too,
// is refused, and nothing reaches the listener behind it.
func TestClientMetadataNeverReachesPrivate(t *testing.T) {
	port, hits := mailtest.CountingListener(t)
	zone := map[string][]netip.Addr{}
	for i, a := range []string{"127.0.0.1", "::ffff:127.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::1", "::1"} {
		zone[fmt.Sprintf("client%d.test", i)] = []netip.Addr{netip.MustParseAddr(a)}
	}
	client := egress.HTTPClient(egress.Options{Timeout: 2 * time.Second, Resolver: mailtest.Resolver(t, zone)})
	ts := startServer(t, Config{HTTPClient: client}, "192.0.2.7")
	for name := range zone {
		id := "https://" + name + ":" + port + "/client.json"
		q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {redirect},
			"code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"S256"}}
		resp, err := ts.client.Get(ts.url + "/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "cannot be fetched") {
			t.Errorf("%s: %d %.300s", id, resp.StatusCode, body)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d connections reached the loopback listener", n)
	}
}

// TestRedirectSchemes: an allow-list (RFC 8252 §7.1, RFC 9700 §4.1): https,
// http on a loopback address, and a native app's private-use scheme that
// is a reverse domain name (com.example.app:/cb), plus the documented
// known client schemes (cursor). Schemes the system hands to programs
// that act on the URI (search-ms:, ms-msdt:, vscode: ...) are refused.
func TestRedirectSchemes(t *testing.T) {
	for uri, ok := range map[string]bool{
		"cursor://anysphere.cursor-retrieval/oauth/callback":     true,
		"com.example.app:/oauth2redirect":                        true,
		"com.example.app://callback":                             true,
		"org.example.my-app.beta:/cb":                            true,
		"https://app.example.com/cb":                             true,
		"http://127.0.0.1:8080/cb":                               true,
		"http://[::1]:8080/cb":                                   true,
		"http://localhost:8080/cb":                               true,
		"http://example.com/cb":                                  false,
		"https:///cb":                                            false,
		"vscode://vscode.github-authentication/did-authenticate": false,
		"search-ms:query=x&crumb=location:%5C%5Cevil%5Cshare":    false,
		"ms-msdt:/id PCWDiagnostic":                              false,
		"ms-officecmd:{}":                                        false,
		"smb://evil.example/share":                               false,
		"x-apple.systempreferences:com.apple.preference":         false,
		"javascript:alert(1)":                                    false,
		"JavaScript://%0aalert(1)":                               false,
		"data:text/html,x":                                       false,
		"file:///etc/passwd":                                     false,
		"vbscript:x":                                             false,
		"c:/windows":                                             false,
		"cursor://x/cb#frag":                                     false,
		"cursor://user@x/cb":                                     false,
		"com.example.app:relative":                               false,
		"com..app:/cb":                                           false,
		"com.-x.app:/cb":                                         false,
		"1com.example:/cb":                                       false,
		"about:blank":                                            false,
		"chrome-extension://abc/cb":                              false,
	} {
		if got := validRedirectURI(uri); got != ok {
			t.Errorf("%s: %v, want %v", uri, got, ok)
		}
	}
}

// sealedCode is a code for user as the sign-in page makes it, for a
// verifier (the tests that need many sign-ins skip the page).
func (ts *testServer) sealedCode(t *testing.T, user, verifier string) string {
	t.Helper()
	g := credentials.Grant{ID: credentials.NewGrantID(), Creds: credentials.New(user, "pw"),
		ClientID: ts.id, RedirectURI: redirect, Challenge: challengeOf(verifier), Audience: ts.resource, Expires: ts.now().Add(time.Minute)}
	c, err := ts.cfg.Sealer.SealGrant(credentials.KindCode, g)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEvictionEndsTheSignIn: when OAUTH_GRANTS_PER_ACCOUNT makes room for
// a new sign-in, the sign-in it makes room from is ended: its refresh
// tokens, the newest and a used one alike, are refused from then on (they
// were accepted again as "unknown" before). The account's other sign-ins
// and other accounts' are untouched. (A minute passes between sign-ins,
// so that the codes, which count in the account's share, have expired.)
func TestEvictionEndsTheSignIn(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().Unix())
	tick := func() { clock.Add(61) }
	ts := startServer(t, Config{GrantsPerAccount: 4, Now: func() time.Time { return time.Unix(clock.Load(), 0) }}, "192.0.2.20")
	code, v := ts.signIn(t, "alice@x.test", "pw-a", "mail.read")
	first := ts.exchange(t, code, v)
	tick()
	firstNext := ts.refresh(t, first.RefreshToken) // first.RefreshToken is now a used one
	bob := ts.exchange(t, ts.sealedCode(t, "bob@x.test", v), v)
	if firstNext.Status != 200 || bob.Status != 200 {
		t.Fatalf("setup: %+v %+v", firstNext, bob)
	}
	var later []answer
	for range 4 { // four more sign-ins of alice: the third and fourth make room
		tick()
		c, v := ts.signIn(t, "ALICE@x.test", "pw-a", "mail.read") // another spelling, the same account
		later = append(later, ts.exchange(t, c, v))
	}
	for name, rt := range map[string]string{"the used refresh token": first.RefreshToken, "the newest refresh token": firstNext.RefreshToken} {
		if a := ts.refresh(t, rt); a.Status != 400 || a.Error != "invalid_grant" || !strings.Contains(a.Description, "ended") {
			t.Errorf("%s of the sign-in that made room: %+v", name, a)
		}
	}
	for i, a := range later[1:] { // the account keeps its 3 most recent (4, less room for a code)
		if r := ts.refresh(t, a.RefreshToken); r.Status != 200 {
			t.Errorf("alice's sign-in %d after the eviction: %+v", i+3, r)
		}
	}
	if r := ts.refresh(t, bob.RefreshToken); r.Status != 200 {
		t.Errorf("bob's sign-in: %+v", r)
	}
}

// TestCodesCountPerAccount: the codes an account redeems count in its
// OAUTH_GRANTS_PER_ACCOUNT with its sign-ins, so one account signing in
// again and again cannot fill OAUTH_MAX_GRANTS: another account still
// signs in, and the flooding one waits (503, Retry-After within the
// minute a code is remembered).
func TestCodesCountPerAccount(t *testing.T) {
	mem := memory.NewLocal(nil)
	ts := startServer(t, Config{MaxGrants: 100, GrantsPerAccount: 10, Memory: mem}, "192.0.2.21")
	v := strings.Repeat("v", 43)
	refused := 0
	for range 120 {
		a := ts.exchange(t, ts.sealedCode(t, "mallory@x.test", v), v)
		switch {
		case a.Status == http.StatusServiceUnavailable && a.RetryAfter != "":
			if n, _ := strconv.Atoi(a.RetryAfter); n < 1 || n > 60 {
				t.Errorf("Retry-After %s, want within the code's minute", a.RetryAfter)
			}
			refused++
		case a.Status != 200:
			t.Fatalf("mallory: %+v", a)
		}
	}
	if n := mem.Entries("oauth.families"); n > 10 {
		t.Errorf("the ledger holds %d entries after one account's sign-ins, want at most its 10", n)
	}
	if refused == 0 {
		t.Error("120 sign-ins of one account in a few seconds were all taken")
	}
	if b := ts.exchange(t, ts.sealedCode(t, "bob@x.test", v), v); b.Status != 200 {
		t.Fatalf("bob after mallory's flood: %+v", b)
	}
}

// register registers a client with these redirect URIs and returns its
// client_id ("" when refused).
func (ts *testServer) register(t *testing.T, uris ...string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"client_name": "x", "redirect_uris": uris})
	resp, err := http.Post(ts.url+"/register", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var reg struct {
		ClientID string `json:"client_id"`
	}
	json.NewDecoder(resp.Body).Decode(&reg)
	return reg.ClientID
}

// TestAuthorizeIsNoOpenRedirector (RFC 9700 §4.11): an error in the
// request, before the person has done anything, is shown on the page,
// not sent to a redirect URI anyone could have registered; only a
// loopback redirect URI (the app on the person's own machine) or a client
// whose metadata document came from its own https URL is sent the error.
// Every answer that does go to the client carries iss (RFC 9207).
func TestAuthorizeIsNoOpenRedirector(t *testing.T) {
	ts := startServer(t, Config{}, "192.0.2.22")
	evil := ts.register(t, "https://evil.example/landing")
	native := ts.register(t, "com.example.app:/cb")
	if evil == "" || native == "" {
		t.Fatal("registration refused")
	}
	bad := map[string]func(url.Values){
		"response_type=token":  func(q url.Values) { q.Set("response_type", "token") },
		"no PKCE":              func(q url.Values) { q.Del("code_challenge") },
		"an unknown scope":     func(q url.Values) { q.Set("scope", "mail.everything") },
		"another resource":     func(q url.Values) { q.Set("resource", "https://elsewhere.example/mcp") },
		"PKCE with plain only": func(q url.Values) { q.Set("code_challenge_method", "plain") },
	}
	for name, change := range bad {
		for client, uri := range map[string]string{evil: "https://evil.example/landing", native: "com.example.app:/cb"} {
			u := ts.authorizeURL(func(q url.Values) { q.Set("client_id", client); q.Set("redirect_uri", uri); change(q) })
			status, loc, body := ts.get(t, u)
			if status != http.StatusBadRequest || loc.String() != "" || !strings.Contains(body, "Nothing was sent back") {
				t.Errorf("%s to %s: %d %s %.200s", name, uri, status, loc, body)
			}
		}
		// A loopback app is told, with state and iss.
		status, loc, _ := ts.get(t, ts.authorizeURL(change))
		if status != http.StatusFound || loc.Query().Get("error") == "" || loc.Query().Get("state") != "client-state" || loc.Query().Get("iss") != ts.issuer {
			t.Errorf("%s to the loopback app: %d %s", name, status, loc)
		}
	}
}

// TestAuthorizeErrorsToMetadataClients: a client whose metadata document
// the gateway fetched from its https client_id URL is told of an error at
// its redirect URI: the document proves who runs that URI.
func TestAuthorizeErrorsToMetadataClients(t *testing.T) {
	doc := httptest.NewTLSServer(nil)
	defer doc.Close()
	id := doc.URL + "/client.json"
	doc.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"client_id": id, "client_name": "Doc app", "redirect_uris": []string{"https://app.example/cb"}})
	})
	ts := startServer(t, Config{HTTPClient: doc.Client()}, "192.0.2.23")
	status, loc, body := ts.get(t, ts.authorizeURL(func(q url.Values) {
		q.Set("client_id", id)
		q.Set("redirect_uri", "https://app.example/cb")
		q.Set("response_type", "token")
	}))
	if status != http.StatusFound || loc.Host != "app.example" || loc.Query().Get("error") != "unsupported_response_type" || loc.Query().Get("iss") != ts.issuer {
		t.Fatalf("a metadata client's error: %d %s %.200s", status, loc, body)
	}
}

// TestOldRegistrationsRechecked: a client registered before the allow-list
// (its sealed client_id names a scheme now refused) is refused at
// /authorize, before anything is shown or sent.
func TestOldRegistrationsRechecked(t *testing.T) {
	ts := startServer(t, Config{}, "192.0.2.24")
	for _, uri := range []string{"ms-msdt:/id", "search-ms:query=x", "vscode://vscode.git/cb"} {
		plain, _ := json.Marshal(client{Name: "old", RedirectURIs: []string{uri}})
		id, err := ts.cfg.Sealer.SealOAuth(credentials.KindClient, plain)
		if err != nil {
			t.Fatal(err)
		}
		status, loc, body := ts.get(t, ts.authorizeURL(func(q url.Values) { q.Set("client_id", id); q.Set("redirect_uri", uri) }))
		if status != http.StatusBadRequest || loc.String() != "" || strings.Contains(body, `name="form"`) {
			t.Errorf("%s: %d %s %.200s", uri, status, loc, body)
		}
	}
}

// TestOneAccountWhateverTheHostSpelling: a password sign-in that names the
// gateway's own host on the page's host field (127.0.0.1 = IMAP_HOST) is
// the same account as one that names none: one share of
// OAUTH_GRANTS_PER_ACCOUNT, not one per spelling.
func TestOneAccountWhateverTheHostSpelling(t *testing.T) {
	h := hosts.New(hosts.Config{Default: hosts.Server{IMAP: transport.Endpoint{Host: "127.0.0.1", Port: 993}},
		Patterns: []hosts.Pattern{{Name: "*.customers.test"}}})
	// A share of 3: a second sign-in of the same account (a code and a
	// family) ends the first; of another account it would not.
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ts := startServer(t, Config{Hosts: h, GrantsPerAccount: 3, Now: clock}, "192.0.2.25")
	for _, hosts := range [][2]string{{"", "127.0.0.1"}, {"127.0.0.1", " 127.0.0.1 "}, {" 127.0.0.1 ", ""}} {
		var first answer
		for i, host := range hosts {
			code, v := ts.signInAt(t, "alice@x.test", "pw-a", "mail.read", host)
			a := ts.exchange(t, code, v)
			if a.Status != 200 {
				t.Fatalf("host %q: %+v", host, a)
			}
			if i == 0 {
				first = a
			}
		}
		if a := ts.refresh(t, first.RefreshToken); a.Status != http.StatusBadRequest || !strings.Contains(a.Description, "has ended") {
			t.Fatalf("a sign-in at host %q after one at %q: %+v, want it ended (one account, one share)", hosts[0], hosts[1], a)
		}
		mu.Lock()
		now = now.Add(time.Minute + time.Second) // the codes fill the share for their minute
		mu.Unlock()
	}
}
