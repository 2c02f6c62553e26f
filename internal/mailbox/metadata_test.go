package mailbox

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// keyedServer is an in-process server with caps and a folder "S".
func keyedServer(t *testing.T, caps imap.CapSet) (*Client, credentials.Credentials) {
	t.Helper()
	mem := imapmemserver.New()
	u := imapmemserver.NewUser("u@example.test", "pw")
	for _, f := range []string{"INBOX", "S"} {
		if err := u.Create(f, nil); err != nil {
			t.Fatal(err)
		}
	}
	mem.AddUser(u)
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps: caps, InsecureAuth: true, Logger: nopLogger{},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c := New(Config{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, Security: transport.Plain, AllowPlaintextAuth: true, Timeout: 5 * time.Second},
		pool.Config{}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { c.Close(context.Background()) })
	return c, credentials.New("u@example.test", "pw")
}

func keyedMsg(key, body string) []byte {
	return []byte("From: a@example.test\r\nSubject: s\r\n" + KeyHeader + ": " + key + "\r\n\r\n" + body + "\r\n")
}

func TestMetadataAbsent(t *testing.T) {
	c, creds := keyedServer(t, imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapUIDPlus: {}})
	ctx := context.Background()
	if _, err := c.GetMetadata(ctx, creds, "S", []string{"/private/comment"}); !errors.Is(err, ErrNoMetadata) {
		t.Errorf("GetMetadata: %v", err)
	}
	v := []byte("x")
	if err := c.SetMetadata(ctx, creds, "S", map[string]*[]byte{"/private/comment": &v}); !errors.Is(err, ErrNoMetadata) {
		t.Errorf("SetMetadata: %v", err)
	}
	if _, err := c.ChildMetadata(ctx, creds, "S", []string{"/private/comment"}); !errors.Is(err, ErrNoMetadata) {
		t.Errorf("ChildMetadata: %v", err)
	}
	if has, err := c.HasMetadata(ctx, creds); has || err != nil {
		t.Errorf("HasMetadata: %v, %v", has, err)
	}
}

// TestKeyed: exact and prefix matches after IMAP's substring search, the
// newest body per key, and removal of exactly the UIDs given.
func TestKeyed(t *testing.T) {
	c, creds := keyedServer(t, imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapUIDPlus: {}})
	ctx := context.Background()
	var uids []uint32
	for _, m := range []struct{ key, body string }{{"a/b", "1"}, {"a/b", "2"}, {"xa/b", "3"}, {"a/bc", "4"}, {"A/B", "5"}} {
		uid, err := c.AppendKeyed(ctx, creds, "S", keyedMsg(m.key, m.body))
		if err != nil || uid == 0 {
			t.Fatalf("append: %d, %v", uid, err)
		}
		uids = append(uids, uid)
	}
	got, err := c.FindKeyed(ctx, creds, "S", "a/b", false, true)
	if err != nil || len(got) != 2 || got[0].UID != uids[0] || got[1].UID != uids[1] {
		t.Fatalf("exact a/b: %+v, %v", got, err)
	}
	if got[0].Raw != nil || got[1].Raw == nil {
		t.Errorf("Raw must be set for the newest only: %q / %q", got[0].Raw, got[1].Raw)
	}
	got, err = c.FindKeyed(ctx, creds, "S", "a/b", true, false)
	if err != nil || len(got) != 3 || got[2].Key != "a/bc" {
		t.Fatalf("prefix a/b: %+v, %v", got, err)
	}
	if err := c.RemoveUIDs(ctx, creds, "S", []uint32{uids[0], 9999}); err != nil {
		t.Fatalf("RemoveUIDs with a UID already gone: %v", err)
	}
	if got, _ := c.FindKeyed(ctx, creds, "S", "", true, false); len(got) != 4 {
		t.Fatalf("after removing one: %+v", got)
	}
	if _, err := c.FindKeyed(ctx, creds, "Nope", "a", false, false); mailerr.KindOf(err) != mailerr.NotFound {
		t.Errorf("missing folder: %v", err)
	}
}

func TestKeyedNeedsUIDPlus(t *testing.T) {
	c, creds := keyedServer(t, imap.CapSet{imap.CapIMAP4rev1: {}})
	ctx := context.Background()
	if _, err := c.AppendKeyed(ctx, creds, "S", keyedMsg("k", "v")); mailerr.KindOf(err) != mailerr.Permanent {
		t.Errorf("AppendKeyed: %v", err)
	}
	if err := c.RemoveUIDs(ctx, creds, "S", []uint32{1}); mailerr.KindOf(err) != mailerr.Permanent {
		t.Errorf("RemoveUIDs: %v", err)
	}
}
