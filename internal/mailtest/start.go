package mailtest

import (
	"errors"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
)

// StartT starts a private stack for one test, with Shared's rules for
// machines that cannot run one, and stops it when the test ends.
func StartT(t testing.TB, opts Options) *Stack {
	t.Helper()
	s, err := mailstack.Start(opts)
	if err != nil {
		if errors.Is(err, mailstack.ErrUnavailable) && !inCI() {
			t.Skipf("mailtest: %v", err)
		}
		t.Fatalf("mailtest: cannot start a mail stack: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("mailtest: stop: %v", err)
		}
	})
	return s
}
