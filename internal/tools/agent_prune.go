package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/access"
	"github.com/mailbox-mcp/mailbox-mcp/internal/agents"
	"github.com/mailbox-mcp/mailbox-mcp/internal/approval"
)

type agentPruneArgs struct {
	OlderThanDays int `json:"older_than_days" min:"1" max:"3650" default:"30" desc:"Move read messages that arrived more than this many days ago (default 30)."`
}

var agentPrune = Def[agentPruneArgs, agents.Pruned]{
	Name:  "agent_prune",
	Title: "Prune agent folders",
	Description: "Move read agent messages older than older_than_days (default 30) to the Trash folder; unread ones stay. " +
		"With an agent name only the caller's own folder is pruned; without one, every agent's folder. " +
		"Days are counted as IMAP does (whole days), so a message may stay up to a day longer. A conversation whose messages were all pruned from a folder is no longer found there.",
	// Moves messages out of folders (to the Trash, where they can be
	// restored): destructive to the folders' contents, idempotent.
	Destructive: true, Idempotent: true, OpenWorld: true,
	Access: access.Organize, Agents: true,
	Run: func(ctx context.Context, c *Call, a agentPruneArgs) (agents.Pruned, error) {
		me, err := c.Agent()
		if err != nil {
			return agents.Pruned{}, err
		}
		want, err := approvedFacts[agents.PruneFacts](c)
		if err != nil {
			return agents.Pruned{}, err
		}
		return orZero(c.Agents.Prune(ctx, c.Creds, me, a.OlderThanDays, want))
	},
	Approve: &Approve[agentPruneArgs]{Kind: access.ApproveDestructive,
		Preview: func(ctx context.Context, c *Call, a agentPruneArgs) (approval.Preview, error) {
			me, err := c.Agent()
			if err != nil {
				return approval.Preview{}, err
			}
			plan, facts, err := c.Agents.PrunePlan(ctx, c.Creds, me, a.OlderThanDays)
			if err != nil {
				return approval.Preview{}, err
			}
			who := "every agent"
			if me != "" {
				who = "agent " + me
			}
			p := approval.Preview{Title: fmt.Sprintf("Move %s of %s to the Trash folder?", plural(plan.Moved, "read message"), who),
				Fields: []approval.Field{{Name: "Agent folders", Value: who}, {Name: "Read before", Value: plan.Before.Format("2 Jan 2006")}},
				Facts:  factsOf(facts)}
			for _, f := range plan.Folders {
				p.Items = append(p.Items, fmt.Sprintf("%s (%s): %d", f.Agent, f.Folder, f.Moved))
			}
			return p, nil
		}},
	Text: func(r agents.Pruned) string {
		var b strings.Builder
		fmt.Fprintf(&b, "Moved %s read before %s", plural(r.Moved, "message"), r.Before.Format("2006-01-02"))
		if r.TrashFolder != "" {
			fmt.Fprintf(&b, " to %s", line(r.TrashFolder))
		}
		b.WriteString(":\n")
		for _, f := range r.Folders {
			fmt.Fprintf(&b, "- %s (%s): %d\n", f.Agent, line(f.Folder), f.Moved)
		}
		return b.String()
	},
	Example: map[string]any{"older_than_days": 30},
}
