package mailbox

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// Against Dovecot: a fresh connection for doIn sends LOGIN and EXAMINE in
// one round trip (over implicit TLS even before the greeting), and what an
// operation sees is what it saw when the EXAMINE followed the LOGIN's
// answer: the same selected folder and role, the same error for a refused
// password (counted by the login guard) and for a missing folder. The
// reference is the sequential path, over STARTTLS on the IMAP port.
func TestLoginAheadAgainstDovecot(t *testing.T) {
	st := mailtest.StartT(t, mailtest.Options{})
	client := func(sec transport.Security, g *guard.Guard) *Client {
		port := st.IMAPSPort
		if sec == transport.StartTLS {
			port = st.IMAPPort
		}
		c := New(Config{Host: st.Host, Port: port, Security: sec, TLS: st.TLSConfig(), Timeout: 10 * time.Second, Guard: g},
			pool.Config{MaxTotal: 4, MaxPerGroup: 2}, slog.New(slog.DiscardHandler))
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	bob := credentials.New(mailtest.Bob, mailtest.BobPassword)
	examine := func(folder string) func(context.Context, *Conn) error {
		return func(ctx context.Context, conn *Conn) error { _, err := conn.examine(folder); return err }
	}

	t.Run("the folder is selected when the operation starts", func(t *testing.T) {
		for _, folder := range []string{"INBOX", "Sent"} {
			var want Conn
			err := client(transport.StartTLS, nil).do(context.Background(), bob, "examining", true, func(ctx context.Context, conn *Conn) error {
				err := examine(folder)(ctx, conn)
				want = Conn{selected: conn.selected, uidValidity: conn.uidValidity, role: conn.role}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			err = client(transport.TLS, nil).doIn(context.Background(), bob, folder, "examining", func(ctx context.Context, conn *Conn) error {
				if conn.selected != folder || conn.selectedRW || conn.client().Mailbox() == nil {
					t.Errorf("%s: selected %q (read-write %v, client's mailbox %v) before the operation",
						folder, conn.selected, conn.selectedRW, conn.client().Mailbox())
				}
				if conn.role != want.role || conn.uidValidity != want.uidValidity {
					t.Errorf("%s: role %q UIDVALIDITY %d, sequential path %q %d", folder, conn.role, conn.uidValidity, want.role, want.uidValidity)
				}
				return examine(folder)(ctx, conn)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("a refused password", func(t *testing.T) {
		wrong := credentials.New(mailtest.Bob, "not-bobs-password")
		want := client(transport.StartTLS, nil).do(context.Background(), wrong, "examining", true, examine("INBOX"))
		g := guard.New(guard.Config{FailuresPerUser: 2, FailuresPerAccount: 100, Delay: time.Minute})
		c := client(transport.TLS, g)
		ctx := guard.WithClientAddr(context.Background(), "192.0.2.7")
		for i := range 2 {
			err := c.doIn(ctx, wrong, "INBOX", "examining", examine("INBOX"))
			sameError(t, err, want)
			if !refusedLogin(err) {
				t.Errorf("login %d: not a refused login for the guard: %v", i+1, err)
			}
		}
		if err := c.doIn(ctx, wrong, "INBOX", "examining", examine("INBOX")); mailerr.KindOf(err) != mailerr.RateLimited {
			t.Errorf("3rd login after 2 refusals: %v, want the back-off", err)
		}
	})

	t.Run("a folder that does not exist", func(t *testing.T) {
		want := client(transport.StartTLS, nil).do(context.Background(), bob, "examining", true, examine("No/Such"))
		c := client(transport.TLS, nil)
		err := c.doIn(context.Background(), bob, "No/Such", "examining", examine("No/Such"))
		sameError(t, err, want)
		if mailerr.KindOf(err) != mailerr.NotFound {
			t.Errorf("kind %v, want NotFound", mailerr.KindOf(err))
		}
		// The login was good: the connection stays, and serves the next call.
		if err := c.doIn(context.Background(), bob, "INBOX", "examining", examine("INBOX")); err != nil {
			t.Fatal(err)
		}
		if s := c.Stats(); s.Opened != 1 || s.Reused != 1 {
			t.Errorf("pool %+v, want one connection, reused once", s)
		}
	})
}

// sameError fails unless err and want have the same kind, message and IMAP
// status and code.
func sameError(t *testing.T, err, want error) {
	t.Helper()
	if want == nil || err == nil {
		t.Fatalf("error %v, reference %v: want both", err, want)
	}
	if mailerr.KindOf(err) != mailerr.KindOf(want) || mailerr.Message(err) != mailerr.Message(want) {
		t.Errorf("%v %q, reference %v %q", mailerr.KindOf(err), mailerr.Message(err), mailerr.KindOf(want), mailerr.Message(want))
	}
	var ie, we *imap.Error
	if errors.As(err, &ie) != errors.As(want, &we) || ie != nil && (ie.Type != we.Type || ie.Code != we.Code) {
		t.Errorf("IMAP answer %+v, reference %+v", ie, we)
	}
}
