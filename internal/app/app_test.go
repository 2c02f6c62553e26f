package app_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/app"
	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

type gateway struct {
	Demo  *demo.Server
	URL   string
	Users []demo.User
	Logs  *mailtest.LogBuffer
	App   *app.App
	Key   string
}

// startDemoGateway runs the gateway against the embedded demo mail server,
// with debug logging captured.
func startDemoGateway(t *testing.T, env ...string) *gateway {
	t.Helper()
	return startDemoGatewayWith(t, false, env...)
}

// startDemoGatewayWith is startDemoGateway, with the demo's SMTP server
// configured (as `mailbox-mcp demo` does) when smtp is true.
func startDemoGatewayWith(t *testing.T, smtp bool, env ...string) *gateway {
	t.Helper()
	srv, err := demo.Start(context.Background(), demo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	key, _ := credentials.NewKey()
	host, port, _ := net.SplitHostPort(srv.IMAPAddr)
	vars := []string{"IMAP_HOST=" + host, "IMAP_PORT=" + port, "IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true",
		"ENCRYPTION_KEY=" + key, "LOG_LEVEL=debug"}
	if smtp {
		sh, sp, _ := net.SplitHostPort(srv.SMTPAddr)
		vars = append(vars, "SMTP_HOST="+sh, "SMTP_PORT="+sp, "SMTP_SECURITY=plain")
	}
	vars = append(vars, env...)
	cfg, err := config.FromEnv(vars)
	if err != nil {
		t.Fatal(err)
	}
	logs := &mailtest.LogBuffer{}
	a, err := app.New(cfg, app.NewLogger(logs, cfg.LogLevel))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &gateway{Demo: srv, URL: "http://" + ln.Addr().String() + "/mcp", Users: srv.Users, Logs: logs, App: a, Key: key}
}

func headers(u demo.User) map[string]string {
	return map[string]string{"x-imap-user": u.Address, "x-imap-pass": u.Password}
}

func TestToolsListBothProtocols(t *testing.T) {
	g := startDemoGateway(t)
	for _, proto := range []string{mcp.ProtocolVersion20250618, ""} {
		t.Run("protocol="+proto, func(t *testing.T) {
			c := mailtest.MCPClient(t, g.URL, nil, proto)
			res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]mcp.Tool{}
			for _, tool := range res.Tools {
				names[tool.Name] = tool
			}
			for _, want := range []string{"imap_encrypt_credentials", "imap_list_folders", "imap_list_emails", "imap_search_emails", "imap_read_email"} {
				tool, ok := names[want]
				if !ok {
					t.Fatalf("tools/list lacks %s: %v", want, names)
				}
				a := tool.Annotations
				if a.ReadOnlyHint == nil || !*a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint || a.OpenWorldHint == nil || a.IdempotentHint == nil {
					t.Errorf("%s annotations wrong: %+v", want, a)
				}
				if tool.OutputSchema.Type != "object" {
					t.Errorf("%s has no output schema", want)
				}
			}
			if _, ok := names["smtp_send_email"]; ok {
				t.Error("smtp tools listed without SMTP_HOST")
			}
		})
	}
}

func TestEncryptCredentials(t *testing.T) {
	g := startDemoGateway(t)
	u := g.Users[0]
	c := mailtest.MCPClient(t, g.URL, nil, "")

	res := mailtest.Call(t, c, "imap_encrypt_credentials", map[string]any{"user": u.Address, "password": u.Password})
	var out tools.EncryptResult
	mailtest.Decode(t, res, &out)
	if !out.Verified || !strings.HasPrefix(out.Token, "mbx1.") || out.User != u.Address {
		t.Fatalf("unexpected result: %+v", out)
	}
	// The token alone (no headers) now opens the mailbox.
	res = mailtest.Call(t, c, "imap_list_folders", map[string]any{"credentials": out.Token})
	if res.IsError {
		t.Fatalf("token refused: %s", mailtest.Text(res))
	}

	res = mailtest.Call(t, c, "imap_encrypt_credentials", map[string]any{"user": u.Address, "password": "wrong-password"})
	if !res.IsError || !strings.Contains(mailtest.Text(res), "authentication failed") {
		t.Fatalf("wrong password: IsError=%v %q", res.IsError, mailtest.Text(res))
	}
	// verify=false seals without asking the server.
	res = mailtest.Call(t, c, "imap_encrypt_credentials", map[string]any{"user": u.Address, "password": "wrong-password", "verify": false})
	mailtest.Decode(t, res, &out)
	if out.Verified {
		t.Fatal("verify=false reported verified")
	}
	// From the headers.
	hc := mailtest.MCPClient(t, g.URL, headers(u), "")
	res = mailtest.Call(t, hc, "imap_encrypt_credentials", nil)
	mailtest.Decode(t, res, &out)
	if out.User != u.Address || !out.Verified {
		t.Fatalf("from headers: %+v", out)
	}
}

func TestBadTokens(t *testing.T) {
	g := startDemoGateway(t)
	c := mailtest.MCPClient(t, g.URL, headers(g.Users[0]), "")
	other, _ := credentials.NewSealer(bytes.Repeat([]byte{7}, 32))
	foreign, _ := other.Seal(credentials.New(g.Users[0].Address, g.Users[0].Password))
	for _, tc := range []struct{ name, token, want string }{
		{"foreign key", foreign, "different key"},
		{"garbage", "hello", "not a mailbox-mcp token"},
		{"tampered", foreign[:20] + "A" + foreign[21:], "key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mailtest.Call(t, c, "imap_list_folders", map[string]any{"credentials": tc.token})
			if !res.IsError || !strings.Contains(mailtest.Text(res), tc.want) {
				t.Fatalf("IsError=%v %q, want it to mention %q", res.IsError, mailtest.Text(res), tc.want)
			}
		})
	}
	// No credentials at all.
	nc := mailtest.MCPClient(t, g.URL, nil, "")
	res := mailtest.Call(t, nc, "imap_list_folders", nil)
	if !res.IsError || !strings.Contains(mailtest.Text(res), "x-imap-user") {
		t.Fatalf("no credentials: %q", mailtest.Text(res))
	}
}

func TestHTTPSurface(t *testing.T) {
	g := startDemoGateway(t, "ALLOWED_ORIGINS=https://app.example.test")
	base := strings.TrimSuffix(g.URL, "/mcp")

	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"ok"`) || !strings.Contains(string(body), `"service":"mailbox-mcp"`) || !strings.Contains(string(body), `"version":"`) {
		t.Fatalf("/health: %d %s", resp.StatusCode, body)
	}

	resp, err = http.Get(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /mcp: %d, want 405", resp.StatusCode)
	}

	big := bytes.Repeat([]byte("x"), 2<<20)
	resp, err = http.Post(g.URL, "application/json", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 MiB POST: %d, want 413", resp.StatusCode)
	}
	// The same without a Content-Length (chunked) is cut off at the limit.
	req, _ := http.NewRequest(http.MethodPost, g.URL, io.MultiReader(bytes.NewReader(big)))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked 2 MiB POST: %d, want 413", resp.StatusCode)
	}

	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	for _, tc := range []struct {
		origin string
		want   int
	}{{"https://evil.example.test", http.StatusForbidden}, {"https://app.example.test", http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodPost, g.URL, strings.NewReader(list))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", mcp.ProtocolVersion20250618)
		req.Header.Set("Origin", tc.origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Origin %s: %d, want %d", tc.origin, resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusOK && resp.Header.Get("Access-Control-Allow-Origin") != tc.origin {
			t.Errorf("allowed origin lacks the CORS header")
		}
	}

	// Half a credential pair is a client error before MCP runs.
	req, _ = http.NewRequest(http.MethodPost, g.URL, strings.NewReader(list))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-imap-user", "someone")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("half credentials: %d, want 400", resp.StatusCode)
	}
}

// Everything logged at debug level through a full flow must be free of the
// password and the token.
func TestLogsHoldNoSecrets(t *testing.T) {
	g := startDemoGateway(t)
	u := g.Users[0]
	c := mailtest.MCPClient(t, g.URL, headers(u), "")
	var out tools.EncryptResult
	mailtest.Decode(t, mailtest.Call(t, c, "imap_encrypt_credentials", nil), &out)
	tc := mailtest.MCPClient(t, g.URL, nil, "")
	for _, name := range []string{"imap_list_folders", "imap_list_emails"} {
		res := mailtest.Call(t, tc, name, map[string]any{"credentials": out.Token})
		if res.IsError {
			t.Fatalf("%s: %s", name, mailtest.Text(res))
		}
	}
	mailtest.Call(t, tc, "imap_encrypt_credentials", map[string]any{"user": u.Address, "password": "wrong-" + u.Password})
	mailtest.Call(t, tc, "imap_list_emails", map[string]any{"credentials": out.Token[:len(out.Token)-3] + "abc"})
	logs := g.Logs.String()
	if !strings.Contains(logs, `"tool":"imap_list_emails"`) || !strings.Contains(logs, `"request_id"`) || !strings.Contains(logs, `"duration_ms"`) {
		t.Fatalf("request log lines missing: %s", logs)
	}
	for _, secret := range []string{u.Password, out.Token, out.Token[5:30]} {
		if strings.Contains(logs, secret) {
			t.Fatalf("log output contains a secret %q:\n%s", secret, logs)
		}
	}
}

// The demo serves every read tool on its seeded mailbox.
func TestDemoReadTools(t *testing.T) {
	g := startDemoGateway(t)
	u := g.Users[0]
	c := mailtest.MCPClient(t, g.URL, headers(u), "")
	msgs := map[string]demo.Message{}
	for _, m := range g.Demo.Messages(u.Address) {
		msgs[m.Tag] = m
	}

	var folders tools.FoldersResult
	mailtest.Decode(t, mailtest.Call(t, c, "imap_list_folders", nil), &folders)
	byName := map[string]mailbox.Folder{}
	for _, f := range folders.Folders {
		byName[f.Name] = f
	}
	for _, name := range []string{demo.FolderInbox, demo.FolderSent, demo.FolderOverview, demo.FolderReceipts} {
		f, ok := byName[name]
		if !ok {
			t.Fatalf("folder %q missing: %v", name, folders.Folders)
		}
		if int(f.Total) != g.Demo.Seeded(u.Address, name) {
			t.Errorf("%s: total %d, seeded %d", name, f.Total, g.Demo.Seeded(u.Address, name))
		}
	}
	if byName[demo.FolderSent].Role != "sent" {
		t.Errorf("Sent role %q", byName[demo.FolderSent].Role)
	}

	var page mailbox.Page
	mailtest.Decode(t, mailtest.Call(t, c, "imap_list_emails", map[string]any{"limit": 5}), &page)
	if len(page.Messages) != 5 || page.Messages[0].Subject != msgs[demo.TagPlain].Subject {
		t.Fatalf("newest message is %+v, want %q", page.Messages, msgs[demo.TagPlain].Subject)
	}

	for _, tc := range []struct{ tag, body string }{
		{demo.TagShiftJIS, "\u3044"}, {demo.TagHTMLOnly, "http"}, {demo.TagLatin1, "ü"},
	} {
		m := msgs[tc.tag]
		var found mailbox.Page
		mailtest.Decode(t, mailtest.Call(t, c, "imap_search_emails", map[string]any{"subject": m.Subject}), &found)
		if len(found.Messages) == 0 {
			t.Fatalf("search for %q found nothing", m.Subject)
		}
		var read mailbox.Message
		mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": found.Messages[0].UID}), &read)
		if read.Subject != m.Subject || read.MessageID != m.MessageID || strings.TrimSpace(read.Text) == "" {
			t.Errorf("%s: read %q / %q, want %q / %q (text %d chars)", tc.tag, read.Subject, read.MessageID, m.Subject, m.MessageID, len(read.Text))
		}
		if !strings.Contains(read.Text, tc.body) {
			t.Errorf("%s: text lacks %q: %s", tc.tag, tc.body, read.Text)
		}
		if strings.Contains(read.Text, "<script") || strings.Contains(read.Text, "</") {
			t.Errorf("%s: markup in text: %s", tc.tag, read.Text)
		}
	}
	// Reading left the unread newest message unread.
	mailtest.Decode(t, mailtest.Call(t, c, "imap_list_emails", map[string]any{"limit": 1}), &page)
	if page.Messages[0].Flags.Seen {
		t.Error("listing or reading marked a message as read")
	}
}
