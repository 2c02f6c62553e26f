package mailbox

import (
	"context"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// A server that advertises neither OAUTHBEARER nor XOAUTH2 gets no token:
// the error names what it offers. (Dovecot's oauth2 passdb is tested in
// tests/xoauth2_test.go.)
func TestOAuthLoginNotOffered(t *testing.T) {
	c, _, _ := memServer(t)
	err := c.Verify(context.Background(), credentials.NewOAuth("u@example.test", "ya29.token"))
	if mailerr.KindOf(err) != mailerr.Auth || !strings.Contains(err.Error(), "offers no OAuth login") || !strings.Contains(err.Error(), "PLAIN") {
		t.Fatalf("got %v (%v)", err, mailerr.KindOf(err))
	}
	if strings.Contains(err.Error(), "ya29") {
		t.Fatalf("the error shows the token: %v", err)
	}
}
