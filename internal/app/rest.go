package app

import (
	"net/http"

	"github.com/mailbox-mcp/mailbox-mcp/internal/rest"
)

// restRoutes is the REST mirror's route table: which tool each /v1/ route
// calls. Everything else (parameters, bodies, answers, errors, the OpenAPI
// document) internal/rest derives from the tools' definitions. A route
// whose tool is not enabled answers 404.
var restRoutes = []rest.Route{
	{Method: http.MethodPost, Path: "/v1/send", Tools: []string{"smtp_send_email"}, Summary: "Send an email"},
	{Method: http.MethodPost, Path: "/v1/reply", Tools: []string{"smtp_reply_email"}, Summary: "Reply to an email"},
	{Method: http.MethodGet, Path: "/v1/peek", Tools: []string{"imap_peek_inbox"}, Summary: "Look at the unread count without changing anything"},
	{Method: http.MethodPost, Path: "/v1/check-inbox", Tools: []string{"imap_check_inbox"}, Summary: "Take the unread messages (marks exactly those as read)"},
	{Method: http.MethodGet, Path: "/v1/wait", Tools: []string{"imap_wait_for_email"}, Summary: "Wait for a new message (long poll)"},
	// Without search criteria a listing; with any, a search.
	{Method: http.MethodGet, Path: "/v1/emails", Tools: []string{"imap_list_emails", "imap_search_emails"}, Summary: "List or search the messages of a folder"},
	{Method: http.MethodGet, Path: "/v1/emails/{uid}", Tools: []string{"imap_read_email"}, Summary: "Read one message"},
	{Method: http.MethodGet, Path: "/v1/emails/{uid}/thread", Tools: []string{"imap_get_thread"}, Summary: "The conversation of one message, oldest first"},
	{Method: http.MethodGet, Path: "/v1/emails/{uid}/attachments/{part_id}", Tools: []string{"imap_get_attachment"}, Summary: "One attachment: its details, and a download link when it is large"},
	{Method: http.MethodGet, Path: "/v1/folders", Tools: []string{"imap_list_folders"}, Summary: "List the folders"},
	{Method: http.MethodPost, Path: "/v1/forward", Tools: []string{"smtp_forward_email"}, Summary: "Forward an email"},
	{Method: http.MethodPost, Path: "/v1/emails/{uid}/invite-response", Tools: []string{"smtp_respond_invite"}, Summary: "Answer a meeting invitation: accept, decline or tentative"},
	{Method: http.MethodPost, Path: "/v1/emails/{uid}/unsubscribe", Tools: []string{"mail_unsubscribe"}, Summary: "Leave the mailing list a message came from"},
	// Changes: offered only at the access level each tool needs.
	{Method: http.MethodPost, Path: "/v1/emails/flags", Tools: []string{"imap_set_flags"}, Summary: "Add or remove flags and keywords"},
	{Method: http.MethodPost, Path: "/v1/emails/move", Tools: []string{"imap_move_emails"}, Summary: "Move messages to another folder"},
	{Method: http.MethodPost, Path: "/v1/emails/trash", Tools: []string{"imap_trash_emails"}, Summary: "Move messages to Trash (or delete them for good)"},
	{Method: http.MethodPost, Path: "/v1/folders", Tools: []string{"imap_create_folder"}, Summary: "Create a folder"},
	{Method: http.MethodPost, Path: "/v1/folders/rename", Tools: []string{"imap_rename_folder"}, Summary: "Rename a folder"},
	{Method: http.MethodPost, Path: "/v1/folders/delete", Tools: []string{"imap_delete_folder"}, Summary: "Delete a folder"},
	{Method: http.MethodPost, Path: "/v1/drafts", Tools: []string{"imap_save_draft"}, Summary: "Save a draft"},
	{Method: http.MethodPost, Path: "/v1/drafts/{uid}/send", Tools: []string{"smtp_send_draft"}, Summary: "Send a saved draft"},
	// Agents of one mailbox (AGENTS=on); the caller names itself with the
	// x-mailbox-agent header, ?agent=, or a token made for an agent.
	{Method: http.MethodGet, Path: "/v1/agents", Tools: []string{"agent_list"}, Summary: "The agents of this mailbox: unread counts, last activity, status lines"},
	{Method: http.MethodPost, Path: "/v1/agents/send", Tools: []string{"agent_send"}, Summary: "Send a message to other agents of this mailbox (\"*\": all of them)"},
	{Method: http.MethodPost, Path: "/v1/agents/status", Tools: []string{"agent_set_status"}, Summary: "Set the caller's status line"},
	{Method: http.MethodGet, Path: "/v1/agents/state", Tools: []string{"agent_get_state"}, Summary: "Read shared state: one key, or every key with a prefix"},
	{Method: http.MethodPost, Path: "/v1/agents/state", Tools: []string{"agent_set_state"}, Summary: "Set one key of the shared state"},
	{Method: http.MethodGet, Path: "/v1/agents/conversations", Tools: []string{"agent_list_conversations"}, Summary: "The caller's group conversations"},
	{Method: http.MethodPost, Path: "/v1/agents/conversations", Tools: []string{"agent_create_conversation"}, Summary: "Start a group conversation"},
	{Method: http.MethodPost, Path: "/v1/agents/conversations/leave", Tools: []string{"agent_leave_conversation"}, Summary: "Leave a group conversation"},
	{Method: http.MethodGet, Path: "/v1/agents/history", Tools: []string{"agent_history"}, Summary: "The messages of a conversation, oldest first"},
	{Method: http.MethodPost, Path: "/v1/agents/prune", Tools: []string{"agent_prune"}, Summary: "Move read agent messages older than some days to Trash"},
}

// RESTRoutes returns the REST mirror's route table.
func RESTRoutes() []rest.Route { return append([]rest.Route(nil), restRoutes...) }
