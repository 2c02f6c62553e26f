package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// listFolders calls imap_list_folders at base with headers and says how
// it went: the HTTP status when the request was refused before MCP, else
// the tool's text.
func listFolders(t *testing.T, base string, headers map[string]string) (int, string) {
	t.Helper()
	return mailtest.RawMCP(t, base+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"imap_list_folders","arguments":{}}}`, headers)
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
	port, hits := mailtest.CountingListener(t)
	provider := []string{"OIDC_NAME=Test", "OIDC_ISSUER=https://id.example.test", "OIDC_CLIENT_ID=gw",
		"OIDC_IMAP_HOST=localhost", "OIDC_IMAP_PORT=" + port}
	_, base, sealer := startSignInGateway(t, provider...)
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
	port2, hits2 := mailtest.CountingListener(t)
	_, base2, _ := startSignInGateway(t, "OIDC_NAME=Test", "OIDC_ISSUER=https://id.example.test", "OIDC_CLIENT_ID=gw",
		"OIDC_IMAP_HOST=localhost", "OIDC_IMAP_PORT="+port2, "MAIL_HOSTS=localhost:"+port2, "MAIL_HOSTS_PRIVATE=true")
	listFolders(t, base2, map[string]string{"x-imap-user": "alice@demo.test", "x-imap-pass": "pw", "x-imap-host": "localhost"})
	if hits2.Load() == 0 {
		t.Fatal("MAIL_HOSTS allows the provider's host, and a password login never reached it")
	}
}
