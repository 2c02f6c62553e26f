package credentials

import (
	"errors"
	"testing"
	"time"
)

// An OAuth value opens only as its own kind, under the current or a
// previous key, and not after it expires.
func TestOAuthKindsDoNotCross(t *testing.T) {
	oldKey, newKey := make([]byte, KeyLength), make([]byte, KeyLength)
	newKey[0] = 1
	old, _ := NewSealer(oldKey)
	s, _ := NewSealer(newKey, oldKey)
	g := Grant{ID: NewGrantID(), Creds: New("u@x", "pw"), Audience: "https://a/mcp", Expires: time.Now().Add(time.Hour)}
	now := time.Now()
	for _, kind := range []OAuthKind{KindCode, KindAccess, KindRefresh} {
		tok, err := s.SealGrant(kind, g)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range []OAuthKind{KindCode, KindAccess, KindRefresh} {
			got, err := s.OpenGrant(other, tok, now)
			if other == kind && (err != nil || got.Creds.Password() != "pw" || got.Audience != g.Audience) {
				t.Errorf("%s: %v %+v", kind, err, got)
			}
			if other != kind && err == nil {
				t.Errorf("a %s opened as a %s", kind, other)
			}
		}
		if _, err := s.Open(tok); err == nil {
			t.Errorf("a %s opened as a credentials token", kind)
		}
		// Swapping the prefix does not help: the additional data differs.
		swapped := string(KindRefresh) + tok[len(kind):]
		if _, err := s.OpenGrant(KindRefresh, swapped, now); kind != KindRefresh && !errors.Is(err, ErrGrantTampered) {
			t.Errorf("%s with a refresh prefix: %v", kind, err)
		}
	}
	ct, _ := s.Seal(New("u@x", "pw"))
	if _, err := s.OpenGrant(KindAccess, "oat1."+ct[len(prefixV1):], now); !errors.Is(err, ErrGrantTampered) {
		t.Errorf("a credentials token relabelled as an access token: %v", err)
	}
	// Rotation: a token of the previous key still opens; a foreign key is named.
	prev, _ := old.SealGrant(KindAccess, g)
	if _, err := s.OpenGrant(KindAccess, prev, now); err != nil {
		t.Errorf("previous key: %v", err)
	}
	other, _ := NewSealer(make([]byte, KeyLength))
	other.current.id[0] ^= 0xff
	if _, err := other.OpenGrant(KindAccess, prev, now); err == nil {
		t.Errorf("opened under an unknown key id")
	}
	expired := g
	expired.Expires = now.Add(-time.Second)
	tok, _ := s.SealGrant(KindAccess, expired)
	if _, err := s.OpenGrant(KindAccess, tok, now); !errors.Is(err, ErrGrantExpired) {
		t.Errorf("expired: %v", err)
	}
}
