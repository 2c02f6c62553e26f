package tools

import (
	"context"
	"fmt"

	"github.com/mailbox-mcp/mailbox-mcp/internal/agents"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

type agentSetStatusArgs struct {
	Status string `json:"status" max:"200" desc:"Your status line: one line, at most 200 characters (\"\" clears it), e.g. \"reviewing PR 42, back in 10 min\"."`
}

// AgentStatusResult is what agent_set_status returns.
type AgentStatusResult struct {
	Agent  string `json:"agent" desc:"the agent whose status line was set (the caller)"`
	Status string `json:"status" desc:"the status line now (\"\": cleared)"`
}

var agentSetStatus = Def[agentSetStatusArgs, AgentStatusResult]{
	Name:  "agent_set_status",
	Title: "Set your status line",
	Description: "Set the caller's status line, which agent_list shows to every agent of this mailbox (kept on the agent's folder with IMAP METADATA, RFC 5464, where the server has it; else in the agents' .state folder). " +
		"Needs an agent name (the x-mailbox-agent header or ?agent= on the MCP URL). An empty status clears it.",
	Idempotent: true, OpenWorld: true,
	Agents: true,
	Run: func(ctx context.Context, c *Call, a agentSetStatusArgs) (AgentStatusResult, error) {
		me, err := c.Agent()
		if err != nil {
			return AgentStatusResult{}, err
		}
		if me == "" {
			return AgentStatusResult{}, mailerr.New(mailerr.BadInput, "a status line belongs to an agent: give this session an agent name with the x-mailbox-agent header (or ?agent=NAME on the MCP URL, or a token made with --agent NAME)")
		}
		if err := c.Agents.SetStatus(ctx, c.Creds, me, a.Status); err != nil {
			return AgentStatusResult{}, err
		}
		status, _ := agents.CheckStatus(a.Status)
		return AgentStatusResult{Agent: me, Status: status}, nil
	},
	Text: func(r AgentStatusResult) string {
		if r.Status == "" {
			return fmt.Sprintf("Status line of %s cleared.\n", r.Agent)
		}
		return fmt.Sprintf("Status line of %s set: %s\n", r.Agent, line(r.Status))
	},
	Example: map[string]any{"status": "reviewing the API change"},
}
