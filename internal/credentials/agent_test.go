package credentials

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
)

// TestAgentRoundTrip: a token's agent opens unchanged and makes it version
// 2 (a gateway that predates agents refuses it rather than let it act as
// the whole mailbox); without an agent or scope it stays version 1.
func TestAgentRoundTrip(t *testing.T) {
	s, err := NewSealer(bytes.Repeat([]byte{9}, KeyLength))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		agent   string
		scope   access.Scope
		version int
	}{
		{"", access.Scope{}, 1},
		{"backend", access.Scope{}, 2},
		{"planner.v1", access.Scope{Level: access.Read, NoSend: true}, 2},
		{"a", access.Scope{}, 2},
		{strings.Repeat("x", 40), access.Scope{}, 2},
	} {
		c := New("alice@example.test", "pw")
		c.Agent, c.Scope = tc.agent, tc.scope
		tok, err := s.Seal(c)
		if err != nil {
			t.Fatalf("%q: %v", tc.agent, err)
		}
		got, err := s.Open(tok)
		if err != nil {
			t.Fatalf("%q: %v", tc.agent, err)
		}
		if got.Agent != tc.agent || got.Scope != tc.scope || got.User != c.User || got.Password() != "pw" {
			t.Errorf("%q opened as agent %q scope %v", tc.agent, got.Agent, got.Scope)
		}
		if v := payloadVersion(t, s, tok); v != tc.version {
			t.Errorf("%q sealed as version %d, want %d", tc.agent, v, tc.version)
		}
	}
}

func TestSealRefusesBadAgentName(t *testing.T) {
	s, _ := NewSealer(key(3))
	for _, name := range []string{"Backend", ".state", strings.Repeat("x", 41), "a b", "ä", "x/y", "x\x00"} {
		c := New("alice@example.test", "pw")
		c.Agent = name
		if _, err := s.Seal(c); !errors.Is(err, ErrAgentName) {
			t.Errorf("%q: %v, want ErrAgentName", name, err)
		}
	}
}

// A version 1 payload with an agent, or a version 2 one with a bad agent
// name, is not a token this gateway made: refused, never half-read.
func TestOpenRefusesBadAgentPayloads(t *testing.T) {
	s, _ := NewSealer(key(4))
	for _, p := range []payload{
		{V: 1, U: "u", P: "p", Ag: "backend"},
		{V: 2, U: "u", P: "p", Ag: "Not A Name"},
	} {
		if _, err := s.Open(sealRaw(t, s, p)); !errors.Is(err, ErrVersion) {
			t.Errorf("%+v: %v, want ErrVersion", p.Ag, err)
		}
	}
	if c, err := s.Open(sealRaw(t, s, payload{V: 2, U: "u", P: "p", Ag: "ok"})); err != nil || c.Agent != "ok" {
		t.Fatalf("%v %q", err, c.Agent)
	}
}

// sealRaw seals any payload, as a gateway of another version might.
func sealRaw(t *testing.T, s *Sealer, p payload) string {
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

func TestValidAgentName(t *testing.T) {
	for name, want := range map[string]bool{
		"backend": true, "frontend-2": true, "planner.v1": true, "_x": true, "9": true, strings.Repeat("a", 40): true,
		"": false, ".state": false, "Backend": false, strings.Repeat("a", 41): false, "a b": false, "a+b": false, "é": false, "a\n": false,
	} {
		if got := ValidAgentName(name); got != want {
			t.Errorf("ValidAgentName(%q) = %v", name, got)
		}
	}
}

func TestAgentContext(t *testing.T) {
	ctx := context.Background()
	if _, ok := AgentFromContext(ctx); ok {
		t.Fatal("agent in an empty context")
	}
	if _, ok := AgentFromContext(NewAgentContext(ctx, "")); ok {
		t.Fatal("an empty name counts as an agent")
	}
	if n, ok := AgentFromContext(NewAgentContext(ctx, "backend")); !ok || n != "backend" {
		t.Fatalf("%q %v", n, ok)
	}
}
