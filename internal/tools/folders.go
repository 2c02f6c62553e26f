package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
)

type noArgs struct{}

// FoldersResult is imap_list_folders' result.
type FoldersResult struct {
	Folders []mailbox.Folder `json:"folders" desc:"every folder, INBOX first"`
}

var listFolders = Def[noArgs, FoldersResult]{
	Name:        "imap_list_folders",
	Title:       "List folders",
	Description: "List every folder of the mailbox with its role (inbox, sent, drafts, trash, junk, archive, all, flagged), whether it can be opened, and its total and unread message counts. Changes nothing.",
	ReadOnly:    true, Idempotent: true, OpenWorld: true,
	Example: map[string]any{},
	Run: func(ctx context.Context, c *Call, _ noArgs) (FoldersResult, error) {
		folders, err := c.Mailbox.ListFolders(ctx, c.Creds)
		return FoldersResult{Folders: folders}, err
	},
	Text: func(r FoldersResult) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s:\n", plural(len(r.Folders), "folder"))
		for _, f := range r.Folders {
			role := ""
			if f.Role != "" {
				role = " [" + f.Role + "]"
			}
			if !f.Selectable {
				role += " (cannot be opened)"
			}
			fmt.Fprintf(&b, "- %s%s: %s, %d unread\n", line(f.Name), role, plural(int(f.Total), "message"), f.Unread)
		}
		return b.String()
	},
}

// plural writes a count with its noun: "1 message", "3 messages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if stem, ok := strings.CutSuffix(noun, "ry"); ok {
		return fmt.Sprintf("%d %sries", n, stem) // entry, entries
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
