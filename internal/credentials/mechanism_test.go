package credentials

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// An OAuth credential never passes for a password: its token is not
// Password(), and it never prints.
func TestOAuthCredentialKind(t *testing.T) {
	const tok = "ya29.secret-token"
	o := NewOAuth("alice@example.test", tok)
	p := New("alice@example.test", tok)
	if o.Mechanism() != MechOAuth || p.Mechanism() != MechPassword {
		t.Fatalf("mechanisms %v, %v", o.Mechanism(), p.Mechanism())
	}
	if o.Password() != "" || o.AccessToken() != tok || p.AccessToken() != "" || p.Password() != tok || !o.Valid() {
		t.Fatalf("secrets leak across kinds")
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "creds", o)
	for _, s := range []string{fmt.Sprint(o), fmt.Sprintf("%v %+v %#v %s", o, o, o, o), o.GoString(), buf.String()} {
		if strings.Contains(s, tok) || strings.Contains(s, "secret") {
			t.Errorf("token printed: %s", s)
		}
	}
	if !strings.Contains(o.String(), "access token redacted") {
		t.Errorf("String: %s", o.String())
	}
}

// The pool reuses a connection only for the very same credential: a token
// never maps to a connection logged in with a password (even one spelt the
// same), nor to one of another token. The per-account group is shared:
// limits count the account, however it logs in.
func TestOAuthPoolKeys(t *testing.T) {
	const host = "imap.example.test"
	a := NewOAuth("alice@example.test", "tok-1")
	keys := map[string]string{
		"token":           a.Key(host),
		"password (same)": New("alice@example.test", "tok-1").Key(host),
		"other token":     NewOAuth("alice@example.test", "tok-2").Key(host),
		"other user":      NewOAuth("bob@example.test", "tok-1").Key(host),
	}
	seen := map[string]string{}
	for name, k := range keys {
		if other, dup := seen[k]; dup {
			t.Errorf("%s and %s share a pool key", name, other)
		}
		seen[k] = name
	}
	if a.Key(host) != NewOAuth("alice@example.test", "tok-1").Key(host) {
		t.Error("one token maps to two keys: nothing would be reused")
	}
	if Account(a.User) != Account("ALICE@example.test") {
		t.Error("the account of a token login differs from the password login's")
	}
}

// Tokens and download links carry the kind, so that an OAuth credential
// opens as one (never as a password).
func TestOAuthSealedKind(t *testing.T) {
	s, err := NewSealer(bytes.Repeat([]byte{7}, KeyLength))
	if err != nil {
		t.Fatal(err)
	}
	o := NewOAuth("alice@example.test", "ya29.abc")
	tok, err := s.Seal(o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Open(tok)
	if err != nil || got.Mechanism() != MechOAuth || got.AccessToken() != "ya29.abc" || got.User != o.User {
		t.Fatalf("Open: %v %v", got, err)
	}
	p, _ := s.Open(mustSeal(t, s, New("alice@example.test", "pw")))
	if p.Mechanism() != MechPassword || p.Password() != "pw" {
		t.Fatalf("a password token opened as %v", p.Mechanism())
	}
	link, err := s.SealLink(Link{Creds: o, Folder: "INBOX", UID: 1, PartID: "2", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.OpenLink(link, time.Now())
	if err != nil || l.Creds.Mechanism() != MechOAuth || l.Creds.AccessToken() != "ya29.abc" {
		t.Fatalf("OpenLink: %v %v", l.Creds, err)
	}
}

func mustSeal(t *testing.T, s *Sealer, c Credentials) string {
	t.Helper()
	tok, err := s.Seal(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The SASL client: OAUTHBEARER preferred, XOAUTH2 otherwise, nothing for a
// password; exact initial responses; a lone \x01 answers the error
// challenge.
func TestOAuthSASL(t *testing.T) {
	o := NewOAuth("a,b=c@example.test", "tok")
	for _, tc := range []struct {
		offered []string
		mech    string
		ir      string
	}{
		{[]string{"PLAIN", "xoauth2", "OAUTHBEARER"}, "OAUTHBEARER", "n,a=a=2Cb=3Dc@example.test,\x01auth=Bearer tok\x01\x01"},
		{[]string{"PLAIN", "XOAUTH2"}, "XOAUTH2", "user=a,b=c@example.test\x01auth=Bearer tok\x01\x01"},
		{[]string{"PLAIN", "LOGIN"}, "", ""},
		{nil, "", ""},
	} {
		c, ok := o.OAuthSASL(tc.offered)
		if !ok {
			if tc.mech != "" {
				t.Errorf("%v: no client", tc.offered)
			}
			continue
		}
		mech, ir, err := c.Start()
		if err != nil || mech != tc.mech || string(ir) != tc.ir {
			t.Errorf("%v: %s %q %v, want %s %q", tc.offered, mech, ir, err, tc.mech, tc.ir)
		}
		if resp, err := c.Next([]byte(`{"status":"invalid_token"}`)); err != nil || string(resp) != "\x01" {
			t.Errorf("%v: Next %q %v", tc.offered, resp, err)
		}
	}
	if _, ok := New("alice", "pw").OAuthSASL([]string{"OAUTHBEARER"}); ok {
		t.Error("a password credential got an OAuth client")
	}
	if c, _ := NewOAuth("alice", "to\x01k").OAuthSASL([]string{"XOAUTH2"}); c != nil {
		if _, _, err := c.Start(); err == nil {
			t.Error("a token with \\x01 was framed into a SASL message")
		}
	}
	for tok, want := range map[string]bool{"ya29.a-b_c~d+e/f=": true, "": false, "a b": false, "Bearer x": false, "é": false, "a\tb": false} {
		if ValidAccessToken(tok) != want {
			t.Errorf("ValidAccessToken(%q) = %v", tok, !want)
		}
	}
}
