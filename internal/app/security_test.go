package app_test

import (
	"context"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// post sends a tools/list with the given Host and Origin headers and
// returns the status.
func post(t *testing.T, url, host, origin string) int {
	t.Helper()
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(list))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcp.ProtocolVersion20250618)
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// With the default loopback bind, a request naming another host (DNS
// rebinding) or coming from a non-local page is refused; ALLOWED_HOSTS lets
// a same-host reverse proxy through, and an origin listed by name passes.
func TestHostAndOriginChecks(t *testing.T) {
	g := startDemoGateway(t, "ALLOWED_HOSTS=mcp.example.test", "ALLOWED_ORIGINS=*,https://app.example.test")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimSuffix(g.URL, "/mcp"), "http://"))
	for _, tc := range []struct {
		name, host, origin string
		want               int
	}{
		{"loopback host", "", "", http.StatusOK},
		{"localhost name", "localhost:" + port, "", http.StatusOK},
		{"ipv6 loopback", "[::1]:" + port, "", http.StatusOK},
		{"rebinding host", "evil.example:" + port, "", http.StatusForbidden},
		{"rebinding host without port", "evil.example", "", http.StatusForbidden},
		{"allowed proxy host", "mcp.example.test", "", http.StatusOK},
		{"allowed proxy host with port", "MCP.example.test:443", "", http.StatusOK},
		{"local page", "", "http://localhost:5173", http.StatusOK},
		{"non-local page despite *", "", "https://evil.example", http.StatusForbidden},
		{"listed origin", "", "https://app.example.test", http.StatusOK},
		{"rebinding with its own origin", "evil.example:" + port, "http://evil.example:" + port, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := post(t, g.URL, tc.host, tc.origin); got != tc.want {
				t.Fatalf("Host %q Origin %q: %d, want %d", tc.host, tc.origin, got, tc.want)
			}
		})
	}
	// Bound to all interfaces with no ALLOWED_HOSTS, any Host is accepted
	// (a container behind its proxy); with a list, only the list and local
	// names.
	open := startDemoGateway(t, "BIND_ADDRESS=0.0.0.0")
	if got := post(t, open.URL, "mcp.example.org", "https://any.example"); got != http.StatusOK {
		t.Fatalf("0.0.0.0 bind: %d, want 200", got)
	}
	listed := startDemoGateway(t, "BIND_ADDRESS=0.0.0.0", "ALLOWED_HOSTS=mcp.example.org")
	if got := post(t, listed.URL, "other.example.org", ""); got != http.StatusForbidden {
		t.Fatalf("0.0.0.0 bind with ALLOWED_HOSTS, other host: %d, want 403", got)
	}
	if got := post(t, listed.URL, "mcp.example.org", ""); got != http.StatusOK {
		t.Fatalf("0.0.0.0 bind with ALLOWED_HOSTS, listed host: %d, want 200", got)
	}
}

// A token sealed with ENCRYPTION_KEY_PREVIOUS still opens the mailbox after
// a rotation; one from any other key is refused with a message saying so.
func TestKeyRotation(t *testing.T) {
	oldKey, _ := credentials.NewKey()
	g := startDemoGateway(t, "ENCRYPTION_KEY_PREVIOUS="+oldKey)
	u := g.Users[0]
	oldSealer, err := credentials.NewSealer(hexKey(t, oldKey))
	if err != nil {
		t.Fatal(err)
	}
	oldToken, _ := oldSealer.Seal(credentials.New(u.Address, u.Password))
	thirdKey, _ := credentials.NewKey()
	third, _ := credentials.NewSealer(hexKey(t, thirdKey))
	thirdToken, _ := third.Seal(credentials.New(u.Address, u.Password))

	c := mailtest.MCPClient(t, g.URL, nil, "")
	var folders tools.FoldersResult
	mailtest.Decode(t, mailtest.Call(t, c, "imap_list_folders", map[string]any{"credentials": oldToken}), &folders)
	if len(folders.Folders) == 0 {
		t.Fatal("no folders through the previous key's token")
	}
	res := mailtest.Call(t, c, "imap_list_folders", map[string]any{"credentials": thirdToken})
	if !res.IsError || !strings.Contains(mailtest.Text(res), "different key") {
		t.Fatalf("third key's token: IsError=%v %q", res.IsError, mailtest.Text(res))
	}
	// New tokens are sealed with the current key, not the previous one.
	var out tools.EncryptResult
	mailtest.Decode(t, mailtest.Call(t, c, "imap_encrypt_credentials", map[string]any{"user": u.Address, "password": u.Password}), &out)
	if _, err := oldSealer.Open(out.Token); err == nil {
		t.Fatal("a new token opens with the previous key")
	}
}

func hexKey(t *testing.T, s string) []byte {
	t.Helper()
	b := make([]byte, len(s)/2)
	for i := range b {
		var v byte
		for _, c := range s[2*i : 2*i+2] {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			case c >= 'a' && c <= 'f':
				v |= byte(c-'a') + 10
			default:
				t.Fatalf("bad hex %q", s)
			}
		}
		b[i] = v
	}
	return b
}

// argsFor builds plausible arguments for any tool from its input schema, so
// that tools added later (smtp_ ones) are covered without editing this test.
func argsFor(tool mcp.Tool, address, secretText string, uid uint32) map[string]any {
	args := map[string]any{}
	for name, raw := range tool.InputSchema.Properties {
		prop, _ := raw.(map[string]any)
		typ, _ := prop["type"].(string)
		lower := strings.ToLower(name)
		switch {
		case name == "credentials" || name == "cursor" || name == "folder" || name == "since" || name == "before":
		case name == "uid":
			args[name] = uid
		case typ == "array":
			if strings.Contains(lower, "attach") {
				continue
			}
			args[name] = []any{address}
		case typ == "string" && (lower == "to" || lower == "cc" || lower == "bcc" || strings.Contains(lower, "address") || lower == "user" || lower == "from"):
			args[name] = address
		case typ == "string" && lower == "password":
		case typ == "string":
			args[name] = secretText
		case typ == "number" || typ == "integer":
			if name == "limit" || name == "max_chars" {
				args[name] = 5
			}
		}
	}
	return args
}

// Every tool, called at debug level with header credentials, a token, a
// wrong password and a broken token, leaves no password, token or message
// body in the log.
func TestLogsHoldNoSecretsAllTools(t *testing.T) {
	probe := startDemoGateway(t)
	host, port, _ := net.SplitHostPort(probe.Demo.SMTPAddr)
	g := startDemoGateway(t, "SMTP_HOST="+host, "SMTP_PORT="+port, "SMTP_SECURITY=plain", "SMTP_TLS=false", "MAILBOX_ACCESS=full")
	u := g.Users[0]
	const secretText = "BodySecret-7f3a9c Please keep this confidential"

	hc := mailtest.MCPClient(t, g.URL, headers(u), "")
	var token tools.EncryptResult
	mailtest.Decode(t, mailtest.Call(t, hc, "imap_encrypt_credentials", nil), &token)
	var page tools.PageResult
	mailtest.Decode(t, mailtest.Call(t, hc, "imap_list_emails", map[string]any{"limit": 5}), &page)
	if len(page.Messages) == 0 {
		t.Fatal("demo mailbox empty")
	}
	uid := page.Messages[0].UID
	var read tools.MessageResult
	mailtest.Decode(t, mailtest.Call(t, hc, "imap_read_email", map[string]any{"uid": uid}), &read)
	body := strings.TrimSpace(read.Text)
	if len(body) < 20 {
		t.Fatalf("the read message has too little text to check for: %q", body)
	}

	list, err := hc.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tc := mailtest.MCPClient(t, g.URL, nil, "")
	wrong := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": u.Address, "x-imap-pass": "wrong-" + u.Password}, "")
	var called []string
	for _, tool := range list.Tools {
		args := argsFor(tool, u.Address, secretText, uid)
		called = append(called, tool.Name)
		mailtest.Call(t, hc, tool.Name, args)
		withToken := map[string]any{"credentials": token.Token}
		for k, v := range args {
			withToken[k] = v
		}
		if tool.Name == "imap_encrypt_credentials" {
			withToken = map[string]any{"user": u.Address, "password": u.Password}
		}
		mailtest.Call(t, tc, tool.Name, withToken)
		withToken["credentials"] = token.Token[:len(token.Token)-4] + "AAAA"
		mailtest.Call(t, tc, tool.Name, withToken)
		mailtest.Call(t, wrong, tool.Name, args)
	}
	sort.Strings(called)
	t.Logf("called %d tools: %v", len(called), called)
	if len(called) < 21 {
		t.Fatalf("only %d tools listed", len(called))
	}
	logs := g.Logs.String()
	if !strings.Contains(logs, `"level":"DEBUG"`) {
		t.Fatal("no debug lines logged: the test would prove nothing")
	}
	for _, secret := range []string{u.Password, "wrong-" + u.Password, token.Token, token.Token[5:30], secretText[:18], body[:20]} {
		if strings.Contains(logs, secret) {
			i := strings.Index(logs, secret)
			t.Fatalf("log output contains a secret %q: ...%s...", secret, logs[max(0, i-300):min(len(logs), i+100)])
		}
	}
}

// The read tools' text fallback puts mail content inside a fenced block
// whose marker changes with every response, and the structured result says
// which fields are untrusted.
func TestUntrustedBlockInEveryReadTool(t *testing.T) {
	g := startDemoGateway(t)
	u := g.Users[0]
	c := mailtest.MCPClient(t, g.URL, headers(u), "")
	var markers []string
	check := func(name string, args map[string]any, out any, u func() tools.Untrusted, subject string) {
		t.Helper()
		res := mailtest.Call(t, c, name, args)
		mailtest.Decode(t, res, out)
		un := u()
		text := mailtest.Text(res)
		begin := "<<<UNTRUSTED MAIL CONTENT BEGIN " + un.Marker + ">>>"
		end := "<<<UNTRUSTED MAIL CONTENT END " + un.Marker + ">>>"
		i, j := strings.Index(text, begin), strings.Index(text, end)
		if un.Marker == "" || i < 0 || j < i || len(un.Fields) == 0 {
			t.Fatalf("%s: no fenced block for marker %q in:\n%s", name, un.Marker, text)
		}
		if !strings.Contains(text[:i], tools.UntrustedNote) {
			t.Fatalf("%s: the note does not precede the block", name)
		}
		if subject != "" && (!strings.Contains(text[i:j], subject) || strings.Contains(text[:i]+text[j:], subject)) {
			t.Fatalf("%s: subject %q not (only) inside the block", name, subject)
		}
		markers = append(markers, un.Marker)
	}
	var page tools.PageResult
	check("imap_list_emails", map[string]any{"limit": 3}, &page, func() tools.Untrusted { return page.Untrusted }, "")
	subject := page.Messages[0].Subject
	var again tools.PageResult
	check("imap_list_emails", map[string]any{"limit": 3}, &again, func() tools.Untrusted { return again.Untrusted }, subject)
	var found tools.PageResult
	check("imap_search_emails", map[string]any{"subject": subject}, &found, func() tools.Untrusted { return found.Untrusted }, subject)
	var msg tools.MessageResult
	check("imap_read_email", map[string]any{"uid": page.Messages[0].UID}, &msg, func() tools.Untrusted { return msg.Untrusted }, subject)
	seen := map[string]bool{}
	for _, m := range markers {
		if seen[m] {
			t.Fatalf("marker %q reused across responses", m)
		}
		seen[m] = true
	}
	var plain mailbox.Page // the structured result still decodes as a plain page
	mailtest.Decode(t, mailtest.Call(t, c, "imap_list_emails", map[string]any{"limit": 1}), &plain)
	if len(plain.Messages) != 1 {
		t.Fatal("PageResult does not decode as mailbox.Page")
	}
}
