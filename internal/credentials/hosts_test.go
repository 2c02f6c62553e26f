package credentials

import (
	"strings"
	"testing"
	"time"
)

// TestLoginHostTravels: the mail host of a login, and the provider whose
// sign-in issued its access token, travel in every sealed form (token,
// grant, download link), and come out named as CanonicalHosts names them:
// a token sealed with IMAP_HOST spelt out opens as the default host ("").
// Before, a download link dropped the host: a link made for a MAIL_HOSTS
// login logged in at the gateway's own host with that password.
func TestLoginHostTravels(t *testing.T) {
	s, _ := NewSealer(key(1))
	s.CanonicalHosts(func(h string) string {
		h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
		if h == "imap.default.test" {
			return ""
		}
		return h
	})
	now := time.Now()
	for _, tc := range []struct{ host, want string }{{"IMAP.Customer.Example.", "imap.customer.example"}, {"Imap.Default.Test", ""}, {"", ""}} {
		password := New("alice@example.test", "pw")
		password.Host = tc.host
		tok, err := s.Seal(password)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.OpenAt(tok, now)
		if err != nil || got.Host != tc.want {
			t.Errorf("token for %q: host %q %v, want %q", tc.host, got.Host, err, tc.want)
		}

		link, err := s.SealLink(Link{Creds: password, Folder: "INBOX", UID: 1, PartID: "2", Expires: now.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.OpenLink(link, now)
		if err != nil || l.Creds.Host != tc.want {
			t.Errorf("link for %q: host %q %v, want %q", tc.host, l.Creds.Host, err, tc.want)
		}

		signIn := NewOAuth("alice@example.test", "provider-access-token")
		signIn.Host, signIn.Provider = tc.host, "microsoft"
		g, err := s.SealGrant(KindAccess, Grant{ID: NewGrantID(), Creds: signIn, Expires: now.Add(time.Minute), Provider: "microsoft"})
		if err != nil {
			t.Fatal(err)
		}
		opened, err := s.OpenGrant(KindAccess, g, now)
		if err != nil || opened.Creds.Host != tc.want || opened.Creds.Provider != "microsoft" {
			t.Errorf("grant for %q: %+v %v", tc.host, opened.Creds, err)
		}
		// A token sealed from a sign-in's credentials keeps its provider.
		tok, err = s.Seal(opened.Creds)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.OpenAt(tok, now); err != nil || got.Provider != "microsoft" || got.Host != tc.want {
			t.Errorf("token of a sign-in for %q: %+v %v", tc.host, got, err)
		}
		link, _ = s.SealLink(Link{Creds: opened.Creds, Folder: "INBOX", UID: 1, PartID: "2", Expires: now.Add(30 * time.Second)})
		if l, err := s.OpenLink(link, now); err != nil || l.Creds.Provider != "microsoft" {
			t.Errorf("link of a sign-in for %q: %+v %v", tc.host, l.Creds, err)
		}
	}
}
