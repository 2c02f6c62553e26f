// Package faults is the fault-injection suite: the gateway against a real
// Dovecot and Postfix, with Shopify's toxiproxy (byte-level faults: resets,
// silence, slow drip) and internal/faultproxy (a fault at an exact protocol
// step: the answer to one STORE lost, a reset after the final dot) between
// them. Every case asserts three things: the bound (each call ends within
// its limit plus 2 s), the recovery (no errors once the fault is gone), and
// that nothing was lost or duplicated, counted at the server; and after
// every case the gateway's goroutines, file descriptors and pooled
// connections return to where they were.
package faults

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/app"
	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/faultproxy"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

func TestMain(m *testing.M) { mailtest.Main(m) }

// The gateway's limits in this suite: short, so that the bound of a call
// that meets a fault is seconds, not minutes.
const (
	toolTimeout = 8 * time.Second
	// slack is what a call may take past its limit (the bound).
	slack = 2 * time.Second
)

// rig is one gateway behind the faults of one test: gateway -> toxiproxy
// -> faultproxy -> Dovecot (implicit TLS) and the same for Postfix
// (submission, implicit TLS).
type rig struct {
	t          *testing.T
	s          *mailtest.Stack
	tox        *toxiproxy.Client
	imap, smtp *toxiproxy.Proxy
	fimap      *faultproxy.Proxy
	fsmtp      *faultproxy.Proxy
	app        *app.App
	url        string
	logs       *mailtest.LogBuffer

	baseGoroutines, baseFDs int
}

// newRig starts the proxies and a gateway with env added to the suite's
// settings, and takes the baseline once a first call has warmed it up.
func newRig(t *testing.T, s *mailtest.Stack, env ...string) *rig {
	t.Helper()
	r := &rig{t: t, s: s}
	crt, err := tls.LoadX509KeyPair(filepath.Join(s.Dir, "etc", "cert.pem"), filepath.Join(s.Dir, "etc", "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := &tls.Config{Certificates: []tls.Certificate{crt}}
	for _, p := range []struct {
		dst    **faultproxy.Proxy
		target string
	}{{&r.fimap, s.IMAPSAddr()}, {&r.fsmtp, s.SubmissionsAddr()}} {
		fp, err := faultproxy.Start(faultproxy.Config{Target: p.target, ServerTLS: serverTLS, ClientTLS: s.TLSConfig()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fp.Close() })
		*p.dst = fp
	}
	r.tox = mailtest.StartToxiproxy(t)
	if r.imap, err = r.tox.CreateProxy("imap", "127.0.0.1:0", r.fimap.Addr()); err != nil {
		t.Fatal(err)
	}
	if r.smtp, err = r.tox.CreateProxy("smtp", "127.0.0.1:0", r.fsmtp.Addr()); err != nil {
		t.Fatal(err)
	}
	key, _ := credentials.NewKey()
	vars := append([]string{"ENCRYPTION_KEY=" + key, "LOG_LEVEL=debug",
		"IMAP_HOST=127.0.0.1", "IMAP_PORT=" + port(t, r.imap.Listen), "MAIL_CA_FILE=" + s.CAFile,
		"SMTP_HOST=127.0.0.1", "SMTP_PORT=" + port(t, r.smtp.Listen), "SMTP_SECURITY=tls",
		"TOOL_TIMEOUT=" + toolTimeout.String(), "IMAP_TIMEOUT=" + toolTimeout.String(), "SMTP_TIMEOUT=" + toolTimeout.String(),
		"POOL_IDLE_TIMEOUT=2s", "WAIT_RECHECK=2s",
	}, env...)
	cfg, err := config.FromEnv(vars)
	if err != nil {
		t.Fatal(err)
	}
	r.logs = &mailtest.LogBuffer{}
	if r.app, err = app.New(cfg, app.NewLogger(r.logs, cfg.LogLevel)); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.app.Serve(ctx, ln) }()
	t.Cleanup(func() {
		if t.Failed() {
			l := r.logs.String()
			if f, err := os.CreateTemp("", "faults-gateway-*.log"); err == nil {
				f.WriteString(l)
				f.Close()
				t.Logf("full gateway log: %s", f.Name())
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	r.url = "http://" + ln.Addr().String() + "/mcp"
	// Warm up (a login, the server learned), then let the pool empty.
	c := r.client(mailtest.Alice)
	if res := mailtest.Call(t, c, "imap_list_folders", nil); res.IsError {
		t.Fatalf("warm-up: %s", mailtest.Text(res))
	}
	c.Close()
	r.settle()
	r.baseGoroutines, r.baseFDs = runtime.NumGoroutine(), openFDs(t)
	return r
}

func port(t *testing.T, hostport string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil || p == "0" {
		t.Fatalf("toxiproxy listens on %q", hostport)
	}
	return p
}

// client is an MCP client for user (password from the stack).
func (r *rig) client(user string) *client.Client {
	return mailtest.MCPClient(r.t, r.url, map[string]string{"x-imap-user": user, "x-imap-pass": r.s.Users[user]}, "")
}

// call is one timed tool call: it fails the test if the call took longer
// than limit plus the slack; it returns the result and whether it failed.
func (r *rig) call(c *client.Client, limit time.Duration, tool string, args map[string]any) (*mcp.CallToolResult, time.Duration) {
	r.t.Helper()
	start := time.Now()
	res, err := mailtest.CallErr(c, tool, args)
	took := time.Since(start)
	if err != nil {
		r.t.Errorf("%s: the call itself failed after %v: %v", tool, took.Round(time.Millisecond), err)
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{mcp.NewTextContent(err.Error())}}, took
	}
	if took > limit+slack {
		r.t.Errorf("%s took %v, past its limit %v + %v: %s", tool, took.Round(time.Millisecond), limit, slack, mailtest.Text(res))
	}
	return res, took
}

// settle waits until the pool holds nothing (its idle timeout is 2 s) and
// Dovecot lists no connection of the stack's users.
func (r *rig) settle() {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := r.app.PoolStats()
		who := r.serverConns()
		if st.Idle == 0 && st.InUse == 0 && st.Waiting == 0 && who == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the pool did not empty: %+v, Dovecot lists %d connections", st, who)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serverConns counts the IMAP connections Dovecot lists (doveadm who).
func (r *rig) serverConns() int {
	out, err := r.s.Doveadm("who", "-1")
	if err != nil {
		return -1
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "imap") && strings.Contains(l, "@") {
			n++
		}
	}
	return n
}

// checkBaseline is the end of every case: no fault left, the pool empty
// (at the gateway and at Dovecot), and the goroutines and file descriptors
// back where they were.
func (r *rig) checkBaseline() {
	r.t.Helper()
	if err := r.tox.ResetState(); err != nil {
		r.t.Fatal(err)
	}
	r.settle()
	var g, fds int
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		g, fds = runtime.NumGoroutine(), openFDs(r.t)
		// a few: the HTTP server's and clients' keep-alive connections
		if g <= r.baseGoroutines+6 && fds <= r.baseFDs+6 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			r.t.Fatalf("after the case: %d goroutines (baseline %d), %d file descriptors (baseline %d)\n%s",
				g, r.baseGoroutines, fds, r.baseFDs, buf)
		}
	}
	r.t.Logf("baseline: %d goroutines (was %d), %d file descriptors (was %d), pool empty, Dovecot lists none", g, r.baseGoroutines, fds, r.baseFDs)
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// count is the number of messages in user's folder whose Subject contains
// subject, as Dovecot sees it.
func count(t *testing.T, s *mailtest.Stack, user, folder, subject string) int {
	t.Helper()
	out, err := s.Doveadm("search", "-u", user, "mailbox", folder, "header", "Subject", subject)
	if err != nil {
		t.Fatal(err)
	}
	return len(strings.Fields(out)) / 2 // "GUID UID" per message
}

// seen counts, among user's messages in folder whose Subject contains
// subject, those flagged \Seen.
func seen(t *testing.T, s *mailtest.Stack, user, folder, subject string) map[string]bool {
	t.Helper()
	out, err := s.Doveadm("fetch", "-u", user, "uid flags", "mailbox", folder, "header", "Subject", subject)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	var uid string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "uid: "); ok {
			uid = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "flags: "); ok && uid != "" {
			m[uid] = strings.Contains(v, `\Seen`)
		}
	}
	return m
}

// deliver puts n messages for user into its INBOX through Postfix's MX
// port, Subjects "<prefix> 1" ... "<prefix> n", and waits for them.
func deliver(t *testing.T, s *mailtest.Stack, user, prefix string, n int) {
	t.Helper()
	before := count(t, s, user, "INBOX", prefix)
	for i := 1; i <= n; i++ {
		raw := fmt.Sprintf("From: sender@example.test\r\nTo: %s\r\nSubject: %s %d\r\nMessage-ID: <%s-%d-%d@example.test>\r\n\r\nbody %d\r\n",
			user, prefix, i, strings.ReplaceAll(prefix, " ", "-"), i, time.Now().UnixNano(), i)
		if err := s.Deliver("sender@example.test", []string{user}, []byte(raw)); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); count(t, s, user, "INBOX", prefix) < before+n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages arrived", count(t, s, user, "INBOX", prefix)-before, n)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
