package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// TestDefaultHostSpellingsShareTheBackoff: a caller who names the
// gateway's own host (x-imap-host: 127.0.0.1, which is IMAP_HOST) is the
// same account as one who names none, for the login back-off as for
// every per-account limit. With LOGIN_BACKOFF_FAILURES=3, six wrong
// passwords alternating between the two reach Dovecot 3 times, by its
// own log. (Before, the two spellings were two accounts: all 6 did.)
func TestDefaultHostSpellingsShareTheBackoff(t *testing.T) {
	t.Parallel()
	user := "spellings@example.test"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: "right-pw"}})
	g := startGateway(t, s, "LOGIN_BACKOFF_FAILURES=3", "LOGIN_BACKOFF_DELAY=1m", "LOGIN_BACKOFF_MAX=1m")
	before := authAttempts(t, s, user)
	var authFailed, backedOff int
	for i := range 6 {
		h := map[string]string{"x-imap-user": user, "x-imap-pass": fmt.Sprintf("guess-%d", i)}
		if i%2 == 1 {
			h["x-imap-host"] = "127.0.0.1"
		}
		res := mailtest.Call(t, mailtest.MCPClient(t, g.URL, h, ""), "imap_list_folders", nil)
		switch text := mailtest.Text(res); {
		case !res.IsError:
			t.Fatalf("guess %d succeeded", i)
		case strings.Contains(text, "authentication failed"):
			authFailed++
		case strings.Contains(text, "too many failed logins"):
			backedOff++
		default:
			t.Fatalf("guess %d: %q", i, text)
		}
	}
	seen := waitCount(func() int { return authAttempts(t, s, user) - before }, authFailed)
	t.Logf("6 wrong passwords, with and without x-imap-host: 127.0.0.1: %d reached Dovecot (it logged %d), %d held back", authFailed, seen, backedOff)
	if authFailed != 3 || seen != 3 {
		t.Fatalf("%d guesses reached the server (Dovecot logged %d), want 3: one account, one back-off", authFailed, seen)
	}
}
