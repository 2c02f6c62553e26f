package tools

import (
	"context"
	"fmt"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/approval"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

type createFolderArgs struct {
	Name string `json:"name" required:"true" max:"200" desc:"Name of the new folder, in any language (e.g. Reçus/2026). The server's hierarchy delimiter (usually / or .; imap_list_folders shows it) makes a folder inside another. No * or %."`
}

var createFolder = Def[createFolderArgs, mailbox.FolderChange]{
	Name:  "imap_create_folder",
	Title: "Create folder",
	Description: "Create a folder (and subscribe to it, so mail clients show it). A folder that already exists is an error, not a success: " +
		"check the name with imap_list_folders.",
	// Not destructive, not idempotent (a second call is refused).
	OpenWorld: true,
	Access:    access.Organize,
	Run: func(ctx context.Context, c *Call, a createFolderArgs) (mailbox.FolderChange, error) {
		return orZero(c.Mailbox.CreateFolder(ctx, c.Creds, a.Name))
	},
	Text:    func(r mailbox.FolderChange) string { return fmt.Sprintf("Created folder %s.\n", line(r.Folder)) },
	Example: map[string]any{"name": "Clients"},
}

type renameFolderArgs struct {
	Folder  string `json:"folder" required:"true" max:"1000" desc:"The folder to rename, as named by imap_list_folders."`
	NewName string `json:"new_name" required:"true" max:"200" desc:"Its new name (any language; the hierarchy delimiter moves it inside another folder). No * or %."`
}

var renameFolder = Def[renameFolderArgs, mailbox.FolderChange]{
	Name:  "imap_rename_folder",
	Title: "Rename folder",
	Description: "Rename a folder; its messages and the folders inside it go along. INBOX and the special folders (Sent, Drafts, Trash, Junk, Archive...) " +
		"cannot be renamed, nor can a folder holding one. The new name must not exist yet.",
	// Not destructive (renaming back undoes it), not idempotent.
	OpenWorld: true,
	Access:    access.Organize,
	Run: func(ctx context.Context, c *Call, a renameFolderArgs) (mailbox.FolderChange, error) {
		return orZero(c.Mailbox.RenameFolder(ctx, c.Creds, a.Folder, a.NewName))
	},
	Text: func(r mailbox.FolderChange) string {
		return fmt.Sprintf("Renamed folder %s to %s.\n", line(r.From), line(r.Folder))
	},
	Example: map[string]any{"folder": "Clients", "new_name": "Kunden ✓"},
}

type deleteFolderArgs struct {
	Folder string `json:"folder" required:"true" max:"1000" desc:"The folder to delete, as named by imap_list_folders."`
}

var deleteFolder = Def[deleteFolderArgs, mailbox.FolderChange]{
	Name:  "imap_delete_folder",
	Title: "Delete folder",
	Description: "Delete a folder and every message in it, for good; it cannot be undone. INBOX and the special folders (Sent, Drafts, Trash, Junk, Archive...) " +
		"cannot be deleted, nor can a folder holding one; a folder with folders inside it must be emptied of them first. " +
		"To keep the messages, move them elsewhere first with imap_move_emails.",
	// Destructive, not idempotent (a second call finds no folder).
	Destructive: true, OpenWorld: true,
	Access: access.Full,
	Run: func(ctx context.Context, c *Call, a deleteFolderArgs) (mailbox.FolderChange, error) {
		want, err := approvedFacts[mailbox.Facts](c)
		if err != nil {
			return mailbox.FolderChange{}, err
		}
		return orZero(c.Mailbox.DeleteFolder(ctx, c.Creds, a.Folder, want))
	},
	Approve: &Approve[deleteFolderArgs]{Kind: access.ApproveDestructive,
		Preview: func(ctx context.Context, c *Call, a deleteFolderArgs) (approval.Preview, error) {
			folders, err := c.Mailbox.ListFolders(ctx, c.Creds)
			if err != nil {
				return approval.Preview{}, err
			}
			for _, f := range folders {
				if f.Name == a.Folder || (f.Display != "" && f.Display == a.Folder) {
					// The deletion goes ahead only while the folder is
					// this one, holding what is shown.
					facts, err := c.Mailbox.FolderFacts(ctx, c.Creds, f.Name)
					if err != nil {
						return approval.Preview{}, err
					}
					return approval.Preview{Title: "Delete this folder and every message in it, for good?",
						Fields: []approval.Field{{Name: "Folder", Value: f.Name},
							{Name: "Messages", Value: fmt.Sprintf("%d (%d unread)", facts.Messages, f.Unread)}},
						Warning: "This cannot be undone. If the folder changes before you approve (mail arrives, or it is replaced), nothing is deleted.",
						Facts:   factsOf(facts)}, nil
				}
			}
			return approval.Preview{}, mailerr.Newf(mailerr.NotFound, "there is no folder %q", a.Folder).About(mailerr.SubjectFolder)
		}},
	Text: func(r mailbox.FolderChange) string {
		switch {
		case r.Messages != nil && *r.Messages == 0:
			return fmt.Sprintf("Deleted folder %s (it was empty).\n", line(r.Folder))
		case r.Messages != nil:
			return fmt.Sprintf("Deleted folder %s and the %s in it.\n", line(r.Folder), plural(int(*r.Messages), "message"))
		}
		return fmt.Sprintf("Deleted folder %s.\n", line(r.Folder))
	},
	Example: map[string]any{"folder": "Kunden ✓"},
}
