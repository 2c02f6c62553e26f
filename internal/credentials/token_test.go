package credentials

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, KeyLength) }

func TestSealOpenRoundTrip(t *testing.T) {
	s, err := NewSealer(key(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Credentials{
		New("alice@example.test", "alicepw"),
		New("ünïcødé@example.test", "pässwörd with spaces\tand \"quotes\""),
		New("x", strings.Repeat("p", 1000)),
	} {
		tok, err := s.Seal(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.User) > 3 && (strings.Contains(tok, c.Password()) || strings.Contains(tok, c.User)) {
			t.Fatalf("token shows the credentials: %s", tok)
		}
		got, err := s.Open(tok)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if got.User != c.User || got.Password() != c.Password() {
			t.Fatalf("round trip changed the credentials: %v", got)
		}
	}
}

func TestSealIsRandomised(t *testing.T) {
	s, _ := NewSealer(key(1))
	a, _ := s.Seal(New("u", "p"))
	b, _ := s.Seal(New("u", "p"))
	if a == b {
		t.Fatal("two seals of the same credentials are equal: nonce not random")
	}
}

// Every single-byte change of a token must be refused.
func TestEveryByteFlipIsRejected(t *testing.T) {
	s, _ := NewSealer(key(1))
	tok, _ := s.Seal(New("alice@example.test", "alicepw"))
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!"
	for i := range len(tok) {
		for _, r := range []byte{tok[i] ^ 1, alphabet[(strings.IndexByte(alphabet, tok[i])+1)%len(alphabet)]} {
			if r == tok[i] {
				continue
			}
			bad := tok[:i] + string(r) + tok[i+1:]
			if _, err := s.Open(bad); err == nil {
				t.Fatalf("changing byte %d (%q -> %q) was accepted", i, tok[i], r)
			}
		}
	}
}

func TestOpenRefusals(t *testing.T) {
	s, _ := NewSealer(key(1))
	other, _ := NewSealer(key(2))
	tok, _ := s.Seal(New("alice@example.test", "alicepw"))
	foreign, _ := other.Seal(New("alice@example.test", "alicepw"))
	tests := []struct {
		name  string
		token string
		want  error
	}{
		{"truncated by a byte", tok[:len(tok)-1], errTruncated},
		{"truncated by four", tok[:len(tok)-4], errTruncated},
		{"truncated by 20", tok[:len(tok)-20], errTruncated},
		{"empty", "", ErrMalformed},
		{"garbage", "hello world", ErrMalformed},
		{"only prefix", "mbx1.", ErrMalformed},
		{"short body", "mbx1.AAAA", ErrMalformed},
		{"future version", "mbx2." + strings.TrimPrefix(tok, "mbx1."), ErrVersion},
		{"other key", foreign, ErrForeignKey},
		{"not base64", "mbx1.!!!!", ErrMalformed},
		{"huge", "mbx1." + strings.Repeat("A", 1<<20), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Open(tt.token)
			if tt.want == errTruncated && (errors.Is(err, ErrMalformed) || errors.Is(err, ErrTampered)) {
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open = %v, want %v", err, tt.want)
			}
		})
	}
	if !strings.Contains(ErrForeignKey.Error(), "different key") {
		t.Fatalf("foreign-key message does not say so: %v", ErrForeignKey)
	}
}

// errTruncated stands for "ErrMalformed or ErrTampered": which one a cut
// token gets depends on whether the cut leaves valid base64.
var errTruncated = errors.New("truncated")

func TestPreviousKeyOpens(t *testing.T) {
	old, _ := NewSealer(key(1))
	tok, _ := old.Seal(New("bob@example.test", "bobpw"))
	rotated, err := NewSealer(key(2), key(1))
	if err != nil {
		t.Fatal(err)
	}
	c, err := rotated.Open(tok)
	if err != nil || c.User != "bob@example.test" {
		t.Fatalf("token of the previous key refused: %v", err)
	}
	third, _ := NewSealer(key(3))
	if _, err := third.Open(tok); !errors.Is(err, ErrForeignKey) {
		t.Fatalf("third key: %v", err)
	}
}

func TestCredentialsNeverPrintPassword(t *testing.T) {
	c := New("alice@example.test", "s3cr3t-pw")
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	log.Debug("x", "creds", c, "any", any(c))
	out := buf.String() + fmt.Sprintf("%v %+v %#v %s %q", c, c, c, c, c)
	if strings.Contains(out, "s3cr3t-pw") {
		t.Fatalf("password printed: %s", out)
	}
	if !strings.Contains(out, "alice@example.test") {
		t.Fatalf("user missing: %s", out)
	}
}

func TestKeySeparatesPasswords(t *testing.T) {
	a := New("alice", "pw1").Key("imap.example.test")
	b := New("alice", "pw2").Key("imap.example.test")
	c := New("alice", "pw1").Key("other.example.test")
	d := New("alic", "epw1").Key("imap.example.test")
	if a == b || a == c || a == d {
		t.Fatal("pool keys collide across passwords, hosts or field boundaries")
	}
	if a != New("alice", "pw1").Key("imap.example.test") {
		t.Fatal("pool key not stable")
	}
}

// What Seal accepts, Open opens: credentials whose token would be over the
// length Open accepts are refused when sealing, not after.
func TestSealRefusesTooLong(t *testing.T) {
	s, _ := NewSealer(bytes.Repeat([]byte{9}, KeyLength))
	if _, err := s.Seal(New("u@example.test", strings.Repeat("p", maxToken))); !errors.Is(err, ErrTooLong) {
		t.Fatalf("an 8 KiB password: %v, want ErrTooLong", err)
	}
	// The worst case that must fit: 1,000 bytes of control characters, six
	// bytes each once escaped in the payload.
	user, pw := "user@example.test", strings.Repeat("\x0e", 1000-len("user@example.test"))
	tok, err := s.Seal(New(user, pw))
	if err != nil {
		t.Fatalf("1,000 bytes of control characters: %v", err)
	}
	c, err := s.Open(tok)
	if err != nil || c.User != user || c.Password() != pw {
		t.Fatalf("round trip: %v", err)
	}
}

// TestScopeRoundTrip: a token's scope opens unchanged; an unscoped token
// stays version 1 (readable by gateways that predate scopes), a scoped one
// is version 2 so such gateways refuse it rather than ignore the narrowing.
func TestScopeRoundTrip(t *testing.T) {
	s, err := NewSealer(bytes.Repeat([]byte{7}, KeyLength))
	if err != nil {
		t.Fatal(err)
	}
	for _, scope := range []access.Scope{{}, {Level: access.Read}, {Level: access.Organize, NoSend: true}, {NoSend: true}, {Level: access.Full}} {
		c := New("alice@example.test", "pw")
		c.Scope = scope
		tok, err := s.Seal(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Open(tok)
		if err != nil {
			t.Fatal(err)
		}
		if got.Scope != scope || got.User != c.User || got.Password() != "pw" {
			t.Errorf("scope %v opened as %v", scope, got.Scope)
		}
		if v := payloadVersion(t, s, tok); v != map[bool]int{false: 1, true: 2}[scope.Narrowed()] {
			t.Errorf("scope %v sealed as version %d", scope, v)
		}
	}
}

func payloadVersion(t *testing.T, s *Sealer, tok string) int {
	t.Helper()
	raw, err := b64.DecodeString(strings.TrimPrefix(tok, prefixV1))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := s.current.aead.Open(nil, raw[keyIDLen:keyIDLen+nonceLen], raw[keyIDLen+nonceLen:], additional(s.current.id))
	if err != nil {
		t.Fatal(err)
	}
	var p payload
	if err := json.Unmarshal(plain, &p); err != nil {
		t.Fatal(err)
	}
	return p.V
}
