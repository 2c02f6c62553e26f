package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/mark3labs/mcp-go/client"

	"github.com/mailbox-mcp/mailbox-mcp/internal/agents"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// The agents' shared state and status lines against Dovecot, with IMAP
// METADATA on (entries on the Agents folder and the agents' folders) and
// off (one message per key in Agents/\u2024state): both code paths.

type stateResult struct {
	Entries []agents.StateEntry `json:"entries"`
}

func TestAgentState(t *testing.T) {
	for _, md := range []bool{false, true} {
		t.Run(fmt.Sprintf("metadata=%v", md), func(t *testing.T) {
			t.Parallel()
			s := mailtest.StartT(t, mailtest.Options{Metadata: md})
			if got := direct(t, s, mailtest.Alice).Caps().Has(imap.CapMetadata); got != md {
				t.Fatalf("METADATA advertised: %v, want %v", got, md)
			}
			g := startGateway(t, s)
			agent := func(name string) map[string]string {
				h := userHeaders(s, mailtest.Alice)
				h["x-mailbox-agent"] = name
				return h
			}
			backend := mailtest.MCPClient(t, g.URL, agent("backend"), "")
			frontend := mailtest.MCPClient(t, g.URL, agent("frontend"), "")
			anon := mailtest.MCPClient(t, g.URL, userHeaders(s, mailtest.Alice), "")

			set := func(c *client.Client, key string, value any) *stateResult {
				t.Helper()
				var r stateResult
				mailtest.Decode(t, mailtest.Call(t, c, "agent_set_state", map[string]any{"key": key, "value": value}), &r)
				return &r
			}
			get := func(key, prefix string) []agents.StateEntry {
				t.Helper()
				args := map[string]any{}
				if key != "" {
					args["key"] = key
				}
				if prefix != "" {
					args["prefix"] = prefix
				}
				var r stateResult
				mailtest.Decode(t, mailtest.Call(t, frontend, "agent_get_state", args), &r)
				return r.Entries
			}

			// set by one agent, read by another
			set(backend, "plan", map[string]any{"step": 1, "owner": "backend"})
			got := get("plan", "")
			if len(got) != 1 || string(got[0].Value) != `{"owner":"backend","step":1}` || got[0].By != "backend" {
				t.Fatalf("frontend reads plan: %+v", got)
			}

			// prefix: exactly the keys under it
			for _, k := range []string{"build/api", "build/web", "buildx", "Build/api"} {
				set(backend, k, k)
			}
			got = get("", "build/")
			if len(got) != 2 || got[0].Key != "build/api" || got[1].Key != "build/web" || string(got[1].Value) != `"build/web"` {
				t.Fatalf("prefix build/: %+v", got)
			}
			if got := get("Build/api", ""); len(got) != 1 || string(got[0].Value) != `"Build/api"` {
				t.Fatalf("keys are case-sensitive: %+v", got)
			}

			// 64 KiB + 1 refused, old value unchanged; a value of exactly 64 KiB is kept
			res := mailtest.Call(t, backend, "agent_set_state", map[string]any{"key": "plan", "value": strings.Repeat("x", agents.MaxStateBytes-1)})
			if !res.IsError || !strings.Contains(mailtest.Text(res), "65536") {
				t.Fatalf("64 KiB + 1: %s", mailtest.Text(res))
			}
			if got := get("plan", ""); len(got) != 1 || !strings.Contains(string(got[0].Value), "backend") {
				t.Fatalf("plan after the refused write: %+v", got)
			}
			exact := strings.Repeat("y", agents.MaxStateBytes-2)
			set(backend, "big", exact)
			if got := get("big", ""); len(got) != 1 || string(got[0].Value) != `"`+exact+`"` {
				t.Fatalf("64 KiB value: %d entries", len(got))
			}

			// bad keys refused, reserved keys among them
			for _, k := range []string{"", ".status/backend", "a b", "a//b", strings.Repeat("k", 201)} {
				res := mailtest.Call(t, backend, "agent_set_state", map[string]any{"key": k, "value": 1})
				if !res.IsError {
					t.Errorf("key %.20q accepted", k)
				}
			}
			res = mailtest.Call(t, frontend, "agent_get_state", map[string]any{"key": "a", "prefix": "a"})
			if !res.IsError {
				t.Error("key and prefix together accepted")
			}

			// 8 concurrent writers (8 MCP clients) leave exactly one value
			var wg sync.WaitGroup
			written := make([]string, 8)
			for i := range 8 {
				c := mailtest.MCPClient(t, g.URL, agent(fmt.Sprintf("w%d", i)), "")
				written[i] = fmt.Sprintf(`{"writer":%d}`, i)
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := mailtest.CallErr(c, "agent_set_state", map[string]any{"key": "race", "value": map[string]any{"writer": i}})
					if err != nil || res.IsError {
						t.Errorf("writer %d: %v %s", i, err, mailtest.Text(res))
					}
				}()
			}
			wg.Wait()
			got = get("race", "")
			if len(got) != 1 || !slices.Contains(written, string(got[0].Value)) {
				t.Fatalf("race: %+v", got)
			}
			d := direct(t, s, mailtest.Alice)
			if md {
				data, err := d.GetMetadata("Agents", []string{"/private/vendor/mailbox-mcp/state/race"}, nil).Wait()
				if err != nil {
					t.Fatal(err)
				}
				v := data.Entries["/private/vendor/mailbox-mcp/state/race"]
				var sv struct {
					V json.RawMessage `json:"v"`
				}
				if v == nil || json.Unmarshal(*v, &sv) != nil || string(sv.V) != string(got[0].Value) {
					t.Fatalf("GETMETADATA race: %v", data.Entries)
				}
			}
			// one message of the key in the .state folder: the value
			// without METADATA, the key's marker with it
			if _, err := d.Select("Agents/\u2024state", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
				t.Fatal(err)
			}
			sr, err := d.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: mailbox.KeyHeader, Value: "race"}}}, nil).Wait()
			if err != nil || len(sr.AllUIDs()) != 1 {
				t.Fatalf("messages of key race in the .state folder: %v, %v", sr.AllUIDs(), err)
			}
			if out, err := s.Doveadm("mailbox", "status", "-u", mailtest.Alice, "messages", "Agents/\u2024state"); err == nil {
				t.Logf("doveadm: %s", strings.TrimSpace(out))
			}

			// status lines: need an agent name; shown to others via Statuses
			res = mailtest.Call(t, anon, "agent_set_status", map[string]any{"status": "x"})
			if !res.IsError || !strings.Contains(mailtest.Text(res), "x-mailbox-agent") {
				t.Fatalf("status without an agent name: %s", mailtest.Text(res))
			}
			mailtest.Decode(t, mailtest.Call(t, backend, "agent_set_status", map[string]any{"status": "migrating the schema"}), &struct{}{})
			if res := mailtest.Call(t, backend, "agent_set_status", map[string]any{"status": "two\nlines"}); !res.IsError {
				t.Error("a status with a newline accepted")
			}
			svc, creds := stateService(t, s)
			svc.Touch(context.Background(), creds, "frontend")
			meta, err := svc.Statuses(context.Background(), creds)
			if err != nil {
				t.Fatal(err)
			}
			if meta["backend"].Status != "migrating the schema" || time.Since(meta["frontend"].LastSeen) > time.Minute {
				t.Fatalf("Statuses: %+v", meta)
			}
			if md {
				data, err := d.GetMetadata("Agents/backend", []string{"/private/comment"}, nil).Wait()
				if err != nil || data.Entries["/private/comment"] == nil || string(*data.Entries["/private/comment"]) != "migrating the schema" {
					t.Fatalf("GETMETADATA Agents/backend /private/comment: %v %v", data, err)
				}
			}
		})
	}
}

// stateService is an agents.Service straight on the stack, for what no
// tool exposes (Touch, Statuses).
func stateService(t *testing.T, s *mailtest.Stack) (*agents.Service, credentials.Credentials) {
	mb := mailbox.New(mailbox.Config{Host: s.Host, Port: s.IMAPSPort, Security: transport.TLS, TLS: s.TLSConfig(), Timeout: 10 * time.Second},
		pool.Config{}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { mb.Close(context.Background()) })
	return agents.New(agents.Config{}, mb), credentials.New(mailtest.Alice, s.Users[mailtest.Alice])
}
