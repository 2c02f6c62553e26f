package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTest(t *testing.T) (*Approvals, *clock) {
	t.Helper()
	s, err := credentials.NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{time.Unix(1_800_000_000, 0)}
	return New(s, Options{Now: c.now}), c
}

var (
	alice      = Caller{Account: "alice@x.test"}
	aliceAlpha = Caller{Account: "alice@x.test", Agent: "alpha"}
	bob        = Caller{Account: "bob@x.test"}
)

// TestState: a state opens for exactly its caller (account and agent),
// tool and arguments (in any key order), once, within its five minutes,
// and gives back what it holds to.
func TestState(t *testing.T) {
	a, c := newTest(t)
	args := map[string]any{"to": []any{"b@x.test"}, "subject": "s", "n": 1.0}
	facts := json.RawMessage(`{"v":7,"h":"abc"}`)
	st, err := a.NewState(aliceAlpha, "agent_prune", args, Binding{Facts: facts})
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
		b, err := a.UseState(tc.state, tc.who, tc.tool, tc.args)
		if !errors.Is(err, tc.want) && err != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == nil && string(b.Facts) != string(facts) {
			t.Errorf("%s: facts %s, want %s", tc.name, b.Facts, facts)
		}
	}
	late, _ := a.NewState(alice, "t", nil, Binding{})
	c.t = c.t.Add(StateTTL)
	if _, err := a.UseState(late, alice, "t", nil); !errors.Is(err, ErrStateExpired) {
		t.Fatalf("after five minutes: %v", err)
	}
}

func mustLink(t *testing.T, a *Approvals) Minted {
	m, err := a.NewLink(Link{Creds: credentials.New("alice@x.test", "pw"), Tool: "imap_delete_folder", Args: json.RawMessage(`{"folder":"X"}`)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLink: a link carries the call, what it holds to and the credentials
// (scope and agent included), expires, never outlives a sign-in, and is
// used once.
func TestLink(t *testing.T) {
	a, c := newTest(t)
	// A password long enough that base64 text cannot hold it by chance
	// ("pw" is in about one token in twenty).
	const password = "correct-horse-battery-staple"
	creds := credentials.New("alice@x.test", password)
	creds.Agent = "backend"
	m, err := a.NewLink(Link{Creds: creds, Tool: "smtp_send_draft", Binding: Binding{Draft: &DraftRef{Folder: "Drafts", UID: 7, UIDValidity: 9, MessageID: "m@x"}}, IdempotencyKey: "k"}, 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Expires.Equal(c.t.Add(30*time.Minute)) || m.ID == "" || strings.Contains(m.Token, m.ID) {
		t.Fatalf("minted %+v", m)
	}
	if strings.Contains(m.Token, password) || strings.Contains(m.Token, "alice") {
		t.Fatal("the link shows the login")
	}
	l, err := a.OpenLink(m.Token)
	if err != nil {
		t.Fatal(err)
	}
	if l.Creds.User != "alice@x.test" || l.Creds.Password() != password || l.Caller() != (Caller{"alice@x.test", "backend"}) || l.Tool != "smtp_send_draft" ||
		*l.Binding.Draft != (DraftRef{"Drafts", 7, 9, "m@x"}) || l.IdempotencyKey != "k" || l.Nonce != m.ID {
		t.Fatalf("opened %+v", l)
	}
	if err := a.UseLink(l); err != nil {
		t.Fatal(err)
	}
	if _, err := a.OpenLink(m.Token); !errors.Is(err, ErrLinkUsed) {
		t.Fatalf("a used link: %v", err)
	}
	if err := a.UseLink(l); !errors.Is(err, ErrLinkUsed) {
		t.Fatalf("used twice: %v", err)
	}
	// Expiry, and a sign-in's expiry caps the link's.
	m2, _ := a.NewLink(Link{Creds: creds, Tool: "x"}, time.Minute)
	c.t = c.t.Add(time.Minute)
	if _, err := a.OpenLink(m2.Token); !errors.Is(err, ErrLinkExpired) {
		t.Fatalf("an expired link: %v", err)
	}
	signedIn := creds
	signedIn.Expires = c.t.Add(5 * time.Minute)
	m3, _ := a.NewLink(Link{Creds: signedIn, Tool: "x"}, time.Hour)
	if !m3.Expires.Equal(signedIn.Expires) {
		t.Fatalf("a sign-in's link expires %v, want %v", m3.Expires, signedIn.Expires)
	}
	for _, bad := range []string{"", "apl1.", "apl1.AAAA", m.Token[:len(m.Token)-3], "aps1." + m.Token[5:]} {
		if _, err := a.OpenLink(bad); !errors.Is(err, ErrLinkInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// A link the person would not open is done with.
	m4, _ := a.NewLink(Link{Creds: creds, Tool: "x"}, time.Hour)
	a.DropLink(CallerOf(creds), m4.ID, m4.Expires)
	if _, err := a.OpenLink(m4.Token); !errors.Is(err, ErrLinkUsed) {
		t.Fatalf("a dropped link: %v", err)
	}
}

// TestPendingPerAccount: one account's waiting approvals are capped, and
// filling that cap (or the used memory) refuses only that account: the
// issue's case of one mailbox with 10,000 approvals asked for.
func TestPendingPerAccount(t *testing.T) {
	s, _ := credentials.NewSealer(bytes.Repeat([]byte{7}, 32))
	c := &clock{time.Unix(1_800_000_000, 0)}
	a := New(s, Options{MaxPending: 20, Now: c.now})
	mallory := credentials.New("mallory@x.test", "pw")
	var pending *PendingError
	made, refused := 0, 0
	for i := range 10_000 {
		var err error
		if i%2 == 0 {
			_, err = a.NewLink(Link{Creds: mallory, Tool: "x"}, 30*time.Minute)
		} else {
			_, err = a.NewState(CallerOf(mallory), "x", nil, Binding{})
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
	if made != 20 || refused != 9_980 || a.Waiting("mallory@x.test") != 20 {
		t.Fatalf("made %d, refused %d, waiting %d", made, refused, a.Waiting("mallory@x.test"))
	}
	// Another mailbox is not affected at all.
	for i := range 20 {
		if _, err := a.NewLink(Link{Creds: credentials.New("bob@x.test", "pw"), Tool: "x"}, 30*time.Minute); err != nil {
			t.Fatalf("bob's link %d: %v", i, err)
		}
	}
	// An answered approval frees its place; an expired one too.
	m, _ := a.NewLink(Link{Creds: credentials.New("carol@x.test", "pw"), Tool: "x"}, 30*time.Minute)
	for range 19 {
		a.NewLink(Link{Creds: credentials.New("carol@x.test", "pw"), Tool: "x"}, 30*time.Minute)
	}
	l, err := a.OpenLink(m.Token)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.UseLink(l); err != nil {
		t.Fatal(err)
	}
	if _, err := a.NewLink(Link{Creds: credentials.New("carol@x.test", "pw"), Tool: "x"}, 30*time.Minute); err != nil {
		t.Fatalf("after one was answered: %v", err)
	}
	c.t = c.t.Add(31 * time.Minute)
	if _, err := a.NewLink(Link{Creds: mallory, Tool: "x"}, 30*time.Minute); err != nil {
		t.Fatalf("after they expired: %v", err)
	}
}

// TestMemoryFailsClosed: an account whose used memory is full refuses a
// new use rather than forget one, and other accounts go on.
func TestMemoryFailsClosed(t *testing.T) {
	m := newMemory(20)
	m.maxUsed = 3
	now := time.Unix(1000, 0)
	for _, id := range []string{"a", "b", "c"} {
		if err := m.use("alice", id, now.Add(time.Minute), now, ErrLinkUsed); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.use("alice", "d", now.Add(time.Minute), now, ErrLinkUsed); !errors.Is(err, ErrBusy) {
		t.Fatalf("full: %v", err)
	}
	if err := m.use("alice", "a", now.Add(time.Minute), now, ErrLinkUsed); !errors.Is(err, ErrLinkUsed) {
		t.Fatalf("a used id on a full account: %v", err)
	}
	if err := m.use("bob", "d", now.Add(10*time.Minute), now, ErrLinkUsed); err != nil {
		t.Fatalf("another account: %v", err)
	}
	later := now.Add(2 * time.Minute)
	if err := m.use("alice", "d", later.Add(time.Minute), later, ErrLinkUsed); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	// The accounts themselves are bounded: past the bound, accounts with
	// nothing live are forgotten, live ones never.
	m.maxAccounts = 2
	if err := m.wait("carol", "x", later.Add(time.Minute), later); !errors.Is(err, errFull) {
		t.Fatalf("a third account: %v", err)
	}
	much := later.Add(time.Hour)
	if err := m.wait("carol", "x", much.Add(time.Minute), much); err != nil {
		t.Fatalf("a third account once the others expired: %v", err)
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
