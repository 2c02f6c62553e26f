package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// A text body of several MB: the default read fetches only the first 1 MB
// (and says so), while a window deep into the body still fetches as much as
// it needs (up to 4 MB), so paging through a large body keeps working.
func TestReadLargeTextBodyFetchesWhatTheWindowNeeds(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{})
	var lines []string
	for i := 0; len(lines)*35 < 3<<20; i++ {
		lines = append(lines, fmt.Sprintf("line %07d the quick brown fox jumps", i))
	}
	want := strings.Join(lines, "\n") // what the gateway returns: LF, no trailing blank
	raw := "From: <big@example.org>\r\nTo: <" + bob + ">\r\nSubject: big text\r\nDate: " + time.Now().Format(time.RFC1123Z) +
		"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n" + strings.Join(lines, "\r\n") + "\r\n"
	d := direct(t, s, bob)
	app := d.Append("INBOX", int64(len(raw)), nil)
	if _, err := app.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	ad, err := app.Wait()
	if err != nil {
		t.Fatal(err)
	}
	uid := uint32(ad.UID)

	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")

	var first mailbox.Message
	mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": uid}), &first)
	if !strings.HasPrefix(want, first.Text) || len(first.Text) != mailbox.DefaultMaxChars || !first.Truncated {
		t.Errorf("default read: %d chars, truncated=%v; want the first %d chars of the body", len(first.Text), first.Truncated, mailbox.DefaultMaxChars)
	}
	if first.TotalChars < 1_000_000 || first.TotalChars > 1<<20 {
		t.Errorf("default read: total_chars %d, want about 1 MB (what was fetched)", first.TotalChars)
	}
	if !strings.Contains(strings.Join(first.Warnings, " "), fmt.Sprintf("only its first %d bytes were read", 1<<20)) {
		t.Errorf("default read: warnings %q do not say the body was cut at 1 MB", first.Warnings)
	}

	offset := 2_500_000
	var deep mailbox.Message
	mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": uid, "offset": offset, "max_chars": 200}), &deep)
	if deep.Text != want[offset:offset+200] {
		t.Errorf("window at %d: got %q, want %q", offset, deep.Text, want[offset:offset+200])
	}
	if deep.TotalChars != len(want) || len(deep.Warnings) != 0 {
		t.Errorf("window at %d: total_chars %d (want %d), warnings %q (want none: the whole body fits in 4 MB)", offset, deep.TotalChars, len(want), deep.Warnings)
	}
}
