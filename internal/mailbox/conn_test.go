package mailbox_test

import (
	"bufio"
	"context"
	"errors"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

var user = credentials.New("u@example.test", "pw")

// drain reads and ignores whatever the client sends, never answering.
func drain(c net.Conn) {
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// greetThen greets (offering STARTTLS and LOGIN), answers LOGIN with OK,
// and stays silent to everything else.
func greetThen(c net.Conn) {
	c.Write([]byte("* OK [CAPABILITY IMAP4rev1 STARTTLS] ready\r\n"))
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		tag, cmd, _ := strings.Cut(sc.Text(), " ")
		if strings.HasPrefix(strings.ToUpper(cmd), "LOGIN ") && strings.Contains(cmd, "loginok") {
			c.Write([]byte(tag + " OK [CAPABILITY IMAP4rev1] logged in\r\n"))
		}
	}
}

func newClient(t *testing.T, host string, port int, sec transport.Security, timeout time.Duration, pc pool.Config) *mailbox.Client {
	t.Helper()
	c := mailbox.New(mailbox.Config{Host: host, Port: port, Security: sec, Timeout: timeout, AllowPlaintextAuth: true},
		pc, slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

func wantTimeout(t *testing.T, err error, step string) {
	t.Helper()
	var me *mailerr.Error
	if !errors.As(err, &me) {
		t.Fatalf("error %T %v, want a *mailerr.Error", err, err)
	}
	if me.Kind != mailerr.Timeout || me.Step != step {
		t.Fatalf("kind %v step %q, want timeout while %q: %v", me.Kind, me.Step, step, err)
	}
	if want := "the mail server did not answer in time while " + step; me.Msg != want {
		t.Fatalf("message %q, want %q", me.Msg, want)
	}
}

// A server that goes silent makes the call end at the IMAP timeout, and
// the error names the step that was waiting.
func TestSilentServerTimeoutNamesTheStep(t *testing.T) {
	silentHost, silentPort := mailtest.Listen(t, drain)
	greetHost, greetPort := mailtest.Listen(t, greetThen)
	const timeout = 500 * time.Millisecond
	for _, tc := range []struct {
		name       string
		host       string
		port       int
		sec        transport.Security
		user       credentials.Credentials
		call       func(*mailbox.Client, credentials.Credentials) error
		wantStep   string
		wantOpened uint64
	}{
		{"no greeting, plain", silentHost, silentPort, transport.Plain, user, verify, "connecting to the mail server", 0},
		{"no greeting, starttls", silentHost, silentPort, transport.StartTLS, user, verify, "connecting to the mail server", 0},
		{"no handshake, tls", silentHost, silentPort, transport.TLS, user, verify, "starting TLS with the mail server", 0},
		{"no answer to STARTTLS", greetHost, greetPort, transport.StartTLS, user, verify, "starting TLS with the mail server", 0},
		{"no answer to LOGIN", greetHost, greetPort, transport.Plain, user, verify, "logging in to the mail server", 0},
		{"no answer to LIST", greetHost, greetPort, transport.Plain, credentials.New("loginok", "pw"), listFolders, "listing the folders", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, tc.host, tc.port, tc.sec, timeout, pool.Config{MaxTotal: 2, MaxPerGroup: 1})
			start := time.Now()
			err := tc.call(c, tc.user)
			took := time.Since(start)
			wantTimeout(t, err, tc.wantStep)
			if took < timeout || took > timeout+time.Second {
				t.Errorf("took %v, want about %v", took, timeout)
			}
			if st := c.Stats(); st.Opened != tc.wantOpened || st.Idle != 0 || st.InUse != 0 {
				t.Errorf("pool after the timeout: %+v", st)
			}
		})
	}
}

func verify(c *mailbox.Client, creds credentials.Credentials) error {
	return c.Verify(context.Background(), creds)
}

func listFolders(c *mailbox.Client, creds credentials.Credentials) error {
	_, err := c.ListFolders(context.Background(), creds)
	return err
}

// A call that cannot get a connection because the pool is full says so:
// Busy, while waiting for a free connection.
func TestPoolWaitNamesTheStep(t *testing.T) {
	host, port := mailtest.Listen(t, drain)
	c := newClient(t, host, port, transport.Plain, 2*time.Second, pool.Config{MaxTotal: 1, MaxPerGroup: 1})
	first := make(chan error, 1)
	go func() { first <- c.Verify(context.Background(), user) }()
	// Wait until the first call's dial holds the only slot.
	for deadline := time.Now().Add(time.Second); c.Stats().InUse == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := c.Verify(ctx, credentials.New("other@example.test", "pw"))
	var me *mailerr.Error
	if !errors.As(err, &me) || me.Kind != mailerr.Busy || me.Step != "waiting for a free mail connection" {
		t.Fatalf("%#v, want Busy while waiting for a free mail connection", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	err = c.Verify(ctx, credentials.New("third@example.test", "pw"))
	if !errors.As(err, &me) || me.Kind != mailerr.Timeout || me.Step != "waiting for a free mail connection" ||
		me.Msg != "the request was cancelled while waiting for a free mail connection" {
		t.Fatalf("%v, want cancelled while waiting for a free mail connection", err)
	}
	wantTimeout(t, <-first, "connecting to the mail server")
}
