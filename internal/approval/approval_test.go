package approval

import (
	"bytes"
	"encoding/json"
	"errors"
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
	return New(s, c.now), c
}

// TestState: a state opens for exactly its account, tool and arguments
// (in any key order), once, within its five minutes.
func TestState(t *testing.T) {
	a, c := newTest(t)
	args := map[string]any{"to": []any{"b@x.test"}, "subject": "s", "n": 1.0}
	st, err := a.NewState("alice@x.test", "smtp_send_email", args)
	if err != nil {
		t.Fatal(err)
	}
	same := map[string]any{"n": 1.0, "subject": "s", "to": []any{"b@x.test"}}
	for _, tc := range []struct {
		name, state, account, tool string
		args                       map[string]any
		want                       error
	}{
		{"other account", st, "bob@x.test", "smtp_send_email", same, ErrStateInvalid},
		{"other tool", st, "alice@x.test", "smtp_reply_email", same, ErrStateInvalid},
		{"other recipient", st, "alice@x.test", "smtp_send_email", map[string]any{"to": []any{"m@x.test"}, "subject": "s", "n": 1.0}, ErrStateInvalid},
		{"an argument added", st, "alice@x.test", "smtp_send_email", map[string]any{"to": []any{"b@x.test"}, "subject": "s", "n": 1.0, "bcc": []any{"m@x.test"}}, ErrStateInvalid},
		{"altered", st[:len(st)-2] + "AA", "alice@x.test", "smtp_send_email", same, ErrStateInvalid},
		{"a link as a state", mustLink(t, a), "alice@x.test", "smtp_send_email", same, ErrStateInvalid},
		{"right", st, "alice@x.test", "smtp_send_email", same, nil},
		{"again", st, "alice@x.test", "smtp_send_email", same, ErrStateUsed},
	} {
		if err := a.UseState(tc.state, tc.account, tc.tool, tc.args); !errors.Is(err, tc.want) && err != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	late, _ := a.NewState("alice@x.test", "t", nil)
	c.t = c.t.Add(StateTTL)
	if err := a.UseState(late, "alice@x.test", "t", nil); !errors.Is(err, ErrStateExpired) {
		t.Fatalf("after five minutes: %v", err)
	}
}

func mustLink(t *testing.T, a *Approvals) string {
	tok, _, err := a.NewLink(Link{Creds: credentials.New("alice@x.test", "pw"), Tool: "imap_delete_folder", Args: json.RawMessage(`{"folder":"X"}`)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestLink: a link carries the call and the credentials (scope and agent
// included), expires, never outlives a sign-in, and is used once.
func TestLink(t *testing.T) {
	a, c := newTest(t)
	// A password long enough that base64 text cannot hold it by chance
	// ("pw" is in about one token in twenty).
	const password = "correct-horse-battery-staple"
	creds := credentials.New("alice@x.test", password)
	creds.Agent = "backend"
	tok, exp, err := a.NewLink(Link{Creds: creds, Tool: "smtp_send_draft", Draft: &DraftRef{Folder: "Drafts", UID: 7, UIDValidity: 9, MessageID: "m@x"}, IdempotencyKey: "k"}, 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Equal(c.t.Add(30 * time.Minute)) {
		t.Fatalf("expires %v", exp)
	}
	if strings.Contains(tok, password) || strings.Contains(tok, "alice") {
		t.Fatal("the link shows the login")
	}
	l, err := a.OpenLink(tok)
	if err != nil {
		t.Fatal(err)
	}
	if l.Creds.User != "alice@x.test" || l.Creds.Password() != password || l.Creds.Agent != "backend" || l.Tool != "smtp_send_draft" || *l.Draft != (DraftRef{"Drafts", 7, 9, "m@x"}) || l.IdempotencyKey != "k" {
		t.Fatalf("opened %+v", l)
	}
	if err := a.UseLink(l); err != nil {
		t.Fatal(err)
	}
	if _, err := a.OpenLink(tok); !errors.Is(err, ErrLinkUsed) {
		t.Fatalf("a used link: %v", err)
	}
	if err := a.UseLink(l); !errors.Is(err, ErrLinkUsed) {
		t.Fatalf("used twice: %v", err)
	}
	// Expiry, and a sign-in's expiry caps the link's.
	tok2, _, _ := a.NewLink(Link{Creds: creds, Tool: "x"}, time.Minute)
	c.t = c.t.Add(time.Minute)
	if _, err := a.OpenLink(tok2); !errors.Is(err, ErrLinkExpired) {
		t.Fatalf("an expired link: %v", err)
	}
	signedIn := creds
	signedIn.Expires = c.t.Add(5 * time.Minute)
	_, exp, _ = a.NewLink(Link{Creds: signedIn, Tool: "x"}, time.Hour)
	if !exp.Equal(signedIn.Expires) {
		t.Fatalf("a sign-in's link expires %v, want %v", exp, signedIn.Expires)
	}
	for _, bad := range []string{"", "apl1.", "apl1.AAAA", tok[:len(tok)-3], "aps1." + tok[5:]} {
		if _, err := a.OpenLink(bad); !errors.Is(err, ErrLinkInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestOnceSetFailsClosed: full of live entries, it refuses new ones and
// never forgets a used one.
func TestOnceSetFailsClosed(t *testing.T) {
	o := newOnceSet(3)
	now := time.Unix(1000, 0)
	for _, id := range []string{"a", "b", "c"} {
		if err := o.use(id, now.Add(time.Minute), now, ErrLinkUsed); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.use("d", now.Add(time.Minute), now, ErrLinkUsed); !errors.Is(err, ErrBusy) {
		t.Fatalf("full: %v", err)
	}
	if err := o.use("a", now.Add(time.Minute), now, ErrLinkUsed); !errors.Is(err, ErrLinkUsed) {
		t.Fatalf("a used id on a full set: %v", err)
	}
	later := now.Add(2 * time.Minute)
	if err := o.use("d", later.Add(time.Minute), later, ErrLinkUsed); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// TestSessions: a session id opens only for the account it was made for.
func TestSessions(t *testing.T) {
	a, _ := newTest(t)
	id, err := a.NewSession("alice@x.test")
	if err != nil {
		t.Fatal(err)
	}
	if !IsSession(id) || !a.OpenSession(id, "alice@x.test") {
		t.Fatal("the session does not open for its account")
	}
	if a.OpenSession(id, "bob@x.test") || a.OpenSession(id, "") || a.OpenSession(id[:len(id)-2]+"AA", "alice@x.test") {
		t.Fatal("the session opens for another account, or altered")
	}
	if other, _ := a.NewSession("alice@x.test"); other == id {
		t.Fatal("two sessions of one account are the same: answers could reach the wrong call")
	}
}

func TestPreviewMessage(t *testing.T) {
	p := Preview{Title: "Send this email?", Fields: []Field{{"To", "b@x.test"}, {"Subject", "Hi"}},
		Attachments: []File{{"a.pdf", 2048}}, Text: "Hello", Items: []string{"one"}, Warning: "Careful."}
	want := "Send this email?\n\nTo: b@x.test\nSubject: Hi\nAttachments:\n  a.pdf (2 KB)\n\nHello\n\n- one\n\nCareful."
	if got := p.Message(); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
