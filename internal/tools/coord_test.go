package tools

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The coordination loop on the embedded demo server, as docs/coordination.md
// runs it: bob waits for tagged mail, alice sends it, bob's wait returns it,
// a check consumes it, and a second check does not return it again.
func TestCoordinationOnDemo(t *testing.T) {
	d, srv := demoDeps(t)
	alice, bob := srv.Users[0], srv.Users[1]
	tag := "handoff-" + strings.ReplaceAll(time.Now().Format("150405.000"), ".", "")

	var peek PeekResult
	decodeInto(t, call(t, tool(t, d, "imap_peek_inbox"), bob, map[string]any{"tag": tag}), &peek)
	if peek.Unread != 0 {
		t.Fatalf("peek before: %+v", peek)
	}
	var wait WaitResult
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	go func() {
		defer wg.Done()
		decodeInto(t, call(t, tool(t, d, "imap_wait_for_email"), bob, map[string]any{"tag": tag, "timeout_s": 20, "since_uid": peek.NextSinceUID}), &wait)
	}()
	time.Sleep(300 * time.Millisecond) // let the wait start idling
	decodeSend(t, call(t, tool(t, d, "smtp_send_email"), alice, map[string]any{
		"to": []any{bob.Address}, "subject": "please review", "text": "the patch is ready", "tags": []any{tag}}))
	wg.Wait()
	t.Logf("the wait returned after %v", time.Since(start).Round(time.Millisecond))
	if wait.TimedOut || len(wait.Messages) != 1 || wait.Messages[0].Subject != "please review" || strings.Join(wait.Messages[0].Tags, ",") != tag {
		t.Fatalf("wait: %+v", wait)
	}
	var first, second CheckResult
	decodeInto(t, call(t, tool(t, d, "imap_check_inbox"), bob, map[string]any{"tag": tag}), &first)
	if len(first.Messages) != 1 || !strings.Contains(first.Messages[0].Text, "the patch is ready") || first.Messages[0].UID != wait.Messages[0].UID {
		t.Fatalf("first check: %+v", first)
	}
	decodeInto(t, call(t, tool(t, d, "imap_check_inbox"), bob, map[string]any{"tag": tag}), &second)
	if len(second.Messages) != 0 {
		t.Fatalf("the second check returned it again: %+v", second)
	}
	decodeInto(t, call(t, tool(t, d, "imap_peek_inbox"), bob, map[string]any{"tag": tag}), &peek)
	if peek.Total != 1 || peek.Unread != 0 {
		t.Fatalf("peek after: %+v", peek)
	}
	var th ThreadResult
	decodeInto(t, call(t, tool(t, d, "imap_get_thread"), bob, map[string]any{"uid": wait.Messages[0].UID}), &th)
	if len(th.Messages) < 1 || th.Messages[0].Subject != "please review" {
		t.Fatalf("thread: %+v", th)
	}
}

func decodeInto(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	if res.IsError {
		t.Errorf("tool error: %s", resultText(res))
		return
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, v); err != nil {
		t.Error(err)
	}
}
