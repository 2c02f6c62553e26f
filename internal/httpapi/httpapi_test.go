package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// seen is what the MCP handler behind httpapi received.
type seen struct {
	called bool
	token  string
	creds  credentials.Credentials
	body   string
}

func testHandler(s *seen) http.Handler {
	mcp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.called = true
		s.token, _ = credentials.TokenFromContext(r.Context())
		s.creds, _ = credentials.FromContext(r.Context())
		var b strings.Builder
		buf := make([]byte, 512)
		for {
			n, err := r.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		s.body = b.String()
		w.Write([]byte(`{}`))
	})
	return New(Options{MaxRequestBytes: 1 << 20, MaxInflightRequests: 8, MaxBufferedBytes: 4 << 20,
		BodyReadTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)}, mcp)
}

const listBody = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

func post(h http.Handler, body string, headers map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://localhost/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestCredentialHeaders(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
		msg     string // in the 400 answer
		token   string
		user    string
	}{
		{name: "none", status: 200},
		{name: "user and password", headers: map[string]string{"x-imap-user": "alice", "x-imap-pass": "pw"}, status: 200, user: "alice"},
		{name: "token", headers: map[string]string{"x-mailbox-token": "mbx1.abc"}, status: 200, token: "mbx1.abc"},
		{name: "token and user", headers: map[string]string{"x-mailbox-token": "mbx1.abc", "x-imap-user": "alice"}, status: 400,
			msg: "send either x-mailbox-token or x-imap-user and x-imap-pass, not both"},
		{name: "token and both", headers: map[string]string{"x-mailbox-token": "mbx1.abc", "x-imap-user": "alice", "x-imap-pass": "pw"}, status: 400,
			msg: "send either x-mailbox-token or x-imap-user and x-imap-pass, not both"},
		{name: "user only", headers: map[string]string{"x-imap-user": "alice"}, status: 400, msg: "send both x-imap-user and x-imap-pass"},
		// net/http refuses a NUL in a header on the wire; a handler mounted
		// elsewhere (or a future transport) must refuse it too.
		{name: "NUL in the password", headers: map[string]string{"x-imap-user": "alice", "x-imap-pass": "pw\x00bob"}, status: 400, msg: "NUL"},
		{name: "NUL in the user", headers: map[string]string{"x-imap-user": "alice\x00bob", "x-imap-pass": "pw"}, status: 400, msg: "NUL"},
		{name: "NUL in the token", headers: map[string]string{"x-mailbox-token": "mbx1.a\x00"}, status: 400, msg: "NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s seen
			w := post(testHandler(&s), listBody, tc.headers)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.msg) {
				t.Fatalf("%d %s, want %d with %q", w.Code, w.Body, tc.status, tc.msg)
			}
			if tc.status != 200 {
				if s.called {
					t.Fatal("refused request reached MCP")
				}
				return
			}
			if s.token != tc.token || s.creds.User != tc.user || s.body != listBody {
				t.Fatalf("MCP saw token %q user %q body %q", s.token, s.creds.User, s.body)
			}
		})
	}
}

// A body with a duplicated key is answered as a JSON-RPC parse error and
// never reaches MCP.
func TestDuplicateKeyRefused(t *testing.T) {
	var s seen
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"imap_list_folders","arguments":{},"name":"smtp_send_email"}}`
	w := post(testHandler(&s), body, nil)
	if s.called {
		t.Fatal("a body with a duplicate key reached MCP")
	}
	var resp struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	if w.Code != 400 || resp.JSONRPC != "2.0" || resp.Error.Code != -32700 || string(resp.ID) != "null" ||
		!strings.Contains(resp.Error.Message, `duplicate key "name"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	// the same call without the second name passes
	w = post(testHandler(&s), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"imap_list_folders","arguments":{}}}`, nil)
	if w.Code != 200 || !s.called {
		t.Fatalf("clean body: %d %s", w.Code, w.Body)
	}
}

func TestCORSAllowsTokenHeader(t *testing.T) {
	h := New(Options{AllowedOrigins: []string{"https://app.example.test"}, MaxRequestBytes: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)}, http.NotFoundHandler())
	r := httptest.NewRequest(http.MethodOptions, "http://localhost/mcp", nil)
	r.Header.Set("Origin", "https://app.example.test")
	r.Header.Set("Access-Control-Request-Method", "POST")
	r.Header.Set("Access-Control-Request-Headers", "x-mailbox-token")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	allowed := strings.ToLower(w.Header().Get("Access-Control-Allow-Headers"))
	if w.Code != http.StatusNoContent || !strings.Contains(allowed, "x-mailbox-token") {
		t.Fatalf("preflight: %d, allowed headers %q", w.Code, allowed)
	}
}
