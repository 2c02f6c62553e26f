package app_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/app"
	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// startSignInGateway is a demo gateway with PUBLIC_URL set to its own
// address (so that it is its own authorization server), sending on,
// MAILBOX_ACCESS=full, and env.
func startSignInGateway(t *testing.T, env ...string) (g *gateway, base string, sealer *credentials.Sealer) {
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
	base = "http://" + ln.Addr().String()
	key, _ := credentials.NewKey()
	host, port, _ := net.SplitHostPort(srv.IMAPAddr)
	sh, sp, _ := net.SplitHostPort(srv.SMTPAddr)
	cfg, err := config.FromEnv(append([]string{"IMAP_HOST=" + host, "IMAP_PORT=" + port, "IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true",
		"SMTP_HOST=" + sh, "SMTP_PORT=" + sp, "SMTP_SECURITY=plain", "ENCRYPTION_KEY=" + key, "PUBLIC_URL=" + base, "MAILBOX_ACCESS=full"}, env...))
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
	sealer, err = credentials.NewSealer(k)
	if err != nil {
		t.Fatal(err)
	}
	return &gateway{Demo: srv, URL: base + "/mcp", Users: srv.Users, App: a, Key: key}, base, sealer
}

// TestTokenNeverMoreThanItsCaller: imap_encrypt_credentials, called with
// the caller's own credentials, makes a token that does at most what they
// do. Every combination of access, send and agent, from a read-only
// sign-in, a wider sign-in, a narrowed token bound to an agent, and plain
// headers: refused when it asks for more, else exactly what was asked or
// inherited, and the token then acts so (its tools/list, a folder it may
// not create, and its expiry).
func TestTokenNeverMoreThanItsCaller(t *testing.T) {
	g, base, sealer := startSignInGateway(t)
	u := g.Users[0]
	expires := time.Now().Add(50 * time.Minute).Truncate(time.Second)
	bearer := func(sc access.Scope) map[string]string {
		c := credentials.New(u.Address, u.Password)
		c.Scope = sc
		tok, err := sealer.SealGrant(credentials.KindAccess, credentials.Grant{ID: credentials.NewGrantID(), Creds: c, ClientID: "test", Audience: base + "/mcp", Expires: expires})
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{"Authorization": "Bearer " + tok}
	}
	agentToken := func() map[string]string {
		c := credentials.New(u.Address, u.Password)
		c.Scope = access.Scope{Level: access.Organize}
		c.Agent = "alpha"
		tok, err := sealer.Seal(c)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{"x-mailbox-token": tok}
	}
	type holder struct {
		level   access.Level // 0: unscoped (the operator's, full)
		noSend  bool
		agent   string
		expires time.Time
	}
	callers := []struct {
		name    string
		headers map[string]string
		h       holder
	}{
		{"sign-in mail.read", bearer(access.Scope{Level: access.Read, NoSend: true}), holder{access.Read, true, "", expires}},
		{"sign-in mail.organize mail.send", bearer(access.Scope{Level: access.Organize}), holder{access.Organize, false, "", expires}},
		{"token organize agent alpha", agentToken(), holder{access.Organize, false, "alpha", time.Time{}}},
		{"headers", headers(u), holder{0, false, "", time.Time{}}},
	}
	yes, no := true, false
	levels := []access.Level{0, access.Read, access.Organize, access.Full}
	sends := []*bool{nil, &yes, &no}
	agents := []string{"", "alpha", "beta"}
	made, refused := 0, 0
	for _, caller := range callers {
		t.Run(caller.name, func(t *testing.T) {
			c := mailtest.MCPClient(t, g.URL, caller.headers, "")
			for _, level := range levels {
				for _, send := range sends {
					for _, agent := range agents {
						args := map[string]any{"verify": false}
						name := fmt.Sprintf("access=%v send=%v agent=%q", level, fmtBool(send), agent)
						if level != 0 {
							args["access"] = level.String()
						}
						if send != nil {
							args["send"] = *send
						}
						if agent != "" {
							args["agent"] = agent
						}
						h := caller.h
						wantRefused := (h.level != 0 && level > h.level) || (send != nil && *send && h.noSend) ||
							(agent != "" && h.agent != "" && agent != h.agent)
						res := mailtest.Call(t, c, "imap_encrypt_credentials", args)
						if wantRefused {
							refused++
							if !res.IsError || !strings.Contains(mailtest.Text(res), "no token was made") {
								t.Errorf("%s: got %q (error %v), want a refusal", name, mailtest.Text(res), res.IsError)
							}
							continue
						}
						made++
						var out struct {
							Token, Access, Agent, Expires string
							Send                          bool
						}
						mailtest.Decode(t, res, &out)
						wantLevel := level
						if wantLevel == 0 {
							wantLevel = max(h.level, 0)
							if h.level == 0 {
								wantLevel = access.Full
							}
						}
						wantSend := !h.noSend
						if send != nil {
							wantSend = *send
						}
						wantAgent := h.agent
						if agent != "" {
							wantAgent = agent
						}
						tok, err := sealer.Open(out.Token)
						if err != nil {
							t.Fatalf("%s: the token does not open: %v", name, err)
						}
						if got := tok.Scope.Effective(access.Full); got != wantLevel || out.Access != wantLevel.String() {
							t.Errorf("%s: token level %v (result %q), want %v", name, got, out.Access, wantLevel)
						}
						if tok.Scope.NoSend == wantSend || out.Send != wantSend {
							t.Errorf("%s: token sends %v (result %v), want %v", name, !tok.Scope.NoSend, out.Send, wantSend)
						}
						if tok.Agent != wantAgent || out.Agent != wantAgent {
							t.Errorf("%s: token agent %q (result %q), want %q", name, tok.Agent, out.Agent, wantAgent)
						}
						if !tok.Expires.Equal(h.expires) {
							t.Errorf("%s: token expires %v, want %v (the caller's)", name, tok.Expires, h.expires)
						}
						if !h.expires.IsZero() && out.Expires == "" {
							t.Errorf("%s: the result does not say when the token expires", name)
						}
						// What the token lists is what it may do.
						tc := mailtest.MCPClient(t, g.URL, map[string]string{"x-mailbox-token": out.Token}, "")
						lr, err := tc.ListTools(context.Background(), mcp.ListToolsRequest{})
						if err != nil {
							t.Fatal(err)
						}
						var listed []string
						for _, tool := range lr.Tools {
							listed = append(listed, tool.Name)
						}
						for tool, need := range map[string]bool{
							"imap_create_folder": wantLevel >= access.Organize,
							"imap_delete_folder": wantLevel >= access.Full,
							"smtp_send_email":    wantSend,
						} {
							if slices.Contains(listed, tool) != need {
								t.Errorf("%s: %s listed %v, want %v", name, tool, !need, need)
							}
						}
					}
				}
			}
		})
	}
	t.Logf("%d tokens made, %d refused", made, refused)

	// The attack of the issue, called for real: a read-only sign-in asks
	// for a full token and uses it to make and delete a folder.
	c := mailtest.MCPClient(t, g.URL, callers[0].headers, "")
	res := mailtest.Call(t, c, "imap_encrypt_credentials", map[string]any{"access": "full", "verify": false})
	if !res.IsError {
		t.Fatalf("a read-only sign-in made a full token: %s", mailtest.Text(res))
	}
	var out struct{ Token string }
	mailtest.Decode(t, mailtest.Call(t, c, "imap_encrypt_credentials", map[string]any{"verify": false}), &out)
	tc := mailtest.MCPClient(t, g.URL, map[string]string{"x-mailbox-token": out.Token}, "")
	if res := mailtest.Call(t, tc, "imap_create_folder", map[string]any{"name": "Escalated"}); !res.IsError {
		t.Fatalf("the token made from a read-only sign-in created a folder: %s", mailtest.Text(res))
	}
	if res := mailtest.Call(t, c, "imap_list_folders", map[string]any{}); strings.Contains(mailtest.Text(res), "Escalated") {
		t.Fatal("the folder exists")
	}
	// The REST mirror has no route that makes tokens, and its own change
	// routes refuse the sign-in's level.
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/folders", strings.NewReader(`{"name":"Escalated"}`))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range callers[0].headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound {
		t.Fatalf("REST create folder with a read-only sign-in: %d %s", resp.StatusCode, body)
	}
}

// TestTokenFromSignInExpires: a token made from a sign-in stops working
// when the sign-in's access token would have.
func TestTokenFromSignInExpires(t *testing.T) {
	g, base, sealer := startSignInGateway(t)
	u := g.Users[0]
	c := credentials.New(u.Address, u.Password)
	c.Scope = access.Scope{Level: access.Read}
	access, err := sealer.SealGrant(credentials.KindAccess, credentials.Grant{ID: credentials.NewGrantID(), Creds: c, ClientID: "test",
		Audience: base + "/mcp", Expires: time.Now().Add(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	mc := mailtest.MCPClient(t, g.URL, map[string]string{"Authorization": "Bearer " + access}, "")
	var out struct{ Token string }
	mailtest.Decode(t, mailtest.Call(t, mc, "imap_encrypt_credentials", map[string]any{"verify": false}), &out)
	tc := mailtest.MCPClient(t, g.URL, map[string]string{"x-mailbox-token": out.Token}, "")
	if res := mailtest.Call(t, tc, "imap_list_folders", map[string]any{}); res.IsError {
		t.Fatalf("before expiry: %s", mailtest.Text(res))
	}
	time.Sleep(time.Until(time.Now().Add(2*time.Second).Truncate(time.Second)) + 100*time.Millisecond)
	res := mailtest.Call(t, tc, "imap_list_folders", map[string]any{})
	if !res.IsError || !strings.Contains(mailtest.Text(res), "has expired") {
		t.Fatalf("after expiry: %q (error %v)", mailtest.Text(res), res.IsError)
	}
}

func fmtBool(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}
