package mailbox_test

import (
	"bufio"
	"context"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// refuseLogin greets and answers every LOGIN with NO and the given response
// code, counting the LOGINs.
func refuseLogin(code string, logins *atomic.Int32) func(net.Conn) {
	return func(c net.Conn) {
		c.Write([]byte("* OK [CAPABILITY IMAP4rev1] ready\r\n"))
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			tag, cmd, _ := strings.Cut(sc.Text(), " ")
			switch verb, _, _ := strings.Cut(strings.ToUpper(cmd), " "); verb {
			case "LOGIN":
				logins.Add(1)
				c.Write([]byte(tag + " NO [" + code + "] refused\r\n"))
			case "LOGOUT":
				c.Write([]byte("* BYE\r\n" + tag + " OK bye\r\n"))
				return
			default:
				c.Write([]byte(tag + " BAD unexpected\r\n"))
			}
		}
	}
}

// A LOGIN refused for a limit or a busy server (Dovecot answers NO [LIMIT]
// at its per-user connection limit) is a temporary failure, not a wrong
// password: it says so, and it never counts toward the login back-off.
// A NO [AUTHENTICATIONFAILED] does count.
func TestLoginLimitIsTemporary(t *testing.T) {
	for _, tc := range []struct {
		code      string
		kind      mailerr.Kind
		msg       string
		backedOff bool // the 3rd login is held back by the guard
	}{
		{"LIMIT", mailerr.Temporary, "the mail server refused: too many connections for this account; try again shortly", false},
		{"INUSE", mailerr.Temporary, "the mail server refused: the mailbox is in use; try again shortly", false},
		{"UNAVAILABLE", mailerr.Temporary, "the mail server cannot log you in right now; try again later", false},
		{"AUTHENTICATIONFAILED", mailerr.Auth, "authentication failed: the mail server rejected the user name or password", true},
	} {
		t.Run(tc.code, func(t *testing.T) {
			var logins atomic.Int32
			host, port := mailtest.Listen(t, refuseLogin(tc.code, &logins))
			g := guard.New(guard.Config{FailuresPerUser: 2, FailuresPerAccount: 2, Delay: time.Minute})
			c := mailbox.New(mailbox.Config{Host: host, Port: port, Security: transport.Plain, AllowPlaintextAuth: true,
				Timeout: 2 * time.Second, Guard: g}, pool.Config{MaxTotal: 2, MaxPerGroup: 1}, slog.New(slog.DiscardHandler))
			t.Cleanup(func() { c.Close(context.Background()) })
			ctx := guard.WithClientAddr(context.Background(), "192.0.2.1")
			creds := credentials.New("u@example.test", "pw")
			for i := range 3 {
				err := c.Verify(ctx, creds)
				if i == 2 && tc.backedOff {
					if mailerr.KindOf(err) != mailerr.RateLimited {
						t.Fatalf("3rd login after 2 refusals: %v, want the back-off", err)
					}
					continue
				}
				if k, m := mailerr.KindOf(err), mailerr.Message(err); k != tc.kind || m != tc.msg {
					t.Fatalf("login %d: %v %q, want %v %q", i+1, k, m, tc.kind, tc.msg)
				}
			}
			want := int32(3)
			if tc.backedOff {
				want = 2
			}
			if n := logins.Load(); n != want {
				t.Fatalf("the server saw %d LOGINs, want %d", n, want)
			}
			if st := c.Stats(); st.Idle != 0 || st.InUse != 0 {
				t.Errorf("pool after refused logins: %+v", st)
			}
		})
	}
}

// Every spelling of one user name counts against one MaxPerGroup (the
// account), while reuse needs the exact credential: with a bound of 1, each
// new spelling closes the previous one's idle connection and dials its own,
// so the pool never holds two for the account. Another account is apart.
func TestSpellingsShareTheBound(t *testing.T) {
	host, port := mailtest.Listen(t, func(c net.Conn) {
		c.Write([]byte("* OK [CAPABILITY IMAP4rev1] ready\r\n"))
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			tag, cmd, _ := strings.Cut(sc.Text(), " ")
			if verb, _, _ := strings.Cut(strings.ToUpper(cmd), " "); verb == "LOGOUT" {
				c.Write([]byte("* BYE\r\n" + tag + " OK bye\r\n"))
				return
			}
			c.Write([]byte(tag + " OK done\r\n"))
		}
	})
	c := newClient(t, host, port, transport.Plain, 2*time.Second, pool.Config{MaxTotal: 10, MaxPerGroup: 1})
	spellings := []string{"alice@example.test", "ALICE@example.test", " Alice@Example.Test", "alice@example.test"}
	for i, user := range spellings {
		if err := c.Verify(context.Background(), credentials.New(user, "pw")); err != nil {
			t.Fatalf("%q: %v", user, err)
		}
		if st := c.Stats(); st.Idle != 1 || st.InUse != 0 || st.Opened != uint64(i+1) || st.Evicted != uint64(i) {
			t.Fatalf("after %q: %+v, want one connection for the account (opened %d, evicted %d)", user, st, i+1, i)
		}
	}
	if err := c.Verify(context.Background(), credentials.New("bob@example.test", "pw")); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Idle != 2 || st.Evicted != uint64(len(spellings)-1) {
		t.Fatalf("after bob: %+v, want bob's connection beside alice's", st)
	}
}
