package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// The test binary doubles as the command: with MAILBOX_MCP_MAIN=1 it runs
// main, so the tests see real exit codes and signals.
func TestMain(m *testing.M) {
	if os.Getenv("MAILBOX_MCP_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func command(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append([]string{"MAILBOX_MCP_MAIN=1", "PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}, env...)
	return cmd
}

const key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

func TestServeRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"no key", []string{"IMAP_HOST=imap.example.test"}, "ENCRYPTION_KEY: required"},
		{"63-char key", []string{"IMAP_HOST=imap.example.test", "ENCRYPTION_KEY=" + key[:63]}, "ENCRYPTION_KEY: expected exactly 64 hex characters, got 63"},
		{"non-hex key", []string{"IMAP_HOST=imap.example.test", "ENCRYPTION_KEY=" + key[:62] + "zz"}, "ENCRYPTION_KEY: expected 64 hex characters"},
		{"PORT=abc", []string{"IMAP_HOST=imap.example.test", "ENCRYPTION_KEY=" + key, "PORT=abc"}, `PORT: expected a whole number, got "abc"`},
		{"empty IMAP_HOST", []string{"IMAP_HOST=", "ENCRYPTION_KEY=" + key}, "IMAP_HOST: required"},
		{"REDIS_URL without scheme", []string{"IMAP_HOST=imap.example.test", "ENCRYPTION_KEY=" + key, "REDIS_URL=redis.internal:6379"}, "REDIS_URL: expected a redis:// or rediss:// URL"},
		{"REDIS_FAIL=maybe", []string{"IMAP_HOST=imap.example.test", "ENCRYPTION_KEY=" + key, "REDIS_FAIL=maybe"}, `REDIS_FAIL: expected closed or open, got "maybe"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := command(context.Background(), tt.env, "serve").CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 {
				t.Fatalf("exit: %v, want status 2; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Fatalf("output lacks %q:\n%s", tt.want, out)
			}
		})
	}
}

func TestKeygenAndToken(t *testing.T) {
	out, err := command(context.Background(), nil, "keygen").Output()
	if err != nil {
		t.Fatal(err)
	}
	k := strings.TrimSpace(string(out))
	raw, err := hex.DecodeString(k)
	if err != nil || len(raw) != 32 {
		t.Fatalf("keygen printed %q", k)
	}

	cmd := command(context.Background(), []string{"ENCRYPTION_KEY=" + k}, "token", "--user", "alice@example.test")
	cmd.Stdin = strings.NewReader("s3cret pass\n")
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	sealer, _ := credentials.NewSealer(raw)
	c, err := sealer.Open(strings.TrimSpace(string(out)))
	if err != nil || c.User != "alice@example.test" || c.Password() != "s3cret pass" {
		t.Fatalf("token does not open to the input: %v %v", c, err)
	}

	cmd = command(context.Background(), nil, "token", "--user", "x")
	cmd.Stdin = strings.NewReader("pw\n")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "ENCRYPTION_KEY") {
		t.Fatalf("token without a key: %v %s", err, out)
	}
}

func TestHelpAndUnknown(t *testing.T) {
	for _, sub := range []string{"serve", "demo", "keygen", "token", "healthcheck"} {
		out, err := command(context.Background(), nil, sub, "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage: mailbox-mcp "+sub) {
			t.Errorf("%s --help: %v\n%s", sub, err, out)
		}
	}
	out, err := command(context.Background(), nil, "frobnicate").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "unknown command") {
		t.Fatalf("unknown command: %v %s", err, out)
	}
	out, _ = command(context.Background(), nil, "version").Output()
	if !strings.HasPrefix(string(out), "mailbox-mcp ") {
		t.Fatalf("version: %q", out)
	}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// The demo prints its URL quickly, answers health checks, and stops cleanly
// on SIGTERM.
func TestDemoRunsAndStops(t *testing.T) {
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := command(ctx, []string{"PORT=" + strconv.Itoa(port)}, "demo")
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var url string
	var printed []string
	for sc.Scan() {
		printed = append(printed, sc.Text())
		if u, ok := strings.CutPrefix(sc.Text(), "MCP URL: "); ok {
			url = u
			break
		}
	}
	took := time.Since(start)
	if url != "http://127.0.0.1:"+strconv.Itoa(port)+"/mcp" {
		t.Fatalf("no MCP URL printed: %q\n%s\n%s", url, strings.Join(printed, "\n"), stderr.String())
	}
	if took > 10*time.Second {
		t.Errorf("demo took %v to print its URL, want < 10 s", took)
	}
	go func() {
		for sc.Scan() {
			printed = append(printed, sc.Text())
		}
	}()

	hc := command(ctx, []string{"PORT=" + strconv.Itoa(port)}, "healthcheck")
	if out, err := hc.CombinedOutput(); err != nil || !strings.Contains(string(out), "healthy") {
		t.Fatalf("healthcheck: %v %s", err, out)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("demo did not exit cleanly on SIGTERM: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), `"msg":"stopped"`) {
		t.Errorf("no shutdown log line:\n%s", stderr.String())
	}
	hc = command(context.Background(), []string{"PORT=" + strconv.Itoa(port)}, "healthcheck", "--timeout", "1s")
	if err := hc.Run(); err == nil {
		t.Fatal("healthcheck passes with the gateway stopped")
	}
	t.Logf("demo printed its URL after %v", took.Round(time.Millisecond))
}

// TestTokenCommandNeverAboveTheOperator: `mailbox-mcp token` seals a
// password typed by whoever holds ENCRYPTION_KEY, so the operator's
// MAILBOX_ACCESS is the only cap: every -access above it is refused with
// status 2 and no token, every other combination of -access and -send is
// sealed exactly.
func TestTokenCommandNeverAboveTheOperator(t *testing.T) {
	raw, _ := hex.DecodeString(key)
	sealer, _ := credentials.NewSealer(raw)
	levels := []string{"read", "organize", "full"}
	rank := map[string]int{"": 0, "read": 1, "organize": 2, "full": 3}
	for _, operator := range levels {
		for _, asked := range append([]string{""}, levels...) {
			for _, send := range []bool{true, false} {
				args := []string{"token", "--user", "alice@example.test", "-send=" + strconv.FormatBool(send)}
				if asked != "" {
					args = append(args, "-access", asked)
				}
				cmd := command(context.Background(), []string{"ENCRYPTION_KEY=" + key, "MAILBOX_ACCESS=" + operator}, args...)
				cmd.Stdin = strings.NewReader("pw\n")
				out, err := cmd.Output()
				name := "MAILBOX_ACCESS=" + operator + " " + strings.Join(args[3:], " ")
				if rank[asked] > rank[operator] {
					if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || len(out) != 0 {
						t.Errorf("%s: %v, output %q: want status 2 and no token", name, err, out)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				c, err := sealer.Open(strings.TrimSpace(string(out)))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if got := c.Scope.Level.String(); (asked == "" && c.Scope.Level != 0) || (asked != "" && got != asked) || c.Scope.NoSend == send {
					t.Errorf("%s: sealed %+v", name, c.Scope)
				}
			}
		}
	}
}

// healthcheck passes a gateway whose shared dependency (Redis) is away:
// /health says "degraded" with 200, the process is alive, and a restart
// would not bring Redis back. Anything else is unhealthy.
func TestHealthcheckDegradedIsAlive(t *testing.T) {
	for _, c := range []struct {
		code int
		body string
		ok   bool
	}{
		{200, `{"status":"ok","service":"mailbox-mcp"}`, true},
		{200, `{"status":"degraded","redis":"degraded","service":"mailbox-mcp"}`, true},
		{200, `{"status":"broken"}`, false},
		{503, `{"status":"degraded"}`, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.code)
			w.Write([]byte(c.body))
		}))
		out, err := command(context.Background(), nil, "healthcheck", "--url", srv.URL+"/health", "--timeout", "2s").CombinedOutput()
		srv.Close()
		if (err == nil) != c.ok {
			t.Errorf("%d %s: %v %s, want healthy=%v", c.code, c.body, err, out, c.ok)
		}
		if c.ok && strings.Contains(c.body, "degraded") && !strings.Contains(string(out), "degraded") {
			t.Errorf("a degraded gateway's healthcheck does not say so: %s", out)
		}
	}
}
