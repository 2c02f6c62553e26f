package tests

// The caller's agent name end to end (a real gateway on Dovecot): named by
// the x-mailbox-agent header, ?agent= on the MCP URL, or sealed in a
// token; a token's agent is binding; a bad name is a 400 naming where it
// came from; and with a name, imap_wait_for_email, imap_peek_inbox and
// imap_check_inbox default to the agent's folder (created on first use),
// while an explicit folder still wins and AGENTS=off changes nothing.

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

const agentUser = "agentid@example.test"

// agentFolders is every folder under Agents, as a bare client LISTs them.
func agentFolders(t *testing.T, d *imapclient.Client) []string {
	t.Helper()
	list, err := d.List("", "Agents*", nil).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range list {
		// Agents/․state is the gateway's own (status lines and last
		// calls on a server without METADATA), not an agent's.
		if m.Mailbox != "Agents" && !strings.Contains(m.Mailbox, "․state") {
			out = append(out, m.Mailbox)
		}
	}
	slices.Sort(out)
	return out
}

// agentFolderName is Agents<delim>name on this server.
func agentFolderName(t *testing.T, d *imapclient.Client, name string) string {
	t.Helper()
	list, err := d.List("", "", nil).Collect()
	if err != nil || len(list) != 1 {
		t.Fatalf("LIST \"\" \"\": %v %v", list, err)
	}
	return "Agents" + string(list[0].Delim) + name
}

type peekOut struct {
	Folder       string `json:"folder"`
	Total        uint32 `json:"total"`
	Unread       uint32 `json:"unread"`
	NextSinceUID uint32 `json:"next_since_uid"`
	NextCursor   string `json:"next_cursor"`
}

func peekAs(t *testing.T, url string, headers map[string]string, args map[string]any) peekOut {
	t.Helper()
	var p peekOut
	mailtest.Decode(t, mailtest.Call(t, mailtest.MCPClient(t, url, headers, ""), "imap_peek_inbox", args), &p)
	return p
}

// agentRawMCP posts one tools/list request to url and returns status and body.
func agentRawMCP(t *testing.T, target string, headers map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
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

func plusHeaders(h map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestAgentIdentity(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{agentUser: "agentpw"}})
	g := startGateway(t, s)
	d := direct(t, s, agentUser)
	login := userHeaders(s, agentUser)
	frontend, backend, qa := agentFolderName(t, d, "frontend"), agentFolderName(t, d, "backend"), agentFolderName(t, d, "qa")
	if got := agentFolders(t, d); len(got) != 0 {
		t.Fatalf("agent folders before any call: %v", got)
	}

	t.Run("header: peek defaults to the agent's folder, created on first use", func(t *testing.T) {
		p := peekAs(t, g.URL, plusHeaders(login, "x-mailbox-agent", "frontend"), map[string]any{})
		if p.Folder != frontend || p.Total != 0 {
			t.Fatalf("peek %+v, want folder %s, empty", p, frontend)
		}
		if got := agentFolders(t, d); !slices.Equal(got, []string{frontend}) {
			t.Fatalf("LIST after the first peek: %v", got)
		}
	})

	t.Run("a message appended by another client is seen by peek, wait and check", func(t *testing.T) {
		h := plusHeaders(login, "x-mailbox-agent", "frontend")
		appendMsg(t, d, frontend, "from backend: API ready")
		p := peekAs(t, g.URL, h, map[string]any{})
		if p.Folder != frontend || p.Total != 1 || p.Unread != 1 || p.NextSinceUID == 0 {
			t.Fatalf("peek after APPEND: %+v", p)
		}
		uid := appendMsg(t, d, frontend, "from qa: tests green")
		c := mailtest.MCPClient(t, g.URL, h, "")
		var w struct {
			Folder   string `json:"folder"`
			Messages []struct {
				UID     uint32 `json:"uid"`
				Subject string `json:"subject"`
			} `json:"messages"`
		}
		mailtest.Decode(t, mailtest.Call(t, c, "imap_wait_for_email", map[string]any{"since_uid": p.NextSinceUID, "timeout_s": 5}), &w)
		if w.Folder != frontend || len(w.Messages) != 1 || w.Messages[0].UID != uint32(uid) {
			t.Fatalf("wait: %+v", w)
		}
		var ck struct {
			Folder   string `json:"folder"`
			Messages []struct {
				Subject string `json:"subject"`
			} `json:"messages"`
		}
		mailtest.Decode(t, mailtest.Call(t, c, "imap_check_inbox", map[string]any{}), &ck)
		if ck.Folder != frontend || len(ck.Messages) != 2 || ck.Messages[0].Subject != "from backend: API ready" {
			t.Fatalf("check: %+v", ck)
		}
		if p := peekAs(t, g.URL, h, map[string]any{}); p.Unread != 0 || p.Total != 2 {
			t.Fatalf("peek after check: %+v", p)
		}
	})

	t.Run("an explicit folder still wins; no agent means INBOX", func(t *testing.T) {
		if p := peekAs(t, g.URL, plusHeaders(login, "x-mailbox-agent", "frontend"), map[string]any{"folder": "INBOX"}); p.Folder != "INBOX" {
			t.Fatalf("explicit folder: %+v", p)
		}
		if p := peekAs(t, g.URL, login, map[string]any{}); p.Folder != "INBOX" {
			t.Fatalf("no agent: %+v", p)
		}
	})

	t.Run("?agent= on the MCP URL, with header credentials and with a token", func(t *testing.T) {
		if p := peekAs(t, g.URL+"?agent=frontend", login, map[string]any{}); p.Folder != frontend {
			t.Fatalf("?agent= with headers: %+v", p)
		}
		var tok struct{ Token string }
		mailtest.Decode(t, mailtest.Call(t, mailtest.MCPClient(t, g.URL, nil, ""), "imap_encrypt_credentials",
			map[string]any{"user": agentUser, "password": "agentpw"}), &tok)
		if p := peekAs(t, g.URL+"?agent=backend", map[string]string{"x-mailbox-token": tok.Token}, map[string]any{}); p.Folder != backend {
			t.Fatalf("?agent= with a token: %+v", p)
		}
		if got := agentFolders(t, d); !slices.Equal(got, []string{backend, frontend}) {
			t.Fatalf("LIST: %v", got)
		}
	})

	t.Run("a token made for an agent acts as it, and only as it", func(t *testing.T) {
		var tok struct {
			Token, Agent string
		}
		mailtest.Decode(t, mailtest.Call(t, mailtest.MCPClient(t, g.URL, nil, ""), "imap_encrypt_credentials",
			map[string]any{"user": agentUser, "password": "agentpw", "agent": "qa"}), &tok)
		if tok.Agent != "qa" {
			t.Fatalf("result agent %q", tok.Agent)
		}
		th := map[string]string{"x-mailbox-token": tok.Token}
		if p := peekAs(t, g.URL, th, map[string]any{}); p.Folder != qa {
			t.Fatalf("token agent: %+v", p)
		}
		// the same name again is fine
		if p := peekAs(t, g.URL+"?agent=qa", plusHeaders(th, "x-mailbox-agent", "qa"), map[string]any{}); p.Folder != qa {
			t.Fatalf("token agent repeated: %+v", p)
		}
		// another name, by header, by URL or with the token as an argument
		for _, tc := range []struct {
			url     string
			headers map[string]string
			args    map[string]any
		}{
			{g.URL, plusHeaders(th, "x-mailbox-agent", "frontend"), map[string]any{}},
			{g.URL + "?agent=frontend", th, map[string]any{}},
			{g.URL, plusHeaders(login, "x-mailbox-agent", "frontend"), map[string]any{"credentials": tok.Token}},
		} {
			res := mailtest.Call(t, mailtest.MCPClient(t, tc.url, tc.headers, ""), "imap_peek_inbox", tc.args)
			if text := mailtest.Text(res); !res.IsError || !strings.Contains(text, "the credentials token was made for agent qa, and the request names another") {
				t.Fatalf("mismatch accepted or unclear: %s", text)
			}
		}
		// a bad agent name is not sealed
		res := mailtest.Call(t, mailtest.MCPClient(t, g.URL, nil, ""), "imap_encrypt_credentials",
			map[string]any{"user": agentUser, "password": "agentpw", "agent": "QA Team"})
		if text := mailtest.Text(res); !res.IsError || !strings.Contains(text, "agent is not a valid agent name: an agent name is 1 to 40") {
			t.Fatalf("bad agent sealed or unclear: %s", text)
		}
	})

	t.Run("invalid names are a 400 that names where they came from", func(t *testing.T) {
		for _, tc := range []struct {
			query   string
			headers map[string]string
			want    string
		}{
			{"", plusHeaders(login, "x-mailbox-agent", "Front End"), "the x-mailbox-agent header is not a valid agent name: an agent name is 1 to 40 lower-case letters"},
			{"", plusHeaders(login, "x-mailbox-agent", strings.Repeat("a", 41)), "the x-mailbox-agent header is not a valid agent name"},
			{"", plusHeaders(login, "x-mailbox-agent", ".state"), "the x-mailbox-agent header is not a valid agent name"},
			{"?agent=" + url.QueryEscape("../INBOX"), login, "?agent= on the URL is not a valid agent name"},
			{"?agent=frontend", plusHeaders(login, "x-mailbox-agent", "backend"), "name different agents"},
		} {
			status, body := agentRawMCP(t, g.URL+tc.query, tc.headers)
			if status != http.StatusBadRequest || !strings.Contains(body, tc.want) {
				t.Errorf("%s %v: %d %s, want 400 with %q", tc.query, tc.headers["x-mailbox-agent"], status, body, tc.want)
			}
		}
		if got := agentFolders(t, d); !slices.Equal(got, []string{backend, frontend, qa}) {
			t.Fatalf("a refused request changed the folders: %v", got)
		}
	})

	t.Run("REST mirror: header and ?agent=", func(t *testing.T) {
		var p peekOut
		restCall(t, g, http.MethodGet, "/v1/peek", plusHeaders(login, "x-mailbox-agent", "frontend"), nil).decode(t, &p)
		if p.Folder != frontend || p.Total != 2 {
			t.Fatalf("REST header: %+v", p)
		}
		p = peekOut{}
		restCall(t, g, http.MethodGet, "/v1/peek?agent=backend", login, nil).decode(t, &p)
		if p.Folder != backend {
			t.Fatalf("REST ?agent=: %+v", p)
		}
		a := restCall(t, g, http.MethodGet, "/v1/peek", plusHeaders(login, "x-mailbox-agent", "NO"), nil)
		if a.status != http.StatusBadRequest || !strings.Contains(string(a.body), "x-mailbox-agent header is not a valid agent name") {
			t.Fatalf("REST bad header: %d %s", a.status, a.body)
		}
	})
}

// With AGENTS=off an agent name changes nothing: INBOX stays the default
// and no folder is made.
func TestAgentIdentityAgentsOff(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{agentUser: "agentpw"}})
	g := startGateway(t, s, "AGENTS=off")
	d := direct(t, s, agentUser)
	if p := peekAs(t, g.URL, plusHeaders(userHeaders(s, agentUser), "x-mailbox-agent", "frontend"), map[string]any{}); p.Folder != "INBOX" {
		t.Fatalf("AGENTS=off: %+v", p)
	}
	if got := agentFolders(t, d); len(got) != 0 {
		t.Fatalf("AGENTS=off made folders: %v", got)
	}
}

// The CLI as an agent, end to end: peek and send --agent, agents, state.
// agents, state and send --agent need the agent_ tools.
func TestAgentCLI(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{agentUser: "agentpw"}})
	g := startGateway(t, s)
	d := direct(t, s, agentUser)
	bin := buildCLI(t)
	env := []string{"MAILBOX_URL=" + g.restBase(), "IMAP_USER=" + agentUser, "IMAP_PASS=agentpw"}
	frontend := agentFolderName(t, d, "frontend")

	r := runCLI(t, bin, append(env, "MAILBOX_AGENT=frontend"), "", "peek", "--json").want(t, exitNothingCLI)
	if !strings.Contains(r.stdout, `"folder":"`+frontend+`"`) {
		t.Fatalf("peek as frontend: %s", r.stdout)
	}
	runCLI(t, bin, env, "", "peek", "--agent", "Bad Name").want(t, 2)

	offered := toolNames(t, g.URL, userHeaders(s, agentUser))
	for _, tool := range []string{"agent_send", "agent_list", "agent_get_state", "agent_set_state"} {
		if _, ok := offered[tool]; !ok {
			if os.Getenv("AGENT_CLI_STRICT") != "" {
				t.Fatalf("%s is not offered", tool)
			}
			t.Skipf("%s is not offered yet: the rest of this test needs the agent_ tools", tool)
		}
	}
	runCLI(t, bin, env, "", "peek", "--agent", "backend").want(t, exitNothingCLI) // backend's folder, so agents lists it
	runCLI(t, bin, env, "", "send", "--agent", "backend", "--to", "frontend", "--subject", "API ready", "--text", "see /v2", "--tag", "handoff").want(t, 0)
	r = runCLI(t, bin, env, "", "check", "--agent", "frontend", "--json").want(t, 0)
	if !strings.Contains(r.stdout, "API ready") || !strings.Contains(r.stdout, `"folder":"`+frontend+`"`) {
		t.Fatalf("check as frontend: %s", r.stdout)
	}
	r = runCLI(t, bin, env, "", "agents", "--agent", "frontend").want(t, 0)
	if !strings.Contains(r.stdout, "backend") || !strings.Contains(r.stdout, "frontend") || !strings.Contains(r.stdout, "2 agents") {
		t.Fatalf("agents: %s", r.stdout)
	}
	runCLI(t, bin, env, "", "state", "set", "build/status", `{"ok":true,"n":3}`, "--agent", "backend").want(t, 0)
	r = runCLI(t, bin, env, "", "state", "get", "build/status", "--json").want(t, 0)
	if !strings.Contains(r.stdout, `"ok":true`) {
		t.Fatalf("state get: %s", r.stdout)
	}
	r = runCLI(t, bin, env, "", "state", "get", "--prefix", "build/", "--json").want(t, 0)
	if !strings.Contains(r.stdout, "build/status") {
		t.Fatalf("state get --prefix: %s", r.stdout)
	}
}

// exitNothingCLI is the client's exit status for "nothing found".
const exitNothingCLI = 1
