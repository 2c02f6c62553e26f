package tests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// TestFreshAfterOtherSession: a tool on a pooled connection that has the
// folder open sees mail another session filed a moment before, although
// its first commands go in one flight with the NOOP that brings Dovecot's
// view up to date, and Dovecot runs a SEARCH pipelined behind a NOOP before
// the NOOP's refresh (opening.go: the operation asks again when the server
// reported a change during the flight).
func TestFreshAfterOtherSession(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{"fresh@example.test": "freshpw"}})
	user := "fresh@example.test"
	g := startGateway(t, s, "MAILBOX_ACCESS=organize")
	c := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": user, "x-imap-pass": "freshpw"}, "")
	d := direct(t, s, user)
	if _, err := d.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	file := func(subject string) uint32 {
		t.Helper()
		m := "From: Zed <zed@example.test>\r\nTo: " + user + "\r\nSubject: " + subject + "\r\nMessage-ID: <" + subject + "@example.test>\r\nX-Mailbox-Tags: " + subject + "\r\n\r\nbody\r\n"
		cmd := d.Append("INBOX", int64(len(m)), nil)
		cmd.Write([]byte(m))
		cmd.Close()
		data, err := cmd.Wait()
		if err != nil {
			t.Fatal(err)
		}
		// Long enough for Dovecot to have taken the change in without
		// telling the gateway's session (seen missed at 300 ms).
		time.Sleep(300 * time.Millisecond)
		return uint32(data.UID)
	}
	// The pooled connection has INBOX open from here on.
	mailtest.Call(t, c, "imap_peek_inbox", nil)

	for round := 1; round <= 3; round++ {
		n := strconv.Itoa(round)

		searched := file("search-" + n)
		var found struct {
			Total    int `json:"total"`
			Messages []struct {
				Subject string `json:"subject"`
			} `json:"messages"`
		}
		mailtest.Decode(t, mailtest.Call(t, c, "imap_search_emails", map[string]any{"subject": "search-" + n}), &found)
		if len(found.Messages) != 1 {
			t.Errorf("round %d: the search found %d messages filed a moment before, want 1", round, len(found.Messages))
		}

		// Flagged by another session a moment before: a search by the
		// flag finds it (Dovecot runs the SEARCH before the NOOP's
		// refresh, and go-imap reports the change on a goroutine of its
		// own: the tap watches the flight).
		if err := d.Store(imap.UIDSetNum(imap.UID(searched)), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagFlagged}}, nil).Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		mailtest.Decode(t, mailtest.Call(t, c, "imap_search_emails", map[string]any{"subject": "search-" + n, "flagged": true}), &found)
		if len(found.Messages) != 1 {
			t.Errorf("round %d: the search by the flag set a moment before found %d messages, want 1", round, len(found.Messages))
		}

		before := 4*(round-1) + 1 // four messages a round
		file("peek-" + n)
		var peek struct {
			Total  int `json:"total"`
			Unread int `json:"unread"`
		}
		mailtest.Decode(t, mailtest.Call(t, c, "imap_peek_inbox", nil), &peek)
		if peek.Total != before+1 {
			t.Errorf("round %d: the peek counts %d messages, want %d", round, peek.Total, before+1)
		}

		uid := file("check-" + n)
		var checked struct {
			Messages []struct {
				UID uint32 `json:"uid"`
			} `json:"messages"`
		}
		mailtest.Decode(t, mailtest.Call(t, c, "imap_check_inbox", map[string]any{"tag": "check-" + n}), &checked)
		if len(checked.Messages) != 1 || checked.Messages[0].UID != uid {
			t.Errorf("round %d: the check by tag took %+v, want UID %d", round, checked.Messages, uid)
		}
		mailtest.Decode(t, mailtest.Call(t, c, "imap_check_inbox", map[string]any{"limit": 10}), &checked)
		if len(checked.Messages) != 2 {
			t.Errorf("round %d: the check took %+v, want the 2 other unread ones", round, checked.Messages)
		}
		// Marked unread again by another session a moment before: the
		// check sees it (other sessions' \Seen alone does not make it ask
		// again: Conn.staleUnread).
		if err := d.Store(imap.UIDSetNum(imap.UID(searched)), &imap.StoreFlags{Op: imap.StoreFlagsDel, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		mailtest.Decode(t, mailtest.Call(t, c, "imap_check_inbox", map[string]any{"limit": 1}), &checked)
		if len(checked.Messages) != 1 || checked.Messages[0].UID != searched {
			t.Errorf("round %d: the check took %+v, want UID %d, marked unread a moment before", round, checked.Messages, searched)
		}

		uid = file("flag-" + n)
		res, err := mailtest.CallErr(c, "imap_set_flags", map[string]any{"uids": []uint32{uid}, "add": []string{"flagged"}})
		if err != nil || res.IsError {
			t.Errorf("round %d: set_flags on the message filed a moment before: %v %s", round, err, mailtest.Text(res))
		}
		// What the server has: the flag is set.
		bufs, err := d.Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{UID: true, Flags: true}).Collect()
		if err != nil || len(bufs) != 1 || !containsFlag(bufs[0].Flags, string(imap.FlagFlagged)) {
			t.Errorf("round %d: the message's flags on the server: %v %v", round, bufs, err)
		}
		// It counts as read (set_flags does not read it): the next
		// round's check takes only its own three.
		d.Store(imap.UIDSetNum(imap.UID(uid)), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close()
	}
}

// The first read of a message that just arrived, on a pooled connection
// that has had its folder open since before (issue 35): Dovecot's view
// of the folder does not hold it yet, and the read asks again after a
// NOOP instead of answering "no message with UID". A UID that does not
// exist is still "no message".
func TestReadRightAfterDelivery(t *testing.T) {
	const user = "justarrived@example.test"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: "arrived-pw"}})
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, user), "")
	d := direct(t, s, user)
	file := func(subject string) uint32 {
		t.Helper()
		m := "From: Zed <zed@example.test>\r\nTo: " + user + "\r\nSubject: " + subject + "\r\nMessage-ID: <" + subject + "@example.test>\r\n\r\nbody of " + subject + "\r\n"
		return uint32(appendUID(t, d, "INBOX", []byte(m), nil, time.Time{}))
	}
	read := func(uid uint32) (string, bool) {
		t.Helper()
		res := mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": uid})
		if res.IsError {
			return mailtest.Text(res), false
		}
		var m struct {
			Subject string `json:"subject"`
		}
		mailtest.Decode(t, res, &m)
		return m.Subject, true
	}
	// The pooled connection has INBOX open from here on.
	if got, ok := read(file("first")); !ok || got != "first" {
		t.Fatalf("the first read: %q", got)
	}
	for round := range 5 {
		subject := "arrived-" + strconv.Itoa(round)
		uid := file(subject)
		if got, ok := read(uid); !ok || got != subject {
			t.Errorf("round %d: reading UID %d right after it arrived: %q", round, uid, got)
		}
	}
	if st := g.App.PoolStats(); st.Opened != 1 {
		t.Errorf("the reads used %d connections, want the one pooled connection: %+v", st.Opened, st)
	}
	if got, ok := read(9999); ok || !strings.Contains(got, "no message with UID 9999") {
		t.Errorf("a UID that does not exist: %q", got)
	}
	// The same for an attachment fetched right after its message arrived.
	for round := range 3 {
		subject := "attached-" + strconv.Itoa(round)
		m := "From: Zed <zed@example.test>\r\nTo: " + user + "\r\nSubject: " + subject + "\r\nMIME-Version: 1.0\r\n" +
			"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nsee file\r\n" +
			"--b\r\nContent-Type: text/plain; name=\"note.txt\"\r\nContent-Disposition: attachment; filename=\"note.txt\"\r\n\r\n" + subject + " content\r\n--b--\r\n"
		uid := uint32(appendUID(t, d, "INBOX", []byte(m), nil, time.Time{}))
		res := mailtest.Call(t, c, "imap_get_attachment", map[string]any{"uid": uid, "part_id": "2"})
		if res.IsError || !strings.Contains(mailtest.Text(res)+fmt.Sprint(res.StructuredContent), "note.txt") {
			t.Errorf("round %d: the attachment of UID %d right after it arrived: %s", round, uid, mailtest.Text(res))
		}
	}
	if st := g.App.PoolStats(); st.Opened != 1 {
		t.Errorf("the reads used %d connections, want the one pooled connection: %+v", st.Opened, st)
	}
}
