package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/app"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// docs/tools.md is generated from the tool definitions; it must not be stale.
func TestToolsDocUpToDate(t *testing.T) {
	want, err := app.ToolsDoc(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/tools.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/tools.md is stale: run `go run ./cmd/mailbox-mcp tools-doc > docs/tools.md`")
	}
}

// The reference covers every tool, the smtp_ ones included, with its
// arguments and an example result.
func TestToolsDocCoversEveryTool(t *testing.T) {
	ts := tools.DocTools()
	doc := string(tools.Markdown(ts, nil))
	names := map[string]bool{}
	for _, tl := range ts {
		names[tl.Def.Name] = true
		i := strings.Index(doc, "\n## "+tl.Def.Name+"\n")
		if i < 0 {
			t.Errorf("no section for %s", tl.Def.Name)
			continue
		}
		section := doc[i+1:]
		if j := strings.Index(section, "\n## "); j >= 0 {
			section = section[:j]
		}
		for _, want := range []string{"### Arguments", "### Result", "readOnlyHint="} {
			if !strings.Contains(section, want) {
				t.Errorf("%s: section lacks %q", tl.Def.Name, want)
			}
		}
		var in struct {
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(tl.Def.RawInputSchema, &in); err != nil {
			t.Fatal(err)
		}
		for arg := range in.Properties {
			if !strings.Contains(section, "| `"+arg+"` |") {
				t.Errorf("%s: argument %s not documented", tl.Def.Name, arg)
			}
		}
	}
	for _, want := range []string{"imap_list_emails", "imap_read_email", "smtp_send_email"} {
		if !names[want] {
			t.Errorf("DocTools lacks %s", want)
		}
	}
}
