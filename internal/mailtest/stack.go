// Package mailtest holds the testing-only helpers around internal/mailstack
// (the real Dovecot/Postfix stack) and internal/mcpcall (MCP calls): one
// stack per test binary, skipping where no stack can run, and MCP helpers
// that fail the test. It imports testing, so only _test.go files may import
// it (tests/boundaries_test.go checks).
//
// Most tests want one stack per test binary:
//
//	func TestMain(m *testing.M) { mailtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		st := mailtest.Shared(t) // skips (or fails when CI=true) if no stack can run
//		...
//	}
package mailtest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
)

// Stack and Options are mailstack's, so that tests need one import.
type (
	Stack   = mailstack.Stack
	Options = mailstack.Options
)

// Default users of every stack (Options.Users adds to these).
const (
	Alice         = mailstack.Alice
	AlicePassword = mailstack.AlicePassword
	Bob           = mailstack.Bob
	BobPassword   = mailstack.BobPassword
)

var shared struct {
	once  sync.Once
	stack *Stack
	err   error
}

// Shared returns the stack of this test binary, started on first use with
// the default Options. If this machine cannot run a stack (not root,
// packages missing) the test is skipped with the reason, except when env CI
// is true, where it fails; a stack that fails to start fails the test.
// Use Main in TestMain so that it is stopped at the end.
func Shared(t testing.TB) *Stack {
	t.Helper()
	shared.once.Do(func() {
		shared.stack, shared.err = mailstack.Start(Options{})
	})
	if shared.err != nil {
		if errors.Is(shared.err, mailstack.ErrUnavailable) && !inCI() {
			t.Skipf("mailtest: %v", shared.err)
		}
		t.Fatalf("mailtest: cannot start the mail stack: %v", shared.err)
	}
	return shared.stack
}

func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// Main is for TestMain: it runs the tests, stops the shared stack if one was
// started, and exits with the tests' code.
func Main(m *testing.M) {
	code := m.Run()
	// marks the stack as never started if no test used it, or waits for a
	// start still in progress in a leaked goroutine
	shared.once.Do(func() {})
	if shared.stack != nil {
		if err := shared.stack.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "mailtest: stopping the shared stack: %v\n", err)
		}
	}
	os.Exit(code)
}

// IMAPServer and Kind are mailstack's: Cyrus or Courier beside Dovecot.
type (
	IMAPServer = mailstack.IMAPServer
	Kind       = mailstack.Kind
)

// The other IMAP servers (scripts/imapservers.sh).
const (
	Cyrus   = mailstack.Cyrus
	Courier = mailstack.Courier
)

// StartIMAP starts a Cyrus or Courier server for this test with the
// default users (mailstack.ServerAlice, ServerBob) plus users, stopped
// when the test ends (its logs printed if the test failed). Where no such
// server can run (not root, not installed: scripts/imapservers.sh
// install) the test is skipped, or fails when CI=true.
func StartIMAP(t testing.TB, kind Kind, users map[string]string) *IMAPServer {
	t.Helper()
	s, err := mailstack.StartIMAP(kind, users)
	if err != nil {
		if errors.Is(err, mailstack.ErrUnavailable) && !inCI() {
			t.Skipf("mailtest: %v", err)
		}
		t.Fatalf("mailtest: cannot start %s: %v", kind, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s logs:\n%s", kind, s.Log(4000))
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stopping %s: %v", kind, err)
		}
	})
	return s
}

// RedisServer and RedisOptions are mailstack's: a redis-server on loopback.
type (
	RedisServer  = mailstack.RedisServer
	RedisOptions = mailstack.RedisOptions
)

// StartRedis starts a redis-server for this test (no persistence, a port
// of its own), stopped when the test ends, its log printed if the test
// failed. Without redis-server installed the test is skipped, or fails
// when CI=true.
func StartRedis(t testing.TB, opts RedisOptions) *RedisServer {
	t.Helper()
	s, err := mailstack.StartRedis(opts)
	if err != nil {
		if errors.Is(err, mailstack.ErrUnavailable) && !inCI() {
			t.Skipf("mailtest: %v", err)
		}
		t.Fatalf("mailtest: cannot start redis-server: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("redis-server log:\n%s", s.Log(4000))
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stopping redis-server: %v", err)
		}
	})
	return s
}
