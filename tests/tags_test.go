package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// Tags travel in the X-Mailbox-Tags header of mail sent through the
// gateway, and the tag filter of list and search matches whole tags only.
func TestTagsSentAndFiltered(t *testing.T) {
	s := mailtest.Shared(t)
	g := startGateway(t, s, smtpEnv(s)...)
	alice := mailtest.MCPClient(t, g.URL, userHeaders(s, mailtest.Alice), "")
	bob := mailtest.MCPClient(t, g.URL, userHeaders(s, mailtest.Bob), "")
	stamp := time.Now().Format("150405.000000")
	send := func(subject string, tags ...string) {
		t.Helper()
		args := map[string]any{"to": []any{mailtest.Bob}, "subject": subject, "text": "tag test"}
		if len(tags) > 0 {
			var list []any
			for _, x := range tags {
				list = append(list, x)
			}
			args["tags"] = list
		}
		res := mailtest.Call(t, alice, "smtp_send_email", args)
		if res.IsError {
			t.Fatalf("send: %s", mailtest.Text(res))
		}
	}
	tag := "job-" + strings.ReplaceAll(stamp, ".", "-")
	send("tagged "+stamp, tag, "review")
	send("other tag "+stamp, "not-"+tag)
	send("untagged " + stamp)
	c := direct(t, s, mailtest.Bob)
	deadline := time.Now().Add(15 * time.Second)
	for len(searchSubject(t, c, stamp)) < 3 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}

	for _, tool := range []string{"imap_list_emails", "imap_search_emails"} {
		var page mailbox.Page
		mailtest.Decode(t, mailtest.Call(t, bob, tool, map[string]any{"tag": tag}), &page)
		if len(page.Messages) != 1 || page.Messages[0].Subject != "tagged "+stamp ||
			strings.Join(page.Messages[0].Tags, ",") != tag+",review" {
			t.Fatalf("%s tag=%s: %+v", tool, tag, page.Messages)
		}
	}
	res := mailtest.Call(t, bob, "imap_list_emails", map[string]any{"tag": "Bad Tag"})
	if !res.IsError || !strings.Contains(mailtest.Text(res), "may only hold lower-case letters") {
		t.Fatalf("bad tag: %q", mailtest.Text(res))
	}
	res = mailtest.Call(t, alice, "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": "x", "text": "x", "tags": []any{"a\r\nBcc: x@example.test"}})
	if !res.IsError {
		t.Fatalf("a tag with a line break was accepted")
	}
}
