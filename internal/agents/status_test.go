package agents

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

func TestStatusesWithoutMetadata(t *testing.T) {
	s, _, creds := stateServer(t)
	ctx := context.Background()
	if m, err := s.Statuses(ctx, creds); err != nil || len(m) != 0 {
		t.Fatalf("empty mailbox: %v, %v", m, err)
	}
	if err := s.SetStatus(ctx, creds, "backend", "  reviewing PR 42 "); err != nil {
		t.Fatal(err)
	}
	s.Touch(ctx, creds, "frontend")
	m, err := s.Statuses(ctx, creds)
	if err != nil {
		t.Fatal(err)
	}
	if m["backend"].Status != "reviewing PR 42" || !m["backend"].LastSeen.IsZero() {
		t.Errorf("backend: %+v", m["backend"])
	}
	if f := m["frontend"]; f.Status != "" || time.Since(f.LastSeen) > time.Minute {
		t.Errorf("frontend: %+v", f)
	}
	if err := s.SetStatus(ctx, creds, "backend", ""); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Statuses(ctx, creds); len(m) != 1 {
		t.Errorf("after clearing backend's status: %+v", m)
	}
	// reserved keys are not state
	if got, _ := s.GetState(ctx, creds, "", "s"); len(got) != 0 {
		t.Errorf("prefix s: %+v", got)
	}
}

func TestCheckStatus(t *testing.T) {
	for _, bad := range []string{"a\nb", "a\x00", "\u202e", strings.Repeat("x", MaxStatusLen+1)} {
		if _, err := CheckStatus(bad); mailerr.KindOf(err) != mailerr.BadInput {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if got, err := CheckStatus(strings.Repeat("é", MaxStatusLen)); err != nil || got == "" {
		t.Errorf("200 characters: %v", err)
	}
}
