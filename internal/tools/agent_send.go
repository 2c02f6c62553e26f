package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/agents"
)

type agentSendArgs struct {
	To           []string `json:"to" max:"100" desc:"Agent names of this mailbox to send to (e.g. [\"frontend\"]), or [\"*\"] for every agent of the mailbox but you. Leave empty with conversation."`
	Subject      string   `json:"subject" max:"2000" desc:"Subject line (in a conversation, default \"Re: \" and its name)."`
	Text         string   `json:"text" required:"true" desc:"The message's plain-text body."`
	Tags         []string `json:"tags" max:"10" desc:"Short labels (lower-case letters, digits, . _ -; up to 32 characters each) carried in the X-Mailbox-Tags header, for agents that filter their folder by tag."`
	Conversation string   `json:"conversation" max:"64" desc:"A conversation id (from agent_create_conversation or agent_list_conversations): the message continues it, threaded, and goes to all its current participants."`
}

// agentNeeded is the advice for a call that needs the caller's agent name.
const agentNeeded = "needs the caller's agent name: the x-mailbox-agent header, ?agent=NAME on the MCP URL, or a credentials token made with agent"

var agentSend = Def[agentSendArgs, agents.Sent]{
	Name:  "agent_send",
	Title: "Send to agents",
	Description: "Send a message to other agents of this mailbox: it is APPENDed straight into each recipient's folder (Agents/NAME), with no SMTP, so an agent waiting on its folder (imap_wait_for_email) wakes at once. " +
		"to names agents (\"*\": every agent of the mailbox but you); a folder that does not exist yet is created, so the message waits for an agent that comes later (delivered[].created says so). " +
		"With conversation the message goes to all the conversation's current participants, threaded; your own copy is kept, as read. " +
		"The message is ordinary mail (From and To carry the agents' names, X-Mailbox-Agent-From/-To the names alone), so the user sees it in any mail app. " +
		"The caller " + agentNeeded + ". Every name and tag is checked before anything is delivered. Returns the Message-ID (the same in every copy) and each folder it went to.",
	// Not read-only; not destructive (it only adds); not idempotent (a
	// second call delivers a second message). OpenWorld true, as every
	// imap_ tool: it acts on the mail server, a system outside the
	// gateway, though it writes only inside the caller's own mailbox and
	// reaches no one outside it (unlike smtp_send_email).
	OpenWorld: true, Agents: true,
	Run: func(ctx context.Context, c *Call, a agentSendArgs) (agents.Sent, error) {
		me, err := c.Agent()
		if err != nil {
			return agents.Sent{}, err
		}
		return orZero(c.Agents.Send(ctx, c.Creds, agents.Message{From: me, To: a.To, Subject: a.Subject, Text: a.Text, Tags: a.Tags, Conversation: a.Conversation}))
	},
	Text:    sentText,
	Example: map[string]any{"to": []any{"frontend"}, "subject": "API ready", "text": "The /orders endpoint is deployed; the schema is in docs/api.md."},
}

// sentText renders a delivery for agent_send and the conversation tools.
func sentText(r agents.Sent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Delivered (Message-ID <%s>)", r.MessageID)
	if r.Conversation != "" {
		fmt.Fprintf(&b, " in conversation %s", r.Conversation)
	}
	b.WriteString(":\n")
	for _, d := range r.Delivered {
		fmt.Fprintf(&b, "- %s: %s", d.Agent, line(d.Folder))
		if d.UID != 0 {
			fmt.Fprintf(&b, " (uid %d)", d.UID)
		}
		if d.Created {
			b.WriteString(", folder created now: the agent gets it when it comes")
		}
		if d.Own {
			b.WriteString(", your own copy (read)")
		}
		b.WriteString("\n")
	}
	return b.String()
}
