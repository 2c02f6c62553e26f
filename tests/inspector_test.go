package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// The MCP Inspector's CLI (tests/clients locks @modelcontextprotocol/inspector)
// lists the gateway's tools with --strict, which lints every input and output
// schema for portability across clients (its core/json/schemaLint.ts):
//
//   - boolean-schema (error): a bare true/false where a schema object is
//     expected (allowed only as additionalProperties, unevaluatedProperties,
//     additionalItems, unevaluatedItems)
//   - type-union (warning): "type" given as an array, e.g. ["null","array"];
//     it suggests anyOf branches with one type each
//   - remote-ref (warning): a $ref outside the document
//   - untyped-schema (warning): a (sub)schema with no validation keyword at
//     all ({} or only a description), which accepts anything
//
// The gateway's schemas must give none of these.
//
// Node: the inspector needs Node.js >= 22.19. tests/clients/node22 installs
// Node 22 from npm (scripts/test.sh, on Linux x86-64); a node on PATH that is
// new enough also does. Without either the test skips (fails when CI=true).

// defaultTools is what the gateway lists with SMTP configured, at the
// default access level (read).
var defaultTools = slices.Concat(readTools, []string{"imap_get_attachment", "smtp_send_email", "smtp_reply_email", "smtp_respond_invite", "smtp_forward_email", "mail_unsubscribe"}, agentTools)

// agentTools are the agent_ tools at the default access level (AGENTS=on).
var agentTools = []string{"agent_send", "agent_list", "agent_set_status", "agent_create_conversation", "agent_list_conversations",
	"agent_leave_conversation", "agent_history", "agent_set_state", "agent_get_state"}

// allTools is what it lists with SMTP configured and MAILBOX_ACCESS=full.
var allTools = slices.Concat(defaultTools, []string{"imap_set_flags", "imap_move_emails", "imap_trash_emails",
	"imap_create_folder", "imap_rename_folder", "imap_delete_folder", "imap_save_draft", "smtp_send_draft", "agent_prune"})

// skipOrFail skips the test, or fails it when CI=true: CI must run it.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// inspectorCLI returns a node able to run the inspector and its launcher
// script (the package's "inspector" bin).
func inspectorCLI(t *testing.T) (node, script string) {
	t.Helper()
	dir := clientsDir(t)
	script = filepath.Join(dir, "node_modules", ".bin", "inspector")
	if _, err := os.Stat(script); err != nil {
		skipOrFail(t, "tests/clients has no MCP Inspector: run `npm ci` there (scripts/test.sh does)")
	}
	candidates := []string{filepath.Join(dir, "node22", "node_modules", ".bin", "node")}
	if p, err := exec.LookPath("node"); err == nil {
		candidates = append(candidates, p)
	}
	var seen []string
	for _, n := range candidates {
		out, err := exec.Command(n, "--version").Output()
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(out))
		var major, minor int
		fmt.Sscanf(v, "v%d.%d", &major, &minor)
		if major > 22 || major == 22 && minor >= 19 {
			return n, script
		}
		seen = append(seen, n+" is "+v)
	}
	skipOrFail(t, "no Node.js >= 22.19 for the MCP Inspector (%s): run `npm ci` in tests/clients/node22 (scripts/test.sh does on Linux x86-64), or put a newer node on PATH", strings.Join(seen, ", "))
	return "", ""
}

// schemaFinding is one problem the inspector's --strict reports.
type schemaFinding struct {
	Rule       string `json:"rule"`
	Severity   string `json:"severity"`
	Schema     string `json:"schema"` // inputSchema or outputSchema
	Path       string `json:"path"`
	Issue      string `json:"issue"`
	Suggestion string `json:"suggestion"`
}

// inspectorRun is what the inspector's CLI printed for tools/list --strict.
type inspectorRun struct {
	Result struct {
		Tools []struct {
			Name         string          `json:"name"`
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	} `json:"result"`
	SchemaFindings []struct {
		ToolName string          `json:"toolName"`
		Findings []schemaFinding `json:"findings"`
	} `json:"schemaFindings"`
	Err    error  // the exit status: exit 6 means an error-severity finding
	Stderr string // the inspector's own report of the findings
}

// runInspector runs `inspector --cli URL --method tools/list --strict` with
// the headers ("Name: value"), as a user would, and decodes its JSON output.
func runInspector(t *testing.T, node, inspector, url string, headers ...string) inspectorRun {
	t.Helper()
	home := t.TempDir() // the inspector keeps a catalog in ~/.mcp-inspector
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{inspector, "--cli", url, "--method", "tools/list", "--strict", "--format", "json"}
	for _, h := range headers {
		args = append(args, "--header", h)
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "MCP_CATALOG_PATH="+filepath.Join(home, "mcp.json"))
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	var out inspectorRun
	out.Err = cmd.Run()
	out.Stderr = stderr.String()
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		// exit 6 (an error-severity finding) still prints the result;
		// anything else without JSON is a failure to run
		t.Fatalf("inspector (%v) printed no JSON result (%v): %s\nstderr:\n%s", out.Err, err, tail(stdout.String(), 2000), tail(out.Stderr, 6000))
	}
	t.Logf("inspector --strict took %v", time.Since(start).Round(time.Millisecond))
	return out
}

func (r inspectorRun) findings() (errs, warns int, all []string) {
	for _, tf := range r.SchemaFindings {
		for _, f := range tf.Findings {
			if f.Severity == "error" {
				errs++
			} else {
				warns++
			}
			all = append(all, fmt.Sprintf("%s %s %s %s.%s", f.Severity, f.Rule, tf.ToolName, f.Schema, f.Path))
		}
	}
	return errs, warns, all
}

func TestInspectorStrictFindsNoSchemaProblems(t *testing.T) {
	node, inspector := inspectorCLI(t)

	// The check itself, on a server whose one tool has a nullable type
	// array: it must report exactly that, or a clean result below means
	// nothing.
	t.Run("control_reports_a_type_union", func(t *testing.T) {
		srv := server.NewMCPServer("control", "1")
		srv.AddTool(mcp.NewToolWithRawSchema("control", "a tool with one nullable argument",
			json.RawMessage(`{"type":"object","properties":{"x":{"type":["null","string"]}}}`)),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(""), nil
			})
		ts := httptest.NewServer(server.NewStreamableHTTPServer(srv, server.WithStateLess(true), server.WithDisableStreaming(true)))
		defer ts.Close()
		run := runInspector(t, node, inspector, ts.URL+"/mcp")
		errs, warns, all := run.findings()
		if run.Err != nil || errs != 0 || warns != 1 || all[0] != "warning type-union control inputSchema.properties.x" {
			t.Fatalf("inspector on a known type union: exit %v, findings %q\nstderr:\n%s", run.Err, all, tail(run.Stderr, 4000))
		}
	})

	s := mailtest.Shared(t)
	g := startGateway(t, s, append(smtpEnv(s), "MAILBOX_ACCESS=full")...)
	run := runInspector(t, node, inspector, g.URL, "x-imap-user: "+mailtest.Alice, "x-imap-pass: "+mailtest.AlicePassword)
	var names []string
	for _, tl := range run.Result.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(allTools))
	t.Run(fmt.Sprintf("lists_%d_tools_with_both_schemas", len(names)), func(t *testing.T) {
		if !slices.Equal(names, want) {
			t.Errorf("the inspector lists %v, want %v", names, want)
		}
		for _, tl := range run.Result.Tools {
			if len(tl.InputSchema) == 0 || len(tl.OutputSchema) == 0 {
				t.Errorf("%s: input schema %d bytes, output schema %d bytes: both must be there to be checked", tl.Name, len(tl.InputSchema), len(tl.OutputSchema))
			}
		}
	})

	byRule := map[string][]string{}
	suggestion := map[string]string{}
	for _, tf := range run.SchemaFindings {
		for _, f := range tf.Findings {
			rule := f.Rule + " (" + f.Severity + ")"
			issue, _, _ := strings.Cut(f.Issue, ". ") // its first sentence names the problem
			byRule[rule] = append(byRule[rule], fmt.Sprintf("%s %s.%s: %s", tf.ToolName, f.Schema, f.Path, issue))
			suggestion[rule] = f.Suggestion
		}
	}
	errs, warns, _ := run.findings()
	t.Run(fmt.Sprintf("strict_schema_check_%d_errors_%d_warnings", errs, warns), func(t *testing.T) {
		if run.Err != nil {
			t.Errorf("inspector --strict: %v\nstderr:\n%s", run.Err, tail(run.Stderr, 4000))
		}
		if errs+warns == 0 {
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "inspector --strict found %d errors and %d warnings in the tool schemas, want none:\n", errs, warns)
		for _, rule := range slices.Sorted(maps.Keys(byRule)) {
			fmt.Fprintf(&b, "\n%s, %d:\n", rule, len(byRule[rule]))
			for _, line := range byRule[rule] {
				fmt.Fprintf(&b, "  %s\n", line)
			}
			fmt.Fprintf(&b, "  the inspector's suggestion for the last one: %s\n", suggestion[rule])
		}
		t.Error(b.String())
	})
}
