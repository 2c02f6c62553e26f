package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// The caller's agent name reaches the handler from the x-mailbox-agent
// header or ?agent= on /mcp and /v1/; a bad or conflicting name is a 400
// naming where it came from, and never reaches MCP.
func TestAgentName(t *testing.T) {
	type got struct {
		called bool
		agent  string
		query  string
	}
	var g got
	record := func(w http.ResponseWriter, r *http.Request) {
		g.called = true
		g.agent, _ = credentials.AgentFromContext(r.Context())
		g.query = r.URL.RawQuery
		w.Write([]byte(`{}`))
	}
	h := New(Options{MaxRequestBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler), REST: http.HandlerFunc(record)}, http.HandlerFunc(record))
	for _, tc := range []struct {
		name    string
		path    string
		headers []string // name, value pairs (repeats allowed)
		status  int
		msg     string
		agent   string
		query   string // what the handler saw of the query
	}{
		{name: "none", path: "/mcp", status: 200},
		{name: "header", path: "/mcp", headers: []string{"x-mailbox-agent", "backend"}, status: 200, agent: "backend"},
		{name: "blank header is none", path: "/mcp", headers: []string{"x-mailbox-agent", "  "}, status: 200},
		{name: "query", path: "/mcp?agent=frontend", status: 200, agent: "frontend", query: "agent=frontend"},
		{name: "query with a dot", path: "/mcp?agent=planner.v1", status: 200, agent: "planner.v1", query: "agent=planner.v1"},
		{name: "same in both", path: "/mcp?agent=backend", headers: []string{"x-mailbox-agent", "backend"}, status: 200, agent: "backend", query: "agent=backend"},
		{name: "different in both", path: "/mcp?agent=frontend", headers: []string{"x-mailbox-agent", "backend"}, status: 400, msg: "name different agents"},
		{name: "bad header", path: "/mcp", headers: []string{"x-mailbox-agent", "Backend"}, status: 400, msg: "the x-mailbox-agent header is not a valid agent name: an agent name is 1 to 40"},
		{name: "too long header", path: "/mcp", headers: []string{"x-mailbox-agent", strings.Repeat("a", 41)}, status: 400, msg: "x-mailbox-agent header is not a valid agent name"},
		{name: "reserved dot", path: "/mcp", headers: []string{"x-mailbox-agent", ".state"}, status: 400, msg: "x-mailbox-agent header"},
		{name: "header twice", path: "/mcp", headers: []string{"x-mailbox-agent", "a", "x-mailbox-agent", "b"}, status: 400, msg: "send the x-mailbox-agent header once"},
		{name: "bad query", path: "/mcp?agent=a%2Fb", status: 400, msg: "?agent= on the URL is not a valid agent name"},
		{name: "query twice", path: "/mcp?agent=a&agent=b", status: 400, msg: "give ?agent= once"},
		{name: "REST header", path: "/v1/peek?format=both", headers: []string{"x-mailbox-agent", "backend"}, status: 200, agent: "backend", query: "format=both"},
		{name: "REST query is taken out", path: "/v1/peek?agent=frontend&format=both", status: 200, agent: "frontend", query: "format=both"},
		{name: "REST bad query", path: "/v1/peek?agent=No", status: 400, msg: "?agent= on the URL"},
		{name: "health ignores agent", path: "/health?agent=Not%20a%20name", status: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g = got{}
			method := http.MethodPost
			if strings.HasPrefix(tc.path, "/health") {
				method = http.MethodGet
			}
			r := httptest.NewRequest(method, "http://localhost"+tc.path, strings.NewReader(`{}`))
			r.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(tc.headers); i += 2 {
				r.Header.Add(tc.headers[i], tc.headers[i+1])
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.msg) {
				t.Fatalf("%d %s, want %d with %q", w.Code, w.Body, tc.status, tc.msg)
			}
			if tc.status != 200 {
				if g.called {
					t.Fatal("a refused request reached the handler")
				}
				return
			}
			if g.agent != tc.agent || g.query != tc.query {
				t.Fatalf("handler saw agent %q query %q, want %q %q", g.agent, g.query, tc.agent, tc.query)
			}
		})
	}
}

func TestCORSAllowsAgentHeader(t *testing.T) {
	h := New(Options{AllowedOrigins: []string{"https://app.example.test"}, MaxRequestBytes: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)}, http.NotFoundHandler())
	r := httptest.NewRequest(http.MethodOptions, "http://localhost/mcp", nil)
	r.Header.Set("Origin", "https://app.example.test")
	r.Header.Set("Access-Control-Request-Method", "POST")
	r.Header.Set("Access-Control-Request-Headers", "x-mailbox-agent")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if allowed := strings.ToLower(w.Header().Get("Access-Control-Allow-Headers")); !strings.Contains(allowed, "x-mailbox-agent") {
		t.Fatalf("preflight: %d, allowed headers %q", w.Code, allowed)
	}
}
