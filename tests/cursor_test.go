package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// waitAnswer is what a wait returns, as far as these tests look.
type waitAnswer struct {
	Folder       string `json:"folder"`
	UIDValidity  uint32 `json:"uid_validity"`
	NextCursor   string `json:"next_cursor"`
	NextSinceUID uint32 `json:"next_since_uid"`
	TimedOut     bool   `json:"timed_out"`
	Messages     []struct {
		UID     uint32 `json:"uid"`
		Subject string `json:"subject"`
	} `json:"messages"`
}

// Cursors that cannot skip (issue 35): an agent's new folder is empty, so
// a peek and a wait that timed out there hand back the folder's start
// (next_since_uid 0). Mail that arrives before the next wait is returned
// by it, whether the waiter passes the new cursor or the old since_uid,
// 0 included: 0 is the start of the folder, and no cursor is "from now".
// A cursor names its folder and UIDVALIDITY: one of another folder, or
// anything the gateway did not make, is refused.
func TestCursorsOnAnEmptyAgentFolder(t *testing.T) {
	const user = "cursor@example.test"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: "cursor-pw"}})
	g := startGateway(t, s)
	d := direct(t, s, user)
	login := userHeaders(s, user)
	newbie := mailtest.MCPClient(t, g.URL, plusHeaders(login, "x-mailbox-agent", "newbie"), "")
	peer := mailtest.MCPClient(t, g.URL, plusHeaders(login, "x-mailbox-agent", "peer"), "")
	wait := func(args map[string]any) waitAnswer {
		t.Helper()
		var w waitAnswer
		res := mailtest.Call(t, newbie, "imap_wait_for_email", args)
		if res.IsError {
			t.Fatalf("wait %v: %s", args, mailtest.Text(res))
		}
		mailtest.Decode(t, res, &w)
		return w
	}

	// The new agent looks, then waits a second: its folder is empty.
	p := peekAs(t, g.URL, plusHeaders(login, "x-mailbox-agent", "newbie"), map[string]any{})
	folder := agentFolderName(t, d, "newbie")
	if p.Folder != folder || p.Total != 0 || p.NextSinceUID != 0 || p.NextCursor == "" {
		t.Fatalf("peek of the new folder: %+v", p)
	}
	first := wait(map[string]any{"timeout_s": 1})
	if !first.TimedOut || first.NextSinceUID != 0 || first.NextCursor == "" || first.Folder != folder {
		t.Fatalf("the first wait: %+v", first)
	}

	// Between two calls, a message arrives.
	sent := mailtest.Call(t, peer, "agent_send", map[string]any{"to": []any{"newbie"}, "subject": "between two waits", "text": "hello"})
	if sent.IsError {
		t.Fatal(mailtest.Text(sent))
	}
	uid := uint32(searchUIDs(t, d, folder, &imap.SearchCriteria{})[0])

	for _, args := range []map[string]any{
		{"cursor": first.NextCursor},
		{"cursor": p.NextCursor},
		{"since_uid": first.NextSinceUID}, // 0: the folder's start
	} {
		args["timeout_s"] = 5
		start := time.Now()
		w := wait(args)
		if w.TimedOut || len(w.Messages) != 1 || w.Messages[0].UID != uid || w.Messages[0].Subject != "between two waits" {
			t.Errorf("wait %v: %+v, want message %d", args, w, uid)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("wait %v took %v: the message was there already", args, took)
		}
		if w.NextSinceUID != uid || w.NextCursor == "" || w.NextCursor == first.NextCursor {
			t.Errorf("wait %v: next_since_uid %d next_cursor %q, want past %d", args, w.NextSinceUID, w.NextCursor, uid)
		}
	}

	// No cursor: from now. The message there already is not new.
	now := wait(map[string]any{"timeout_s": 1})
	if !now.TimedOut || len(now.Messages) != 0 || now.NextSinceUID != uid {
		t.Errorf("a wait without a cursor: %+v", now)
	}
	// Its cursor misses nothing either.
	mailtest.Call(t, peer, "agent_send", map[string]any{"to": []any{"newbie"}, "subject": "after the timeout", "text": "again"})
	if w := wait(map[string]any{"cursor": now.NextCursor, "timeout_s": 5}); len(w.Messages) != 1 || w.Messages[0].Subject != "after the timeout" {
		t.Errorf("the wait from the timed-out cursor: %+v", w)
	}

	// Cursors that cannot be read rightly are refused, each with its reason.
	list := mailtest.Call(t, newbie, "imap_list_emails", map[string]any{"folder": folder, "limit": 1})
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	mailtest.Decode(t, list, &page)
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"folder": "INBOX", "cursor": first.NextCursor}, "belongs to folder"},
		{map[string]any{"cursor": first.NextCursor, "since_uid": 0}, "not both"},
		{map[string]any{"cursor": "not-a-cursor"}, "invalid cursor"},
		{map[string]any{"cursor": page.NextCursor}, "invalid cursor"},
	} {
		if tc.args["cursor"] == "" {
			continue // the folder has one page only
		}
		tc.args["timeout_s"] = 1
		res := mailtest.Call(t, newbie, "imap_wait_for_email", tc.args)
		if txt := mailtest.Text(res); !res.IsError || !strings.Contains(txt, tc.want) {
			t.Errorf("wait %v: %q, want an error saying %q", tc.args, txt, tc.want)
		}
	}
}
