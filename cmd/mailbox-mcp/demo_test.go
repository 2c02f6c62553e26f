package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// The mcp-remote the demo prints is the one tests/clients installs and runs
// (package.json and its lockfile) and the one the README shows.
func TestDemoPinsTheTestedMCPRemote(t *testing.T) {
	version, ok := strings.CutPrefix(mcpRemote, "mcp-remote@")
	if !ok || version == "" {
		t.Fatalf("mcpRemote = %q, want mcp-remote@VERSION", mcpRemote)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	readJSON(t, "../../tests/clients/package.json", &pkg)
	if got := pkg.Dependencies["mcp-remote"]; got != version {
		t.Errorf("tests/clients/package.json has mcp-remote %q, the demo prints %s", got, mcpRemote)
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	readJSON(t, "../../tests/clients/package-lock.json", &lock)
	if got := lock.Packages["node_modules/mcp-remote"].Version; got != version {
		t.Errorf("tests/clients/package-lock.json locks mcp-remote %q, the demo prints %s", got, mcpRemote)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), `"args": ["-y", "`+mcpRemote+`", `) {
		t.Errorf("README.md's Claude Desktop snippet does not run %q with -y", mcpRemote)
	}
	if n := len(regexp.MustCompile(`mcp-remote@[0-9]`).FindAllString(string(readme), -1)); n != strings.Count(string(readme), mcpRemote) {
		t.Errorf("README.md names an mcp-remote version other than %s", mcpRemote)
	}
}

// What the demo prints for Claude Desktop is the README's form: npx -y and a
// pinned mcp-remote, so npx never waits for a prompt Claude Desktop does not
// show; likewise the shell line.
func TestDemoPrintsThePinnedSnippet(t *testing.T) {
	var b strings.Builder
	users := []demo.User{{Address: "alice@demo.test", Password: "pw"}}
	printDemo(&b, "http://127.0.0.1:1234/mcp", users, time.Millisecond)
	out := b.String()
	entry := desktopEntry(t, out)
	want := []string{"-y", mcpRemote, "http://127.0.0.1:1234/mcp", "--header", "x-imap-user:alice@demo.test", "--header", "x-imap-pass:pw"}
	if entry.Command != "npx" || strings.Join(entry.Args, " ") != strings.Join(want, " ") {
		t.Errorf("Claude Desktop entry: %s %q, want npx %q", entry.Command, entry.Args, want)
	}
	if !strings.Contains(out, `"command": "npx",`+"\n") {
		t.Errorf("command should come before args, as in the README:\n%s", out)
	}
	shell := "npx -y " + mcpRemote + " http://127.0.0.1:1234/mcp --header x-imap-user:alice@demo.test --header x-imap-pass:pw\n"
	if !strings.Contains(out, "or from a shell: "+shell) {
		t.Errorf("shell line is not %q:\n%s", shell, out)
	}
}

// A token made by `mailbox-mcp token` with ENCRYPTION_KEY opens in a demo
// run with the same key, and one sealed with ENCRYPTION_KEY_PREVIOUS too; a
// token of any other key does not.
func TestDemoOpensTokensOfTheConfiguredKey(t *testing.T) {
	const (
		current  = "1111111111111111111111111111111111111111111111111111111111111111"
		previous = "2222222222222222222222222222222222222222222222222222222222222222"
		other    = "3333333333333333333333333333333333333333333333333333333333333333"
	)
	d := startDemo(t, "ENCRYPTION_KEY="+current, "ENCRYPTION_KEY_PREVIOUS="+previous)
	u := d.users[0]
	c := mailtest.MCPClient(t, d.url, nil, "")
	for _, tt := range []struct {
		key    string
		opens  bool
		reason string
	}{
		{current, true, "ENCRYPTION_KEY"},
		{previous, true, "ENCRYPTION_KEY_PREVIOUS"},
		{other, false, "another key"},
	} {
		t.Run("sealed_with_"+strings.ReplaceAll(tt.reason, " ", "_"), func(t *testing.T) {
			t.Setenv("ENCRYPTION_KEY", tt.key)
			var out, errb strings.Builder
			if code := run([]string{"token", "--user", u.Address}, strings.NewReader(u.Password+"\n"), &out, &errb); code != exitOK {
				t.Fatalf("token: exit %d: %s", code, errb.String())
			}
			res := mailtest.Call(t, c, "imap_list_folders", map[string]any{"credentials": strings.TrimSpace(out.String())})
			if !tt.opens {
				if !res.IsError {
					t.Fatalf("a token of %s opened: %s", tt.reason, mailtest.Text(res))
				}
				return
			}
			var got struct {
				Folders []struct {
					Name string `json:"name"`
				} `json:"folders"`
			}
			mailtest.Decode(t, res, &got)
			if len(got.Folders) == 0 || got.Folders[0].Name != "INBOX" {
				t.Fatalf("imap_list_folders with a token of %s: %+v", tt.reason, got)
			}
		})
	}
}

// Without a key the demo still runs (an ephemeral key); a set but invalid
// one stops it with status 2 naming the variable, as serve does.
func TestDemoRefusesAnInvalidKey(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		want string
	}{
		{[]string{"ENCRYPTION_KEY=" + key[:63]}, "ENCRYPTION_KEY: expected exactly 64 hex characters, got 63"},
		{[]string{"ENCRYPTION_KEY_PREVIOUS=" + key[:62] + "zz"}, "ENCRYPTION_KEY_PREVIOUS: expected 64 hex characters"},
		{[]string{"ENCRYPTION_KEY=" + key, "ENCRYPTION_KEY_PREVIOUS=" + key}, "ENCRYPTION_KEY_PREVIOUS: is the same as ENCRYPTION_KEY"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := command(ctx, tt.env, "demo", "--port", strconv.Itoa(freePort(t))).CombinedOutput()
		cancel()
		if ee, ok := err.(interface{ ExitCode() int }); !ok || ee.ExitCode() != exitConfig || !strings.Contains(string(out), tt.want) {
			t.Errorf("%v: exit %v, want status 2 and %q; output:\n%s", tt.env, err, tt.want, out)
		}
	}
	d := startDemo(t)
	res := mailtest.Call(t, mailtest.MCPClient(t, d.url, nil, ""), "imap_list_folders", map[string]any{})
	if !res.IsError || !strings.Contains(mailtest.Text(res), "x-imap-user") {
		t.Errorf("a demo without a key should run and ask for credentials: %s", mailtest.Text(res))
	}
}

type runningDemo struct {
	url   string
	users []demo.User
}

// startDemo runs `mailbox-mcp demo` with env on a free port until the test
// ends, and returns what it printed: the URL and the demo logins.
func startDemo(t *testing.T, env ...string) runningDemo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := command(ctx, env, "demo", "--port", strconv.Itoa(freePort(t)))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		cancel()
	})
	var d runningDemo
	user := regexp.MustCompile(`^  user (\S+) +password (\S+)$`)
	sc := bufio.NewScanner(stdout)
	var printed []string
	for sc.Scan() {
		line := sc.Text()
		printed = append(printed, line)
		if u, ok := strings.CutPrefix(line, "MCP URL: "); ok {
			d.url = u
		}
		if m := user.FindStringSubmatch(line); m != nil {
			d.users = append(d.users, demo.User{Address: m[1], Password: m[2]})
		}
		if strings.HasPrefix(line, "Press Ctrl-C") {
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if d.url == "" || len(d.users) == 0 {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		t.Fatalf("demo printed no URL or logins:\n%s\nstderr:\n%s", strings.Join(printed, "\n"), stderr.String())
	}
	return d
}

// desktopEntry extracts the Claude Desktop snippet the demo printed.
func desktopEntry(t *testing.T, out string) stdioServer {
	t.Helper()
	_, rest, ok := strings.Cut(out, "Claude Desktop (claude_desktop_config.json), through mcp-remote:\n")
	if !ok {
		t.Fatalf("no Claude Desktop snippet in:\n%s", out)
	}
	var s struct {
		MCPServers map[string]stdioServer `json:"mcpServers"`
	}
	if err := json.NewDecoder(strings.NewReader(rest)).Decode(&s); err != nil {
		t.Fatalf("Claude Desktop snippet is not JSON: %v\n%s", err, rest)
	}
	return s.MCPServers["mailbox"]
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
