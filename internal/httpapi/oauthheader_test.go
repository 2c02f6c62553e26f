package httpapi

import (
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
)

// x-imap-oauth-token goes with x-imap-user instead of x-imap-pass, and with
// nothing else; MCP sees an OAuth credential.
func TestOAuthTokenHeader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
		msg     string
	}{
		{name: "user and token", headers: map[string]string{"x-imap-user": "alice", "x-imap-oauth-token": "ya29.abc"}, status: 200},
		{name: "token without user", headers: map[string]string{"x-imap-oauth-token": "ya29.abc"}, status: 400, msg: "needs x-imap-user"},
		{name: "token and password", headers: map[string]string{"x-imap-user": "alice", "x-imap-pass": "pw", "x-imap-oauth-token": "ya29.abc"}, status: 400, msg: "instead of x-imap-pass"},
		{name: "token and mailbox token", headers: map[string]string{"x-mailbox-token": "mbx1.abc", "x-imap-oauth-token": "ya29.abc"}, status: 400, msg: "instead of x-imap-pass or x-mailbox-token"},
		{name: "Bearer prefix", headers: map[string]string{"x-imap-user": "alice", "x-imap-oauth-token": "Bearer ya29.abc"}, status: 400, msg: "send the token itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s seen
			w := post(testHandler(&s), listBody, tc.headers)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.msg) {
				t.Fatalf("%d %s, want %d with %q", w.Code, w.Body, tc.status, tc.msg)
			}
			if strings.Contains(w.Body.String(), "ya29") {
				t.Errorf("the answer echoes the token: %s", w.Body)
			}
			if tc.status != 200 {
				if s.called {
					t.Fatal("refused request reached MCP")
				}
				return
			}
			if s.creds.User != "alice" || s.creds.Mechanism() != credentials.MechOAuth || s.creds.AccessToken() != "ya29.abc" {
				t.Fatalf("MCP saw %v (%v)", s.creds, s.creds.Mechanism())
			}
		})
	}
}

// Browsers may send the header cross-origin (CORS preflight).
func TestOAuthTokenHeaderAllowedByCORS(t *testing.T) {
	if !strings.Contains(corsAllowHeaders, "X-Imap-Oauth-Token") {
		t.Fatalf("CORS allowed headers: %s", corsAllowHeaders)
	}
}
