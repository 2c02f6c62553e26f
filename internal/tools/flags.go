package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
)

type setFlagsArgs struct {
	Folder string   `json:"folder" max:"1000" desc:"Folder of the messages (default INBOX)."`
	UIDs   []uint32 `json:"uids" required:"true" min:"1" max:"500" desc:"UIDs of the messages, from imap_list_emails or imap_search_emails (1 to 500)."`
	Add    []string `json:"add" max:"20" desc:"Flags to set: seen (read), flagged (starred), answered, or keywords (labels such as $Work or project-x: up to 64 ASCII characters, no spaces and none of ( ) { % * \" \\ ])."`
	Remove []string `json:"remove" max:"20" desc:"Flags to clear, named as for add (remove seen marks the messages unread)."`
}

var setFlags = Def[setFlagsArgs, mailbox.FlagsResult]{
	Name:  "imap_set_flags",
	Title: "Set flags",
	Description: "Set or clear flags on messages: seen (read/unread), flagged (starred), answered, and keywords (labels). " +
		"Give at least one flag in add or remove. If any UID is not in the folder, or a keyword is not valid, nothing is changed. " +
		"Returns every message's flags afterwards. Setting a flag that is already set changes nothing.",
	// Not destructive (a flag can be cleared again), idempotent.
	Idempotent: true, OpenWorld: true,
	Access: access.Organize,
	Run: func(ctx context.Context, c *Call, a setFlagsArgs) (mailbox.FlagsResult, error) {
		return orZero(c.Mailbox.SetFlags(ctx, c.Creds, a.Folder, a.UIDs, a.Add, a.Remove))
	},
	Text: func(r mailbox.FlagsResult) string {
		var b strings.Builder
		fmt.Fprintf(&b, "Flags in %s now:\n", line(r.Folder))
		for _, m := range r.Messages {
			fmt.Fprintf(&b, "- uid %d: %s\n", m.UID, flagsText(m.Flags))
		}
		return b.String()
	},
	Example: map[string]any{"folder": "INBOX", "uids": []any{2}, "add": []any{"flagged", "follow-up"}},
}

// flagsText is a message's flags in words: "read, flagged, $Work".
func flagsText(f mailbox.Flags) string {
	var s []string
	if f.Seen {
		s = append(s, "read")
	} else {
		s = append(s, "unread")
	}
	for _, x := range []struct {
		on   bool
		name string
	}{{f.Flagged, "flagged"}, {f.Answered, "answered"}, {f.Draft, "draft"}, {f.Deleted, "marked deleted"}} {
		if x.on {
			s = append(s, x.name)
		}
	}
	for _, k := range f.Keywords {
		s = append(s, line(k))
	}
	return strings.Join(s, ", ")
}

// orZero is a mail layer's answer as a value: the zero value with an error.
func orZero[T any](p *T, err error) (T, error) { return valueOf(p), err }
