package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// rawMCP posts body to the gateway as a stateless MCP client would, with
// extra headers, and returns the status and the answer.
func rawMCP(t *testing.T, url, body string, headers map[string]string) (int, string) {
	t.Helper()
	return mailtest.RawMCP(t, url, body, headers)
}

// The attack of issue 12.6: encoding/json keeps the last of two equal keys,
// so a call whose name says imap_list_folders first and smtp_send_email
// second sent a mail. Every duplicate is now a parse error, and nothing is
// sent; the same call without the duplicate does send (so the count below
// would see a sent mail).
func TestHostileHTTPDuplicateKeys(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{})
	g := startGateway(t, s, smtpEnv(s)...)
	headers := userHeaders(s, alice)
	before := map[string]int{}
	for _, u := range []string{alice, mailtest.Bob} {
		n, err := s.MessageCount(u, "")
		if err != nil {
			t.Fatal(err)
		}
		before[u] = n
	}
	send := `"arguments":{"to":["` + mailtest.Bob + `"],"subject":"duplicate keys","text":"must not arrive"}`
	for _, tc := range []struct{ name, body, key string }{
		{"name twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"imap_list_folders",` + send + `,"name":"smtp_send_email"}}`, "name"},
		{"name in another case", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"imap_list_folders",` + send + `,"NAME":"smtp_send_email"}}`, "NAME"},
		{"name escaped", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"imap_list_folders",` + send + `,"na\u006de":"smtp_send_email"}}`, "name"},
		{"recipient twice", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"smtp_send_email","arguments":{"to":["` + alice + `"],"subject":"s","text":"t","to":["` + mailtest.Bob + `"]}}}`, "to"},
		{"method twice", `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"name":"smtp_send_email",` + send + `},"method":"tools/call"}`, "method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := rawMCP(t, g.URL, tc.body, headers)
			var resp struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &resp); err != nil {
				t.Fatalf("%d %s: %v", status, body, err)
			}
			if status != http.StatusBadRequest || resp.Error.Code != -32700 || string(resp.ID) != "null" ||
				!strings.Contains(resp.Error.Message, fmt.Sprintf("duplicate key %q", tc.key)) {
				t.Fatalf("%d %s, want 400 with a -32700 error naming %q and id null", status, body, tc.key)
			}
		})
	}
	// Delivery is asynchronous: give a sent mail time to arrive.
	for u, n := range before {
		if got, err := s.WaitMessages(u, "", n+1, 3*time.Second); err == nil {
			t.Fatalf("%s's INBOX went from %d to %d messages: a refused call sent mail", u, n, got)
		}
	}

	// The control: the same call without the duplicate sends.
	status, body := rawMCP(t, g.URL, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"smtp_send_email",`+send+`}}`, headers)
	if status != http.StatusOK || strings.Contains(body, `"isError":true`) {
		t.Fatalf("control send: %d %s", status, body)
	}
	if got, err := s.WaitMessages(mailtest.Bob, "", before[mailtest.Bob]+1, 15*time.Second); err != nil {
		t.Fatalf("control send did not arrive (%d messages): %v", got, err)
	}
}

// Credential headers and tokens: a NUL byte is refused before any login,
// a token header cannot be mixed with the user and password headers, and
// a token is one exact string (a line break inside no longer opens).
func TestHostileHTTPCredentials(t *testing.T) {
	s := mailtest.Shared(t)
	g := startGateway(t, s, smtpEnv(s)...)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"imap_list_folders","arguments":{}}}`

	// A NUL in a header: net/http itself refuses it on the wire.
	addr := strings.TrimSuffix(strings.TrimPrefix(g.URL, "http://"), "/mcp")
	for _, h := range []string{"x-imap-user: " + alice + "\x00" + mailtest.Bob + "\r\nx-imap-pass: pw", "x-imap-user: " + alice + "\r\nx-imap-pass: " + s.Users[alice] + "\x00"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n%s\r\nContent-Length: %d\r\n\r\n%s", h, len(list), list)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("NUL in a credential header: %d, want 400", resp.StatusCode)
		}
	}

	// A real token, made by the gateway.
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")
	var tok tools.EncryptResult
	mailtest.Decode(t, mailtest.Call(t, c, "imap_encrypt_credentials", nil), &tok)
	if !strings.HasPrefix(tok.Token, "mbx1.") || len(tok.KeyID) != 8 {
		t.Fatalf("token %q key id %q", tok.Token, tok.KeyID)
	}

	// x-mailbox-token alone works; with the user headers it is refused.
	status, body := rawMCP(t, g.URL, list, map[string]string{"x-mailbox-token": tok.Token})
	if status != http.StatusOK || !strings.Contains(body, "INBOX") || strings.Contains(body, `"isError":true`) {
		t.Fatalf("x-mailbox-token: %d %s", status, body)
	}
	status, body = rawMCP(t, g.URL, list, map[string]string{"x-mailbox-token": tok.Token, "x-imap-user": alice, "x-imap-pass": s.Users[alice]})
	if status != http.StatusBadRequest || !strings.Contains(body, "send either x-mailbox-token or x-imap-user and x-imap-pass, not both") {
		t.Fatalf("token and user headers: %d %s", status, body)
	}

	// A line break inside the token: refused as a tool error (it used to
	// open, Go's base64 skipping it); blanks around it are fine.
	nc := mailtest.MCPClient(t, g.URL, nil, "")
	mid := len(tok.Token) / 2
	for _, tc := range []struct {
		token string
		ok    bool
	}{
		{tok.Token[:mid] + "\n" + tok.Token[mid:], false},
		{tok.Token[:mid] + "\r\n" + tok.Token[mid:], false},
		{" " + tok.Token + "\n", true},
	} {
		res := mailtest.Call(t, nc, "imap_list_folders", map[string]any{"credentials": tc.token})
		if res.IsError == tc.ok {
			t.Fatalf("token %q: IsError=%v %s", tc.token, res.IsError, mailtest.Text(res))
		}
	}

	// A NUL in a password cannot be sealed.
	res := mailtest.Call(t, c, "imap_encrypt_credentials", map[string]any{"user": alice, "password": s.Users[alice] + "\x00", "verify": false})
	if !res.IsError || strings.Contains(mailtest.Text(res), "mbx1.") {
		t.Fatalf("sealing a NUL password: IsError=%v %s", res.IsError, mailtest.Text(res))
	}
}
