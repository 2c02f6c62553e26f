// The OAuth provider of the sign-in tests: Ory Hydra from internal/hydra,
// and a mail stack whose Dovecot checks Hydra's tokens.

package mailtest

import (
	"errors"
	"maps"
	"os"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/hydra"
)

// Hydra and HydraOptions are internal/hydra's (clients, flows and tokens
// are in that package too).
type (
	Hydra        = hydra.Server
	HydraOptions = hydra.Options
)

// StartHydra starts Ory Hydra and its login and consent app for one test
// and stops it when the test ends (see internal/hydra). The users who can
// sign in are the stack's default users (Alice, Bob) plus opts.Users: give
// OAuthStack's Options.Users the same extras. Where Hydra cannot be built
// (no Go toolchain, C compiler or module proxy) the test is skipped with the
// reason, except when env CI is true, where it fails. The first use on a
// machine builds Hydra (about 2 min; scripts/test.sh builds it beforehand).
func StartHydra(t testing.TB, opts HydraOptions) *Hydra {
	t.Helper()
	users := map[string]string{Alice: AlicePassword, Bob: BobPassword}
	maps.Copy(users, opts.Users)
	opts.Users = users
	h, err := hydra.Start(opts)
	if err != nil {
		if errors.Is(err, hydra.ErrUnavailable) && !inCI() {
			t.Skipf("mailtest: %v", err)
		}
		t.Fatalf("mailtest: cannot start Hydra: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if log, err := os.ReadFile(h.LogPath()); err == nil {
				t.Logf("Hydra's log (last 6 KB):\n%s", tail(string(log), 6000))
			}
		}
		if err := h.Stop(); err != nil {
			t.Errorf("mailtest: %v", err)
		}
	})
	return h
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// OAuthStack starts a private stack (see StartT) whose Dovecot takes OAuth
// logins (XOAUTH2 and OAUTHBEARER, for IMAP and, through Dovecot's SASL,
// Postfix submission) and checks each access token at h's introspection
// endpoint; the token's subject must be the SASL user. opts may set
// OAuthScope to require a scope; its OAuth fields are otherwise filled in.
// Dovecot keeps no auth cache here: every login asks Hydra, so a revoked
// token is refused at once.
func OAuthStack(t testing.TB, h *Hydra, opts Options) *Stack {
	t.Helper()
	opts.OAuthIntrospectionURL = h.IntrospectionURL()
	opts.OAuthUsernameAttribute = "sub"
	return StartT(t, opts)
}
