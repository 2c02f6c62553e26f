package tools

import (
	"cmp"
	"context"
	"fmt"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/approval"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

type trashArgs struct {
	Folder    string   `json:"folder" max:"1000" desc:"Folder the messages are in (default INBOX)."`
	UIDs      []uint32 `json:"uids" required:"true" min:"1" max:"500" desc:"UIDs of the messages, from imap_list_emails or imap_search_emails (1 to 500)."`
	Permanent bool     `json:"permanent" default:"false" desc:"true: delete the messages for good instead of moving them to the Trash folder; it cannot be undone and needs the full access level. The only way to remove messages that are already in the Trash folder."`
}

var trashEmails = Def[trashArgs, mailbox.Trashed]{
	Name:  "imap_trash_emails",
	Title: "Trash emails",
	Description: "Move messages to the Trash folder (the one the server marks as Trash), from where they can be moved back. " +
		"With permanent: true they are deleted for good instead (only these messages, never others; needs the full access level). " +
		"If any UID is not in the folder, nothing is changed.",
	// Destructive: it takes messages out of their folder, and with
	// permanent deletes them. Not idempotent.
	Destructive: true, OpenWorld: true,
	Access: access.Organize,
	Run: func(ctx context.Context, c *Call, a trashArgs) (mailbox.Trashed, error) {
		if a.Permanent {
			if err := c.Require(access.Full, "permanent deletion (permanent: true)"); err != nil {
				return mailbox.Trashed{}, err
			}
		}
		want, err := approvedFacts[mailbox.Facts](c)
		if err != nil {
			return mailbox.Trashed{}, err
		}
		return orZero(c.Mailbox.Trash(ctx, c.Creds, a.Folder, a.UIDs, a.Permanent, want))
	},
	// Only a deletion for good asks; to the Trash can be undone.
	Approve: &Approve[trashArgs]{Kind: access.ApproveDestructive, When: func(a trashArgs) bool { return a.Permanent },
		Preview: func(ctx context.Context, c *Call, a trashArgs) (approval.Preview, error) {
			if err := c.Require(access.Full, "permanent deletion (permanent: true)"); err != nil {
				return approval.Preview{}, err
			}
			msgs, facts, err := c.Mailbox.MessageFacts(ctx, c.Creds, a.Folder, a.UIDs)
			if err != nil {
				return approval.Preview{}, err
			}
			if len(msgs) != len(a.UIDs) {
				return approval.Preview{}, mailerr.Newf(mailerr.NotFound, "%d of the %d UIDs are not in the folder; nothing was changed", len(a.UIDs)-len(msgs), len(a.UIDs)).About(mailerr.SubjectMessage)
			}
			p := approval.Preview{Title: fmt.Sprintf("Delete %s for good?", plural(len(msgs), "message")),
				Fields:  []approval.Field{{Name: "Folder", Value: cmp.Or(a.Folder, "INBOX")}},
				Warning: "This cannot be undone. Exactly these messages are deleted: if the folder is replaced, or the UIDs name other messages, before you approve, nothing is.",
				Facts:   factsOf(facts)}
			for _, m := range msgs {
				from := ""
				if m.From != nil {
					from = cmp.Or(m.From.Name, m.From.Email) + ": "
				}
				p.Items = append(p.Items, fmt.Sprintf("%s%s (%s)", from, m.Subject, m.Date.Format("2 Jan 2006")))
			}
			return p, nil
		}},
	Text: func(r mailbox.Trashed) string {
		if r.Permanent {
			return fmt.Sprintf("Deleted %s from %s for good.\n", plural(len(r.Messages), "message"), line(r.Folder))
		}
		return fmt.Sprintf("Moved %s from %s to the Trash folder %s:\n%s", plural(len(r.Messages), "message"), line(r.Folder), line(r.TrashFolder), movedText(r.Messages))
	},
	Example: map[string]any{"folder": "INBOX", "uids": []any{1}},
}
