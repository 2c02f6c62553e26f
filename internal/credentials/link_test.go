package credentials

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var linkNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func testLink() Link {
	return Link{Creds: New("alice@example.test", "alicepw-secret"), Folder: "Projekte/März", UID: 4711, UIDValidity: 1712345678,
		PartID: "2.1", Expires: linkNow.Add(10 * time.Minute)}
}

func TestLinkRoundTrip(t *testing.T) {
	s, _ := NewSealer(key(1))
	want := testLink()
	link, err := s.SealLink(want)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link, "att1.") || !base64URL(strings.TrimPrefix(link, "att1.")) {
		t.Fatalf("link %q is not att1. plus base64url", link)
	}
	for _, secret := range []string{"alice", "alicepw", "Projekte", "4711", "2.1"} {
		if strings.Contains(link, secret) {
			t.Fatalf("link shows %q: %s", secret, link)
		}
	}
	got, err := s.OpenLink(link, linkNow)
	if err != nil {
		t.Fatal(err)
	}
	if got.Creds.User != want.Creds.User || got.Creds.Password() != want.Creds.Password() || got.Folder != want.Folder ||
		got.UID != want.UID || got.UIDValidity != want.UIDValidity || got.PartID != want.PartID || !got.Expires.Equal(want.Expires) {
		t.Fatalf("round trip changed the link: %+v", got)
	}
	if again, _ := s.SealLink(want); again == link {
		t.Fatal("two seals of the same link are equal: nonce not random")
	}
}

func TestLinkExpiry(t *testing.T) {
	s, _ := NewSealer(key(1))
	l := testLink()
	link, _ := s.SealLink(l)
	if _, err := s.OpenLink(link, l.Expires.Add(-time.Second)); err != nil {
		t.Fatalf("a second before expiry: %v", err)
	}
	for _, at := range []time.Time{l.Expires, l.Expires.Add(time.Hour)} {
		if _, err := s.OpenLink(link, at); !errors.Is(err, ErrLinkExpired) {
			t.Fatalf("at %v: %v, want ErrLinkExpired", at, err)
		}
	}
}

// Every single-character change of a link is refused, and never reported
// as merely expired: an altered link cannot tell anything.
func TestLinkEveryByteFlipIsRejected(t *testing.T) {
	s, _ := NewSealer(key(1))
	link, _ := s.SealLink(testLink())
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!"
	for i := range len(link) {
		r := alphabet[(strings.IndexByte(alphabet, link[i])+1)%len(alphabet)]
		bad := link[:i] + string(r) + link[i+1:]
		_, err := s.OpenLink(bad, linkNow)
		if !errors.Is(err, ErrLinkMalformed) && !errors.Is(err, ErrLinkTampered) && !errors.Is(err, ErrLinkForeignKey) {
			t.Fatalf("changing byte %d (%q -> %q): %v", i, link[i], r, err)
		}
	}
}

func TestLinkRefusals(t *testing.T) {
	s, _ := NewSealer(key(1))
	other, _ := NewSealer(key(2))
	link, _ := s.SealLink(testLink())
	foreign, _ := other.SealLink(testLink())
	tok, _ := s.Seal(New("alice@example.test", "alicepw-secret"))
	tests := []struct {
		name, link string
		want       error
	}{
		{"empty", "", ErrLinkMalformed},
		{"only prefix", "att1.", ErrLinkMalformed},
		{"truncated", link[:len(link)-5], ErrLinkTampered},
		{"not base64", "att1.!!!!", ErrLinkMalformed},
		{"padded", link + "=", ErrLinkMalformed},
		{"huge", "att1." + strings.Repeat("A", 1<<20), ErrLinkMalformed},
		{"other key", foreign, ErrLinkForeignKey},
		{"a credentials token", tok, ErrLinkMalformed},
		// The token's sealed body under the link's prefix: same key, but
		// the additional data differs, so the tag fails.
		{"a token's body as a link", "att1." + strings.TrimPrefix(tok, prefixV1), ErrLinkTampered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.OpenLink(tt.link, linkNow)
			if tt.name == "truncated" && errors.Is(err, ErrLinkMalformed) {
				return // a cut can leave invalid base64
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("OpenLink = %v, want %v", err, tt.want)
			}
		})
	}
	// And the other way: a link is never a credentials token.
	if _, err := s.Open(link); err == nil {
		t.Fatal("a link opened as a credentials token")
	}
	if _, err := s.Open(prefixV1 + strings.TrimPrefix(link, prefixLink)); !errors.Is(err, ErrTampered) {
		t.Fatalf("a link's body as a token: %v, want ErrTampered", err)
	}
	for _, err := range []error{ErrLinkMalformed, ErrLinkForeignKey, ErrLinkTampered, ErrLinkExpired} {
		if strings.Contains(err.Error(), "alice") {
			t.Fatalf("%v names the user", err)
		}
	}
}

func TestLinkPreviousKeyOpens(t *testing.T) {
	old, _ := NewSealer(key(1))
	link, _ := old.SealLink(testLink())
	rotated, _ := NewSealer(key(2), key(1))
	if l, err := rotated.OpenLink(link, linkNow); err != nil || l.UID != 4711 {
		t.Fatalf("link of the previous key: %v", err)
	}
}

func TestSealLinkRefuses(t *testing.T) {
	s, _ := NewSealer(key(1))
	ok := testLink()
	for name, mutate := range map[string]func(*Link){
		"no password":    func(l *Link) { l.Creds = New("alice", "") },
		"no uid":         func(l *Link) { l.UID = 0 },
		"no part":        func(l *Link) { l.PartID = "" },
		"no folder":      func(l *Link) { l.Folder = "" },
		"no expiry":      func(l *Link) { l.Expires = time.Time{} },
		"invalid UTF-8":  func(l *Link) { l.Folder = "caf\xe9" },
		"NUL in the pwd": func(l *Link) { l.Creds = New("alice", "a\x00b") },
		"too long":       func(l *Link) { l.Creds = New("alice", strings.Repeat("p", maxLink)) },
	} {
		l := ok
		mutate(&l)
		if link, err := s.SealLink(l); err == nil {
			t.Errorf("%s: sealed %q", name, link)
		}
	}
}

// FuzzOpenLink feeds arbitrary text to OpenLink: it never panics, fails
// only with one of the link errors, and whatever it opens is a complete,
// unexpired link. Links of the current and the previous key, and a
// credentials token, are among the seeds, so mutations reach the AEAD and
// JSON steps.
func FuzzOpenLink(f *testing.F) {
	s, err := NewSealer(fuzzCurrent, fuzzPrevious)
	if err != nil {
		f.Fatal(err)
	}
	old, _ := NewSealer(fuzzPrevious)
	link, _ := s.SealLink(testLink())
	oldLink, _ := old.SealLink(testLink())
	tok, _ := s.Seal(New("alice@example.test", "pw"))
	f.Add(link)
	f.Add(oldLink)
	f.Add(tok)
	f.Add("att1." + strings.TrimPrefix(tok, prefixV1))
	f.Add(link[:len(link)-1])
	f.Add("att1.")
	f.Add(strings.Repeat("A", 5000))
	f.Fuzz(func(t *testing.T, in string) {
		l, err := s.OpenLink(in, linkNow)
		if err != nil {
			if !errors.Is(err, ErrLinkMalformed) && !errors.Is(err, ErrLinkForeignKey) && !errors.Is(err, ErrLinkTampered) && !errors.Is(err, ErrLinkExpired) {
				t.Fatalf("undocumented error %v", err)
			}
			if l.Creds.Valid() {
				t.Fatalf("link %+v returned with error %v", l, err)
			}
			return
		}
		if !l.Creds.Valid() || l.UID == 0 || l.PartID == "" || l.Folder == "" || !linkNow.Before(l.Expires) {
			t.Fatalf("opened an incomplete link from %q: %+v", in, l)
		}
		if !strings.HasPrefix(in, prefixLink) || !base64URL(in[len(prefixLink):]) {
			t.Fatalf("opened %q, which is not att1. plus base64url", in)
		}
	})
}
