package agents

import (
	"context"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Prune limits, in days.
const (
	DefaultPruneDays = 30
	MaxPruneDays     = 3650
)

// Pruned is what Prune moved.
type Pruned struct {
	Before      time.Time     `json:"before" desc:"read messages that arrived before this day were moved"`
	TrashFolder string        `json:"trash_folder,omitempty" desc:"the Trash folder they went to"`
	Moved       int           `json:"moved" desc:"how many messages were moved in all"`
	Folders     []PrunedAgent `json:"folders" desc:"each agent folder looked at, with how many of its messages were moved"`
}

// PrunedAgent is one folder Prune looked at.
type PrunedAgent struct {
	Agent  string `json:"agent" desc:"the agent"`
	Folder string `json:"folder" desc:"its folder"`
	Moved  int    `json:"moved" desc:"how many of its messages went to the Trash folder"`
}

// PruneFacts are what a person approved of a prune: for each agent
// folder, its identity and exactly which of its messages go.
type PruneFacts struct {
	Agent   string        `json:"a,omitempty"`
	Folders []PruneFolder `json:"f"`
}

// PruneFolder is one folder of PruneFacts.
type PruneFolder struct {
	Folder      string `json:"f"`
	UIDValidity uint32 `json:"v"`
	UIDs        string `json:"h"` // mailbox.UIDDigest of the messages that go
}

// Prune moves the read messages older than days from agent folders to
// the Trash folder (the mailbox's Trash machinery: UID MOVE of exactly
// those UIDs); unread ones stay. With a caller name only its own folder
// is pruned; without one every agent's folder (the user tidying up).
// IMAP's BEFORE compares days, so a message may stay up to a day longer.
//
// With want (what a person approved, from PrunePlan), it moves only what
// they saw: the same folders, each the same folder (UIDVALIDITY), with
// exactly the same messages to move; otherwise nothing.
func (s *Service) Prune(ctx context.Context, creds credentials.Credentials, caller string, days int, want *PruneFacts) (*Pruned, error) {
	out, todo, facts, err := s.prunable(ctx, creds, caller, days)
	if err != nil {
		return nil, err
	}
	if want != nil && !sameFacts(facts, want) {
		return nil, mailerr.New(mailerr.BadInput, "the agent folders changed since the person approved the prune (messages were read, added, moved or a folder replaced): nothing was moved; ask again, so that they see it as it is now")
	}
	for i, uids := range todo {
		p := &out.Folders[i]
		for len(uids) > 0 {
			chunk := uids[:min(len(uids), mailbox.MaxUIDs)]
			uids = uids[len(chunk):]
			var bound *mailbox.Facts
			if want != nil {
				bound = &mailbox.Facts{UIDValidity: facts.Folders[i].UIDValidity}
			}
			t, err := s.mb.Trash(ctx, creds, p.Folder, chunk, false, bound)
			if err != nil {
				return nil, err
			}
			out.TrashFolder = t.TrashFolder
			p.Moved += len(t.Messages)
		}
		out.Moved += p.Moved
	}
	return out, nil
}

func sameFacts(a, b *PruneFacts) bool {
	if a.Agent != b.Agent || len(a.Folders) != len(b.Folders) {
		return false
	}
	for i := range a.Folders {
		if a.Folders[i] != b.Folders[i] {
			return false
		}
	}
	return true
}

// PrunePlan is what Prune would move, moving nothing: Moved counts the
// messages it would take from each folder. The facts name them, for
// Prune to move exactly those once a person approved.
func (s *Service) PrunePlan(ctx context.Context, creds credentials.Credentials, caller string, days int) (*Pruned, *PruneFacts, error) {
	out, todo, facts, err := s.prunable(ctx, creds, caller, days)
	if err != nil {
		return nil, nil, err
	}
	for i, uids := range todo {
		out.Folders[i].Moved = len(uids)
		out.Moved += len(uids)
	}
	return out, facts, nil
}

// prunable finds the folders Prune looks at and, for each, the UIDs it
// would move, and the facts that name them.
func (s *Service) prunable(ctx context.Context, creds credentials.Credentials, caller string, days int) (*Pruned, [][]uint32, *PruneFacts, error) {
	switch {
	case days == 0:
		days = DefaultPruneDays
	case days < 1 || days > MaxPruneDays:
		return nil, nil, nil, mailerr.Newf(mailerr.BadInput, "older_than_days must be between 1 and %d", MaxPruneDays)
	}
	names := []string{caller}
	if caller == "" {
		var err error
		if names, err = s.Names(ctx, creds); err != nil {
			return nil, nil, nil, err
		}
	} else if err := CheckName(caller); err != nil {
		return nil, nil, nil, err
	}
	out := &Pruned{Before: time.Now().AddDate(0, 0, -days).Truncate(24 * time.Hour), Folders: []PrunedAgent{}}
	facts := &PruneFacts{Agent: caller, Folders: []PruneFolder{}}
	var todo [][]uint32
	for _, name := range names {
		folder, err := s.folderOf(ctx, creds, name)
		if err != nil {
			return nil, nil, nil, err
		}
		uids, validity, err := s.mb.SeenBefore(ctx, creds, folder, out.Before)
		if err != nil {
			return nil, nil, nil, err
		}
		out.Folders = append(out.Folders, PrunedAgent{Agent: name, Folder: folder})
		facts.Folders = append(facts.Folders, PruneFolder{Folder: folder, UIDValidity: validity, UIDs: mailbox.UIDDigest(uids)})
		todo = append(todo, uids)
	}
	return out, todo, facts, nil
}
