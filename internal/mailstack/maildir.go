package mailstack

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// WriteInbox writes raw messages (RFC 5322, LF or CRLF line endings) straight
// into user's INBOX Maildir, as unread mail in cur/, owned by the mail uid,
// with INTERNALDATE date. Unlike Seed it starts no process and does not ask
// Dovecot: Dovecot gives the messages UIDs 1, 2, ... in the order given
// and builds the index on the user's first access. It is for seeding many
// small mailboxes fast (10,000 users of a few messages take seconds; Seed
// runs a generator and doveadm for each call). Safe to call from several
// goroutines for different users.
func (s *Stack) WriteInbox(user string, date time.Time, msgs ...[]byte) error {
	local, dom, ok := strings.Cut(strings.ToLower(user), "@")
	if _, known := s.Users[strings.ToLower(user)]; !ok || !known {
		return fmt.Errorf("mailstack: WriteInbox: unknown user %q", user)
	}
	uid, err := strconv.Atoi(s.Env["MAILSTACK_UID"])
	if err != nil {
		return fmt.Errorf("mailstack: WriteInbox: MAILSTACK_UID in mailstack.env: %w", err)
	}
	// The script's layout: home = DIR/mail/DOMAIN/LOCAL, mail in ~/Maildir.
	home := filepath.Join(s.Dir, "mail", dom, local)
	md := filepath.Join(home, "Maildir")
	for _, d := range []string{md, filepath.Join(md, "cur"), filepath.Join(md, "new"), filepath.Join(md, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("mailstack: WriteInbox: %w", err)
		}
		if err := os.Chown(d, uid, uid); err != nil {
			return fmt.Errorf("mailstack: WriteInbox: %w", err)
		}
	}
	if err := os.Chown(home, uid, uid); err != nil {
		return fmt.Errorf("mailstack: WriteInbox: %w", err)
	}
	for i, m := range msgs {
		m = bytes.ReplaceAll(m, []byte("\r\n"), []byte("\n")) // Maildir keeps LF
		ts := date.Add(time.Duration(i) * time.Second)
		// Dovecot sorts new files by the time and counter in the name: the
		// i-th message gets UID i+1.
		name := fmt.Sprintf("%d.M%06dP%dQ%d.mailstack,S=%d,W=%d:2,", ts.Unix(), i, os.Getpid(), i,
			len(m), len(m)+bytes.Count(m, []byte("\n")))
		path := filepath.Join(md, "cur", name)
		if err := os.WriteFile(path, m, 0o600); err != nil {
			return fmt.Errorf("mailstack: WriteInbox: %w", err)
		}
		if err := os.Chown(path, uid, uid); err != nil {
			return fmt.Errorf("mailstack: WriteInbox: %w", err)
		}
		if err := os.Chtimes(path, ts, ts); err != nil { // INTERNALDATE is the mtime
			return fmt.Errorf("mailstack: WriteInbox: %w", err)
		}
	}
	return nil
}
