package agents

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
)

// Entry is one agent of the directory.
type Entry struct {
	Name   string `json:"name" desc:"the agent's name"`
	Folder string `json:"folder" desc:"its folder"`
	Unread uint32 `json:"unread" desc:"unread messages in its folder"`
	Total  uint32 `json:"total" desc:"messages in its folder"`
	// LastActivity is the later of its newest message's arrival and its
	// last call, zero when neither is known.
	LastActivity *time.Time `json:"last_activity,omitempty" desc:"the later of its newest message's arrival and its last call"`
	Status       string     `json:"status,omitempty" desc:"its status line, as it set it"`
	// UnreadFromYou is how many of its unread messages the caller sent;
	// nil when the call has no agent name.
	UnreadFromYou *int `json:"unread_from_you,omitempty" desc:"how many of its unread messages came from the caller (only when the caller has an agent name)"`
}

// Directory lists every agent of the mailbox (every folder under the
// root but the gateway's own), in name order, with its counts, last
// activity and status line; with a caller name also how many of each
// one's unread messages the caller sent. The counts come from one
// LIST-STATUS round trip where the server has it.
func (s *Service) Directory(ctx context.Context, creds credentials.Credentials, caller string) ([]Entry, error) {
	if caller != "" {
		if err := CheckName(caller); err != nil {
			return nil, err
		}
	}
	ns, err := s.mb.Namespace(ctx, creds)
	if err != nil {
		return nil, err
	}
	var from *mailbox.HeaderMatch
	if caller != "" {
		from = &mailbox.HeaderMatch{Name: HeaderFrom, Value: caller}
	}
	acts, err := s.mb.Activity(ctx, creds, s.pattern(ns), from)
	if err != nil {
		return nil, err
	}
	metas, err := s.Statuses(ctx, creds)
	if err != nil {
		return nil, err
	}
	out := []Entry{}
	for _, a := range acts {
		name, ok := s.NameOf(ns, a.Folder)
		if !ok {
			continue
		}
		e := Entry{Name: name, Folder: a.Folder, Unread: a.Unread, Total: a.Total}
		last := a.Newest
		if m, ok := metas[name]; ok {
			e.Status = m.Status
			if m.LastSeen.After(last) {
				last = m.LastSeen
			}
		}
		if !last.IsZero() {
			e.LastActivity = &last
		}
		if from != nil {
			n := a.UnreadMatching
			e.UnreadFromYou = &n
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
