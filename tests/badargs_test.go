package tests

import (
	"fmt"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// Bad arguments, through the official TypeScript SDK, on every tool: each
// is refused with one plain sentence naming the argument, the allowed range
// or form and what was given, and a misspelt argument is refused with the
// nearest valid name instead of being ignored. Nothing reaches the mail
// server (the refusals come before any login).
func TestBadArgumentsThroughTypeScriptSDK(t *testing.T) {
	dir := clientsDir(t)
	s := mailtest.Shared(t)
	g := startGateway(t, s, append(smtpEnv(s), "MAILBOX_ACCESS=full")...)
	type call struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	cases := []struct {
		call
		want string
	}{
		{call{"imap_encrypt_credentials", map[string]any{"user": "a@example.test"}}, "give both user and password, or neither to seal the x-imap-user and x-imap-pass headers"},
		{call{"imap_encrypt_credentials", map[string]any{"username": "a@example.test", "password": "x"}}, `unknown argument "username"; did you mean "user"?`},
		{call{"imap_encrypt_credentials", map[string]any{"user": "a@example.test", "password": "x", "verify": "no"}}, `verify must be true or false (got "no")`},
		{call{"imap_list_folders", map[string]any{"folder": "INBOX"}}, `unknown argument "folder": this tool takes no arguments`},
		{call{"imap_list_folders", map[string]any{"credentials": 7}}, "credentials must be a string: the token from imap_encrypt_credentials (got 7)"},
		{call{"imap_list_emails", map[string]any{"limit": 100000}}, "limit must be between 1 and 100 (got 100000)"},
		{call{"imap_list_emails", map[string]any{"limit": 0}}, "limit must be between 1 and 100 (got 0)"},
		{call{"imap_list_emails", map[string]any{"mailbox": "Sent"}}, `unknown argument "mailbox"; did you mean "folder"?`},
		{call{"imap_list_emails", map[string]any{"folder": 3}}, "folder must be a string (got 3)"},
		{call{"imap_search_emails", map[string]any{"form": "bob"}}, `unknown argument "form"; did you mean "from"?`},
		{call{"imap_search_emails", map[string]any{"seen": "yes"}}, `seen must be true or false (got "yes")`},
		{call{"imap_search_emails", map[string]any{"from": "bob", "since": "yesterday"}}, `since must be a date: YYYY-MM-DD (e.g. 2026-01-31) or RFC 3339 (e.g. 2026-01-31T09:00:00Z) (got "yesterday")`},
		{call{"imap_search_emails", map[string]any{"larger": -5}}, "larger must be at least 0 (got -5)"},
		{call{"imap_read_email", map[string]any{}}, "uid is required"},
		{call{"imap_read_email", map[string]any{"uid": 1.5}}, "uid must be a whole number (got 1.5)"},
		{call{"imap_read_email", map[string]any{"uid": "12"}}, `uid must be a whole number (got "12")`},
		{call{"imap_read_email", map[string]any{"uid": 4294967296}}, "uid must be between 1 and 4294967295 (got 4294967296)"},
		{call{"imap_read_email", map[string]any{"uid": 5, "max_chars": 0}}, "max_chars must be between 1 and 1000000 (got 0)"},
		{call{"imap_read_email", map[string]any{"id": 5}}, `unknown argument "id"; did you mean "uid"?`},
		{call{"imap_get_thread", map[string]any{}}, "uid is required"},
		{call{"imap_get_thread", map[string]any{"uid": 3, "also_folders": "Archive"}}, `also_folders must be a list (got "Archive")`},
		{call{"imap_peek_inbox", map[string]any{"tag": "Not A Tag"}}, `tag "Not A Tag" may only hold lower-case letters, digits, '.', '_' and '-'`},
		{call{"imap_peek_inbox", map[string]any{"mailbox": "INBOX"}}, `unknown argument "mailbox"; did you mean "folder"?`},
		{call{"imap_wait_for_email", map[string]any{"timeout_s": 7200}}, "timeout_s must be between 1 and 3600 (got 7200)"},
		{call{"imap_wait_for_email", map[string]any{"timeout": 10}}, `unknown argument "timeout"; did you mean "timeout_s"?`},
		{call{"imap_wait_for_email", map[string]any{"unread_only": "yes"}}, `unread_only must be true or false (got "yes")`},
		{call{"imap_check_inbox", map[string]any{"limit": 51}}, "limit must be between 1 and 50 (got 51)"},
		{call{"imap_check_inbox", map[string]any{"tags": []any{"a"}}}, `unknown argument "tags"; did you mean "tag"?`},
		{call{"smtp_send_email", map[string]any{"to": "bob@example.test", "text": "x"}}, `to must be a list (got "bob@example.test")`},
		{call{"smtp_send_email", map[string]any{"to": []any{"bob@example.test"}, "text": "x", "tags": []any{"Urgent!"}}}, `tag "Urgent!" may only hold lower-case letters, digits, '.', '_' and '-'`},
		{call{"smtp_send_email", map[string]any{"to": []any{"bob@example.test"}, "body": "x"}}, `unknown argument "body"; did you mean "text"?`},
		{call{"smtp_send_email", map[string]any{"to": []any{"bob@example.test"}, "text": "x", "attachments": []any{map[string]any{"filename": "a.txt"}}}}, "attachments[0].content_base64 is required"},
		{call{"smtp_reply_email", map[string]any{"uid": -1, "text": "x"}}, "uid must be between 1 and 4294967295 (got -1)"},
		{call{"smtp_reply_email", map[string]any{"uid": 3, "text": "x", "attachments": []any{map[string]any{"data": "AAAA"}}}}, `unknown argument "attachments[0].data"; did you mean "attachments[0].content_base64"?`},
		{call{"smtp_reply_email", map[string]any{"uid": 3, "text": "x", "replyall": true}}, `unknown argument "replyall"; did you mean "reply_all"?`},
		{call{"smtp_respond_invite", map[string]any{"uid": 3, "response": "maybe"}}, "response must be one of accept, decline, tentative"},
		{call{"smtp_respond_invite", map[string]any{"uid": 3, "rsvp": "accept"}}, `unknown argument "rsvp"; did you mean "response"?`},
		{call{"mail_unsubscribe", map[string]any{"uid": 3, "list": "weekly"}}, `unknown argument "list"; the arguments are: folder, uid`},
		{call{"imap_get_attachment", map[string]any{"uid": 3}}, "part_id is required"},
		{call{"imap_get_attachment", map[string]any{"uid": 3, "part": "2"}}, `unknown argument "part"; did you mean "part_id"?`},
		{call{"imap_set_flags", map[string]any{"uids": []any{}, "add": []any{"flagged"}}}, "uids must have at least 1 entry (got 0)"},
		{call{"imap_set_flags", map[string]any{"uids": []any{1}, "add": "flagged"}}, `add must be a list (got "flagged")`},
		{call{"imap_move_emails", map[string]any{"uids": []any{1}}}, "to_folder is required"},
		{call{"imap_move_emails", map[string]any{"uids": []any{1}, "to": "Archive"}}, `unknown argument "to"; the arguments are: folder, to_folder, uids`},
		{call{"imap_trash_emails", map[string]any{"uids": "1"}}, `uids must be a list (got "1")`},
		{call{"imap_trash_emails", map[string]any{"uids": []any{1}, "permanent": "yes"}}, `permanent must be true or false (got "yes")`},
		{call{"imap_create_folder", map[string]any{}}, "name is required"},
		{call{"imap_rename_folder", map[string]any{"folder": "Clients"}}, "new_name is required"},
		{call{"imap_delete_folder", map[string]any{"folders": "Clients"}}, `unknown argument "folders"; did you mean "folder"?`},
		{call{"smtp_forward_email", map[string]any{"uid": 3}}, "no recipients: give at least one address in to, cc or bcc"},
		{call{"imap_save_draft", map[string]any{"to": "bob@example.test"}}, `to must be a list (got "bob@example.test")`},
		{call{"smtp_send_draft", map[string]any{"uid": 0}}, "uid must be between 1 and 4294967295 (got 0)"},
		{call{"agent_send", map[string]any{"to": "frontend", "text": "x"}}, `to must be a list (got "frontend")`},
		{call{"agent_send", map[string]any{"to": []any{"frontend"}}}, "text is required"},
		{call{"agent_list", map[string]any{"folder": "Agents"}}, `unknown argument "folder": this tool takes no arguments`},
		{call{"agent_set_status", map[string]any{"state": "busy"}}, `unknown argument "state"; the arguments are: status`},
		{call{"agent_create_conversation", map[string]any{"name": "Release"}}, "participants is required"},
		{call{"agent_list_conversations", map[string]any{"limit": 3}}, `unknown argument "limit": this tool takes no arguments`},
		{call{"agent_leave_conversation", map[string]any{}}, "conversation is required"},
		{call{"agent_history", map[string]any{"conversation": "conv-x", "limit": 500}}, "limit must be between 1 and 200 (got 500)"},
		{call{"agent_set_state", map[string]any{"key": "build/status"}}, "value is required"},
		{call{"agent_get_state", map[string]any{"keys": "build/"}}, `unknown argument "keys"; did you mean "key"?`},
		{call{"agent_prune", map[string]any{"older_than_days": 0}}, "older_than_days must be between 1 and 3650 (got 0)"},
	}
	var calls []call
	for _, c := range cases {
		calls = append(calls, c.call)
	}
	var out struct {
		Results []struct {
			IsError       bool   `json:"isError"`
			Text          string `json:"text"`
			ProtocolError string `json:"protocolError"`
		} `json:"results"`
	}
	runNode(t, dir, "calls.mjs", map[string]any{"url": g.URL, "headers": userHeaders(s, mailtest.Alice), "calls": calls}, &out)
	if len(out.Results) != len(cases) {
		t.Fatalf("%d results for %d calls", len(out.Results), len(cases))
	}
	tools := map[string]bool{}
	for i, c := range cases {
		tools[c.Name] = true
		got := out.Results[i]
		t.Run(fmt.Sprintf("%s_%d", c.Name, i), func(t *testing.T) {
			if got.ProtocolError != "" {
				t.Fatalf("%s(%v): protocol error %s, want the tool error %q", c.Name, c.Arguments, got.ProtocolError, c.want)
			}
			if !got.IsError || got.Text != c.want {
				t.Fatalf("%s(%v):\n got isError=%v %q\nwant %q", c.Name, c.Arguments, got.IsError, got.Text, c.want)
			}
		})
	}
	if len(tools) != len(allTools) {
		t.Errorf("the table covers %d tools, want all %d", len(tools), len(allTools))
	}
}
