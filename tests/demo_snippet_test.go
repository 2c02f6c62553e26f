package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// What `mailbox-mcp demo` prints for Claude Desktop works as printed: the
// built binary's demo is started, its claude_desktop_config.json entry is
// run unchanged (npx -y mcp-remote@VERSION URL --header ...) as a stdio MCP
// server by the TypeScript SDK's client, as Claude Desktop runs it, and so is
// the shell line it prints. npm is offline with an empty cache, so npx must
// find the pinned version in tests/clients/node_modules: the one the
// lockfile installs.
func TestDemoSnippetRunsAsPrinted(t *testing.T) {
	dir := clientsDir(t)
	bin := buildGateway(t)
	printed := startDemoBinary(t, bin)

	_, rest, ok := strings.Cut(printed, "Claude Desktop (claude_desktop_config.json), through mcp-remote:\n")
	if !ok {
		t.Fatalf("the demo printed no Claude Desktop snippet:\n%s", printed)
	}
	var raw json.RawMessage
	if err := json.NewDecoder(strings.NewReader(rest)).Decode(&raw); err != nil {
		t.Fatalf("the Claude Desktop snippet is not JSON (%v):\n%s", err, rest)
	}
	entry := serverEntry(t, string(raw))
	t.Logf("Claude Desktop entry as printed: %s", raw)
	_, shellLine, ok := strings.Cut(printed, "or from a shell: ")
	if !ok {
		t.Fatalf("the demo printed no shell line:\n%s", printed)
	}
	shellLine, _, _ = strings.Cut(shellLine, "\n")
	words := shellWords(t, shellLine)

	version := lockedMCPRemote(t)
	t.Run("pins_mcp-remote@"+version+"_with_-y", func(t *testing.T) {
		args, _ := entry["args"].([]any)
		if entry["command"] != "npx" || len(args) < 2 || args[0] != "-y" || args[1] != "mcp-remote@"+version {
			t.Errorf("entry %s, want command npx and args starting -y mcp-remote@%s", raw, version)
		}
		if len(words) < 3 || words[0] != "npx" || words[1] != "-y" || words[2] != "mcp-remote@"+version {
			t.Errorf("shell line %q, want npx -y mcp-remote@%s ...", shellLine, version)
		}
	})

	// npx with this environment cannot download: a version that is not
	// installed fails, so a run that works used the installed one.
	t.Run("npx_is_offline", func(t *testing.T) {
		home := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npx", "-y", "mcp-remote@0.0.1", "--help")
		cmd.Dir, cmd.Env = dir, offlineNPM(home)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "ENOTCACHED") {
			t.Errorf("npx fetched a package it does not have (%v):\n%s", err, tail(string(out), 2000))
		}
	})

	for _, run := range []struct {
		name   string
		server map[string]any
	}{
		{"claude_desktop_entry", entry},
		{"shell_line", map[string]any{"command": words[0], "args": words[1:]}},
	} {
		t.Run(run.name, func(t *testing.T) {
			var out struct {
				ServerInfo struct {
					Name string `json:"name"`
				} `json:"serverInfo"`
				Tools       []string   `json:"tools"`
				ListFolders toolResult `json:"listFolders"`
			}
			runNode(t, dir, "desktop-entry.mjs", map[string]any{"server": run.server}, &out)
			slices.Sort(out.Tools)
			want := slices.Sorted(slices.Values(defaultTools))
			t.Run(fmt.Sprintf("lists_%d_tools", len(out.Tools)), func(t *testing.T) {
				if !slices.Equal(out.Tools, want) {
					t.Errorf("tools/list through mcp-remote: %v, want %v", out.Tools, want)
				}
			})
			t.Run("imap_list_folders_succeeds", func(t *testing.T) {
				var res struct {
					Folders []struct {
						Name string `json:"name"`
					} `json:"folders"`
				}
				if out.ListFolders.IsError {
					t.Fatalf("imap_list_folders failed: %s", out.ListFolders.Text)
				}
				decodeJSON(t, out.ListFolders.Structured, &res)
				if len(res.Folders) == 0 || res.Folders[0].Name != "INBOX" {
					t.Errorf("imap_list_folders: %s", out.ListFolders.Structured)
				}
			})
		})
	}
}

// buildGateway builds cmd/mailbox-mcp into a temporary directory.
func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mailbox-mcp")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/mailbox-mcp")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startDemoBinary runs `bin demo` on a free port until the test ends and
// returns what it printed up to "Press Ctrl-C to stop.".
func startDemoBinary(t *testing.T, bin string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "demo", "--port", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr mailtest.LogBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-stopped:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-stopped
		}
		if t.Failed() {
			t.Logf("demo's log:\n%s", tail(stderr.String(), 6000))
		}
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var b strings.Builder
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the demo stopped before it was ready:\n%s\nstderr:\n%s", b.String(), stderr.String())
			}
			b.WriteString(line + "\n")
			if strings.HasPrefix(line, "Press Ctrl-C") {
				go func() {
					for range lines {
					}
				}()
				return b.String()
			}
		case <-timeout:
			t.Fatalf("the demo printed no complete instructions within a minute:\n%s\nstderr:\n%s", b.String(), stderr.String())
		}
	}
}

// lockedMCPRemote is the mcp-remote version tests/clients/package-lock.json
// installs.
func lockedMCPRemote(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("clients/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	v := l.Packages["node_modules/mcp-remote"].Version
	if v == "" {
		t.Fatal("package-lock.json does not lock mcp-remote")
	}
	return v
}

// offlineNPM is the environment runNode gives npm and mcp-remote: a private
// HOME and cache, and no network for npm.
func offlineNPM(home string) []string {
	return append(os.Environ(),
		"HOME="+home,
		"MCP_REMOTE_CONFIG_DIR="+filepath.Join(home, "mcp-auth"),
		"npm_config_cache="+filepath.Join(home, "npm-cache"),
		"npm_config_offline=true",
		"npm_config_update_notifier=false",
		"NO_UPDATE_NOTIFIER=1",
	)
}
