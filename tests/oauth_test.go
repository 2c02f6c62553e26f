package tests

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/app"
	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// oauthGateway is a gateway with PUBLIC_URL set to its own address, so
// that it is its own OAuth authorization server.
type oauthGateway struct {
	Base string // PUBLIC_URL
	Key  string
	Logs *mailtest.LogBuffer
}

func startOAuthGateway(t testing.TB, s *mailtest.Stack, env ...string) *oauthGateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	key, _ := credentials.NewKey()
	vars := append([]string{
		"IMAP_HOST=127.0.0.1", "IMAP_PORT=" + strconv.Itoa(s.IMAPSPort), "MAIL_CA_FILE=" + s.CAFile,
		"ENCRYPTION_KEY=" + key, "LOG_LEVEL=debug", "PUBLIC_URL=" + base,
	}, env...)
	cfg, err := config.FromEnv(vars)
	if err != nil {
		t.Fatal(err)
	}
	logs := &mailtest.LogBuffer{}
	a, err := app.New(cfg, app.NewLogger(logs, cfg.LogLevel))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		if t.Failed() {
			l := logs.String()
			t.Logf("gateway log (last 6 KB):\n%s", l[max(0, len(l)-6000):])
		}
		cancel()
		<-done
	})
	return &oauthGateway{Base: base, Key: key, Logs: logs}
}

// oauthClient is a test client that signs in the way a browser would,
// without one: the page needs no JavaScript.
type oauthClient struct {
	t        *testing.T
	g        *oauthGateway
	http     *http.Client
	id       string
	redirect string
}

func newOAuthClient(t *testing.T, g *oauthGateway) *oauthClient {
	jar, _ := cookiejar.New(nil)
	c := &oauthClient{t: t, g: g, redirect: "http://127.0.0.1:9/callback",
		http: &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	var reg struct {
		ClientID string `json:"client_id"`
	}
	status := c.postJSON("/register", map[string]any{"client_name": "oauth test", "redirect_uris": []string{c.redirect}}, &reg)
	if status != http.StatusCreated || reg.ClientID == "" {
		t.Fatalf("register: %d %+v", status, reg)
	}
	c.id = reg.ClientID
	return c
}

func (c *oauthClient) postJSON(path string, body, out any) int {
	b, _ := json.Marshal(body)
	resp, err := c.http.Post(c.g.Base+path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(out)
	return resp.StatusCode
}

func pkce() (verifier, challenge string) {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(time.Now().UnixNano() >> (i % 8))
	}
	verifier = base64.RawURLEncoding.EncodeToString([]byte(hex.EncodeToString(b)))[:64]
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

var formField = regexp.MustCompile(`name="form" value="([^"]+)"`)

// authorize opens the sign-in page and submits it; it returns the page
// shown (when there is no redirect) and the redirect's query.
func (c *oauthClient) authorize(params url.Values, user, pass, action string) (page string, status int, redirect url.Values) {
	c.t.Helper()
	resp, err := c.http.Get(c.g.Base + "/authorize?" + params.Encode())
	if err != nil {
		c.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusFound {
		u, _ := url.Parse(resp.Header.Get("Location"))
		return "", resp.StatusCode, u.Query()
	}
	m := formField.FindSubmatch(body)
	if m == nil {
		return string(body), resp.StatusCode, nil
	}
	form := url.Values{"form": {html.UnescapeString(string(m[1]))}, "username": {user}, "password": {pass}, "action": {action}}
	resp, err = c.http.PostForm(c.g.Base+"/authorize", form)
	if err != nil {
		c.t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusFound {
		u, _ := url.Parse(resp.Header.Get("Location"))
		return "", resp.StatusCode, u.Query()
	}
	return string(body), resp.StatusCode, nil
}

func (c *oauthClient) authParams(challenge, scope string) url.Values {
	v := url.Values{"response_type": {"code"}, "client_id": {c.id}, "redirect_uri": {c.redirect},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "state": {"st-1"}, "resource": {c.g.Base + "/mcp"}}
	if scope != "" {
		v.Set("scope", scope)
	}
	return v
}

type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
	Description  string `json:"error_description"`
}

func (c *oauthClient) token(form url.Values) (int, tokenAnswer) {
	c.t.Helper()
	resp, err := c.http.PostForm(c.g.Base+"/token", form)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var a tokenAnswer
	json.NewDecoder(resp.Body).Decode(&a)
	if resp.StatusCode == http.StatusOK && resp.Header.Get("Cache-Control") != "no-store" {
		c.t.Errorf("token answer without Cache-Control: no-store")
	}
	return resp.StatusCode, a
}

// mcpPost sends one JSON-RPC request to /mcp with the given Authorization
// header and returns status, WWW-Authenticate and body.
func mcpPost(t *testing.T, base, auth, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

const listFolders = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"imap_list_folders","arguments":{}}}`

// TestOAuthSignInAndRefusals signs in through the gateway's own
// authorization server against Dovecot (the page driven by plain HTTP, as
// a browser without JavaScript would) and checks every refusal the issue
// names, each with its status and error code.
func TestOAuthSignInAndRefusals(t *testing.T) {
	const user, pass = "oauth@example.test", "oauth-pw"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: pass}})
	g := startOAuthGateway(t, s, "MAILBOX_ACCESS=full")
	c := newOAuthClient(t, g)

	t.Run("metadata", func(t *testing.T) {
		for path, want := range map[string]string{
			"/.well-known/oauth-protected-resource/mcp": `"resource":"` + g.Base + `/mcp"`,
			"/.well-known/oauth-protected-resource":     `"resource":"` + g.Base + `"`,
			"/.well-known/oauth-authorization-server":   `"code_challenge_methods_supported":["S256"]`,
		} {
			resp, err := http.Get(g.Base + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
				t.Errorf("%s: %d %s (want %s)", path, resp.StatusCode, b, want)
			}
		}
	})

	t.Run("anonymous /mcp gets 401 with resource_metadata", func(t *testing.T) {
		status, www, _ := mcpPost(t, g.Base, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		want := `Bearer resource_metadata="` + g.Base + `/.well-known/oauth-protected-resource/mcp"`
		if status != 401 || www != want {
			t.Errorf("got %d %q, want 401 %q", status, www, want)
		}
		// Header credentials work exactly as before.
		mc := mailtest.MCPClient(t, g.Base+"/mcp", userHeaders(s, user), "")
		mailtest.Call(t, mc, "imap_list_folders", map[string]any{})
	})

	t.Run("wrong password: the page again, no code", func(t *testing.T) {
		_, ch := pkce()
		page, status, redirect := c.authorize(c.authParams(ch, ""), user, "wrong", "allow")
		if redirect != nil || status != 200 || !strings.Contains(page, "did not accept this address and password") || !strings.Contains(page, `role="alert"`) {
			t.Errorf("got %d redirect=%v page=%.300s", status, redirect, page)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		_, ch := pkce()
		_, _, redirect := c.authorize(c.authParams(ch, ""), "", "", "cancel")
		if redirect.Get("error") != "access_denied" || redirect.Get("state") != "st-1" || redirect.Get("code") != "" {
			t.Errorf("cancel: %v", redirect)
		}
	})

	t.Run("unregistered redirect URI: page, no redirect", func(t *testing.T) {
		_, ch := pkce()
		p := c.authParams(ch, "")
		p.Set("redirect_uri", "https://evil.example/cb")
		page, status, redirect := c.authorize(p, user, pass, "allow")
		if status != 400 || redirect != nil || !strings.Contains(page, "not registered") {
			t.Errorf("got %d %v %.200s", status, redirect, page)
		}
	})

	t.Run("another resource at /authorize", func(t *testing.T) {
		_, ch := pkce()
		p := c.authParams(ch, "")
		p.Set("resource", "https://other.example/mcp")
		_, _, redirect := c.authorize(p, user, pass, "allow")
		if redirect.Get("error") != "invalid_target" {
			t.Errorf("got %v", redirect)
		}
	})

	var first tokenAnswer
	t.Run("sign in, exchange, replay, verifier, redirect mismatch", func(t *testing.T) {
		verifier, ch := pkce()
		_, _, redirect := c.authorize(c.authParams(ch, "mail.read mail.organize"), user, pass, "allow")
		code := redirect.Get("code")
		if code == "" || redirect.Get("state") != "st-1" || redirect.Get("iss") != g.Base {
			t.Fatalf("no code: %v", redirect)
		}
		base := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {c.id}, "redirect_uri": {c.redirect}, "code_verifier": {verifier}}
		with := func(k, v string) url.Values {
			f := url.Values{}
			for kk, vv := range base {
				f[kk] = vv
			}
			f.Set(k, v)
			return f
		}
		// Refusals before the real exchange do not use the code up.
		wrongVerifier := strings.Repeat("a", 64)
		if st, a := c.token(with("code_verifier", wrongVerifier)); st != 400 || a.Error != "invalid_grant" {
			t.Errorf("wrong verifier: %d %+v", st, a)
		}
		if st, a := c.token(with("redirect_uri", "http://127.0.0.1:9/other")); st != 400 || a.Error != "invalid_grant" {
			t.Errorf("redirect mismatch: %d %+v", st, a)
		}
		if st, a := c.token(with("client_id", "https://other.example/client.json")); st != 400 || a.Error != "invalid_grant" {
			t.Errorf("other client: %d %+v", st, a)
		}
		st, a := c.token(base)
		if st != 200 || a.AccessToken == "" || a.RefreshToken == "" || a.TokenType != "Bearer" || a.ExpiresIn != 3600 || a.Scope != "mail.read mail.organize" {
			t.Fatalf("exchange: %d %+v", st, a)
		}
		first = a
		if st, a := c.token(base); st != 400 || a.Error != "invalid_grant" || !strings.Contains(a.Description, "already been used") {
			t.Errorf("replay: %d %+v", st, a)
		}
		// The replay revoked the sign-in the code started (RFC 6749
		// §4.1.2): its refresh token no longer works. (Its access token
		// lives out its hour: nothing is stored to check it against.)
		if st, b := c.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {a.RefreshToken}, "client_id": {c.id}}); st != 400 || !strings.Contains(b.Description, "revoked") {
			t.Errorf("refresh after the code was replayed: %d %+v", st, b)
		}
		verifier, ch = pkce()
		_, _, redirect = c.authorize(c.authParams(ch, "mail.read mail.organize"), user, pass, "allow")
		base.Set("code", redirect.Get("code"))
		base.Set("code_verifier", verifier)
		if st, a = c.token(base); st != 200 {
			t.Fatalf("a second sign-in: %d %+v", st, a)
		}
		first = a
		// Only the bearer token: folders listed, and the scope applies.
		status, _, body := mcpPost(t, g.Base, "Bearer "+a.AccessToken, listFolders)
		if status != 200 || !strings.Contains(body, "INBOX") || strings.Contains(body, `"isError":true`) {
			t.Errorf("list folders with bearer: %d %.300s", status, body)
		}
		status, _, body = mcpPost(t, g.Base, "Bearer "+a.AccessToken, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		// (the sign-in's scope decides the list: no imap_delete_folder, which
		// needs full, and no sending, which this gateway does not have)
		var list struct {
			Result struct{ Tools []struct{ Name string } }
		}
		json.Unmarshal([]byte(body), &list)
		var names []string
		for _, tool := range list.Result.Tools {
			names = append(names, tool.Name)
		}
		if status != 200 || slices.Contains(names, "imap_delete_folder") || slices.Contains(names, "smtp_send_email") || !slices.Contains(names, "imap_move_emails") {
			t.Errorf("tools/list with an organize-only token: %d %v", status, names)
		}
		// And on the REST mirror.
		req, _ := http.NewRequest(http.MethodGet, g.Base+"/v1/folders", nil)
		req.Header.Set("Authorization", "Bearer "+a.AccessToken)
		if resp, err := http.DefaultClient.Do(req); err != nil {
			t.Error(err)
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), "INBOX") {
				t.Errorf("REST with bearer: %d %.300s", resp.StatusCode, b)
			}
		}
	})

	t.Run("refresh rotates; a used refresh token is refused", func(t *testing.T) {
		f := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.RefreshToken}, "client_id": {c.id}}
		st, a := c.token(f)
		if st != 200 || a.RefreshToken == "" || a.RefreshToken == first.RefreshToken || a.Scope != first.Scope {
			t.Fatalf("refresh: %d %+v", st, a)
		}
		if st, b := c.token(f); st != 400 || b.Error != "invalid_grant" {
			t.Errorf("used refresh token: %d %+v", st, b)
		}
		if st, b := c.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {a.RefreshToken}, "client_id": {c.id}, "scope": {"mail.full"}}); st != 400 || b.Error != "invalid_scope" {
			t.Errorf("widening refresh: %d %+v", st, b)
		}
		// An access token is not a refresh token, nor the reverse.
		if st, b := c.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {a.AccessToken}, "client_id": {c.id}}); st != 400 || b.Error != "invalid_grant" {
			t.Errorf("access token as refresh token: %d %+v", st, b)
		}
		if status, www, _ := mcpPost(t, g.Base, "Bearer "+a.RefreshToken, listFolders); status != 401 || !strings.Contains(www, `error="invalid_token"`) {
			t.Errorf("refresh token as access token: %d %q", status, www)
		}
	})

	sealer := func() *credentials.Sealer {
		k, _ := hex.DecodeString(g.Key)
		s, err := credentials.NewSealer(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	seal := func(gr credentials.Grant) string {
		tok, err := sealer.SealGrant(credentials.KindAccess, gr)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	refused := func(t *testing.T, what, token, wantDesc string) {
		t.Helper()
		status, www, body := mcpPost(t, g.Base, "Bearer "+token, listFolders)
		if status != 401 || !strings.Contains(www, `error="invalid_token"`) || !strings.Contains(www, `resource_metadata="`+g.Base) || !strings.Contains(body, wantDesc) {
			t.Errorf("%s: %d %q %.200s", what, status, www, body)
		}
	}

	t.Run("token for another resource", func(t *testing.T) {
		tok := seal(credentials.Grant{ID: "x1", Creds: credentials.New(user, pass), Audience: "https://other.example/mcp", Expires: time.Now().Add(time.Hour)})
		refused(t, "other audience", tok, "for another resource")
	})
	t.Run("expired token", func(t *testing.T) {
		tok := seal(credentials.Grant{ID: "x2", Creds: credentials.New(user, pass), Audience: g.Base + "/mcp", Expires: time.Now().Add(-time.Second)})
		refused(t, "expired", tok, "has expired")
	})
	t.Run("tampered token", func(t *testing.T) {
		b := []byte(first.AccessToken)
		i := len(b) / 2
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		refused(t, "tampered", string(b), "not valid here")
		// A credentials token (x-mailbox-token's kind) is not an access token.
		ct, _ := sealer.Seal(credentials.New(user, pass))
		refused(t, "credentials token as bearer", ct, "not valid here")
	})
	t.Run("password changed at the mail server: 401 sign in again", func(t *testing.T) {
		// The token carries the old password: what a change at the server looks like.
		tok := seal(credentials.Grant{ID: "x3", Creds: credentials.New(user, "old-password"), Audience: g.Base + "/mcp", Expires: time.Now().Add(time.Hour)})
		status, www, body := mcpPost(t, g.Base, "Bearer "+tok, listFolders)
		if status != 401 || !strings.Contains(www, `error="invalid_token"`) || !strings.Contains(www, "sign in again") || !strings.Contains(body, `"isError":true`) {
			t.Errorf("got %d %q %.300s", status, www, body)
		}
	})
	t.Run("bearer and headers together", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, g.Base+"/mcp", strings.NewReader(listFolders))
		req.Header.Set("Authorization", "Bearer "+first.AccessToken)
		req.Header.Set("X-Imap-User", user)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("got %d", resp.StatusCode)
		}
	})
	if strings.Contains(g.Logs.String(), pass) {
		t.Errorf("the password appears in the gateway log")
	}
}

// TestOAuthTypeScriptSDK signs in with the official TypeScript SDK's OAuth
// client (discovery, dynamic registration, PKCE, finishAuth), the sign-in
// page filled in by headless Chromium (puppeteer-core), first with a wrong
// password; then tools/list and imap_list_folders with only the bearer token.
func TestOAuthTypeScriptSDK(t *testing.T) {
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		skipOrFail(t, "no /usr/bin/chromium: apt-get install -y --no-install-recommends chromium (scripts/test.sh does)")
	}
	dir := clientsDir(t)
	const user, pass = "oauth-sdk@example.test", "oauth-sdk-pw"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: pass}})
	g := startOAuthGateway(t, s)
	var out struct {
		WrongPasswordPage string `json:"wrongPasswordPage"`
		LandedOn          string `json:"landedOn"`
		Tools             []string
		Folders           sdkResult
		Scope             string
		TokenKind         string
		Requests          []struct {
			Method string
			Auth   string
			Other  []string
		}
	}
	start := time.Now()
	runNode(t, dir, "oauth-sdk.mjs", map[string]any{"url": g.Base + "/mcp", "user": user, "password": pass, "wrongPassword": "not-the-password", "chromium": chromium}, &out)
	t.Logf("sign-in with the SDK and Chromium, then tools/list and a call: %v", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(out.WrongPasswordPage, "did not accept this address and password") {
		t.Errorf("wrong password: the page said %q", out.WrongPasswordPage)
	}
	if out.LandedOn != "/callback" || out.TokenKind != string(credentials.KindAccess) {
		t.Errorf("sign-in landed on %q with a token of kind %q", out.LandedOn, out.TokenKind)
	}
	if !slices.Contains(out.Tools, "imap_list_folders") {
		t.Errorf("tools/list with the bearer token: %v", out.Tools)
	}
	out.Folders.ok(t, "imap_list_folders with the bearer token", nil)
	if !strings.Contains(out.Folders.Text, "INBOX") {
		t.Errorf("folders: %s", out.Folders.Text)
	}
	bearer := 0
	for _, r := range out.Requests {
		if len(r.Other) > 0 {
			t.Errorf("a request carried credential headers %v", r.Other)
		}
		if r.Auth == "Bearer" {
			bearer++
		}
	}
	if bearer < 3 {
		t.Errorf("expected initialize, tools/list and tools/call with Bearer, got %+v", out.Requests)
	}
	t.Logf("scope granted: %q; requests: %+v", out.Scope, out.Requests)
}

// TestOAuthConformance runs the MCP conformance suite's authorization-server
// scenarios against the gateway: authorization-server-metadata-endpoint,
// and authorization-code-grant with the suite's own callback server (the
// sign-in page submitted over HTTP, as a browser without JavaScript does).
func TestOAuthConformance(t *testing.T) {
	node, _ := inspectorCLI(t)
	dir := clientsDir(t)
	suite := filepath.Join(dir, "node22", "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(suite); err != nil {
		skipOrFail(t, "tests/clients/node22 has no @modelcontextprotocol/conformance: run `npm ci` there")
	}
	const user, pass = "oauth-conf@example.test", "oauth-conf-pw"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: pass}})
	g := startOAuthGateway(t, s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c := newOAuthClient(t, g)
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if st := c.postJSON("/register", map[string]any{"client_name": "conformance", "redirect_uris": []string{"http://127.0.0.1:" + strconv.Itoa(port) + "/callback"}}, &reg); st != 201 {
		t.Fatalf("register: %d", st)
	}
	home, outDir := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "authorization", "--url", g.Base, "--client-id", reg.ClientID,
		"--resource", g.Base+"/mcp", "--port", strconv.Itoa(port), "--output-dir", outDir)
	cmd.Env = append(os.Environ(), "HOME="+home, "NO_UPDATE_NOTIFIER=1")
	cmd.WaitDelay = 10 * time.Second
	stdout, _ := cmd.StdoutPipe()
	var output strings.Builder
	cmd.Stderr = &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The suite prints the authorization URL and waits for its callback.
	buf := make([]byte, 4096)
	signedIn := false
	for {
		n, err := stdout.Read(buf)
		output.Write(buf[:n])
		if !signedIn {
			if i := strings.Index(output.String(), g.Base+"/authorize?"); i >= 0 {
				line := output.String()[i:]
				if j := strings.IndexByte(line, '\n'); j >= 0 {
					u, _ := url.Parse(strings.TrimSpace(line[:j]))
					c.id = reg.ClientID
					_, _, redirect := c.authorize(u.Query(), user, pass, "allow")
					if redirect.Get("code") == "" {
						t.Fatalf("no code for the suite: %v", redirect)
					}
					cb := "http://127.0.0.1:" + strconv.Itoa(port) + "/callback?" + redirect.Encode()
					// The suite prints the URL before its callback listener
					// is up; on a loaded machine the first tries are refused.
					resp, err := http.Get(cb)
					for i := 0; err != nil && i < 50; i++ {
						time.Sleep(100 * time.Millisecond)
						resp, err = http.Get(cb)
					}
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					signedIn = true
				}
			}
		}
		if err != nil {
			break
		}
	}
	runErr := cmd.Wait()
	files, _ := filepath.Glob(filepath.Join(outDir, "*", "checks.json"))
	if len(files) == 0 {
		t.Fatalf("no checks.json (exit %v)\n%s", runErr, tail(output.String(), 4000))
	}
	ran := map[string]string{}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatal(err)
		}
		for _, ch := range checks {
			ran[ch.ID] = ch.Status
			if ch.Status != "SUCCESS" {
				t.Errorf("%s: %s %s", ch.ID, ch.Status, ch.ErrorMessage)
			}
		}
	}
	for _, want := range []string{"authorization-server-metadata", "authorization-server-metadata-cimd", "authorization-code-grant"} {
		if ran[want] != "SUCCESS" {
			t.Errorf("%s did not pass: %q\n%s", want, ran[want], tail(output.String(), 3000))
		}
	}
	t.Logf("conformance authorization checks: %v (exit %v)", ran, runErr)
}

// TestOAuthReadSignInCannotEscalate is the attack through the
// official TypeScript SDK with an authProvider: a connector signs in with
// scope mail.read (Chromium fills the page) and then asks
// imap_encrypt_credentials for every combination of access, send and
// agent over its bearer token, and uses each token it gets to create a
// folder. Every ask for more is refused; every token made lists no change
// tools and cannot create the folder; Dovecot, asked directly, holds no
// such folder.
func TestOAuthReadSignInCannotEscalate(t *testing.T) {
	t.Parallel() // its own stack (and provider): waits, mostly, beside the other parallel tests
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		skipOrFail(t, "no /usr/bin/chromium: apt-get install -y --no-install-recommends chromium (scripts/test.sh does)")
	}
	dir := clientsDir(t)
	const user, pass = "oauth-esc@example.test", "oauth-esc-pw"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: pass}})
	g := startOAuthGateway(t, s, "MAILBOX_ACCESS=full")
	var out struct {
		Scope        string
		BearerCreate sdkResult
		Escalation   []struct {
			Args         map[string]any
			Result       sdkResult
			CreateFolder *sdkResult
			Tools        []string
		}
	}
	runNode(t, dir, "oauth-sdk.mjs", map[string]any{"url": g.Base + "/mcp", "user": user, "password": pass, "chromium": chromium, "scope": "mail.read"}, &out)
	if out.Scope != "mail.read" {
		t.Fatalf("granted scope %q, want mail.read", out.Scope)
	}
	if !out.BearerCreate.IsError || !strings.Contains(out.BearerCreate.Text, "needs the organize access level") {
		t.Errorf("imap_create_folder with the read-only bearer: %+v", out.BearerCreate)
	}
	made := 0
	for _, e := range out.Escalation {
		access, _ := e.Args["access"].(string)
		send, _ := e.Args["send"].(bool)
		wantRefused := access == "organize" || access == "full" || send
		switch {
		case wantRefused && !e.Result.IsError:
			t.Errorf("%v: a token was made: %s", e.Args, e.Result.Text)
		case wantRefused && !strings.Contains(e.Result.Text, "no token was made"):
			t.Errorf("%v: refused with %q", e.Args, e.Result.Text)
		case !wantRefused && e.Result.IsError:
			t.Errorf("%v: refused: %s", e.Args, e.Result.Text)
		case !wantRefused:
			made++
			var tok struct {
				Access, Expires string
				Send            bool
			}
			json.Unmarshal(e.Result.Structured, &tok)
			if tok.Access != "read" || tok.Send || tok.Expires == "" {
				t.Errorf("%v: token %+v, want read, no sending, an expiry", e.Args, tok)
			}
			if slices.Contains(e.Tools, "imap_create_folder") || slices.Contains(e.Tools, "imap_delete_folder") {
				t.Errorf("%v: the token lists change tools: %v", e.Args, e.Tools)
			}
			if e.CreateFolder == nil || !e.CreateFolder.IsError {
				t.Errorf("%v: imap_create_folder with the token: %+v", e.Args, e.CreateFolder)
			}
		}
	}
	if made == 0 || len(out.Escalation) != 24 {
		t.Fatalf("%d asks, %d tokens made", len(out.Escalation), made)
	}
	folders, err := s.Doveadm("mailbox", "list", "-u", user)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(folders, "Escalated") {
		t.Fatalf("Dovecot holds a folder the read-only sign-in made:\n%s", folders)
	}
	t.Logf("%d asks: %d read-only tokens made, the rest refused; folders: %s", len(out.Escalation), made, strings.Join(strings.Fields(folders), " "))
}
