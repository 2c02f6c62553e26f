package app_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// On the demo (the embedded in-memory server, no METADATA, no SMTP), two
// agents of alice's mailbox: one sends by name, the other finds it with
// imap_peek_inbox and imap_check_inbox and no folder argument; the
// directory lists both; state set by one is read by the other; a status
// line shows in the directory.
func TestAgentsOnDemo(t *testing.T) {
	g := startDemoGateway(t)
	u := g.Users[0]
	as := func(agent string) map[string]string {
		h := maps.Clone(headers(u))
		h["x-mailbox-agent"] = agent
		return h
	}
	backend := mailtest.MCPClient(t, g.URL, as("backend"), "")
	frontend := mailtest.MCPClient(t, g.URL, as("frontend"), "")

	var sent struct {
		MessageID string `json:"message_id"`
		Delivered []struct {
			Agent, Folder string
			Created       bool
		} `json:"delivered"`
	}
	mailtest.Decode(t, mailtest.Call(t, backend, "agent_send", map[string]any{"to": []any{"frontend"}, "subject": "API ready", "text": "GET /v1/orders is live"}), &sent)
	if len(sent.Delivered) != 1 || sent.Delivered[0].Folder != "Agents/frontend" || !sent.Delivered[0].Created {
		t.Fatalf("agent_send: %+v", sent)
	}

	var peek struct {
		Folder string `json:"folder"`
		Unread int    `json:"unread"`
	}
	mailtest.Decode(t, mailtest.Call(t, frontend, "imap_peek_inbox", map[string]any{}), &peek)
	if peek.Folder != "Agents/frontend" || peek.Unread != 1 {
		t.Fatalf("frontend's peek: %+v", peek)
	}
	res := mailtest.Call(t, frontend, "imap_check_inbox", map[string]any{})
	if txt := mailtest.Text(res); res.IsError || !strings.Contains(txt, "GET /v1/orders is live") {
		t.Fatalf("frontend's check: %s", txt)
	}
	mailtest.Decode(t, mailtest.Call(t, frontend, "imap_peek_inbox", map[string]any{}), &peek)
	if peek.Unread != 0 {
		t.Errorf("after check, %d unread", peek.Unread)
	}

	mailtest.Call(t, frontend, "agent_set_status", map[string]any{"status": "wiring the orders page"})
	mailtest.Call(t, backend, "agent_set_state", map[string]any{"key": "build/status", "value": map[string]any{"ok": true}})
	var state struct {
		Entries []struct {
			Key   string         `json:"key"`
			Value map[string]any `json:"value"`
			By    string         `json:"by"`
		} `json:"entries"`
	}
	mailtest.Decode(t, mailtest.Call(t, frontend, "agent_get_state", map[string]any{"key": "build/status"}), &state)
	if len(state.Entries) != 1 || state.Entries[0].Value["ok"] != true || state.Entries[0].By != "backend" {
		t.Errorf("state read by frontend: %+v", state)
	}

	var dir struct {
		Agents []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
			Total  int    `json:"total"`
		} `json:"agents"`
	}
	mailtest.Decode(t, mailtest.Call(t, backend, "agent_list", map[string]any{}), &dir)
	got := map[string]string{}
	for _, a := range dir.Agents {
		got[a.Name] = a.Status
	}
	if _, ok := got["backend"]; !ok || got["frontend"] != "wiring the orders page" || len(got) != 2 {
		t.Errorf("directory: %+v", dir.Agents)
	}
}
