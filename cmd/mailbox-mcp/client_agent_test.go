package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// recorded is the request a client command made.
type recorded struct {
	method, path, agent string
	query               map[string][]string
	body                map[string]any
}

// recordingGateway answers every call like the mirror (format=both) and
// keeps what it received.
func recordingGateway(t *testing.T) (string, *recorded) {
	t.Helper()
	var got recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = recorded{method: r.Method, path: r.URL.Path, agent: r.Header.Get("X-Mailbox-Agent"), query: r.URL.Query()}
		delete(got.query, "format")
		if b, _ := io.ReadAll(r.Body); len(b) > 0 {
			json.Unmarshal(b, &got.body)
		}
		io.WriteString(w, `{"result":{},"text":"ok"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &got
}

// The agent options of the client commands: --agent (or MAILBOX_AGENT)
// sends x-mailbox-agent; send becomes agent_send's route and takes only
// its arguments; agents and state call their routes.
func TestCLIAgentArguments(t *testing.T) {
	url, got := recordingGateway(t)
	t.Setenv("MAILBOX_AGENT", "")
	tests := []struct {
		name  string
		env   string // MAILBOX_AGENT
		args  []string
		stdin string
		code  int
		want  recorded
		err   string // in stderr, for usage errors
	}{
		{name: "peek as an agent", args: []string{"peek", "--agent", "frontend"},
			want: recorded{method: "GET", path: "/v1/peek", agent: "frontend", query: map[string][]string{}}},
		{name: "MAILBOX_AGENT", env: "backend", args: []string{"wait", "--timeout", "5"},
			want: recorded{method: "GET", path: "/v1/wait", agent: "backend", query: map[string][]string{"timeout_s": {"5"}}}},
		{name: "--agent wins over MAILBOX_AGENT", env: "backend", args: []string{"check", "--agent=planner.v1"},
			want: recorded{method: "POST", path: "/v1/check-inbox", agent: "planner.v1", query: map[string][]string{}, body: map[string]any{}}},
		{name: "explicit folder still sent", args: []string{"peek", "--agent", "frontend", "--folder", "INBOX"},
			want: recorded{method: "GET", path: "/v1/peek", agent: "frontend", query: map[string][]string{"folder": {"INBOX"}}}},
		{name: "send as an agent is agent_send", args: []string{"send", "--agent", "backend", "--to", "frontend", "--to", "qa", "--subject", "API ready", "--text", "-", "--tag", "handoff", "--conversation", "c1"}, stdin: "see /v2",
			want: recorded{method: "POST", path: "/v1/agents/send", agent: "backend", query: map[string][]string{},
				body: map[string]any{"to": []any{"frontend", "qa"}, "subject": "API ready", "text": "see /v2", "tags": []any{"handoff"}, "conversation": "c1"}}},
		{name: "send as an agent to all", env: "backend", args: []string{"send", "--to", "*", "--text", "hi"},
			want: recorded{method: "POST", path: "/v1/agents/send", agent: "backend", query: map[string][]string{}, body: map[string]any{"to": []any{"*"}, "text": "hi"}}},
		{name: "--agent= sends email", env: "backend", args: []string{"send", "--agent=", "--to", "bob@example.test", "--text", "hi", "--cc", "c@example.test"},
			want: recorded{method: "POST", path: "/v1/send", query: map[string][]string{}, body: map[string]any{"to": []any{"bob@example.test"}, "text": "hi", "cc": []any{"c@example.test"}}}},
		{name: "email flags with --agent", args: []string{"send", "--agent", "backend", "--to", "x", "--cc", "y", "--html", "<p>"}, code: exitUsage, err: "--cc, --html is for email"},
		{name: "conversation without agent", args: []string{"send", "--to", "x@example.test", "--conversation", "c"}, code: exitUsage, err: "--conversation is for messages between agents"},
		{name: "bad agent name", args: []string{"peek", "--agent", "Backend"}, code: exitUsage, err: "--agent (or MAILBOX_AGENT) is not a valid agent name"},
		{name: "bad MAILBOX_AGENT", env: "no way", args: []string{"agents"}, code: exitUsage, err: "not a valid agent name"},
		{name: "agents", args: []string{"agents", "--agent", "qa"},
			want: recorded{method: "GET", path: "/v1/agents", agent: "qa", query: map[string][]string{}}},
		{name: "agents takes no argument", args: []string{"agents", "x"}, code: exitUsage, err: `unexpected argument "x"`},
		{name: "state get KEY", args: []string{"state", "get", "build/status"},
			want: recorded{method: "GET", path: "/v1/agents/state", query: map[string][]string{"key": {"build/status"}}}},
		{name: "state get --prefix", args: []string{"state", "get", "--prefix", "build/"},
			want: recorded{method: "GET", path: "/v1/agents/state", query: map[string][]string{"prefix": {"build/"}}}},
		{name: "state set KEY JSON", args: []string{"state", "set", "build", `{"ok":true,"n":12345678901234567890}`, "--agent", "ci"},
			want: recorded{method: "POST", path: "/v1/agents/state", agent: "ci", query: map[string][]string{},
				body: map[string]any{"key": "build", "value": map[string]any{"ok": true, "n": 12345678901234567890.0}}}},
		{name: "state set from stdin", args: []string{"state", "set", "k", "-"}, stdin: `"text"` + "\n",
			want: recorded{method: "POST", path: "/v1/agents/state", query: map[string][]string{}, body: map[string]any{"key": "k", "value": "text"}}},
		{name: "state set not JSON", args: []string{"state", "set", "k", "plain words"}, code: exitUsage, err: "the value must be JSON"},
		{name: "state set two values", args: []string{"state", "set", "k", "1 2"}, code: exitUsage, err: "the value must be JSON"},
		{name: "state get both", args: []string{"state", "get", "k", "--prefix", "p"}, code: exitUsage, err: "expected 'state get KEY' or 'state get --prefix P'"},
		{name: "state get nothing", args: []string{"state", "get"}, code: exitUsage, err: "expected 'state get KEY'"},
		{name: "state set short", args: []string{"state", "set", "k"}, code: exitUsage, err: "expected 'state set KEY JSON'"},
		{name: "state other", args: []string{"state", "del", "k"}, code: exitUsage, err: `expected get or set, got "del"`},
		{name: "state alone", args: []string{"state"}, code: exitUsage, err: "expected get or set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("MAILBOX_AGENT", tt.env)
			*got = recorded{}
			var out, errOut strings.Builder
			code := run(append(tt.args, "--url", url), strings.NewReader(tt.stdin), &out, &errOut)
			if code != tt.code || !strings.Contains(errOut.String(), tt.err) {
				t.Fatalf("exit %d, stderr %q; want %d with %q", code, errOut.String(), tt.code, tt.err)
			}
			if tt.code != exitOK {
				if got.method != "" {
					t.Fatalf("a usage error reached the gateway: %+v", *got)
				}
				return
			}
			if got.body == nil && tt.want.body != nil && len(tt.want.body) == 0 {
				got.body = map[string]any{}
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Fatalf("request\n%+v\nwant\n%+v", *got, tt.want)
			}
		})
	}
}

func TestCLIAgentHelp(t *testing.T) {
	for _, name := range []string{"send", "peek", "check", "wait", "agents", "state"} {
		var out, errOut strings.Builder
		if code := run([]string{name, "--help"}, strings.NewReader(""), &out, &errOut); code != exitOK {
			t.Fatalf("%s --help: exit %d", name, code)
		}
		if !strings.Contains(errOut.String(), "-agent") || !strings.Contains(errOut.String(), "MAILBOX_AGENT") {
			t.Errorf("%s --help does not mention --agent and MAILBOX_AGENT:\n%s", name, errOut.String())
		}
	}
	var out, errOut strings.Builder
	run([]string{"--help"}, strings.NewReader(""), &out, &errOut)
	for _, want := range []string{"mailbox-mcp agents", "state get KEY", "--agent NAME or MAILBOX_AGENT"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}

// mailbox-mcp token -agent seals the agent name; a bad name is refused
// before anything is read or sealed.
func TestTokenAgent(t *testing.T) {
	raw, _ := hex.DecodeString(key)
	sealer, _ := credentials.NewSealer(raw)
	cmd := command(context.Background(), []string{"ENCRYPTION_KEY=" + key}, "token", "-user", "alice@example.test", "-agent", "backend", "-access", "read")
	cmd.Stdin = strings.NewReader("pw\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	c, err := sealer.Open(strings.TrimSpace(string(out)))
	if err != nil || c.Agent != "backend" || c.User != "alice@example.test" || c.Scope.Level.String() != "read" {
		t.Fatalf("opened %v agent %q scope %v: %v", c, c.Agent, c.Scope, err)
	}
	cmd = command(context.Background(), []string{"ENCRYPTION_KEY=" + key}, "token", "-user", "alice@example.test", "--agent", "Back End")
	cmd.Stdin = strings.NewReader("pw\n")
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "-agent: an agent name is 1 to 40") || strings.Contains(string(b), "mbx1.") {
		t.Fatalf("bad agent: %v %s", err, b)
	}
}
