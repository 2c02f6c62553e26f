package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
)

type saveDraftArgs struct {
	To           []string        `json:"to" max:"1000" desc:"Recipients, each \"Name <user@example.com>\" or \"user@example.com\"."`
	Cc           []string        `json:"cc" max:"1000" desc:"Carbon-copy recipients."`
	Bcc          []string        `json:"bcc" max:"1000" desc:"Blind-copy recipients: kept in the draft, never shown to anyone when it is sent."`
	Subject      string          `json:"subject" max:"2000" desc:"Subject line; with in_reply_to_uid and no subject, \"Re: \" and the original's."`
	Text         string          `json:"text" desc:"Plain-text body (may be empty in a draft)."`
	HTML         string          `json:"html" desc:"Optional HTML body, alongside the text."`
	Attachments  []AttachmentArg `json:"attachments" max:"100" desc:"Files to attach."`
	From         string          `json:"from" max:"1000" desc:"Sender, \"Name <user@example.com>\"; default: the logged-in user."`
	Tags         []string        `json:"tags" max:"10" desc:"Short labels (lower-case letters, digits, . _ -; up to 32 characters each) for the X-Mailbox-Tags header, which agents filter their mail by."`
	InReplyToUID uint32          `json:"in_reply_to_uid" min:"1" desc:"UID of a message this draft answers: the draft is threaded to it (In-Reply-To, References) and, without recipients, addressed to its sender."`
	Folder       string          `json:"folder" max:"1000" desc:"Folder of the in_reply_to_uid message (default INBOX)."`
	ReplaceUID   uint32          `json:"replace_uid" min:"1" desc:"UID of an earlier draft (in the Drafts folder) this one replaces: it is removed once the new one is saved."`
}

var saveDraft = Def[saveDraftArgs, outbox.SavedDraft]{
	Name:  "imap_save_draft",
	Title: "Save draft",
	Describe: func(d *Deps) string {
		return "Save a message as a draft in the Drafts folder (flagged Draft and Seen) without sending it, for a person to review or to be sent later. " +
			"Every field may be empty but the sender; in_reply_to_uid threads the draft as a reply to that message. " +
			"replace_uid replaces an earlier draft: the new one is saved first, then exactly the old one removed (it must be a draft in the Drafts folder, else nothing is saved). " +
			"Returns the draft's UID, folder and Message-ID. " + attachmentsDescription(d)
	},
	// It adds a message; replace_uid removes the older version of the same
	// draft, which the new one supersedes: not destructive. A second call
	// saves a second draft: not idempotent.
	OpenWorld: true, Access: access.Organize,
	Run: func(ctx context.Context, c *Call, a saveDraftArgs) (outbox.SavedDraft, error) {
		atts, err := decodeAttachments(c.Outbox.AttachmentLimit(), a.Attachments)
		if err != nil {
			return outbox.SavedDraft{}, err
		}
		if a.Folder != "" && a.InReplyToUID == 0 {
			return outbox.SavedDraft{}, badArg("folder is the folder of the in_reply_to_uid message; give in_reply_to_uid too, or leave folder out")
		}
		res, err := c.Outbox.SaveDraft(ctx, c.Creds, outbox.Draft{From: a.From, To: a.To, Cc: a.Cc, Bcc: a.Bcc,
			Subject: a.Subject, Text: a.Text, HTML: a.HTML, Attachments: atts, Tags: a.Tags,
			InReplyToFolder: a.Folder, InReplyToUID: a.InReplyToUID, ReplaceUID: a.ReplaceUID})
		return valueOf(res), err
	},
	Text: func(r outbox.SavedDraft) string {
		var b strings.Builder
		fmt.Fprintf(&b, "Saved draft %q in %s (uid %d, Message-ID <%s>), from %s.\n", r.Subject, r.Folder, r.UID, r.MessageID, r.From)
		fmt.Fprintf(&b, "To: %s\n", strings.Join(r.To, ", "))
		if len(r.Cc) > 0 {
			fmt.Fprintf(&b, "Cc: %s\n", strings.Join(r.Cc, ", "))
		}
		if len(r.Bcc) > 0 {
			fmt.Fprintf(&b, "Bcc: %s\n", strings.Join(r.Bcc, ", "))
		}
		if r.Attachments > 0 {
			fmt.Fprintf(&b, "%s.\n", plural(r.Attachments, "attachment"))
		}
		if r.InReplyTo != "" {
			fmt.Fprintf(&b, "In reply to <%s>.\n", r.InReplyTo)
		}
		if r.Replaced != 0 {
			fmt.Fprintf(&b, "It replaces the earlier draft uid %d, which was removed.\n", r.Replaced)
		}
		for _, w := range r.Warnings {
			fmt.Fprintf(&b, "[warning: %s]\n", w)
		}
		return b.String()
	},
	Example: map[string]any{"to": []any{"Bob <bob@demo.test>"}, "subject": "Draft: quarterly report", "text": "Hi Bob,\n\nfirst numbers below.\n"},
}

type sendDraftArgs struct {
	UID            uint32 `json:"uid" required:"true" min:"1" desc:"UID of the draft in the Drafts folder (from imap_save_draft, or imap_list_emails of the Drafts folder)."`
	IdempotencyKey string `json:"idempotency_key" max:"200" desc:"Optional key that makes the draft go out at most once (as for smtp_send_email)."`
}

var sendDraft = Def[sendDraftArgs, SendResult]{
	Name:  "smtp_send_draft",
	Title: "Send draft",
	Describe: func(d *Deps) string {
		return fmt.Sprintf("Send a draft from the Drafts folder as it is: to its To, Cc and Bcc (Bcc recipients are not named in what anyone receives), with its subject, body, attachments and threading. "+
			"It goes through the same checks as smtp_send_email (sender, at most %d recipients, attachments at most %s); a copy is saved in the Sent folder, the draft is then removed, and the message a reply draft answers (found in INBOX) gets the Answered flag. "+
			"A UID that is not a draft in the Drafts folder sends nothing. %s",
			d.Outbox.MaxRecipients(), outbox.SizeText(d.Outbox.AttachmentLimit()), idempotencyDescription)
	},
	// It sends and then removes the draft, whose content lives on in the
	// message sent (and its Sent copy), as replace_uid removes a draft
	// the newer one supersedes: not destructive. Not idempotent without a
	// key.
	OpenWorld: true, Sends: true, Access: access.Organize,
	Run: func(ctx context.Context, c *Call, a sendDraftArgs) (SendResult, error) {
		res, err := c.Outbox.SendDraft(ctx, c.Creds, outbox.DraftSend{UID: a.UID, IdempotencyKey: a.IdempotencyKey})
		return valueOf(res), err
	},
	// The draft itself waits for the approval page: nothing new is held.
	Approve: sending("Send this draft?", func(ctx context.Context, c *Call, a sendDraftArgs) (*outbox.Planned, error) {
		return c.Outbox.PlanDraft(ctx, c.Creds, a.UID)
	}, true, func(a sendDraftArgs) string { return a.IdempotencyKey }),
	Text:    sendText,
	Example: map[string]any{"uid": 0},
}
