package tools

import (
	"context"
	"fmt"

	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
)

type forwardArgs struct {
	Folder             string   `json:"folder" max:"1000" desc:"Folder of the message to forward (default INBOX)."`
	UID                uint32   `json:"uid" required:"true" min:"1" desc:"UID of the message to forward, from imap_list_emails or imap_search_emails."`
	To                 []string `json:"to" max:"1000" desc:"Recipients, each \"Name <user@example.com>\" or \"user@example.com\"."`
	Cc                 []string `json:"cc" max:"1000" desc:"Carbon-copy recipients."`
	Bcc                []string `json:"bcc" max:"1000" desc:"Blind-copy recipients."`
	Text               string   `json:"text" desc:"Your own words, placed above the forwarded message."`
	IncludeAttachments *bool    `json:"include_attachments" default:"true" desc:"Carry the original's attachments (default true); false sends its text and header only."`
	From               string   `json:"from" max:"1000" desc:"Sender, \"Name <user@example.com>\"; default: the logged-in user."`
	Tags               []string `json:"tags" max:"10" desc:"Short labels carried in the X-Mailbox-Tags header (as for smtp_send_email)."`
	IdempotencyKey     string   `json:"idempotency_key" max:"200" desc:"Optional key that makes the forward go out at most once (as for smtp_send_email)."`
}

var forwardEmail = Def[forwardArgs, SendResult]{
	Name:  "smtp_forward_email",
	Title: "Forward email",
	Describe: func(d *Deps) string {
		return fmt.Sprintf("Forward a message of the mailbox to new recipients (at most %d in all). "+
			"The subject gets one \"Fwd: \"; the body is your text, then a block quoting the original's From, Date, Subject, To and Cc, then the original's text (HTML converted to plain text). "+
			"The original's attachments go along unless include_attachments is false; together they may take at most %s, else nothing is sent and the error says so. "+
			"References names the original, so mail clients thread the forward with it. The original is read without marking it as read; a copy is saved in the Sent folder. %s",
			d.Outbox.MaxRecipients(), outbox.SizeText(d.Outbox.AttachmentLimit()), idempotencyDescription)
	},
	// As smtp_send_email: it adds and deletes nothing, a second call sends
	// a second message.
	OpenWorld: true, Sends: true,
	Run: func(ctx context.Context, c *Call, a forwardArgs) (SendResult, error) {
		res, err := c.Outbox.Forward(ctx, c.Creds, a.forward())
		return valueOf(res), err
	},
	Approve: sending("Forward this email?", func(ctx context.Context, c *Call, a forwardArgs) (*outbox.Planned, error) {
		return c.Outbox.PlanForward(ctx, c.Creds, a.forward())
	}, false, func(a forwardArgs) string { return a.IdempotencyKey }),
	Text:    sendText,
	Example: map[string]any{"folder": "INBOX", "uid": 0, "to": []any{"Bob <bob@demo.test>"}, "text": "FYI, see below."},
}

func (a forwardArgs) forward() outbox.Forward {
	include := a.IncludeAttachments == nil || *a.IncludeAttachments
	return outbox.Forward{Folder: a.Folder, UID: a.UID, From: a.From,
		To: a.To, Cc: a.Cc, Bcc: a.Bcc, Text: a.Text, IncludeAttachments: include, Tags: a.Tags, IdempotencyKey: a.IdempotencyKey}
}
