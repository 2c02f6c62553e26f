package app_test

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/app"
	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// countingListener accepts and closes connections on loopback, counting
// them: whether anything was dialled there.
func countingListener(t *testing.T) (port string, hits *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	hits = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			c.Close()
		}
	}()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), hits
}

// startGatewayWith runs a gateway on the demo server as its own host, with
// PUBLIC_URL its own address, and env; it returns the base URL and a
// sealer with the gateway's key.
func startGatewayWith(t *testing.T, env ...string) (string, *credentials.Sealer) {
	t.Helper()
	srv, err := demo.Start(context.Background(), demo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	key, _ := credentials.NewKey()
	host, port, _ := net.SplitHostPort(srv.IMAPAddr)
	cfg, err := config.FromEnv(append([]string{"IMAP_HOST=" + host, "IMAP_PORT=" + port, "IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true",
		"ENCRYPTION_KEY=" + key, "PUBLIC_URL=" + base}, env...))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, app.NewLogger(io.Discard, cfg.LogLevel))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	k, _ := hex.DecodeString(key)
	sealer, err := credentials.NewSealer(k)
	if err != nil {
		t.Fatal(err)
	}
	return base, sealer
}

// listFolders calls imap_list_folders at base with headers and says how
// it went: the HTTP status when the request was refused before MCP, else
// the tool's text.
func listFolders(t *testing.T, base string, headers map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"imap_list_folders","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProviderHostOnlyForItsSignIns: a sign-in provider's own mail host
// (OIDC_IMAP_HOST) serves that provider's sign-ins, and is not reached by
// anyone else: not with a password and x-imap-host, not with an upstream
// token and x-imap-host, not through imap_encrypt_credentials' host, not
// with a grant that names the host without the provider. Unless
// MAIL_HOSTS allows the name: then it is a MAIL_HOSTS host like any other.
// Before, each of these reached it, and without the public-address check
// MAIL_HOSTS names get.
func TestProviderHostOnlyForItsSignIns(t *testing.T) {
	port, hits := countingListener(t)
	provider := []string{"OIDC_NAME=Test", "OIDC_ISSUER=https://id.example.test", "OIDC_CLIENT_ID=gw",
		"OIDC_IMAP_HOST=localhost", "OIDC_IMAP_PORT=" + port}
	base, sealer := startGatewayWith(t, provider...)
	grant := func(c credentials.Credentials, provider string) string {
		c.Host = "localhost"
		g, err := sealer.SealGrant(credentials.KindAccess, credentials.Grant{ID: credentials.NewGrantID(), Creds: c, ClientID: "c",
			Audience: base + "/mcp", Expires: time.Now().Add(time.Minute), Provider: provider, ProviderExpires: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + g
	}
	for name, h := range map[string]map[string]string{
		"a password with x-imap-host":          {"x-imap-user": "alice@demo.test", "x-imap-pass": "pw", "x-imap-host": "localhost"},
		"an upstream token with x-imap-host":   {"x-imap-user": "alice@demo.test", "x-imap-oauth-token": "ya29.abc", "x-imap-host": "localhost"},
		"the host spelt LOCALHOST.":            {"x-imap-user": "alice@demo.test", "x-imap-pass": "pw", "x-imap-host": "LOCALHOST."},
		"a password grant naming the host":     {"Authorization": grant(credentials.New("alice@demo.test", "pw"), "")},
		"another provider's grant on the host": {"Authorization": grant(credentials.NewOAuth("alice@demo.test", "tok"), "google")},
	} {
		status, body := listFolders(t, base, h)
		if status == http.StatusOK && !strings.Contains(body, `"isError":true`) {
			t.Errorf("%s: served: %.200s", name, body)
		}
		if n := hits.Load(); n != 0 {
			t.Fatalf("%s: %d connections reached the provider's host", name, n)
		}
	}
	mc := mailtest.MCPClient(t, base+"/mcp", map[string]string{"x-imap-user": "someone@demo.test", "x-imap-pass": "pw"}, "")
	res := mailtest.Call(t, mc, "imap_encrypt_credentials", map[string]any{"user": "alice@demo.test", "password": "pw", "host": "localhost"})
	if !res.IsError || !strings.Contains(mailtest.Text(res), "does not serve mailboxes at") || hits.Load() != 0 {
		t.Fatalf("imap_encrypt_credentials with the provider's host: %s (%d connections)", mailtest.Text(res), hits.Load())
	}
	// The provider's own sign-in reaches it (the listener hangs up: no
	// mailbox there, but the connection was made).
	listFolders(t, base, map[string]string{"Authorization": grant(credentials.NewOAuth("alice@demo.test", "tok"), "oidc-test")})
	if hits.Load() == 0 {
		t.Fatal("the provider's own sign-in never reached its host")
	}
	// MAIL_HOSTS may allow the name for everyone (here with private
	// addresses allowed: it is loopback).
	port2, hits2 := countingListener(t)
	base2, _ := startGatewayWith(t, "OIDC_NAME=Test", "OIDC_ISSUER=https://id.example.test", "OIDC_CLIENT_ID=gw",
		"OIDC_IMAP_HOST=localhost", "OIDC_IMAP_PORT="+port2, "MAIL_HOSTS=localhost:"+port2, "MAIL_HOSTS_PRIVATE=true")
	listFolders(t, base2, map[string]string{"x-imap-user": "alice@demo.test", "x-imap-pass": "pw", "x-imap-host": "localhost"})
	if hits2.Load() == 0 {
		t.Fatal("MAIL_HOSTS allows the provider's host, and a password login never reached it")
	}
}
