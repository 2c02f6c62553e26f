package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/app"
	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/hydra"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// restartable is a gateway in this process on a fixed address that can be
// stopped and started again with the same configuration (key included).
type restartable struct {
	t      *testing.T
	addr   string
	env    []string
	logs   *mailtest.LogBuffer
	cancel context.CancelFunc
	done   chan error
}

func (r *restartable) base() string { return "http://" + r.addr }

func (r *restartable) serve(ln net.Listener) {
	cfg, err := config.FromEnv(r.env)
	if err != nil {
		r.t.Fatal(err)
	}
	a, err := app.New(cfg, app.NewLogger(r.logs, cfg.LogLevel))
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan error, 1)
	go func() { r.done <- a.Serve(ctx, ln) }()
}

func (r *restartable) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel = nil
	}
}

// restart stops the gateway and starts a new process-state one on the same
// address: nothing it held survives but what the tokens carry.
func (r *restartable) restart() {
	r.stop()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.serve(ln)
}

// TestProviderSignIn: a real OpenID provider (Ory Hydra) in front of
// Dovecot and Postfix, which take its access tokens. The official
// TypeScript SDK with an authProvider signs in through the gateway's
// "Continue with Hydra" (headless Chromium follows Hydra's login and
// consent), then lists the folders and sends, with only Authorization:
// Bearer. Hydra's access tokens last 60 s: after that the SDK refreshes at
// the gateway, which refreshes at Hydra, and calls go on, across a restart
// of the gateway. Consent revoked at Hydra: the next refresh is
// invalid_grant. No token appears in the gateway's log.
func TestProviderSignIn(t *testing.T) {
	t.Parallel() // its own stack (and provider): waits, mostly, beside the other parallel tests
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		skipOrFail(t, "no /usr/bin/chromium: apt-get install -y --no-install-recommends chromium (scripts/test.sh does)")
	}
	dir := clientsDir(t)
	h := mailtest.StartHydra(t, mailtest.HydraOptions{Scopes: []string{"mail"}, AutoLogin: mailtest.Alice})
	s := mailtest.OAuthStack(t, h, mailtest.Options{OAuthScope: "mail"})
	ctx := context.Background()
	g, client, key := providerGateway(t, h, s)
	marker := filepath.Join(t.TempDir(), "ready")
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if _, err := os.Stat(marker); err == nil {
				g.restart()
				return
			}
		}
	}()
	var out struct {
		LandedOn  string
		Tools     []string
		Folders   sdkResult
		Sent      sdkResult
		Scope     string
		TokenKind string
		Later     struct{ Folders, Sent sdkResult }
		Tokens    struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
		}
		Requests []struct {
			Method, Auth string
			Other        []string
		}
	}
	start := time.Now()
	runNode(t, dir, "oauth-sdk.mjs", map[string]any{"url": g.base() + "/mcp", "user": mailtest.Alice, "password": mailtest.AlicePassword,
		"chromium": chromium, "provider": "provider:oidc-hydra", "sendTo": mailtest.Bob, "markerFile": marker, "waitMs": 62000}, &out)
	<-restarted
	t.Logf("sign-in, calls, 62 s, calls again: %v", time.Since(start).Round(time.Second))
	if out.LandedOn != "/callback" || out.TokenKind != string(credentials.KindAccess) || !slices.Contains(out.Tools, "smtp_send_email") {
		t.Fatalf("landed on %q, token %q, tools %v", out.LandedOn, out.TokenKind, out.Tools)
	}
	out.Folders.ok(t, "imap_list_folders after the provider sign-in", nil)
	out.Sent.ok(t, "smtp_send_email with the provider's token", nil)
	out.Later.Folders.ok(t, "imap_list_folders after Hydra's token expired and the gateway restarted", nil)
	out.Later.Sent.ok(t, "smtp_send_email after the refresh", nil)
	for _, subject := range []string{"provider sign-in 1", "provider sign-in 2"} {
		if n := delivered(t, s, mailtest.Bob, subject, 1); n != 1 {
			t.Errorf("%q: %d delivered", subject, n)
		}
	}
	for _, r := range out.Requests {
		if len(r.Other) > 0 {
			t.Errorf("a request carried credential headers %v", r.Other)
		}
	}
	// The refresh the SDK made went to Hydra: its access token was renewed.
	// Now the person withdraws consent at Hydra.
	if err := h.RevokeConsent(ctx, strings.ToLower(mailtest.Alice), client.ID); err != nil {
		t.Fatal(err)
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {out.Tokens.RefreshToken}, "client_id": {clientIDOf(t, out.Tokens.AccessToken, key)}}
	resp, err := http.PostForm(g.base()+"/token", form)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "invalid_grant") {
		t.Fatalf("refresh after consent was revoked: %d %s", resp.StatusCode, b)
	}
	logs := g.logs.String()
	for _, tok := range []string{out.Tokens.AccessToken, out.Tokens.RefreshToken, "ory_at_", "ory_rt_", client.Secret} {
		if tok != "" && strings.Contains(logs, tok) {
			t.Errorf("the gateway log holds a token or secret (%.12s…)", tok)
		}
	}
}

// providerGateway runs a gateway (restartable, on a fixed address) whose
// provider is h (OIDC_NAME Hydra), with its client registered at h (access
// tokens of 60 s); the gateway's own host is "localhost", the provider's
// mailboxes are at "127.0.0.1" (both s), so the provider's host is routed
// as its own.
func providerGateway(t *testing.T, h *mailtest.Hydra, s *mailtest.Stack, extra ...string) (*restartable, hydra.Client, string) {
	t.Helper()
	key, _ := credentials.NewKey()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	client, err := h.CreateClient(context.Background(), hydra.Client{RedirectURIs: []string{"http://" + addr + "/authorize/callback"},
		Scopes: []string{"openid", "offline_access", "email", "mail"}, AccessTTL: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"IMAP_HOST=localhost", "IMAP_PORT=" + strconv.Itoa(s.IMAPSPort), "MAIL_CA_FILE=" + s.CAFile,
		"ENCRYPTION_KEY=" + key, "LOG_LEVEL=debug", "PUBLIC_URL=http://" + addr,
		"OIDC_NAME=Hydra", "OIDC_ISSUER=" + h.IssuerURL, "OIDC_CLIENT_ID=" + client.ID, "OIDC_CLIENT_SECRET=" + client.Secret,
		"OIDC_SCOPES=openid email offline_access mail", "OIDC_IMAP_HOST=127.0.0.1", "OIDC_IMAP_PORT=" + strconv.Itoa(s.IMAPSPort),
		"OIDC_SMTP_HOST=127.0.0.1", "OIDC_SMTP_PORT=" + strconv.Itoa(s.SubmissionPort),
	}
	env = append(env, extra...)
	g := &restartable{t: t, addr: addr, env: env, logs: &mailtest.LogBuffer{}}
	g.serve(ln)
	t.Cleanup(func() {
		if t.Failed() {
			l := g.logs.String()
			t.Logf("gateway log (last 6 KB):\n%s", l[max(0, len(l)-6000):])
		}
		g.stop()
	})
	return g, client, key
}

// TestProviderSignInMcpRemote: mcp-remote 0.15.1's own OAuth flow, as
// Claude Desktop runs it, headless: xdg-open's $BROWSER is a stand-in that
// hands the sign-in page to Chromium, which chooses "Continue with Hydra";
// mcp-remote then reaches the tools with the gateway's bearer token.
func TestProviderSignInMcpRemote(t *testing.T) {
	t.Parallel() // its own stack (and provider): waits, mostly, beside the other parallel tests
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		skipOrFail(t, "no /usr/bin/chromium: apt-get install -y --no-install-recommends chromium (scripts/test.sh does)")
	}
	dir := clientsDir(t)
	h := mailtest.StartHydra(t, mailtest.HydraOptions{Scopes: []string{"mail"}, AutoLogin: mailtest.Alice})
	s := mailtest.OAuthStack(t, h, mailtest.Options{OAuthScope: "mail"})
	g, _, _ := providerGateway(t, h, s)
	var out struct {
		Tools   []string
		Folders sdkResult
		Browser []string
	}
	runNode(t, dir, "mcp-remote-oauth.mjs", map[string]any{"url": g.base() + "/mcp", "provider": "provider:oidc-hydra",
		"user": mailtest.Alice, "password": mailtest.AlicePassword, "chromium": chromium}, &out)
	t.Logf("browser: %v", out.Browser)
	if !slices.Contains(out.Tools, "imap_list_folders") {
		t.Fatalf("tools through mcp-remote: %v", out.Tools)
	}
	out.Folders.ok(t, "imap_list_folders through mcp-remote after its OAuth flow", nil)
	if !strings.Contains(out.Folders.Text, "INBOX") {
		t.Fatalf("folders: %s", out.Folders.Text)
	}
}

// clientIDOf reads the client id a gateway access token was issued to.
func clientIDOf(t *testing.T, access, key string) string {
	t.Helper()
	s := sealerOf(t, key)
	g, err := s.OpenGrant(credentials.KindAccess, access, time.Now().Add(-time.Hour))
	if err != nil {
		// (expired is fine: only the client id is read)
		t.Fatalf("open the access token: %v", err)
	}
	return g.ClientID
}

func sealerOf(t *testing.T, key string) *credentials.Sealer {
	t.Helper()
	k := make([]byte, 32)
	if _, err := fmt.Sscanf(key, "%x", &k); err != nil {
		t.Fatal(err)
	}
	s, err := credentials.NewSealer(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTwoMailHosts: two Dovecot stacks behind one gateway. Alice signs in
// with a password at host 1 (a MAIL_HOSTS name, chosen with x-imap-host),
// Bob through the provider at host 2 (the default host). Each sees only
// their own mailbox, and each stack holds its own pooled connection
// (doveadm who). A host that is not allowed, and one that resolves to a
// private address without MAIL_HOSTS_PRIVATE, are refused before anything
// is dialled: nothing reaches the listener behind them.
func TestTwoMailHosts(t *testing.T) {
	t.Parallel() // its own stack (and provider): waits, mostly, beside the other parallel tests
	h := mailtest.StartHydra(t, mailtest.HydraOptions{Scopes: []string{"mail"}})
	host2 := mailtest.OAuthStack(t, h, mailtest.Options{OAuthScope: "mail"})
	host1 := mailtest.StartT(t, mailtest.Options{})
	for stack, subject := range map[*mailtest.Stack]string{host1: "only on host one", host2: "only on host two"} {
		for _, u := range []string{mailtest.Alice, mailtest.Bob} {
			raw := fmt.Sprintf("From: x@example.test\r\nTo: %s\r\nSubject: %s\r\n\r\nhello\r\n", u, subject)
			if err := stack.Deliver("x@example.test", []string{u}, []byte(raw)); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	client, err := h.CreateClient(ctx, hydra.Client{RedirectURIs: []string{"http://127.0.0.1:9/authorize/callback"}, Scopes: []string{"openid", "offline_access", "email", "mail"}})
	if err != nil {
		t.Fatal(err)
	}
	// The gateway's own host is a name nothing answers at; host 1 is
	// "localhost" (MAIL_HOSTS), host 2 the provider's "127.0.0.1".
	// Each stack has its own CA: the gateway trusts both.
	cas := filepath.Join(t.TempDir(), "cas.pem")
	var pems []byte
	for _, f := range []string{host1.CAFile, host2.CAFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pems = append(pems, b...)
	}
	if err := os.WriteFile(cas, pems, 0o600); err != nil {
		t.Fatal(err)
	}
	g := startOAuthGateway(t, host2, "MAIL_CA_FILE="+cas, "IMAP_HOST=mail.gateway.invalid", "MAIL_HOSTS=localhost:"+strconv.Itoa(host1.IMAPSPort)+",10.0.0.1", "MAIL_HOSTS_PRIVATE=true",
		"OIDC_NAME=Hydra", "OIDC_ISSUER="+h.IssuerURL, "OIDC_CLIENT_ID="+client.ID, "OIDC_CLIENT_SECRET="+client.Secret,
		"OIDC_IMAP_HOST=127.0.0.1", "OIDC_IMAP_PORT="+strconv.Itoa(host2.IMAPSPort))
	// Alice, password, host 1.
	alice := mailtest.MCPClient(t, g.Base+"/mcp", map[string]string{"x-imap-user": mailtest.Alice, "x-imap-pass": mailtest.AlicePassword, "x-imap-host": "localhost"}, "")
	res := mailtest.Call(t, alice, "imap_search_emails", map[string]any{"subject": "only on host"})
	if text := mailtest.Text(res); res.IsError || !strings.Contains(text, "only on host one") || strings.Contains(text, "only on host two") {
		t.Fatalf("alice at host 1 sees: %s", text)
	}
	// Bob, through the provider: the grant the gateway's sign-in makes
	// (Hydra's token, the provider's host), sealed with the gateway's key.
	tok, err := h.Login(ctx, client, mailtest.Bob)
	if err != nil {
		t.Fatal(err)
	}
	creds := credentials.NewOAuth(mailtest.Bob, tok.AccessToken)
	creds.Host = "127.0.0.1"
	access, err := sealerOf(t, g.Key).SealGrant(credentials.KindAccess, credentials.Grant{ID: credentials.NewGrantID(), Creds: creds, ClientID: "test",
		Audience: g.Base + "/mcp", Expires: time.Now().Add(time.Minute), Provider: "oidc-hydra", ProviderExpires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	bob := mailtest.MCPClient(t, g.Base+"/mcp", map[string]string{"Authorization": "Bearer " + access}, "")
	res = mailtest.Call(t, bob, "imap_search_emails", map[string]any{"subject": "only on host"})
	if text := mailtest.Text(res); res.IsError || !strings.Contains(text, "only on host two") || strings.Contains(text, "only on host one") {
		t.Fatalf("bob at host 2 sees: %s", text)
	}
	// Each stack holds its own connection: alice at host 1, bob at host 2.
	for stack, want := range map[*mailtest.Stack]string{host1: mailtest.Alice, host2: mailtest.Bob} {
		who, err := stack.Doveadm("who", "-1")
		if err != nil {
			t.Fatal(err)
		}
		other := mailtest.Bob
		if want == mailtest.Bob {
			other = mailtest.Alice
		}
		if !strings.Contains(who, want) || strings.Contains(who, other) {
			t.Errorf("doveadm who: %s", who)
		}
	}

	// Refusals before any connection: a listener counts the attempts.
	port, hits := mailtest.CountingListener(t)
	strict := startGateway(t, host2, "MAIL_HOSTS=localhost:"+port+",10.0.0.1")
	// One status and one sentence for every refusal, whatever the reason:
	// not allowed, a loopback or a private address, no host name at all.
	for _, host := range []string{"mail.elsewhere.test", "localhost", "10.0.0.1", "localhost#.evil.test"} {
		status, body := rawMCP(t, strict.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"imap_list_folders","arguments":{}}}`,
			map[string]string{"X-Imap-User": mailtest.Alice, "X-Imap-Pass": mailtest.AlicePassword, "X-Imap-Host": host})
		var answer struct{ Error string }
		json.Unmarshal([]byte(body), &answer)
		want := fmt.Sprintf("this gateway does not serve mailboxes at %q: it serves 127.0.0.1, localhost, 10.0.0.1 (names that resolve to public addresses)", host)
		if status != http.StatusForbidden || answer.Error != want {
			t.Errorf("x-imap-host %s: %d %q, want 403 %q", host, status, answer.Error, want)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d connections reached the listener behind a refused host", n)
	}
}
