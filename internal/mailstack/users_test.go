package mailstack_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// TestManyUsers starts a stack with more users than MAILSTACK_USERS carries
// (they go through MAILSTACK_USERS_FILE), logs in as the last of them, and
// reads what WriteInbox put into its INBOX, in order.
func TestManyUsers(t *testing.T) {
	mailtest.Shared(t) // skips (or fails in CI) where no stack can run
	users := map[string]string{}
	for i := range 3000 { // about 90 KiB as one string
		users[fmt.Sprintf("many%04d@example.test", i)] = fmt.Sprintf("pw%04d", i)
	}
	st, err := mailstack.Start(mailstack.Options{Users: users})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	if st.Env["MAILSTACK_USERS_FILE"] == "" {
		t.Errorf("mailstack.env has no MAILSTACK_USERS_FILE: the list went through the environment")
	}
	passwd, err := os.ReadFile(filepath.Join(st.Dir, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(passwd), "\n"); n != len(users)+2 { // + alice, bob
		t.Errorf("passwd has %d lines, want %d", n, len(users)+2)
	}

	const user = "many2999@example.test"
	date := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	var msgs [][]byte
	for i := 1; i <= 3; i++ {
		msgs = append(msgs, fmt.Appendf(nil, "From: <sender%d@example.org>\r\nTo: <%s>\r\nSubject: number %d\r\nDate: %s\r\n\r\nbody %d\r\n",
			i, user, i, date.Format(time.RFC1123Z), i))
	}
	if err := st.WriteInbox(user, date, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteInbox("nobody@example.test", date, msgs...); err == nil {
		t.Error("WriteInbox for an unknown user: no error")
	}
	c := login(t, st, user)
	if n := numMessages(t, c, "INBOX"); n != 3 {
		t.Fatalf("INBOX has %d messages, want 3", n)
	}
	if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	bufs, err := c.Fetch(imap.UIDSetNum(1, 2, 3), &imap.FetchOptions{UID: true, Envelope: true, Flags: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bufs {
		if want := fmt.Sprintf("number %d", b.UID); b.Envelope == nil || b.Envelope.Subject != want {
			t.Errorf("UID %d: envelope %+v, want subject %q", b.UID, b.Envelope, want)
		}
		for _, f := range b.Flags {
			if f != `\Recent` {
				t.Errorf("UID %d: flags %v, want none but \\Recent", b.UID, b.Flags)
			}
		}
	}
	if len(bufs) != 3 {
		t.Errorf("fetched %d messages, want 3", len(bufs))
	}
}
