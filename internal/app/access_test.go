package app_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// need is the permission model of issue 15, as the operator reads it in
// SECURITY.md: the level each tool needs and whether it sends. A tool
// missing here fails the test, so a new tool must be placed.
var need = map[string]struct {
	level access.Level
	sends bool
}{
	"imap_encrypt_credentials":  {access.Read, false},
	"imap_list_folders":         {access.Read, false},
	"imap_list_emails":          {access.Read, false},
	"imap_search_emails":        {access.Read, false},
	"imap_read_email":           {access.Read, false},
	"imap_get_attachment":       {access.Read, false},
	"imap_get_thread":           {access.Read, false},
	"imap_peek_inbox":           {access.Read, false},
	"imap_wait_for_email":       {access.Read, false},
	"imap_check_inbox":          {access.Read, false},
	"smtp_send_email":           {access.Read, true},
	"smtp_reply_email":          {access.Read, true},
	"smtp_forward_email":        {access.Read, true},
	"smtp_respond_invite":       {access.Read, true},
	"mail_unsubscribe":          {access.Read, true},
	"imap_set_flags":            {access.Organize, false},
	"imap_move_emails":          {access.Organize, false},
	"imap_trash_emails":         {access.Organize, false},
	"imap_create_folder":        {access.Organize, false},
	"imap_rename_folder":        {access.Organize, false},
	"imap_save_draft":           {access.Organize, false},
	"smtp_send_draft":           {access.Organize, true},
	"imap_delete_folder":        {access.Full, false},
	"agent_send":                {access.Read, false},
	"agent_list":                {access.Read, false},
	"agent_set_status":          {access.Read, false},
	"agent_create_conversation": {access.Read, false},
	"agent_list_conversations":  {access.Read, false},
	"agent_leave_conversation":  {access.Read, false},
	"agent_history":             {access.Read, false},
	"agent_set_state":           {access.Read, false},
	"agent_get_state":           {access.Read, false},
	"agent_prune":               {access.Organize, false},
}

// TestPermissionMatrix: operator level × token scope × every tool. Each
// request's tools/list shows exactly the tools it may call, and a call
// beyond its level (as from a stale list) is refused with the sentence that
// names the level needed and who limits it, before its arguments are even
// looked at.
func TestPermissionMatrix(t *testing.T) {
	scopes := []struct {
		name  string
		scope *access.Scope // nil: x-imap-* headers, no token
	}{
		{"headers", nil},
		{"token", &access.Scope{}},
		{"token read", &access.Scope{Level: access.Read}},
		{"token organize", &access.Scope{Level: access.Organize}},
		{"token full", &access.Scope{Level: access.Full}},
		{"token organize no-send", &access.Scope{Level: access.Organize, NoSend: true}},
	}
	for _, operator := range access.Levels {
		t.Run("MAILBOX_ACCESS="+operator.String(), func(t *testing.T) {
			g := startDemoGatewayWith(t, true, "MAILBOX_ACCESS="+operator.String())
			key, _ := hex.DecodeString(g.Key)
			sealer, err := credentials.NewSealer(key)
			if err != nil {
				t.Fatal(err)
			}
			u := g.Users[0]
			for _, sc := range scopes {
				t.Run(sc.name, func(t *testing.T) {
					hdr := headers(u)
					scope := access.Scope{}
					if sc.scope != nil {
						scope = *sc.scope
						c := credentials.New(u.Address, u.Password)
						c.Scope = scope
						tok, err := sealer.Seal(c)
						if err != nil {
							t.Fatal(err)
						}
						hdr = map[string]string{"x-mailbox-token": tok}
					}
					c := mailtest.MCPClient(t, g.URL, hdr, "")
					res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
					if err != nil {
						t.Fatal(err)
					}
					var listed []string
					for _, tool := range res.Tools {
						listed = append(listed, tool.Name)
					}
					for name, n := range need {
						allowed := name == "imap_encrypt_credentials" || (n.level <= scope.Effective(operator) && !(n.sends && scope.NoSend))
						if slices.Contains(listed, name) != allowed {
							t.Errorf("%s: listed=%v, want %v", name, !allowed, allowed)
						}
						if allowed {
							continue
						}
						// A stale list: the call is refused, arguments unread.
						res := mailtest.Call(t, c, name, map[string]any{"no_such_argument": 1})
						if got, want := mailtest.Text(res), refusal(name, n.level, n.sends, operator, scope); !res.IsError || got != want {
							t.Errorf("%s: got %q (error %v), want %q", name, got, res.IsError, want)
						}
					}
					for _, name := range listed {
						if _, ok := need[name]; !ok {
							t.Errorf("tool %s is not in the permission model of this test", name)
						}
					}
				})
			}
		})
	}
}

// refusal is the exact sentence for a call beyond the caller's permissions.
func refusal(name string, level access.Level, sends bool, operator access.Level, scope access.Scope) string {
	switch {
	case level > operator:
		return fmt.Sprintf("%s needs the %s access level, and this gateway allows %s (the operator sets MAILBOX_ACCESS); nothing was changed", name, level, operator)
	case level > scope.Effective(operator):
		return fmt.Sprintf("%s needs the %s access level, and the credentials token or sign-in allows %s; nothing was changed; imap_encrypt_credentials with the user and password makes a token with a wider scope, up to what the operator allows (a sign-in is widened by signing in again)", name, level, scope.Level)
	case sends && scope.NoSend:
		return name + " sends mail, and the credentials token or sign-in does not allow sending; nothing was sent; imap_encrypt_credentials with the user and password makes a token with a wider scope, up to what the operator allows (a sign-in is widened by signing in again)"
	}
	return ""
}

// TestScopedTokenFromTool: imap_encrypt_credentials seals the scope it is
// asked for, never more than the operator's level, and the token then acts
// within it.
func TestScopedTokenFromTool(t *testing.T) {
	g := startDemoGatewayWith(t, true, "MAILBOX_ACCESS=organize")
	u := g.Users[0]
	c := mailtest.MCPClient(t, g.URL, headers(u), "")
	res := mailtest.Call(t, c, "imap_encrypt_credentials", map[string]any{"access": "full"})
	if want := "access full is more than this gateway allows (organize, set by the operator with MAILBOX_ACCESS); no token was made"; !res.IsError || mailtest.Text(res) != want {
		t.Fatalf("got %q, want %q", mailtest.Text(res), want)
	}
	var out struct {
		Token, Access string
		Send          bool
	}
	mailtest.Decode(t, mailtest.Call(t, c, "imap_encrypt_credentials", map[string]any{"access": "read", "send": false}), &out)
	if out.Access != "read" || out.Send || !strings.HasPrefix(out.Token, "mbx1.") {
		t.Fatalf("result %+v", out)
	}
	res = mailtest.Call(t, c, "smtp_send_email", map[string]any{"credentials": out.Token, "to": []string{u.Address}, "subject": "x", "text": "x"})
	if !res.IsError || !strings.Contains(mailtest.Text(res), "does not allow sending") {
		t.Fatalf("send with a no-send token: %q", mailtest.Text(res))
	}
	res = mailtest.Call(t, c, "imap_list_folders", map[string]any{"credentials": out.Token})
	if res.IsError {
		t.Fatalf("read with a read token: %q", mailtest.Text(res))
	}
}
