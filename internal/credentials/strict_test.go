package credentials

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// sealPayload seals a payload as Seal would, without Seal's checks: a token
// an older version could have made.
func sealPayload(t *testing.T, s *Sealer, p payload) string {
	t.Helper()
	plain, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, keyIDLen+nonceLen)
	copy(raw, s.current.id[:])
	rand.Read(raw[keyIDLen:])
	raw = s.current.aead.Seal(raw, raw[keyIDLen:], plain, additional(s.current.id))
	return prefixV1 + b64.EncodeToString(raw)
}

// A NUL separates the fields of a SASL PLAIN message: credentials holding
// one are refused when sealed, and a token carrying one is refused when
// opened.
func TestNULRefused(t *testing.T) {
	s, _ := NewSealer(key(5))
	for _, c := range []Credentials{New("alice@example.test\x00bob@example.test", "pw"), New("alice@example.test", "pw\x00")} {
		if _, err := s.Seal(c); !errors.Is(err, ErrNUL) {
			t.Errorf("Seal(%q): %v, want ErrNUL", c.User, err)
		}
	}
	for _, p := range []payload{{V: 1, U: "a\x00b", P: "pw"}, {V: 1, U: "alice", P: "\x00"}} {
		tok := sealPayload(t, s, p)
		if _, err := s.Open(tok); !errors.Is(err, ErrNUL) {
			t.Errorf("Open of a token holding %q/%q: %v, want ErrNUL", p.U, p.P, err)
		}
	}
	// the helper makes tokens Open accepts when they hold no NUL
	if c, err := s.Open(sealPayload(t, s, payload{V: 1, U: "alice", P: "pw"})); err != nil || c.Password() != "pw" {
		t.Fatalf("helper token: %v", err)
	}
}

// A token is one exact string: Go's base64 decoder skips \r and \n, so a
// token with a line break inside used to open. Only blanks at either end
// are ignored.
func TestOpenIsStrict(t *testing.T) {
	s, _ := NewSealer(key(6))
	tok, _ := s.Seal(New("alice@example.test", "alicepw"))
	body := strings.TrimPrefix(tok, prefixV1)
	mid := len(body) / 2
	for _, tc := range []struct {
		name, token string
		ok          bool
	}{
		{"as sealed", tok, true},
		{"blanks around", " \t" + tok + "\r\n", true},
		{"newline inside", prefixV1 + body[:mid] + "\n" + body[mid:], false},
		{"CRLF inside", prefixV1 + body[:mid] + "\r\n" + body[mid:], false},
		{"space inside", prefixV1 + body[:mid] + " " + body[mid:], false},
		{"tab inside", prefixV1 + body[:mid] + "\t" + body[mid:], false},
		{"padding", tok + "=", false},
		{"standard alphabet", prefixV1 + strings.NewReplacer("-", "+", "_", "/").Replace(body), strings.IndexAny(body, "-_") < 0},
		{"NUL at the end", tok + "\x00", false},
		{"non-breaking space around", "\u00a0" + tok, false},
		{"newline after the prefix", prefixV1 + "\n" + body, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := s.Open(tc.token)
			if tc.ok {
				if err != nil || c.User != "alice@example.test" {
					t.Fatalf("Open: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Open(%q) = %v, want ErrMalformed", tc.token, err)
			}
		})
	}
}

func TestTokenContext(t *testing.T) {
	ctx := context.Background()
	if _, ok := TokenFromContext(ctx); ok {
		t.Fatal("token in an empty context")
	}
	if _, ok := TokenFromContext(NewTokenContext(ctx, "")); ok {
		t.Fatal("empty token reported")
	}
	tok, ok := TokenFromContext(NewTokenContext(ctx, "mbx1.abc"))
	if !ok || tok != "mbx1.abc" {
		t.Fatalf("got %q %v", tok, ok)
	}
	// the two kinds travel under different keys
	if _, ok := FromContext(NewTokenContext(ctx, "mbx1.abc")); ok {
		t.Fatal("a token context carries credentials")
	}
}
