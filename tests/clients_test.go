package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// The real MCP clients users run, against the gateway on Dovecot/Postfix:
// mcp-remote (what Claude Desktop starts), the official TypeScript SDK over
// streamable HTTP (what an "http" entry of Claude Code or .mcp.json does),
// and mcp-go's Go client with two protocol versions. The configuration the
// Node clients run is read from the snippets of docs/clients.md.
//
// scripts/test.sh shows only the names of passing tests, so each checked
// fact is a subtest whose name carries the figures, e.g.
//   --- PASS: TestRealClients/mcp-remote/gets_the_20_newest_messages_uid_45..26

// Placeholders of the snippets in docs/clients.md.
const (
	snippetURL  = "https://mail-gateway.example.com/mcp"
	snippetUser = "you@example.com"
	snippetPass = "your-app-password"
)

// Every client must list these.
var readTools = []string{"imap_encrypt_credentials", "imap_list_folders", "imap_list_emails", "imap_search_emails", "imap_read_email",
	"imap_get_thread", "imap_peek_inbox", "imap_wait_for_email", "imap_check_inbox"}

// sendSubject is the subject tests/clients/lib.mjs sends with.
const sendSubject = "mailbox-mcp client test: sent through mcp-remote"

const clientSeed = 45 // messages seeded per client user

// clientsDir is tests/clients, with its npm packages installed.
func clientsDir(t *testing.T) string {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	for _, bin := range []string{"node", "npm", "npx"} {
		if _, err := exec.LookPath(bin); err != nil {
			skip("%s not found: the real-client tests need Node.js 20.18+ with npm", bin)
		}
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		skip("node --version: %v", err)
	}
	var major, minor int
	fmt.Sscanf(strings.TrimSpace(string(out)), "v%d.%d", &major, &minor)
	if major < 20 || major == 20 && minor < 18 {
		skip("node %s is too old: mcp-remote needs Node.js 20.18 or newer", strings.TrimSpace(string(out)))
	}
	dir, err := filepath.Abs("clients")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "mcp-remote", "package.json")); err != nil {
		skip("tests/clients has no node_modules: run `npm ci` there (scripts/test.sh does)")
	}
	return dir
}

// snippets returns the fenced code blocks of docs/clients.md that follow a
// "<!-- snippet: NAME -->" line, by name.
func snippets(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?ms)^<!-- snippet: ([a-z-]+) -->\\n```[a-z]*\\n(.*?)^```$")
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	for _, name := range []string{"claude-code", "mcp-json", "claude-desktop"} {
		if out[name] == "" {
			t.Fatalf("docs/clients.md has no snippet %q", name)
		}
	}
	return out
}

// fill puts the test gateway and login in place of the placeholders.
func fill(s, url, user, pass string) string {
	return strings.NewReplacer(snippetURL, url, snippetUser, user, snippetPass, pass).Replace(s)
}

// serverEntry decodes a {"mcpServers": {"mailbox": ENTRY}} snippet.
func serverEntry(t *testing.T, snippet string) map[string]any {
	t.Helper()
	var cfg struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(snippet), &cfg); err != nil {
		t.Fatalf("snippet is not valid JSON: %v\n%s", err, snippet)
	}
	e, ok := cfg.MCPServers["mailbox"]
	if !ok || len(cfg.MCPServers) != 1 {
		t.Fatalf("snippet must define exactly the server \"mailbox\": %s", snippet)
	}
	return e
}

// shellWords splits a one-line shell command with '…' and "…" quoting.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range strings.TrimSpace(s) {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case r == '\\' || r == '$' || r == '`' || r == '\n':
			t.Fatalf("snippet uses shell syntax this parser does not know (%q): %s", r, s)
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %s", s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// claudeAddEntry turns `claude mcp add --transport http NAME URL --header
// "K: V"...` into the .mcp.json entry Claude Code writes for it.
func claudeAddEntry(t *testing.T, cmd string) map[string]any {
	t.Helper()
	w := shellWords(t, cmd)
	if len(w) < 3 || w[0] != "claude" || w[1] != "mcp" || w[2] != "add" {
		t.Fatalf("not a `claude mcp add` command: %s", cmd)
	}
	entry := map[string]any{}
	headers := map[string]any{}
	var pos []string
	for i := 3; i < len(w); i++ {
		switch w[i] {
		case "--transport", "-t":
			i++
			entry["type"] = w[i]
		case "--header", "-H":
			i++
			k, v, ok := strings.Cut(w[i], ":")
			if !ok {
				t.Fatalf("header %q has no colon", w[i])
			}
			headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
		default:
			if strings.HasPrefix(w[i], "-") {
				t.Fatalf("unexpected option %s in %s", w[i], cmd)
			}
			pos = append(pos, w[i])
		}
	}
	if len(pos) != 2 || pos[0] != "mailbox" {
		t.Fatalf("want NAME=mailbox and URL, got %v", pos)
	}
	entry["url"] = pos[1]
	entry["headers"] = headers
	return entry
}

// runNode runs a script of tests/clients with input as JSON on stdin and
// decodes its JSON output into out. mcp-remote and npm get a private HOME,
// and npm is offline: npx must use the locked, installed mcp-remote.
func runNode(t *testing.T, dir, script string, input any, out any) {
	t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(os.Environ(),
		"HOME="+home,
		"MCP_REMOTE_CONFIG_DIR="+filepath.Join(home, "mcp-auth"),
		"npm_config_cache="+filepath.Join(home, "npm-cache"),
		"npm_config_offline=true",
		"npm_config_update_notifier=false",
		"NO_UPDATE_NOTIFIER=1",
	)
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	if err != nil {
		t.Fatalf("node %s: %v\nstderr:\n%s", script, err, tail(stderr.String(), 6000))
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("node %s printed no JSON result (%v): %s\nstderr:\n%s", script, err, tail(stdout.String(), 2000), tail(stderr.String(), 4000))
	}
	t.Logf("node %s took %v", script, time.Since(start).Round(time.Millisecond))
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// newestMessage is what Dovecot says about one of the newest messages.
type newestMessage struct {
	UID       uint32
	Subject   string
	MessageID string
}

// newest20 asks Dovecot directly for the 20 newest messages of user's INBOX,
// newest first.
func newest20(t *testing.T, s *mailtest.Stack, user string) []newestMessage {
	t.Helper()
	d := direct(t, s, user)
	uids := allUIDs(t, d, "INBOX", nil)
	if len(uids) < 20 {
		t.Fatalf("%s has only %d messages", user, len(uids))
	}
	uids = uids[len(uids)-20:]
	msgs, err := d.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, Envelope: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	byUID := map[imap.UID]*imap.Envelope{}
	for _, m := range msgs {
		byUID[m.UID] = m.Envelope
	}
	var out []newestMessage
	for i := len(uids) - 1; i >= 0; i-- {
		env := byUID[uids[i]]
		if env == nil {
			t.Fatalf("no envelope for uid %d", uids[i])
		}
		out = append(out, newestMessage{UID: uint32(uids[i]), Subject: env.Subject, MessageID: env.MessageID})
	}
	return out
}

func uidRange(want []newestMessage) string {
	return fmt.Sprintf("uid_%d..%d", want[0].UID, want[len(want)-1].UID)
}

// checkPage asserts that a listing is exactly want, in order.
func checkPage(t *testing.T, page mailbox.Page, want []newestMessage) {
	t.Helper()
	if len(page.Messages) != len(want) {
		t.Fatalf("got %d messages, want %d", len(page.Messages), len(want))
	}
	for i, m := range page.Messages {
		if m.UID != want[i].UID || m.Subject != want[i].Subject {
			t.Errorf("message %d: uid %d %q, Dovecot has uid %d %q", i, m.UID, m.Subject, want[i].UID, want[i].Subject)
		}
	}
	if page.Total != clientSeed || page.Folder != "INBOX" {
		t.Errorf("page header: folder %q total %d, want INBOX %d", page.Folder, page.Total, clientSeed)
	}
}

// checkRead asserts that a read result is the newest message.
func checkRead(t *testing.T, msg mailbox.Message, want newestMessage) {
	t.Helper()
	if msg.UID != want.UID || msg.Subject != want.Subject || msg.MessageID != want.MessageID {
		t.Errorf("read uid %d %q <%s>, Dovecot has uid %d %q <%s>", msg.UID, msg.Subject, msg.MessageID, want.UID, want.Subject, want.MessageID)
	}
	if msg.Flags.Seen {
		t.Errorf("reading marked the message \\Seen")
	}
	if msg.Text == "" && len(msg.Attachments) == 0 {
		t.Errorf("read returned neither text nor attachments: %+v", msg)
	}
}

func decodeJSON(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", tail(string(raw), 500), err)
	}
}

// hasReadTools asserts that names contains every read tool.
func hasReadTools(t *testing.T, names []string) {
	t.Helper()
	for _, want := range readTools {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
}

type toolResult struct {
	IsError    bool            `json:"isError"`
	Text       string          `json:"text"`
	Structured json.RawMessage `json:"structured"`
}

type remoteOutput struct {
	ProtocolVersion string `json:"protocolVersion"`
	ServerInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"serverInfo"`
	Tools []struct {
		Name        string         `json:"name"`
		Annotations map[string]any `json:"annotations"`
	} `json:"tools"`
	Calls []struct {
		Tool string         `json:"tool"`
		Args map[string]any `json:"args"`
		toolResult
	} `json:"calls"`
	Skipped []string `json:"skipped"`
}

type sdkSession struct {
	ProtocolVersion string      `json:"protocolVersion"`
	Tools           []string    `json:"tools"`
	List            toolResult  `json:"list"`
	Read            *toolResult `json:"read"`
}

type sdkOutput struct {
	Headers       sdkSession `json:"headers"`
	Token         sdkSession `json:"token"`
	NoCredentials toolResult `json:"noCredentials"`
}

func TestRealClients(t *testing.T) {
	dir := clientsDir(t)
	snip := snippets(t)

	users := map[string]string{
		"desktop@example.test": "desktoppw", // mcp-remote
		"code@example.test":    "codepw",    // TypeScript SDK
		"agent@example.test":   "agentpw",   // mcp-go
	}
	s := mailtest.StartT(t, mailtest.Options{Users: users})
	for u := range users {
		if err := s.Seed(u, clientSeed, "INBOX"); err != nil {
			t.Fatal(err)
		}
	}
	g := startGateway(t, s, "SMTP_HOST=127.0.0.1", "SMTP_PORT="+strconv.Itoa(s.SubmissionsPort), "SMTP_SECURITY=tls")

	t.Run("mcp-remote", func(t *testing.T) {
		const user = "desktop@example.test"
		want := newest20(t, s, user)
		entry := serverEntry(t, fill(snip["claude-desktop"], g.URL, user, users[user]))
		var out remoteOutput
		runNode(t, dir, "mcp-remote.mjs", map[string]any{"server": entry, "user": user, "password": users[user]}, &out)

		calls := map[string]toolResult{}
		for _, c := range out.Calls {
			calls[c.Tool] = c.toolResult
		}
		var names []string
		for _, tl := range out.Tools {
			names = append(names, tl.Name)
		}
		t.Logf("mcp-remote (protocol %s, server %s %s) lists %d tools: %v", out.ProtocolVersion, out.ServerInfo.Name, out.ServerInfo.Version, len(names), names)
		t.Run(fmt.Sprintf("lists_%d_tools", len(names)), func(t *testing.T) { hasReadTools(t, names) })

		t.Run("gets_the_20_newest_messages_"+uidRange(want), func(t *testing.T) {
			r, ok := calls["imap_list_emails"]
			if !ok || r.IsError {
				t.Fatalf("imap_list_emails not called or failed: %+v", r)
			}
			var page mailbox.Page
			decodeJSON(t, r.Structured, &page)
			checkPage(t, page, want)
		})
		t.Run(fmt.Sprintf("reads_one_message_uid_%d", want[0].UID), func(t *testing.T) {
			r, ok := calls["imap_read_email"]
			if !ok || r.IsError {
				t.Fatalf("imap_read_email not called or failed: %+v", r)
			}
			var msg mailbox.Message
			decodeJSON(t, r.Structured, &msg)
			checkRead(t, msg, want[0])
			t.Logf("mcp-remote read uid %d %q <%s>: %d chars of text", msg.UID, msg.Subject, msg.MessageID, len(msg.Text))
		})
		t.Run(fmt.Sprintf("calls_all_%d_tools", len(names)), func(t *testing.T) {
			for _, tl := range out.Tools {
				r, called := calls[tl.Name]
				ro, _ := tl.Annotations["readOnlyHint"].(bool)
				switch {
				case !called && ro:
					t.Errorf("read-only tool %s was not called", tl.Name)
				case !called:
					t.Logf("%s: skipped (changes something and has arguments the script does not know)", tl.Name)
				case r.IsError && slices.Contains(readTools, tl.Name):
					t.Errorf("%s failed: %s", tl.Name, r.Text)
				default:
					t.Logf("%s: isError=%v %s", tl.Name, r.IsError, strings.SplitN(r.Text, "\n", 2)[0])
				}
			}
			var folders struct {
				Folders []mailbox.Folder `json:"folders"`
			}
			decodeJSON(t, calls["imap_list_folders"].Structured, &folders)
			if len(folders.Folders) == 0 || folders.Folders[0].Name != "INBOX" || folders.Folders[0].Total != clientSeed {
				t.Errorf("imap_list_folders: %+v", folders.Folders)
			}
			var found mailbox.Page
			decodeJSON(t, calls["imap_search_emails"].Structured, &found)
			if !slices.ContainsFunc(found.Messages, func(m mailbox.Summary) bool { return m.UID == want[0].UID }) {
				t.Errorf("searching the newest subject %q did not find uid %d: %+v", want[0].Subject, want[0].UID, found.Messages)
			}
			var enc struct {
				Token    string `json:"token"`
				Verified bool   `json:"verified"`
				User     string `json:"user"`
			}
			decodeJSON(t, calls["imap_encrypt_credentials"].Structured, &enc)
			if enc.Token == "" || !enc.Verified || enc.User != user {
				t.Errorf("imap_encrypt_credentials: verified=%v user=%q token empty=%v", enc.Verified, enc.User, enc.Token == "")
			}
		})
		if r, ok := calls["smtp_send_email"]; ok {
			t.Run("sends_a_message_to_itself", func(t *testing.T) {
				if r.IsError {
					t.Fatalf("smtp_send_email failed: %s", r.Text)
				}
				if _, err := s.WaitMessages(user, "INBOX", clientSeed+1, 30*time.Second); err != nil {
					t.Fatalf("the message sent to %s did not arrive: %v", user, err)
				}
				got := newest20(t, s, user)[0]
				if got.Subject != sendSubject {
					t.Errorf("newest message is %q, want the one sent: %q", got.Subject, sendSubject)
				}
			})
		}
	})

	t.Run("typescript-sdk", func(t *testing.T) {
		const user = "code@example.test"
		want := newest20(t, s, user)
		entry := serverEntry(t, fill(snip["mcp-json"], g.URL, user, users[user]))
		if entry["type"] != "http" {
			t.Fatalf(".mcp.json snippet: type %v, want http", entry["type"])
		}
		t.Run("claude_mcp_add_makes_the_same_entry_as_mcp.json", func(t *testing.T) {
			fromCLI := claudeAddEntry(t, fill(snip["claude-code"], g.URL, user, users[user]))
			a, _ := json.Marshal(fromCLI)
			b, _ := json.Marshal(entry)
			if !bytes.Equal(a, b) {
				t.Errorf("`claude mcp add` snippet gives %s, the .mcp.json snippet %s", a, b)
			}
		})
		var out sdkOutput
		runNode(t, dir, "sdk.mjs", map[string]any{"server": entry, "user": user, "password": users[user]}, &out)
		for _, sess := range []struct {
			name string
			got  sdkSession
		}{{"headers", out.Headers}, {"token", out.Token}} {
			t.Logf("typescript-sdk with %s (protocol %s) lists %d tools: %v", sess.name, sess.got.ProtocolVersion, len(sess.got.Tools), sess.got.Tools)
			t.Run(fmt.Sprintf("with_%s_lists_%d_tools", sess.name, len(sess.got.Tools)), func(t *testing.T) {
				hasReadTools(t, sess.got.Tools)
			})
			t.Run(fmt.Sprintf("with_%s_gets_the_20_newest_messages_%s", sess.name, uidRange(want)), func(t *testing.T) {
				if sess.got.List.IsError {
					t.Fatalf("imap_list_emails failed: %s", sess.got.List.Text)
				}
				var page mailbox.Page
				decodeJSON(t, sess.got.List.Structured, &page)
				checkPage(t, page, want)
				if sess.got.Read == nil || sess.got.Read.IsError {
					t.Fatalf("imap_read_email failed: %+v", sess.got.Read)
				}
				var msg mailbox.Message
				decodeJSON(t, sess.got.Read.Structured, &msg)
				checkRead(t, msg, want[0])
			})
		}
		t.Run("without_headers_or_token_gets_a_clear_error", func(t *testing.T) {
			if !out.NoCredentials.IsError || !strings.Contains(out.NoCredentials.Text, "x-imap-user") {
				t.Errorf("want a tool error naming the headers, got %+v", out.NoCredentials)
			}
		})
	})

	t.Run("mcp-go", func(t *testing.T) {
		const user = "agent@example.test"
		want := newest20(t, s, user)
		for _, proto := range []struct{ name, version string }{
			{"protocol_" + mcp.ProtocolVersion20250618, mcp.ProtocolVersion20250618},
			{"default_protocol", ""},
		} {
			c := mailtest.MCPClient(t, g.URL, userHeaders(s, user), proto.version)
			res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatalf("%s: tools/list: %v", proto.name, err)
			}
			var names []string
			for _, tl := range res.Tools {
				names = append(names, tl.Name)
			}
			t.Logf("mcp-go with %s lists %d tools: %v", proto.name, len(names), names)
			t.Run(fmt.Sprintf("%s_lists_%d_tools", proto.name, len(names)), func(t *testing.T) { hasReadTools(t, names) })
			t.Run(fmt.Sprintf("%s_gets_the_20_newest_messages_%s", proto.name, uidRange(want)), func(t *testing.T) {
				var page mailbox.Page
				mailtest.Decode(t, mailtest.Call(t, c, "imap_list_emails", map[string]any{"limit": 20}), &page)
				checkPage(t, page, want)
			})
		}
	})
}

// The README carries copies of the client snippets: they must be the ones
// the tests run, and the Claude Desktop snippet must pin the mcp-remote
// version of the lockfile.
func TestClientSnippetsInStep(t *testing.T) {
	snip := snippets(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"claude-code", "mcp-json", "claude-desktop"} {
		if !strings.Contains(string(readme), snip[name]) {
			t.Errorf("README.md lacks the %s snippet of docs/clients.md, verbatim:\n%s", name, snip[name])
		}
	}
	lock, err := os.ReadFile("clients/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(lock, &l); err != nil {
		t.Fatal(err)
	}
	v := l.Packages["node_modules/mcp-remote"].Version
	if v == "" {
		t.Fatal("package-lock.json does not lock mcp-remote")
	}
	if !strings.Contains(snip["claude-desktop"], `"mcp-remote@`+v+`"`) {
		t.Errorf("the Claude Desktop snippet must pin mcp-remote@%s (the tested version): %s", v, snip["claude-desktop"])
	}
}
