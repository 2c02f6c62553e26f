package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"regexp"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/config"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// ToolsDoc renders docs/tools.md: the reference of every tool, with an
// example call made for real, through the gateway's own tool handlers,
// against the embedded demo mail server. Values that change from run to
// run (dates, tokens, random markers, generated ids, cursors) are replaced
// by fixed ones, so the file is the same every time and a test can keep it
// from drifting.
func ToolsDoc(ctx context.Context) ([]byte, error) {
	srv, err := demo.Start(ctx, demo.Options{})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	ih, ip, _ := net.SplitHostPort(srv.IMAPAddr)
	sh, sp, _ := net.SplitHostPort(srv.SMTPAddr)
	cfg, err := config.FromEnv([]string{
		"IMAP_HOST=" + ih, "IMAP_PORT=" + ip, "IMAP_SECURITY=plain",
		"SMTP_HOST=" + sh, "SMTP_PORT=" + sp, "SMTP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true",
		"ENCRYPTION_KEY=" + strings.Repeat("0", 64), "MAILBOX_ACCESS=full", "AUTHSERV_ID=" + demo.AuthServID,
	})
	if err != nil {
		return nil, err
	}
	a, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer a.mailbox.Close(context.Background())

	user := srv.Users[0]
	ctx = credentials.NewContext(ctx, credentials.New(user.Address, user.Password))
	// An example's "uid" is filled in here: the demo message each tool
	// shows best, or the draft the example before it saved.
	uid, err := demoUID(srv, user.Address, demo.FolderInbox, demo.TagAlternative)
	if err != nil {
		return nil, err
	}
	pdf, err := demoUID(srv, user.Address, demo.FolderInbox, demo.TagPDF)
	if err != nil {
		return nil, err
	}
	invitation, err := demoUID(srv, user.Address, demo.FolderInbox, demo.TagCalendar)
	if err != nil {
		return nil, err
	}
	newsletter, err := demoUID(srv, user.Address, demo.FolderInbox, demo.TagHTMLOnly)
	if err != nil {
		return nil, err
	}
	uids := map[string]uint32{"imap_get_attachment": pdf, "smtp_respond_invite": invitation, "mail_unsubscribe": newsletter}
	// Further examples: a read shows an invitation, and a newsletter's
	// unsubscribe options and sender verification.
	more := map[string][]struct {
		title string
		uid   uint32
	}{"imap_read_email": {{"an invitation (`invite`), signed by its calendar service (`authentication`)", invitation}, {"a newsletter: how to leave its list (`unsubscribe`)", newsletter}}}
	// The agent_ tools are called as the agent "backend"; a
	// "conversation" is the one the example before started.
	agentCtx := credentials.NewAgentContext(ctx, "backend")
	var conversation string
	examples := map[string][]tools.Example{}
	for _, t := range a.tools {
		if t.Example == nil {
			continue
		}
		args := map[string]any{}
		for k, v := range t.Example {
			switch k {
			case "uid":
				v = uid
				if u, ok := uids[t.Def.Name]; ok {
					v = u
				}
			case "conversation":
				v = conversation
			}
			args[k] = v
		}
		callCtx := ctx
		if strings.HasPrefix(t.Def.Name, "agent_") {
			callCtx = agentCtx
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = t.Def.Name
		req.Params.Arguments = args
		res, err := t.Handler(callCtx, req)
		if err != nil || res.IsError {
			return nil, fmt.Errorf("example call of %s failed: %v %v", t.Def.Name, err, res)
		}
		if saved, ok := res.StructuredContent.(outbox.SavedDraft); ok {
			uids["smtp_send_draft"] = saved.UID
		}
		if m, ok := steady(res.StructuredContent, false).(map[string]any); ok && t.Def.Name == "agent_create_conversation" {
			conversation, _ = m["conversation"].(string)
		}
		generated := strings.HasPrefix(t.Def.Name, "smtp_") || t.Def.Name == "imap_save_draft" || strings.HasPrefix(t.Def.Name, "agent_") || t.Def.Name == "mail_unsubscribe"
		examples[t.Def.Name] = []tools.Example{{Args: args, Result: steady(res.StructuredContent, generated)}}
		for _, m := range more[t.Def.Name] {
			margs := maps.Clone(args)
			margs["uid"] = m.uid
			margs["max_chars"] = 50 // before the invitation's date, which counts from the demo's start
			req.Params.Arguments = margs
			res, err := t.Handler(callCtx, req)
			if err != nil || res.IsError {
				return nil, fmt.Errorf("example call of %s failed: %v %v", t.Def.Name, err, res)
			}
			examples[t.Def.Name] = append(examples[t.Def.Name], tools.Example{Title: m.title, Args: margs, Result: steady(res.StructuredContent, generated)})
		}
	}
	// A conversation id is random, and appears in arguments and results.
	return conversationID.ReplaceAll(tools.Markdown(a.tools, examples), []byte("conv-exampleexample2")), nil
}

var conversationID = regexp.MustCompile(`conv-[a-z2-7]{16}`)

// demoUID is the UID of the demo message tagged tag: messages are seeded
// in UID order, oldest first.
func demoUID(srv *demo.Server, user, folder, tag string) (uint32, error) {
	var n uint32
	for _, m := range srv.Messages(user) {
		if m.Folder != folder {
			continue
		}
		n++
		if m.Tag == tag {
			return n, nil
		}
	}
	return 0, fmt.Errorf("no demo message %q in %s", tag, folder)
}

// steadyValues replace what differs between two runs of the same call.
// (An invitation's times count from the demo's start.)
var steadyValues = map[string]any{
	"start": "2026-03-04T09:00:00Z", "end": "2026-03-04T10:00:00Z", "start_utc": "2026-03-04T09:00:00Z", "end_utc": "2026-03-04T10:00:00Z",
	"when": "Wed 4 Mar 2026, 09:00–10:00 UTC", "recurrence": "every week on Wednesday, 4 times",
	"date": "2026-03-02T09:15:00Z", "oldest_unread_at": "2026-03-01T08:00:00Z", "newest_at": "2026-03-02T09:15:00Z", "marker": "MAIL-EXAMPLEMARKER", "token": "mbx1.AAAA…",
	"key_id": "1a2b3c4d", "uid_validity": 1712345678, "last_activity": "2026-03-02T09:15:00Z", "updated_at": "2026-03-02T09:15:00Z", "before": "2026-01-31T00:00:00Z", "next_cursor": "eyJ2IjoxLCJmIjoiSU5CT1gi…",
}

// steady returns v (a structured result) as plain JSON values with the
// volatile fields fixed; generated reports whether the call made a
// message whose Message-ID must be fixed too.
func steady(v any, generated bool) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	var walk func(x any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case map[string]any:
			for k, v := range t {
				if s, ok := steadyValues[k]; ok {
					t[k] = s
				} else if generated && k == "message_id" {
					t[k] = "20260302091500.4711@demo.test"
				} else {
					t[k] = walk(v)
				}
			}
		case []any:
			for i := range t {
				t[i] = walk(t[i])
			}
		}
		return x
	}
	return walk(out)
}
