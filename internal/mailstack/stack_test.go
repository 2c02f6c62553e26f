package mailstack_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// The shared stack comes from mailtest, the testing side of this package.
func TestMain(m *testing.M) { mailtest.Main(m) }

// within runs f and fails the test if it takes longer than d (imapclient has
// no per-call deadline; closing the client unblocks it).
func within(t *testing.T, c *imapclient.Client, d time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		c.Close()
		t.Fatalf("%s: no answer within %v", what, d)
		return nil
	}
}

func login(t *testing.T, st *mailstack.Stack, user string) *imapclient.Client {
	t.Helper()
	c, err := imapclient.DialTLS(st.IMAPSAddr(), &imapclient.Options{
		TLSConfig: st.TLSConfig(),
		Dialer:    &net.Dialer{Timeout: 10 * time.Second},
	})
	if err != nil {
		t.Fatalf("dial %s: %v", st.IMAPSAddr(), err)
	}
	t.Cleanup(func() { c.Close() })
	if err := within(t, c, 20*time.Second, "LOGIN "+user, func() error {
		return c.Login(user, st.Users[user]).Wait()
	}); err != nil {
		t.Fatalf("LOGIN %s: %v", user, err)
	}
	return c
}

func numMessages(t *testing.T, c *imapclient.Client, mailbox string) uint32 {
	t.Helper()
	var data *imap.StatusData
	err := within(t, c, 20*time.Second, "STATUS "+mailbox, func() (err error) {
		data, err = c.Status(mailbox, &imap.StatusOptions{NumMessages: true}).Wait()
		return err
	})
	if err != nil {
		t.Fatalf("STATUS %s: %v", mailbox, err)
	}
	if data.NumMessages == nil {
		t.Fatalf("STATUS %s: no MESSAGES in the answer", mailbox)
	}
	return *data.NumMessages
}

func TestStack(t *testing.T) {
	st := mailtest.Shared(t)
	t.Logf("stack in %s, IMAPS %s, MX %s", st.Dir, st.IMAPSAddr(), st.MXAddr())

	if len(st.Dir) > 70 {
		t.Errorf("Dir %q is longer than 70 characters", st.Dir)
	}
	fi, err := os.Stat(st.Dir)
	if err != nil || fi.Mode().Perm()&0o001 == 0 {
		t.Errorf("Dir %s must be o+x: %v %v", st.Dir, fi.Mode(), err)
	}
	if st.Host != "127.0.0.1" || st.Users[mailstack.Alice] != "alicepw" || st.Users[mailstack.Bob] != "bobpw" {
		t.Errorf("Host %q Users %v", st.Host, st.Users)
	}

	// seed 50 messages into bob's INBOX
	if err := st.Seed(mailstack.Bob, 50, ""); err != nil {
		t.Fatal(err)
	}
	bob := login(t, st, mailstack.Bob)
	if n := numMessages(t, bob, "INBOX"); n != 50 {
		t.Fatalf("bob's INBOX has %d messages after Seed, want 50", n)
	}

	// deliver one message to alice through the MX port
	alice := login(t, st, mailstack.Alice)
	raw := "From: Carol <carol@example.org>\r\nTo: alice@example.test\r\nSubject: Grüße\r\n" +
		"Message-ID: <deliver.1@example.org>\r\nDate: Mon, 02 Jan 2006 15:04:05 +0000\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" +
		"Schöne Grüße\r\n"
	if err := st.Deliver("carol@example.org", []string{mailstack.Alice}, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := numMessages(t, alice, "INBOX")
		if n == 1 {
			break
		}
		if n > 1 || time.Now().After(deadline) {
			t.Fatalf("alice's INBOX has %d messages, want 1 (postfix log: %s)", n, readLog(st, "postfix.log"))
		}
		time.Sleep(20 * time.Millisecond)
	}

	// kick bob: his connection is closed, alice's is not
	if err := st.Kick(mailstack.Bob); err != nil {
		t.Fatal(err)
	}
	if err := within(t, bob, 10*time.Second, "NOOP after kick", func() error { return bob.Noop().Wait() }); err == nil {
		t.Fatal("NOOP on bob's connection succeeded after Kick")
	} else {
		t.Logf("NOOP after kick: %v", err)
	}
	if err := within(t, alice, 10*time.Second, "NOOP", func() error { return alice.Noop().Wait() }); err != nil {
		t.Fatalf("alice's NOOP after kicking bob: %v", err)
	}
	if err := st.Kick(mailstack.Bob); err != nil {
		t.Fatalf("Kick of a user without connections: %v", err)
	}

	// restart Dovecot: old connections are gone, new logins work, mail is kept
	if err := st.RestartDovecot(); err != nil {
		t.Fatal(err)
	}
	if err := within(t, alice, 10*time.Second, "NOOP after restart", func() error { return alice.Noop().Wait() }); err == nil {
		t.Fatal("NOOP on a connection from before RestartDovecot succeeded")
	}
	bob2 := login(t, st, mailstack.Bob)
	if n := numMessages(t, bob2, "INBOX"); n != 50 {
		t.Fatalf("bob's INBOX has %d messages after the restart, want 50", n)
	}
	alice2 := login(t, st, mailstack.Alice)
	if n := numMessages(t, alice2, "INBOX"); n != 1 {
		t.Fatalf("alice's INBOX has %d messages after the restart, want 1", n)
	}

	// Postfix kept running: mail still flows into the restarted Dovecot
	if err := st.Deliver("carol@example.org", []string{mailstack.Alice, mailstack.Bob}, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WaitMessages(mailstack.Bob, "INBOX", 51, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WaitMessages(mailstack.Alice, "", 2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestSeedNonASCIIMailbox(t *testing.T) {
	st := mailtest.Shared(t)
	// modified UTF-7, as on the wire and on disk
	if err := st.Seed(mailstack.Alice, 3, "Entw&APw-rfe"); err != nil {
		t.Fatal(err)
	}
	// UTF-8, with a hierarchy
	if err := st.Seed(mailstack.Alice, 2, "Archiv/Grüße 2024"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"R&D", "a.b"} {
		if err := st.Seed(mailstack.Alice, 1, bad); err == nil {
			t.Errorf("Seed into %q succeeded, want an error", bad)
		}
	}
	if _, err := os.Stat(st.Dir + "/mail/example.test/alice/Maildir/.Entw&APw-rfe/cur"); err != nil {
		t.Errorf("Maildir folder name on disk: %v", err)
	}
	c := login(t, st, mailstack.Alice)
	// imapclient encodes the names to modified UTF-7 on the wire
	if n := numMessages(t, c, "Entwürfe"); n != 3 {
		t.Errorf("Entwürfe has %d messages, want 3", n)
	}
	if n := numMessages(t, c, "Archiv/Grüße 2024"); n != 2 {
		t.Errorf("Archiv/Grüße 2024 has %d messages, want 2", n)
	}
	if n, err := st.MessageCount(mailstack.Alice, "Entwürfe"); err != nil || n != 3 {
		t.Errorf("MessageCount(Entwürfe) = %d, %v; want 3", n, err)
	}
	out, err := st.Doveadm("mailbox", "list", "-s", "-u", mailstack.Alice)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Entwürfe") {
		t.Errorf("Entwürfe not subscribed: %q", out)
	}
}

// A second, independent stack in the same process, with an extra user: its
// ports differ from the shared one's and both work at once.
func TestStartSecondStack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second stack")
	}
	shared := mailtest.Shared(t)
	st, err := mailstack.Start(mailstack.Options{Users: map[string]string{"carol@example.org": "carolpw"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := st.Dir
	defer func() {
		if err := st.Stop(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Stop left %s behind: %v", dir, err)
		}
		if err := st.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	}()
	if st.IMAPSPort == shared.IMAPSPort || st.Dir == shared.Dir {
		t.Fatalf("second stack shares ports or dir with the first: %d %s", st.IMAPSPort, st.Dir)
	}
	if len(st.Users) != 3 || st.Users["carol@example.org"] != "carolpw" {
		t.Fatalf("Users = %v", st.Users)
	}
	c := login(t, st, "carol@example.org")
	if n := numMessages(t, c, "INBOX"); n != 0 {
		t.Fatalf("carol's INBOX has %d messages, want 0", n)
	}
	if err := st.Deliver("alice@example.test", []string{"carol@example.org"}, []byte("Subject: hi\r\n\r\nhello\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WaitMessages("carol@example.org", "INBOX", 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// unknown recipients are refused at RCPT time
	err = st.Deliver("alice@example.test", []string{"nobody@example.org"}, []byte("Subject: hi\r\n\r\nhello\r\n"))
	if err == nil || !strings.Contains(err.Error(), "550") {
		t.Errorf("Deliver to an unknown user: %v, want a 550", err)
	}
}

func TestBadUsers(t *testing.T) {
	for _, users := range []map[string]string{
		{"carol": "pw"},
		{"carol@example.org": "pass word"},
		{"carol@example.org": "a:b"},
		{"carol@example.org": ""},
	} {
		if st, err := mailstack.Start(mailstack.Options{Users: users}); err == nil {
			st.Stop()
			t.Errorf("Start with users %v succeeded", users)
		}
	}
}

func readLog(st *mailstack.Stack, name string) string {
	b, err := os.ReadFile(st.Dir + "/log/" + name)
	if err != nil {
		return fmt.Sprint(err)
	}
	return string(b)
}
