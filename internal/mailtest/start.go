package mailtest

import (
	"errors"
	"testing"
)

// StartT starts a private stack for one test, with Shared's rules for
// machines that cannot run one, and stops it when the test ends.
func StartT(t testing.TB, opts Options) *Stack {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		if errors.Is(err, ErrUnavailable) && !inCI() {
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
