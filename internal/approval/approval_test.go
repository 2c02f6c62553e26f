package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

var ctx = context.Background()

func newTest(t *testing.T) (*Approvals, *clock) {
	t.Helper()
	c := &clock{time.Unix(1_800_000_000, 0)}
	return newOn(t, c, memory.NewLocal(c.now), 0), c
}

func newOn(t *testing.T, c *clock, mem memory.Store, maxPending int) *Approvals {
	t.Helper()
	s, err := credentials.NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return New(s, Options{Now: c.now, Memory: mem, MaxPending: maxPending})
}

// newRedis is a Redis store on its own redis-server, on clock c (Redis
// keeps its own time for what expires).
func newRedis(t *testing.T, c *clock) (*memory.Redis, *mailtest.RedisServer) {
	t.Helper()
	srv := mailtest.StartRedis(t, mailtest.RedisOptions{})
	r, err := memory.NewRedis(memory.RedisOptions{URL: srv.URL(0), Key: bytes.Repeat([]byte{9}, 32), Now: c.now, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, srv
}

// eachStore runs f with Approvals on each store: this process's memory,
// and Redis.
func eachStore(t *testing.T, maxPending int, f func(t *testing.T, a *Approvals, c *clock, shared bool)) {
	t.Run("local", func(t *testing.T) {
		c := &clock{time.Unix(1_800_000_000, 0)}
		f(t, newOn(t, c, memory.NewLocal(c.now), maxPending), c, false)
	})
	t.Run("redis", func(t *testing.T) {
		c := &clock{time.Unix(1_800_000_000, 0)}
		r, _ := newRedis(t, c)
		f(t, newOn(t, c, r, maxPending), c, true)
	})
}

var (
	alice      = Caller{Account: "alice@x.test"}
	aliceAlpha = Caller{Account: "alice@x.test", Agent: "alpha"}
	bob        = Caller{Account: "bob@x.test"}
)

// TestState: a state opens for exactly its caller (account and agent),
// tool and arguments (in any key order), once, within its five minutes,
// and gives back what it holds to.
func TestState(t *testing.T) { eachStore(t, 0, testState) }

func testState(t *testing.T, a *Approvals, c *clock, _ bool) {
	args := map[string]any{"to": []any{"b@x.test"}, "subject": "s", "n": 1.0}
	facts := json.RawMessage(`{"v":7,"h":"abc"}`)
	st, err := a.NewState(ctx, aliceAlpha, "agent_prune", args, Binding{Facts: facts})
	if err != nil {
		t.Fatal(err)
	}
	same := map[string]any{"n": 1.0, "subject": "s", "to": []any{"b@x.test"}}
	for _, tc := range []struct {
		name, state, tool string
		who               Caller
		args              map[string]any
		want              error
	}{
		{"other account", st, "agent_prune", Caller{"bob@x.test", "alpha"}, same, ErrStateInvalid},
		// The agent_prune case: a form shown for agent alpha, retried
		// without the agent (every agent's folders), is not the call the
		// person saw.
		{"no agent", st, "agent_prune", alice, same, ErrStateInvalid},
		{"another agent", st, "agent_prune", Caller{"alice@x.test", "beta"}, same, ErrStateInvalid},
		{"other tool", st, "smtp_reply_email", aliceAlpha, same, ErrStateInvalid},
		{"other recipient", st, "agent_prune", aliceAlpha, map[string]any{"to": []any{"m@x.test"}, "subject": "s", "n": 1.0}, ErrStateInvalid},
		{"an argument added", st, "agent_prune", aliceAlpha, map[string]any{"to": []any{"b@x.test"}, "subject": "s", "n": 1.0, "bcc": []any{"m@x.test"}}, ErrStateInvalid},
		{"altered", st[:len(st)-2] + "AA", "agent_prune", aliceAlpha, same, ErrStateInvalid},
		{"a link as a state", mustLink(t, a).Token, "agent_prune", aliceAlpha, same, ErrStateInvalid},
		{"right", st, "agent_prune", aliceAlpha, same, nil},
		{"again", st, "agent_prune", aliceAlpha, same, ErrStateUsed},
	} {
		b, err := a.UseState(ctx, tc.state, tc.who, tc.tool, tc.args)
		if !errors.Is(err, tc.want) && err != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == nil && string(b.Facts) != string(facts) {
			t.Errorf("%s: facts %s, want %s", tc.name, b.Facts, facts)
		}
	}
	late, _ := a.NewState(ctx, alice, "t", nil, Binding{})
	c.t = c.t.Add(StateTTL)
	if _, err := a.UseState(ctx, late, alice, "t", nil); !errors.Is(err, ErrStateExpired) {
		t.Fatalf("after five minutes: %v", err)
	}
}

func mustLink(t *testing.T, a *Approvals) Minted {
	m, err := a.NewLink(ctx, Link{Creds: credentials.New("alice@x.test", "pw"), Tool: "imap_delete_folder", Args: json.RawMessage(`{"folder":"X"}`)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLink: a link carries the call, what it holds to and the credentials
// (scope and agent included), expires, never outlives a sign-in, and is
// used once.
func TestLink(t *testing.T) { eachStore(t, 0, testLink) }

func testLink(t *testing.T, a *Approvals, c *clock, _ bool) {
	// A password long enough that base64 text cannot hold it by chance
	// ("pw" is in about one token in twenty).
	const password = "correct-horse-battery-staple"
	creds := credentials.New("alice@x.test", password)
	creds.Agent = "backend"
	m, err := a.NewLink(ctx, Link{Creds: creds, Tool: "smtp_send_draft", Binding: Binding{Draft: &DraftRef{Folder: "Drafts", UID: 7, UIDValidity: 9, MessageID: "m@x"}}, IdempotencyKey: "k"}, 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Expires.Equal(c.t.Add(30*time.Minute)) || m.ID == "" || strings.Contains(m.Token, m.ID) {
		t.Fatalf("minted %+v", m)
	}
	if strings.Contains(m.Token, password) || strings.Contains(m.Token, "alice") {
		t.Fatal("the link shows the login")
	}
	l, err := a.OpenLink(ctx, m.Token)
	if err != nil {
		t.Fatal(err)
	}
	if l.Creds.User != "alice@x.test" || l.Creds.Password() != password || l.Caller() != (Caller{"alice@x.test", "backend"}) || l.Tool != "smtp_send_draft" ||
		*l.Binding.Draft != (DraftRef{"Drafts", 7, 9, "m@x"}) || l.IdempotencyKey != "k" || l.Nonce != m.ID {
		t.Fatalf("opened %+v", l)
	}
	if err := a.UseLink(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := a.OpenLink(ctx, m.Token); !errors.Is(err, ErrLinkUsed) {
		t.Fatalf("a used link: %v", err)
	}
	if err := a.UseLink(ctx, l); !errors.Is(err, ErrLinkUsed) {
		t.Fatalf("used twice: %v", err)
	}
	// Expiry, and a sign-in's expiry caps the link's.
	m2, _ := a.NewLink(ctx, Link{Creds: creds, Tool: "x"}, time.Minute)
	c.t = c.t.Add(time.Minute)
	if _, err := a.OpenLink(ctx, m2.Token); !errors.Is(err, ErrLinkExpired) {
		t.Fatalf("an expired link: %v", err)
	}
	signedIn := creds
	signedIn.Expires = c.t.Add(5 * time.Minute)
	m3, _ := a.NewLink(ctx, Link{Creds: signedIn, Tool: "x"}, time.Hour)
	if !m3.Expires.Equal(signedIn.Expires) {
		t.Fatalf("a sign-in's link expires %v, want %v", m3.Expires, signedIn.Expires)
	}
	for _, bad := range []string{"", "apl1.", "apl1.AAAA", m.Token[:len(m.Token)-3], "aps1." + m.Token[5:]} {
		if _, err := a.OpenLink(ctx, bad); !errors.Is(err, ErrLinkInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// A link the person would not open is done with.
	m4, _ := a.NewLink(ctx, Link{Creds: creds, Tool: "x"}, time.Hour)
	a.DropLink(ctx, CallerOf(creds), m4.ID, m4.Expires)
	if _, err := a.OpenLink(ctx, m4.Token); !errors.Is(err, ErrLinkUsed) {
		t.Fatalf("a dropped link: %v", err)
	}
}

// TestPendingPerAccount: one account's waiting approvals are capped, and
// filling that cap (or the used memory) refuses only that account: the
// issue's case of one mailbox with 10,000 approvals asked for.
func TestPendingPerAccount(t *testing.T) { eachStore(t, 20, testPendingPerAccount) }

func testPendingPerAccount(t *testing.T, a *Approvals, c *clock, shared bool) {
	mallory := credentials.New("mallory@x.test", "pw")
	var pending *PendingError
	made, refused := 0, 0
	tries := 10_000
	if shared {
		tries = 1_000 // a round trip each
	}
	for i := range tries {
		var err error
		if i%2 == 0 {
			_, err = a.NewLink(ctx, Link{Creds: mallory, Tool: "x"}, 30*time.Minute)
		} else {
			_, err = a.NewState(ctx, CallerOf(mallory), "x", nil, Binding{})
		}
		switch {
		case err == nil:
			made++
		case errors.As(err, &pending) && pending.Max == 20:
			refused++
		default:
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	if made != 20 || refused != tries-20 || a.Waiting(ctx, "mallory@x.test") != 20 {
		t.Fatalf("made %d, refused %d, waiting %d", made, refused, a.Waiting(ctx, "mallory@x.test"))
	}
	// Another mailbox is not affected at all.
	for i := range 20 {
		if _, err := a.NewLink(ctx, Link{Creds: credentials.New("bob@x.test", "pw"), Tool: "x"}, 30*time.Minute); err != nil {
			t.Fatalf("bob's link %d: %v", i, err)
		}
	}
	// An answered approval frees its place; an expired one too.
	m, _ := a.NewLink(ctx, Link{Creds: credentials.New("carol@x.test", "pw"), Tool: "x"}, 30*time.Minute)
	for range 19 {
		a.NewLink(ctx, Link{Creds: credentials.New("carol@x.test", "pw"), Tool: "x"}, 30*time.Minute)
	}
	l, err := a.OpenLink(ctx, m.Token)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.UseLink(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := a.NewLink(ctx, Link{Creds: credentials.New("carol@x.test", "pw"), Tool: "x"}, 30*time.Minute); err != nil {
		t.Fatalf("after one was answered: %v", err)
	}
	if shared {
		return // Redis forgets by its own clock: the expiry is the store's test
	}
	c.t = c.t.Add(31 * time.Minute)
	if _, err := a.NewLink(ctx, Link{Creds: mallory, Tool: "x"}, 30*time.Minute); err != nil {
		t.Fatalf("after they expired: %v", err)
	}
}

// TestMemoryFailsClosed: this process's memory, full, refuses a new use
// rather than forget one: an account whose used memory is full refuses
// only itself, and a memory full in all refuses every account until
// entries expire.
func TestMemoryFailsClosed(t *testing.T) {
	now := time.Unix(1000, 0)
	s := memory.NewLocal(func() time.Time { return now })
	m := &ledger{waiting: s.Slots("t.pending", memory.Bounds{}), used: s.Once("t.used", memory.Bounds{Max: 4, PerScope: 3}), maxPending: 20}
	for _, id := range []string{"a", "b", "c"} {
		if err := m.use(ctx, "alice", id, now.Add(time.Minute), ErrLinkUsed); err != nil {
			t.Fatal(err)
		}
	}
	var busy *UnavailableError
	if err := m.use(ctx, "alice", "d", now.Add(time.Minute), ErrLinkUsed); !errors.As(err, &busy) || !strings.Contains(err.Error(), "this mailbox has answered too many") {
		t.Fatalf("full: %v", err)
	}
	if err := m.use(ctx, "alice", "a", now.Add(time.Minute), ErrLinkUsed); !errors.Is(err, ErrLinkUsed) {
		t.Fatalf("a used id on a full account: %v", err)
	}
	if err := m.use(ctx, "bob", "d", now.Add(10*time.Minute), ErrLinkUsed); err != nil {
		t.Fatalf("another account: %v", err)
	}
	// Full in all: 4 entries.
	if err := m.use(ctx, "carol", "x", now.Add(time.Minute), ErrLinkUsed); !errors.As(err, &busy) || !strings.Contains(err.Error(), "too many approvals to take another") || busy.RetryAfter != time.Minute {
		t.Fatalf("a full memory: %v", err)
	}
	now = now.Add(2 * time.Minute)
	if err := m.use(ctx, "alice", "d", now.Add(time.Minute), ErrLinkUsed); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if err := m.use(ctx, "carol", "x", now.Add(time.Minute), ErrLinkUsed); err != nil {
		t.Fatalf("a third account once the others expired: %v", err)
	}
}

// TestSharedMemoryFailsClosed: while Redis does not answer, no state or
// link is made, opened or used (an *UnavailableError: 503 with
// Retry-After); when it answers again, they are, with no restart. (A
// Redis without persistence forgot what was used: docs/scaling.md.)
func TestSharedMemoryFailsClosed(t *testing.T) {
	c := &clock{time.Now()}
	r, srv := newRedis(t, c)
	a := newOn(t, c, r, 0)
	creds := credentials.New("alice@x.test", "pw")
	m, err := a.NewLink(ctx, Link{Creds: creds, Tool: "x"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	st, err := a.NewState(ctx, alice, "t", nil, Binding{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	unavailable := func(what string, err error) {
		t.Helper()
		var u *UnavailableError
		if !errors.As(err, &u) || u.RetryAfter <= 0 || !strings.Contains(err.Error(), "nothing was done") {
			t.Errorf("%s with Redis killed: %v, want an UnavailableError", what, err)
		}
	}
	_, err = a.OpenLink(ctx, m.Token)
	unavailable("OpenLink", err)
	unavailable("UseLink", a.UseLink(ctx, Link{Creds: creds, Nonce: m.ID, Expires: m.Expires}))
	_, err = a.UseState(ctx, st, alice, "t", nil)
	unavailable("UseState", err)
	_, err = a.NewState(ctx, alice, "t", nil, Binding{})
	unavailable("NewState", err)
	_, err = a.NewLink(ctx, Link{Creds: creds, Tool: "x"}, time.Hour)
	unavailable("NewLink", err)
	unavailable("Room", a.Room(ctx, "alice@x.test"))
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := a.OpenLink(ctx, m.Token)
		if err == nil {
			if err := a.UseLink(ctx, l); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis back, the link still refused: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := a.UseState(ctx, st, alice, "t", nil); err != nil {
		t.Fatalf("Redis back, the state: %v", err)
	}
	if _, err := a.UseState(ctx, st, alice, "t", nil); !errors.Is(err, ErrStateUsed) {
		t.Fatalf("the state used twice after Redis came back: %v", err)
	}
}

// TestSessions: a session id opens only for the account it was made for,
// with the modes it was made with.
func TestSessions(t *testing.T) {
	a, _ := newTest(t)
	id, err := a.NewSession("alice@x.test", Modes{URL: true})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := a.OpenSession(id, "alice@x.test"); !IsSession(id) || !ok || m != (Modes{URL: true}) {
		t.Fatalf("the session does not open for its account: %v %v", m, ok)
	}
	for _, acct := range []string{"bob@x.test", ""} {
		if _, ok := a.OpenSession(id, acct); ok {
			t.Fatalf("the session opens for %q", acct)
		}
	}
	if _, ok := a.OpenSession(id[:len(id)-2]+"AA", "alice@x.test"); ok {
		t.Fatal("an altered session opens")
	}
	if other, _ := a.NewSession("alice@x.test", Modes{Form: true}); other == id {
		t.Fatal("two sessions of one account are the same: answers could reach the wrong call")
	}
}

// TestPerson: the sign-in cookie opens while it lasts, as who signed in;
// its forms' tokens are its own and the link's.
func TestPerson(t *testing.T) {
	a, c := newTest(t)
	v, err := a.newPerson(aliceAlpha)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(v, "alice") {
		t.Fatal("the cookie shows the account")
	}
	p, ok := a.openPerson(v)
	if !ok || p.Caller != aliceAlpha {
		t.Fatalf("opened %+v %v", p, ok)
	}
	other, _ := a.newPerson(aliceAlpha)
	q, _ := a.openPerson(other)
	if p.csrf("L1") == p.csrf("L2") || p.csrf("L1") == q.csrf("L1") || len(p.csrf("L1")) != 64 {
		t.Fatal("form tokens are not bound to both the sign-in and the link")
	}
	if _, ok := a.openPerson(v[:len(v)-2] + "AA"); ok {
		t.Fatal("an altered cookie opens")
	}
	if _, ok := a.openPerson("app1.x"); ok {
		t.Fatal("garbage opens")
	}
	c.t = c.t.Add(SignInTTL)
	if _, ok := a.openPerson(v); ok {
		t.Fatal("the sign-in outlives SignInTTL")
	}
}

func TestPreviewMessage(t *testing.T) {
	p := Preview{Title: "Send this email?", Fields: []Field{{"To", "b@x.test"}, {"Subject", "Hi"}},
		Attachments: []File{{"a.pdf", 2048}}, Text: "Hello", Items: []string{"one"}, Warning: "Careful."}
	want := "Send this email?\n\nTo: b@x.test\nSubject: Hi\nAttachments:\n  a.pdf (2 KB)\n\nHello\n\n- one\n\nCareful."
	if got := p.Message(); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	// Both versions of a message, each named, the HTML one last.
	p = Preview{Title: "Send?", Text: "Pay 10 EUR", HTML: "Pay 900 EUR"}
	if got := p.Message(); !strings.Contains(got, "Text version:\n\nPay 10 EUR") || !strings.Contains(got, "HTML version") || !strings.HasSuffix(got, ":\n\nPay 900 EUR") {
		t.Fatalf("both versions: %q", got)
	}
}

// TestVisible: what changes how text reads, or cannot be seen, is shown
// as an escape, in every part of a preview.
func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"invoice\u202Efdp.exe":          "invoice⟨U+202E⟩fdp.exe",
		"a\u200Bb\u2066c\u2069":         "a⟨U+200B⟩b⟨U+2066⟩c⟨U+2069⟩",
		"soft\u00ADhyphen\u2028line":    "soft⟨U+00AD⟩hyphen⟨U+2028⟩line",
		"tag\U000E0041s":                "tag⟨U+E0041⟩s",
		"bell\x07 \x1b[31m":             "bell⟨U+0007⟩ ⟨U+001B⟩[31m",
		"line one\n\tline two, Grüße ✓": "line one\n\tline two, Grüße ✓",
		"\u3164":                        "⟨U+3164⟩",
	} {
		if got := Visible(in); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
	p := Preview{Title: "T\u202E", Fields: []Field{{"Subject", "x\u202Ey"}}, Attachments: []File{{"cod.\u202Eexe", 1}}, Text: "t\u200F", HTML: "h\u2067", Items: []string{"i\u202D"}, Warning: "w\u200E"}
	msg := p.Message()
	if strings.ContainsAny(msg, "\u202E\u200F\u2067\u202D\u200E") || strings.Count(msg, "⟨U+") != 7 {
		t.Fatalf("the form shows invisible characters: %q", msg)
	}
	s := p.Shown()
	for _, v := range []string{s.Title, s.Fields[0].Value, s.Attachments[0].Name, s.Text, s.HTML, s.Items[0], s.Warning} {
		if !strings.Contains(v, "⟨U+") {
			t.Errorf("not shown: %q", v)
		}
	}
	if p.Title != "T\u202E" {
		t.Fatal("Shown changed the original")
	}
}

func ExampleVisible() {
	fmt.Println(Visible("Invoice \u202Efdp.exe"))
	// Output: Invoice ⟨U+202E⟩fdp.exe
}
