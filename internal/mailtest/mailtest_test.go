package mailtest_test

import (
	"errors"
	"os"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

func TestMain(m *testing.M) { mailtest.Main(m) }

// Shared starts one stack per test binary and hands the same one to every
// caller; the stack itself is tested in internal/mailstack.
func TestSharedIsOneStack(t *testing.T) {
	a := mailtest.Shared(t)
	b := mailtest.Shared(t)
	if a != b {
		t.Fatalf("Shared returned two stacks: %s and %s", a.Dir, b.Dir)
	}
	if n, err := a.MessageCount(mailtest.Alice, ""); err != nil {
		t.Fatalf("the shared stack does not answer: %v", err)
	} else {
		t.Logf("alice's INBOX holds %d messages", n)
	}
}

// StartT's stack is a different one, and is gone when its test ends.
func TestStartTStopsAtCleanup(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second stack")
	}
	shared := mailtest.Shared(t)
	var dir string
	t.Run("private", func(t *testing.T) {
		st := mailtest.StartT(t, mailtest.Options{})
		dir = st.Dir
		if dir == shared.Dir || st.IMAPSPort == shared.IMAPSPort {
			t.Fatalf("StartT's stack shares dir or ports with the shared one: %s %d", dir, st.IMAPSPort)
		}
		if _, err := st.MessageCount(mailtest.Bob, ""); err != nil {
			t.Fatalf("StartT's stack does not answer: %v", err)
		}
	})
	if dir == "" {
		t.Fatal("the subtest did not run")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("StartT left %s behind after its test: %v", dir, err)
	}
}
