package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// Agent B waits, agent A sends a tagged message, B's wait returns it;
// imap_check_inbox by tag consumes it; a second check does not return it
// again. Through the official TypeScript SDK, against Dovecot and Postfix.
func TestCoordinationThroughTypeScriptSDK(t *testing.T) {
	dir := clientsDir(t)
	s := mailtest.Shared(t)
	g := startGateway(t, s, smtpEnv(s)...)
	tag := "sdk-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "-")
	type result struct {
		IsError    bool           `json:"isError"`
		Text       string         `json:"text"`
		Structured map[string]any `json:"structured"`
	}
	var out struct {
		Peek, Wait, Send, First, Second result
		WaitMs                          int `json:"waitMs"`
	}
	runNode(t, dir, "coord.mjs", map[string]any{
		"url": g.URL, "a": userHeaders(s, mailtest.Alice), "b": userHeaders(s, mailtest.Bob),
		"b_address": mailtest.Bob, "tag": tag,
	}, &out)
	for name, r := range map[string]result{"peek": out.Peek, "wait": out.Wait, "send": out.Send, "first check": out.First, "second check": out.Second} {
		if r.IsError {
			t.Fatalf("%s failed: %s", name, r.Text)
		}
	}
	msgs := func(r result) []any { m, _ := r.Structured["messages"].([]any); return m }
	if timedOut, _ := out.Wait.Structured["timed_out"].(bool); timedOut || len(msgs(out.Wait)) != 1 {
		t.Fatalf("the wait did not return the message: %s", out.Wait.Text)
	}
	t.Logf("the wait returned after %d ms (the send took place 500 ms after it started)", out.WaitMs)
	first := msgs(out.First)
	if len(first) != 1 || !strings.Contains(first[0].(map[string]any)["text"].(string), "please take this over") {
		t.Fatalf("the first check did not take the message: %s", out.First.Text)
	}
	if uidW, uidC := msgs(out.Wait)[0].(map[string]any)["uid"], first[0].(map[string]any)["uid"]; uidW != uidC {
		t.Fatalf("the wait returned uid %v, the check %v", uidW, uidC)
	}
	if len(msgs(out.Second)) != 0 {
		t.Fatalf("the second check returned it again: %s", out.Second.Text)
	}
}
