package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
)

type moveArgs struct {
	Folder   string   `json:"folder" max:"1000" desc:"Folder the messages are in (default INBOX)."`
	UIDs     []uint32 `json:"uids" required:"true" min:"1" max:"500" desc:"UIDs of the messages, from imap_list_emails or imap_search_emails (1 to 500)."`
	ToFolder string   `json:"to_folder" required:"true" max:"1000" desc:"Folder to move them to, as named by imap_list_folders; it must exist (imap_create_folder makes one)."`
}

var moveEmails = Def[moveArgs, mailbox.Moved]{
	Name:  "imap_move_emails",
	Title: "Move emails",
	Description: "Move messages to another folder. The messages get new UIDs there: the result gives each one's new_uid when the server says. " +
		"If any UID is not in the folder, or to_folder does not exist, nothing is moved. Other messages of the folder are never touched.",
	// Not destructive (moving back undoes it), not idempotent (the UIDs
	// are gone from the folder after the first call).
	OpenWorld: true,
	Access:    access.Organize,
	Run: func(ctx context.Context, c *Call, a moveArgs) (mailbox.Moved, error) {
		return orZero(c.Mailbox.Move(ctx, c.Creds, a.Folder, a.UIDs, a.ToFolder))
	},
	Text: func(r mailbox.Moved) string {
		return fmt.Sprintf("Moved %s from %s to %s:\n%s", plural(len(r.Messages), "message"), line(r.Folder), line(r.ToFolder), movedText(r.Messages))
	},
	Example: map[string]any{"folder": "INBOX", "uids": []any{5}, "to_folder": "Archive"},
}

// movedText lists moved messages with their new UIDs.
func movedText(ms []mailbox.MovedUID) string {
	var b strings.Builder
	for _, m := range ms {
		if m.NewUID != 0 {
			fmt.Fprintf(&b, "- uid %d is now uid %d\n", m.UID, m.NewUID)
		} else {
			fmt.Fprintf(&b, "- uid %d (the server did not say its new uid)\n", m.UID)
		}
	}
	return b.String()
}
