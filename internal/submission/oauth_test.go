package submission_test

import (
	"context"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/submission"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// An access token is never sent as a password: a server without an OAuth
// mechanism gets nothing, and the error names what it offers. (Postfix with
// Dovecot's oauth2 passdb is tested in tests/xoauth2_test.go.)
func TestFakeOAuthNotOffered(t *testing.T) {
	fs := startFake(t, func(fs *fakeServer, _ *smtp.Server) { fs.mechs = []string{"PLAIN", "LOGIN"} })
	c := submission.New(fs.config(transport.Plain), nil)
	tok := credentials.NewOAuth(mailtest.Alice, "ya29.token")
	_, err := c.Send(context.Background(), tok, mailtest.Alice, []string{"x@fake.test"}, message(t, mailtest.Alice, "x@fake.test"))
	wantKind(t, err, mailerr.Unavailable, "offers no OAuth login", "PLAIN LOGIN")
	if _, auths, _, _, _ := fs.snapshot(); len(auths) != 0 {
		t.Errorf("the token was tried as a password: %d AUTH", len(auths))
	}
	if strings.Contains(err.Error(), "ya29") {
		t.Errorf("the error shows the token: %v", err)
	}
}
