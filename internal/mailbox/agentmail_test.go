package mailbox

import (
	"context"
	"testing"
	"time"
)

func TestParseFieldsAndMatch(t *testing.T) {
	h := parseFields([]byte("X-Mailbox-Agent-From: backend\r\nSubject: =?utf-8?q?h=C3=A9?=\r\n folded\r\nX-Mailbox-Agent-From: other\r\n\r\n"))
	if h["x-mailbox-agent-from"] != "backend" || h["subject"] != "hé folded" {
		t.Fatalf("%q", h)
	}
	for _, tc := range []struct {
		m    HeaderMatch
		want bool
	}{
		{HeaderMatch{"X-Mailbox-Agent-From", "backend"}, true},
		{HeaderMatch{"X-Mailbox-Agent-From", "back"}, false}, // IMAP's substring match is narrowed
		{HeaderMatch{"X-Mailbox-Agent-From", ""}, true},
		{HeaderMatch{"X-Other", ""}, false},
	} {
		if got := tc.m.matches(h); got != tc.want {
			t.Errorf("%+v: %v", tc.m, got)
		}
	}
}

// Delivery into several folders, activity, exact header search and the
// read-before search, on the in-process server.
func TestAgentMailInProcess(t *testing.T) {
	c, creds, add := memServer(t)
	ctx := context.Background()
	for _, f := range []string{"Agents/a", "Agents/b"} {
		if _, err := c.EnsureFolder(ctx, creds, f); err != nil {
			t.Fatal(err)
		}
	}
	raw := []byte("From: x@y\r\nX-Mailbox-Agent-From: backend\r\nSubject: s\r\n\r\nbody\r\n")
	uids, err := c.AppendEach(ctx, creds, raw, time.Now(), []Delivery{{Folder: "Agents/a"}, {Folder: "Agents/b", Seen: true}})
	if err != nil || len(uids) != 2 {
		t.Fatalf("%v %v", uids, err)
	}
	if _, err := c.AppendEach(ctx, creds, raw, time.Now(), []Delivery{{Folder: "Agents/missing"}}); err == nil {
		t.Fatal("append to a missing folder")
	}
	add("From: z@y\nX-Mailbox-Agent-From: backend-2\n\nnot from backend\n")
	acts, err := c.Activity(ctx, creds, "Agents/%", &HeaderMatch{Name: "X-Mailbox-Agent-From", Value: "backend"})
	if err != nil || len(acts) != 2 {
		t.Fatalf("%+v %v", acts, err)
	}
	if a := acts[0]; a.Folder != "Agents/a" || a.Total != 1 || a.Unread != 1 || a.UnreadMatching != 1 || a.Newest.IsZero() {
		t.Fatalf("a: %+v", a)
	}
	if b := acts[1]; b.Unread != 0 || b.UnreadMatching != 0 {
		t.Fatalf("b: %+v", b)
	}
	msgs, err := c.FindByHeader(ctx, creds, "Agents/a", HeaderMatch{Name: "X-Mailbox-Agent-From", Value: "backend"}, []string{"Subject"}, 100)
	if err != nil || len(msgs) != 1 || msgs[0].Header["subject"] != "s" || msgs[0].Text != "body" || msgs[0].Seen {
		t.Fatalf("%+v %v", msgs, err)
	}
	if u, v, err := c.SeenBefore(ctx, creds, "Agents/b", time.Now().AddDate(0, 0, 2)); err != nil || len(u) != 1 || v == 0 {
		t.Fatalf("seen before: %v %v", u, err)
	}
	if u, v, err := c.SeenBefore(ctx, creds, "Agents/missing", time.Now()); err != nil || len(u) != 0 || v != 0 {
		t.Fatalf("missing folder: %v %v", u, err)
	}
}
