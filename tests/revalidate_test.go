package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// setPassword changes user's password at the stack's Dovecot (and so at
// Postfix, which asks Dovecot): it rewrites the passwd-file that
// scripts/mailstack.sh made (user:{PLAIN}password::::::), atomically and
// with a new size and mtime, so that Dovecot, which re-reads the file when
// either changes, sees it at the next login. The stack has no auth cache.
func setPassword(t *testing.T, s *mailtest.Stack, user, password string) {
	t.Helper()
	path := filepath.Join(s.Dir, "etc", "passwd")
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	found := false
	for _, l := range strings.Split(strings.TrimRight(string(old), "\n"), "\n") {
		if name, _, _ := strings.Cut(l, ":"); name == user {
			l, found = user+":{PLAIN}"+password+"::::::", true
		}
		lines = append(lines, l)
	}
	if !found {
		t.Fatalf("%s not in %s", user, path)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok { // root:dovecot
		if err := os.Chown(tmp, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	later := time.Now().Add(2 * time.Second) // Dovecot compares whole seconds
	if err := os.Chtimes(tmp, later, later); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A password change at the mail server revokes the old password through
// the gateway within POOL_REVALIDATE (plus a call already running), though
// the gateway holds connections logged in with it: for the headers and for
// a token sealed before the change. The new password works.
func TestRevalidateAfterPasswordChange(t *testing.T) {
	const (
		user       = "rotate@example.test"
		oldPW      = "old-password"
		newPW      = "the-new-password"
		revalidate = 3 * time.Second
	)
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: oldPW}})
	if err := s.Seed(user, 20, "INBOX"); err != nil {
		t.Fatal(err)
	}
	// The back-off is not what this test is about: the old password is
	// refused many times below.
	g := startGateway(t, s, "POOL_REVALIDATE="+revalidate.String(),
		"LOGIN_BACKOFF_FAILURES=1000", "LOGIN_BACKOFF_ACCOUNT_FAILURES=1000", "LOGIN_BACKOFF_FAILURES_PER_ADDRESS=1000")
	headers := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": user, "x-imap-pass": oldPW}, "")
	var tok tools.EncryptResult
	mailtest.Decode(t, mailtest.Call(t, headers, "imap_encrypt_credentials", nil), &tok)
	token := mailtest.MCPClient(t, g.URL, nil, "")
	tokenArgs := map[string]any{"credentials": tok.Token, "limit": 5}

	// Fill the pool with connections logged in with the old password, and
	// keep them busy so that some are always freshly logged in.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for range 5 {
				if res := mailtest.Call(t, headers, "imap_list_emails", map[string]any{"limit": 5}); res.IsError {
					t.Errorf("before the change: %s", mailtest.Text(res))
				}
			}
		})
	}
	wg.Wait()
	if st := g.App.PoolStats(); st.Idle < 2 {
		t.Fatalf("pool before the change: %+v, want several idle connections", st)
	}

	setPassword(t, s, user, newPW)
	changed := time.Now()

	// Call with the old password, by header and by token, until both have
	// been refused for a whole POOL_REVALIDATE after the deadline passed.
	type outcome struct {
		start, end time.Time
		ok         bool
		text       string
	}
	var mu sync.Mutex
	var all []outcome
	caller := func(name string, call func() (bool, string)) {
		for time.Since(changed) < revalidate+3*time.Second {
			start := time.Now()
			ok, text := call()
			mu.Lock()
			all = append(all, outcome{start, time.Now(), ok, name + ": " + text})
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}
	for range 2 {
		wg.Go(func() {
			caller("header", func() (bool, string) {
				res := mailtest.Call(t, headers, "imap_list_emails", map[string]any{"limit": 5})
				return !res.IsError, mailtest.Text(res)
			})
		})
	}
	wg.Go(func() {
		caller("token", func() (bool, string) {
			res := mailtest.Call(t, token, "imap_list_emails", tokenArgs)
			return !res.IsError, mailtest.Text(res)
		})
	})
	wg.Wait()

	var lastOK time.Time
	var longest time.Duration
	oks, refused := 0, 0
	for _, o := range all {
		longest = max(longest, o.end.Sub(o.start))
		switch {
		case o.ok:
			oks++
			if o.end.After(lastOK) {
				lastOK = o.end
			}
			if o.start.Sub(changed) >= revalidate {
				t.Errorf("a call with the old password started %v after the change succeeded", o.start.Sub(changed).Round(time.Millisecond))
			}
		case strings.Contains(o.text, "authentication failed"):
			refused++
		default:
			t.Errorf("unexpected error with the old password: %q", o.text)
		}
	}
	window := time.Duration(0)
	if !lastOK.IsZero() {
		window = lastOK.Sub(changed)
	}
	t.Logf("old password after the change: %d calls succeeded, the last ending %v after it; %d refused; longest call %v; pool %+v",
		oks, window.Round(time.Millisecond), refused, longest.Round(time.Millisecond), g.App.PoolStats())
	if refused == 0 {
		t.Fatal("the old password was never refused")
	}
	if window > revalidate+longest {
		t.Fatalf("the old password worked until %v after the change, want at most POOL_REVALIDATE (%v) plus a call (%v)", window, revalidate, longest)
	}

	// The new password works, by header and by a new token.
	fresh := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": user, "x-imap-pass": newPW}, "")
	res := mailtest.Call(t, fresh, "imap_list_emails", map[string]any{"limit": 5})
	if res.IsError {
		t.Fatalf("new password: %s", mailtest.Text(res))
	}
	var tok2 tools.EncryptResult
	mailtest.Decode(t, mailtest.Call(t, fresh, "imap_encrypt_credentials", nil), &tok2)
	if res := mailtest.Call(t, token, "imap_list_folders", map[string]any{"credentials": tok2.Token}); res.IsError {
		t.Fatalf("token sealed with the new password: %s", mailtest.Text(res))
	}
	if res := mailtest.Call(t, token, "imap_list_folders", map[string]any{"credentials": tok.Token}); !res.IsError {
		t.Fatal(fmt.Sprint("the token sealed before the change still works: ", mailtest.Text(res)))
	}
}
