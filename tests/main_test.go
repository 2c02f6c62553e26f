// Package tests holds the end-to-end tests: the gateway over HTTP, driven
// by a real MCP client, against Dovecot and Postfix from scripts/mailstack.sh.
package tests

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message/charset"

	"mime"

	"github.com/mailbox-mcp/mailbox-mcp/internal/app"
	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

func TestMain(m *testing.M) { mailtest.Main(m) }

type gateway struct {
	URL  string
	Logs *mailtest.LogBuffer
	App  *app.App
	Key  string
}

// startGateway runs the gateway in-process against the stack's IMAPS port,
// trusting the stack's CA, with env overriding the defaults.
func startGateway(t testing.TB, s *mailtest.Stack, env ...string) *gateway {
	t.Helper()
	return startGatewayEnv(t, append([]string{
		"IMAP_HOST=127.0.0.1", "IMAP_PORT=" + strconv.Itoa(s.IMAPSPort), "MAIL_CA_FILE=" + s.CAFile,
	}, env...)...)
}

// startGatewayEnv runs the gateway in-process with env (IMAP_HOST and the
// rest) over a fresh ENCRYPTION_KEY and debug logging.
func startGatewayEnv(t testing.TB, env ...string) *gateway {
	t.Helper()
	key, _ := credentials.NewKey()
	vars := append([]string{"ENCRYPTION_KEY=" + key, "LOG_LEVEL=debug"}, env...)
	cfg, err := config.FromEnv(vars)
	if err != nil {
		t.Fatal(err)
	}
	logs := &mailtest.LogBuffer{}
	a, err := app.New(cfg, app.NewLogger(logs, cfg.LogLevel))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		if t.Failed() {
			l := logs.String()
			f, err := os.CreateTemp("", "gateway-*.log")
			if err == nil {
				f.WriteString(l)
				f.Close()
				t.Logf("full gateway log: %s", f.Name())
			}
			t.Logf("gateway log (last 8 KB):\n%s", l[max(0, len(l)-8000):])
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &gateway{URL: "http://" + ln.Addr().String() + "/mcp", Logs: logs, App: a, Key: key}
}

func userHeaders(s *mailtest.Stack, user string) map[string]string {
	return map[string]string{"x-imap-user": user, "x-imap-pass": s.Users[user]}
}

// direct logs in to the stack with a bare go-imap client: the reference the
// gateway's answers are checked against.
func direct(t testing.TB, s *mailtest.Stack, user string) *imapclient.Client {
	t.Helper()
	c, err := imapclient.DialTLS(s.IMAPSAddr(), &imapclient.Options{
		TLSConfig:   s.TLSConfig(),
		WordDecoder: &mime.WordDecoder{CharsetReader: charset.Reader},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Login(user, s.Users[user]).Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Logout().Wait(); c.Close() })
	return c
}
