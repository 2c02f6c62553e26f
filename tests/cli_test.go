package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// The CLI client (mailbox-mcp send|peek|check|wait|list|read), built as a
// binary and run as a shell would, against a real gateway on Dovecot and
// Postfix: its output checked against Dovecot, its exit codes against the
// documented ones.

// buildCLI builds cmd/mailbox-mcp into a directory removed when t ends.
func buildCLI(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "mailbox-mcp")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../cmd/mailbox-mcp").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type cliResult struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, bin string, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errOut.String()}
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

func (r cliResult) want(t *testing.T, code int) cliResult {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

func (r cliResult) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("--json output is not JSON (%v):\n%s", err, r.stdout)
	}
}

const cliSeed = 25

func TestCLIAgainstGateway(t *testing.T) {
	bin := buildCLI(t)
	s := sendStack(t)
	if err := s.Seed(alice, cliSeed, "INBOX"); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, s, smtpEnv(s)...)
	as := func(user string) []string {
		return []string{"MAILBOX_URL=" + g.URL, "IMAP_USER=" + user, "IMAP_PASS=" + s.Users[user]}
	}
	aliceEnv, bobEnv := as(alice), as(mailtest.Bob)

	t.Run("exit 0: list and read match Dovecot", func(t *testing.T) {
		want := newest20(t, s, alice)
		r := runCLI(t, bin, aliceEnv, "", "list", "--limit", "5").want(t, 0)
		if !strings.HasPrefix(r.stdout, fmt.Sprintf("INBOX: %d messages,", cliSeed)) || !strings.Contains(r.stdout, fmt.Sprintf("- uid %d |", want[0].UID)) {
			t.Fatalf("text output:\n%s", r.stdout)
		}
		var page mailbox.Page
		runCLI(t, bin, aliceEnv, "", "list", "--limit", "100", "--json").want(t, 0).decode(t, &page)
		if len(page.Messages) != cliSeed {
			t.Fatalf("--json list has %d messages, Dovecot %d", len(page.Messages), cliSeed)
		}
		for i, m := range page.Messages[:len(want)] {
			if m.UID != want[i].UID || m.Subject != want[i].Subject {
				t.Errorf("message %d: uid %d %q, Dovecot has uid %d %q", i, m.UID, m.Subject, want[i].UID, want[i].Subject)
			}
		}
		var msg mailbox.Message
		runCLI(t, bin, aliceEnv, "", "read", strconv.Itoa(int(want[2].UID)), "--json").want(t, 0).decode(t, &msg)
		if msg.UID != want[2].UID || msg.MessageID != want[2].MessageID {
			t.Fatalf("read: uid %d <%s>, Dovecot has uid %d <%s>", msg.UID, msg.MessageID, want[2].UID, want[2].MessageID)
		}
	})

	t.Run("exit 1: nothing found", func(t *testing.T) {
		runCLI(t, bin, aliceEnv, "", "list", "--subject", "no such subject in this mailbox").want(t, 1)
	})

	t.Run("exit 2: usage", func(t *testing.T) {
		for _, args := range [][]string{{"read"}, {"read", "x"}, {"list", "--nope"}, {"check", "surplus"}} {
			if r := runCLI(t, bin, aliceEnv, "", args...); r.code != 2 || r.stdout != "" {
				t.Errorf("%v: exit %d, stdout %q", args, r.code, r.stdout)
			}
		}
	})

	t.Run("exit 3: unavailable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := ln.Addr().String()
		ln.Close()
		r := runCLI(t, bin, aliceEnv, "", "peek", "--url", "http://"+closed).want(t, 3)
		if !strings.Contains(r.stderr, "cannot reach the gateway at http://"+closed) {
			t.Fatalf("stderr: %s", r.stderr)
		}
		// A gateway that cannot reach its mail server answers 502: also 3.
		_, port, _ := net.SplitHostPort(closed)
		down := startGateway(t, s, "IMAP_PORT="+port)
		r = runCLI(t, bin, []string{"MAILBOX_URL=" + down.URL, "IMAP_USER=" + alice, "IMAP_PASS=" + s.Users[alice]}, "", "list").want(t, 3)
		if r.stderr == "" {
			t.Fatal("no reason on stderr")
		}
	})

	t.Run("exit 4: refused", func(t *testing.T) {
		r := runCLI(t, bin, []string{"MAILBOX_URL=" + g.URL, "IMAP_USER=" + alice, "IMAP_PASS=wrong"}, "", "list").want(t, 4)
		if !strings.Contains(r.stderr, "authentication failed") {
			t.Fatalf("stderr: %s", r.stderr)
		}
		runCLI(t, bin, aliceEnv, "", "read", "999999").want(t, 4)
	})

	var tagged string
	t.Run("send arrives at Dovecot with its tag", func(t *testing.T) {
		subject := fmt.Sprintf("CLI send %d", time.Now().UnixNano())
		var res struct {
			MessageID string `json:"message_id"`
		}
		runCLI(t, bin, aliceEnv, "sent by the CLI\n", "send", "--to", mailtest.Bob, "--subject", subject, "--text", "-", "--tag", "cli-test", "--json").want(t, 0).decode(t, &res)
		got := findByMessageID(t, direct(t, s, mailtest.Bob), "INBOX", res.MessageID)
		if got.hdr.Get("Subject") != subject || !strings.Contains(got.hdr.Get("X-Mailbox-Tags"), "cli-test") {
			t.Fatalf("delivered: Subject %q, X-Mailbox-Tags %q", got.hdr.Get("Subject"), got.hdr.Get("X-Mailbox-Tags"))
		}
		tagged = subject
	})

	t.Run("peek and check by tag: exit 0, then 1", func(t *testing.T) {
		requireTool(t, g, "imap_check_inbox")
		requireTool(t, g, "imap_peek_inbox")
		if tagged == "" {
			t.Skip("the send subtest failed")
		}
		var peek struct{ Unread int }
		runCLI(t, bin, bobEnv, "", "peek", "--tag", "cli-test", "--json").want(t, 0).decode(t, &peek)
		if peek.Unread != 1 {
			t.Fatalf("peek --tag cli-test: %d unread, want 1", peek.Unread)
		}
		var checked struct {
			Messages []struct {
				UID     uint32
				Subject string
			}
		}
		runCLI(t, bin, bobEnv, "", "check", "--tag", "cli-test", "--json").want(t, 0).decode(t, &checked)
		if len(checked.Messages) != 1 || checked.Messages[0].Subject != tagged {
			t.Fatalf("check: %+v, want %q", checked.Messages, tagged)
		}
		d := direct(t, s, mailtest.Bob)
		if _, err := d.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
			t.Fatal(err)
		}
		if !fetchStored(t, d, imap.UID(checked.Messages[0].UID)).has(imap.FlagSeen) {
			t.Fatal("the checked message is not \\Seen in Dovecot")
		}
		runCLI(t, bin, bobEnv, "", "check", "--tag", "cli-test").want(t, 1)
		runCLI(t, bin, bobEnv, "", "peek", "--tag", "cli-test").want(t, 1)
	})

	t.Run("wait: exit 1 on timeout, 0 when mail comes", func(t *testing.T) {
		requireTool(t, g, "imap_wait_for_email")
		var idle struct {
			TimedOut bool `json:"timed_out"`
		}
		runCLI(t, bin, bobEnv, "", "wait", "--timeout", "1", "--tag", "cli-nothing", "--json").want(t, 1).decode(t, &idle)
		if !idle.TimedOut {
			t.Fatal("timed_out is not true")
		}
		var peek struct {
			NextSinceUID uint32 `json:"next_since_uid"`
		}
		runCLI(t, bin, bobEnv, "", "peek", "--json").decode(t, &peek)
		subject := fmt.Sprintf("CLI wait %d", time.Now().UnixNano())
		done := make(chan cliResult, 1)
		go func() {
			done <- runCLI(t, bin, bobEnv, "", "wait", "--timeout", "60", "--tag", "cli-wait", "--since-uid", strconv.Itoa(int(peek.NextSinceUID)))
		}()
		time.Sleep(500 * time.Millisecond)
		runCLI(t, bin, aliceEnv, "", "send", "--to", mailtest.Bob, "--subject", subject, "--text", "wake up", "--tag", "cli-wait").want(t, 0)
		r := (<-done).want(t, 0)
		if !strings.Contains(r.stdout, subject) {
			t.Fatalf("wait output lacks %q:\n%s", subject, r.stdout)
		}
	})
}
