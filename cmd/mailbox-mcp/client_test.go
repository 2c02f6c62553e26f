package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// The client commands against `mailbox-mcp demo` (a real gateway on the
// embedded mail server), run as a separate process so that exit codes,
// stdout and stderr are what a shell sees.

type cliRun struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, env []string, stdin string, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := command(ctx, env, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := cliRun{stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%v: %v", args, err)
	}
	return r
}

func (r cliRun) want(t *testing.T, code int) cliRun {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

func TestCLIAgainstDemo(t *testing.T) {
	d := startDemo(t, "ENCRYPTION_KEY="+key)
	alice, bob := d.users[0], d.users[1]
	as := func(u demo.User) []string {
		return []string{"MAILBOX_URL=" + d.url, "IMAP_USER=" + u.Address, "IMAP_PASS=" + u.Password}
	}
	aliceEnv, bobEnv := as(alice), as(bob)

	var page struct {
		Total    int
		Messages []struct {
			UID     uint32
			Subject string
		}
	}
	t.Run("list: text, then --json", func(t *testing.T) {
		r := runCLI(t, aliceEnv, "", "list", "--limit", "3").want(t, exitFound)
		if !strings.HasPrefix(r.stdout, "INBOX: ") || strings.Count(r.stdout, "- uid ") != 3 {
			t.Fatalf("text output:\n%s", r.stdout)
		}
		r = runCLI(t, aliceEnv, "", "list", "--limit", "3", "--json").want(t, exitFound)
		if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Messages) != 3 || page.Total < 3 {
			t.Fatalf("--json output (%v):\n%s", err, r.stdout)
		}
	})
	t.Run("list with nothing found exits 1", func(t *testing.T) {
		r := runCLI(t, aliceEnv, "", "list", "--subject", "no such subject anywhere").want(t, exitNothing)
		if !strings.HasPrefix(r.stdout, "0 messages") {
			t.Fatalf("output:\n%s", r.stdout)
		}
	})
	t.Run("read, flags before or after the UID", func(t *testing.T) {
		m := page.Messages[0]
		for _, args := range [][]string{
			{"read", strconv.Itoa(int(m.UID)), "--folder", "INBOX"},
			{"read", "--max-chars", "40", strconv.Itoa(int(m.UID))},
		} {
			r := runCLI(t, aliceEnv, "", args...).want(t, exitFound)
			if !strings.Contains(r.stdout, fmt.Sprintf("Message uid %d in INBOX", m.UID)) || !strings.Contains(r.stdout, "Subject: "+m.Subject) {
				t.Fatalf("%v:\n%s", args, r.stdout)
			}
		}
		r := runCLI(t, aliceEnv, "", "read", "999999").want(t, exitRefused)
		if !strings.Contains(r.stderr, "999999") || r.stdout != "" {
			t.Fatalf("unknown uid: stdout %q stderr %q", r.stdout, r.stderr)
		}
	})
	t.Run("usage errors exit 2", func(t *testing.T) {
		for _, args := range [][]string{
			{"read"}, {"read", "abc"}, {"read", "1", "2"}, {"list", "extra"}, {"list", "--bogus"}, {"list", "--limit", "many"},
		} {
			if r := runCLI(t, aliceEnv, "", args...); r.code != exitUsage || r.stdout != "" {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
			}
		}
		runCLI(t, []string{"MAILBOX_URL=ftp://example.com"}, "", "list").want(t, exitUsage)
		runCLI(t, []string{"MAILBOX_URL=" + d.url, "IMAP_USER=" + alice.Address}, "", "list").want(t, exitUsage)
	})
	t.Run("refusals exit 4", func(t *testing.T) {
		r := runCLI(t, []string{"MAILBOX_URL=" + d.url}, "", "list").want(t, exitRefused)
		if !strings.Contains(r.stderr, "no mailbox credentials") || !strings.Contains(r.stderr, "set MAILBOX_TOKEN, or IMAP_USER and IMAP_PASS") {
			t.Fatalf("no credentials: %s", r.stderr)
		}
		r = runCLI(t, []string{"MAILBOX_URL=" + d.url, "IMAP_USER=" + alice.Address, "IMAP_PASS=wrong"}, "", "list").want(t, exitRefused)
		if !strings.Contains(r.stderr, "authentication failed") {
			t.Fatalf("wrong password: %s", r.stderr)
		}
		r = runCLI(t, aliceEnv, "", "list", "--limit", "0").want(t, exitRefused)
		if !strings.Contains(r.stderr, "limit must be between 1 and 100 (got 0)") {
			t.Fatalf("bad argument: %s", r.stderr)
		}
	})
	t.Run("MAILBOX_TOKEN", func(t *testing.T) {
		k, _ := hex.DecodeString(key)
		sealer, err := credentials.NewSealer(k)
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := sealer.Seal(credentials.New(alice.Address, alice.Password))
		r := runCLI(t, []string{"MAILBOX_URL=" + d.url, "MAILBOX_TOKEN=" + tok}, "", "list", "--limit", "1", "--json").want(t, exitFound)
		var p struct{ Total int }
		if json.Unmarshal([]byte(r.stdout), &p) != nil || p.Total != page.Total {
			t.Fatalf("token list: %s (alice has %d)", r.stdout, page.Total)
		}
	})
	t.Run("unreachable gateway exits 3", func(t *testing.T) {
		r := runCLI(t, aliceEnv, "", "list", "--url", "http://127.0.0.1:"+strconv.Itoa(freePort(t))).want(t, exitUnavailable)
		if !strings.Contains(r.stderr, "cannot reach the gateway") {
			t.Fatalf("stderr: %s", r.stderr)
		}
	})
	t.Run("send with tags, then bob lists by tag", func(t *testing.T) {
		subject := fmt.Sprintf("cli send %d", time.Now().UnixNano())
		tag := fmt.Sprintf("cli%d", time.Now().UnixNano()%1000000)
		r := runCLI(t, aliceEnv, "body from standard input\n", "send", "--to", bob.Address, "--subject", subject, "--text", "-", "--tag", tag).want(t, exitFound)
		if !strings.Contains(r.stdout, subject) {
			t.Fatalf("send output:\n%s", r.stdout)
		}
		r = runCLI(t, bobEnv, "", "list", "--tag", tag, "--json").want(t, exitFound)
		var got struct {
			Messages []struct {
				Subject string
				Preview string
				Tags    []string
			}
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Messages) != 1 ||
			got.Messages[0].Subject != subject || !slices.Contains(got.Messages[0].Tags, tag) || !strings.Contains(got.Messages[0].Preview, "body from standard input") {
			t.Fatalf("bob's list by tag (%v):\n%s", err, r.stdout)
		}
	})
	t.Run("peek, check and wait", func(t *testing.T) {
		r := runCLI(t, bobEnv, "", "peek", "--json")
		if r.code == exitRefused && strings.Contains(r.stderr, "is not available on this gateway") {
			t.Skipf("the gateway has no peek yet: %s", strings.TrimSpace(r.stderr))
		}
		r.want(t, exitFound)
		var peek struct{ Unread int }
		if json.Unmarshal([]byte(r.stdout), &peek) != nil || peek.Unread == 0 {
			t.Fatalf("peek: %s", r.stdout)
		}
		// check takes every unread message; then peek and check find none.
		runCLI(t, bobEnv, "", "check", "--limit", "50").want(t, exitFound)
		for i := 0; i < 10 && runCLI(t, bobEnv, "", "check", "--limit", "50").code == exitFound; i++ {
		}
		runCLI(t, bobEnv, "", "peek").want(t, exitNothing)
		runCLI(t, bobEnv, "", "check").want(t, exitNothing)
		r = runCLI(t, bobEnv, "", "wait", "--timeout", "1", "--json").want(t, exitNothing)
		var w struct {
			TimedOut bool `json:"timed_out"`
		}
		if json.Unmarshal([]byte(r.stdout), &w) != nil || !w.TimedOut {
			t.Fatalf("wait: %s", r.stdout)
		}
	})
}

func TestCLIHelp(t *testing.T) {
	for _, name := range []string{"send", "peek", "check", "wait", "list", "read"} {
		r := runCLI(t, nil, "", name, "--help").want(t, exitOK)
		for _, want := range []string{"Usage: mailbox-mcp " + name, "Exit status:", "3  the gateway is unavailable", "MAILBOX_TOKEN", "-json"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s --help lacks %q:\n%s", name, want, r.stderr)
			}
		}
	}
	r := runCLI(t, nil, "", "--help").want(t, exitOK)
	if !strings.Contains(r.stdout, "mailbox-mcp read UID") {
		t.Errorf("usage does not list the client commands:\n%s", r.stdout)
	}
}

// 5xx answers exit 3 like an unreachable gateway; other 4xx exit 4; an
// answer that is not the mirror's is not taken for a result.
func TestCLIStatusToExitCode(t *testing.T) {
	status := 0
	body := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	defer srv.Close()
	tests := []struct {
		status int
		body   string
		code   int
		stderr string
	}{
		{502, `{"error":{"code":"unavailable","message":"cannot connect to the mail server"}}`, exitUnavailable, "cannot connect to the mail server"},
		{503, `{"error":"the gateway is serving too many requests; retry in a second"}`, exitUnavailable, "too many requests"},
		{504, `gateway timeout`, exitUnavailable, "504 Gateway Timeout"},
		{403, `{"error":"origin not allowed"}`, exitRefused, "origin not allowed"},
		{429, `{"error":{"code":"rate_limited","message":"rate limit reached"}}`, exitRefused, "rate limit reached"},
		{200, `<html>not a gateway</html>`, exitUnavailable, "did not answer like a mailbox-mcp gateway"},
	}
	for _, tt := range tests {
		status, body = tt.status, tt.body
		var out, errOut strings.Builder
		code := run([]string{"list", "--url", srv.URL}, strings.NewReader(""), &out, &errOut)
		if code != tt.code || !strings.Contains(errOut.String(), tt.stderr) {
			t.Errorf("%d %s: exit %d, stderr %q; want %d with %q", tt.status, tt.body, code, errOut.String(), tt.code, tt.stderr)
		}
	}
}

func TestCLIGatewayURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:3000":                "http://127.0.0.1:3000/v1/peek",
		"http://127.0.0.1:3000/":               "http://127.0.0.1:3000/v1/peek",
		"http://127.0.0.1:3000/mcp":            "http://127.0.0.1:3000/v1/peek",
		"https://gw.example.com/mail/v1/":      "https://gw.example.com/mail/v1/peek",
		"https://gw.example.com/mail/mcp?x=1":  "https://gw.example.com/mail/v1/peek",
		" https://gw.example.com/mail/v1#frag": "https://gw.example.com/mail/v1/peek",
	} {
		got, err := gatewayURL(in, "/v1/peek")
		if err != nil || got != want {
			t.Errorf("gatewayURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:3000", "ftp://x", "http://"} {
		if _, err := gatewayURL(bad, "/v1/peek"); err == nil {
			t.Errorf("gatewayURL(%q) accepted", bad)
		}
	}
}

func TestCLIParseInterleaved(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	folder := fs.String("folder", "", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterleaved(fs, []string{"--json", "42", "--folder", "Sent", "--", "-7"})
	if err != nil || !slices.Equal(pos, []string{"42", "-7"}) || *folder != "Sent" || !*asJSON {
		t.Fatalf("positional %v, folder %q, json %v, err %v", pos, *folder, *asJSON, err)
	}
}

// TestCLIApproval: under APPROVAL=send, a send from a script (no
// terminal) prints the approval link and exits 5, sending nothing; on a
// terminal (a pseudo-terminal made by script(1)) the CLI shows what will
// be sent and asks: y sends (exit 0), n rejects (exit 1, nothing sent).
func TestCLIApproval(t *testing.T) {
	scriptCmd, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to make a terminal (util-linux)")
	}
	d := startDemo(t, "ENCRYPTION_KEY="+key, "APPROVAL=send")
	alice, bob := d.users[0], d.users[1]
	aliceEnv := []string{"MAILBOX_URL=" + d.url, "IMAP_USER=" + alice.Address, "IMAP_PASS=" + alice.Password}
	bobEnv := []string{"MAILBOX_URL=" + d.url, "IMAP_USER=" + bob.Address, "IMAP_PASS=" + bob.Password}
	received := func(subject string) bool {
		return runCLI(t, bobEnv, "", "list", "--subject", subject).code == exitFound
	}
	subject := fmt.Sprint("cli approval ", time.Now().UnixNano())
	r := runCLI(t, aliceEnv, "", "send", "--to", bob.Address, "--subject", subject, "--text", "hello").want(t, exitApproval)
	if !strings.Contains(r.stdout, "/approve/apl1.") || !strings.Contains(r.stdout, "browser") || received(subject) {
		t.Fatalf("without a terminal: %q (received %v)", r.stdout, received(subject))
	}
	// On a terminal (which an agent can fake with script(1) as easily as
	// this test does) the command still only prints the link: it holds
	// the mailbox's password, so an approval it gave would be the
	// agent's own.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	yes := fmt.Sprint("cli on a terminal ", time.Now().UnixNano())
	line := fmt.Sprintf("%q send --to %q --subject %q --text hello", os.Args[0], bob.Address, yes)
	cmd := exec.CommandContext(ctx, scriptCmd, "-q", "-e", "-c", line, "/dev/null")
	cmd.Env = append([]string{"MAILBOX_MCP_MAIN=1", "PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "TERM=dumb"}, aliceEnv...)
	cmd.Stdin = strings.NewReader("y\n")
	out := &mailtest.LogBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitApproval || !strings.Contains(out.String(), "/approve/apl1.") || strings.Contains(out.String(), "Approve?") {
		t.Fatalf("on a terminal: %v %q", err, out.String())
	}
	time.Sleep(time.Second)
	if received(yes) {
		t.Fatal("the command approved its own send")
	}
}
