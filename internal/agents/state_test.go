package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// stateServer is an in-memory IMAP server with UIDPLUS and no METADATA
// (imapmemserver has none): the message-store path.
func stateServer(t *testing.T) (*Service, *mailbox.Client, credentials.Credentials) {
	t.Helper()
	mem := imapmemserver.New()
	u := imapmemserver.NewUser("u@example.test", "pw")
	if err := u.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(u)
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapUIDPlus: {}},
		InsecureAuth: true,
		Logger:       quiet{},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	mb := mailbox.New(mailbox.Config{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, Security: transport.Plain, AllowPlaintextAuth: true, Timeout: 5 * time.Second},
		pool.Config{}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { mb.Close(context.Background()) })
	return New(Config{}, mb), mb, credentials.New("u@example.test", "pw")
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func TestStateMessageStore(t *testing.T) {
	s, mb, creds := stateServer(t)
	ctx := context.Background()

	got, err := s.GetState(ctx, creds, "plan", "")
	if err != nil || len(got) != 0 {
		t.Fatalf("unset key: %v, %v", got, err)
	}
	if _, err := s.SetStateBy(ctx, creds, "backend", "plan", json.RawMessage(`{"step": 1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetState(ctx, creds, "plan", json.RawMessage(`{"step": 2, "note": "é"}`)); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetState(ctx, creds, "plan", "")
	if err != nil || len(got) != 1 || string(got[0].Value) != `{"step":2,"note":"é"}` || got[0].By != "" {
		t.Fatalf("after two sets: %+v, %v", got, err)
	}
	if got[0].UpdatedAt.IsZero() {
		t.Error("updated_at is zero")
	}
	folder := "Agents/\u2024state"
	if k, err := mb.FindKeyed(ctx, creds, folder, "plan", false, false); err != nil || len(k) != 1 {
		t.Fatalf("messages of key plan: %v, %v", k, err)
	}

	// prefix: exactly the keys under it; the key "Plan" is another key
	for _, k := range []string{"build/a", "build/b", "buildx", "Plan"} {
		if _, err := s.SetState(ctx, creds, k, json.RawMessage(`"`+k+`"`)); err != nil {
			t.Fatal(err)
		}
	}
	got, err = s.GetState(ctx, creds, "", "build/")
	if err != nil || len(got) != 2 || got[0].Key != "build/a" || got[1].Key != "build/b" || string(got[1].Value) != `"build/b"` {
		t.Fatalf("prefix build/: %+v, %v", got, err)
	}
	if got, _ := s.GetState(ctx, creds, "Plan", ""); len(got) != 1 || string(got[0].Value) != `"Plan"` {
		t.Fatalf("key Plan: %+v", got)
	}
}

func TestStateRefusals(t *testing.T) {
	s, _, creds := stateServer(t)
	ctx := context.Background()
	if _, err := s.SetState(ctx, creds, "k", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`"` + strings.Repeat("x", MaxStateBytes-1) + `"`) // MaxStateBytes+1 bytes
	cases := []struct {
		name, key string
		value     json.RawMessage
		kind      mailerr.Kind
	}{
		{"too large", "k", big, mailerr.TooLarge},
		{"not JSON", "k", json.RawMessage(`{`), mailerr.BadInput},
		{"empty key", "", json.RawMessage(`1`), mailerr.BadInput},
		{"reserved key", ".status/x", json.RawMessage(`1`), mailerr.BadInput},
		{"space", "a b", json.RawMessage(`1`), mailerr.BadInput},
		{"double slash", "a//b", json.RawMessage(`1`), mailerr.BadInput},
		{"trailing slash", "a/", json.RawMessage(`1`), mailerr.BadInput},
		{"too long", strings.Repeat("k", 201), json.RawMessage(`1`), mailerr.BadInput},
	}
	for _, c := range cases {
		_, err := s.SetState(ctx, creds, c.key, c.value)
		if mailerr.KindOf(err) != c.kind {
			t.Errorf("%s: got %v (%v), want %v", c.name, mailerr.KindOf(err), err, c.kind)
		}
		if c.key != "" && strings.Contains(mailerr.Message(err), c.key) && len(c.key) > 20 {
			t.Errorf("%s: the error echoes the key: %v", c.name, err)
		}
	}
	if got, _ := s.GetState(ctx, creds, "k", ""); len(got) != 1 || string(got[0].Value) != "1" {
		t.Fatalf("refused writes changed the value: %+v", got)
	}
	exact := json.RawMessage(`"` + strings.Repeat("y", MaxStateBytes-2) + `"`)
	if _, err := s.SetState(ctx, creds, "k", exact); err != nil {
		t.Fatalf("a value of exactly MaxStateBytes: %v", err)
	}
	if _, err := s.GetState(ctx, creds, "k", "k"); mailerr.KindOf(err) != mailerr.BadInput {
		t.Errorf("key and prefix: %v", err)
	}
	if _, err := s.GetState(ctx, creds, "", ""); mailerr.KindOf(err) != mailerr.BadInput {
		t.Errorf("neither key nor prefix: %v", err)
	}
}

// TestStateConcurrentWriters: 8 writers of one key leave one message.
func TestStateConcurrentWriters(t *testing.T) {
	s, mb, creds := stateServer(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.SetState(ctx, creds, "race", json.RawMessage(fmt.Sprint(i))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	k, err := mb.FindKeyed(ctx, creds, "Agents/\u2024state", "race", false, false)
	if err != nil || len(k) != 1 {
		t.Fatalf("messages of key race: %+v, %v", k, err)
	}
	if got, _ := s.GetState(ctx, creds, "race", ""); len(got) != 1 {
		t.Fatalf("read: %+v", got)
	}
}
