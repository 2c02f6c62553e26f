package tests

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// A consumed message is read before its claim, from the FETCH that also
// brings the flags the claim is decided by, and the claim adds \Seen
// (and the key's keyword) to what it read: what it returns must be what a
// read of the message returns afterwards, byte for byte, whatever the
// pooled connection had open (nothing, the folder examined by a list, the
// folder selected by an earlier claim) and with a key.
func TestConsumedIsWhatReadReturns(t *testing.T) {
	// A stack of its own: the claim with a key leaves its records folder
	// under Agents, which the shared stack's folder tests would see.
	const user = "consumeread@example.test"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: "consumereadpw"}})
	c := mailboxClient(t, s)
	d := direct(t, s, user)
	folder := scratchFolder(t, d)
	creds := stackCreds(s, user)
	ctx := context.Background()

	multipart := "From: Lead <lead@example.org>\nTo: bob@example.test\nSubject: report attached\nMessage-ID: <att.%d@consume.test>\n" +
		"References: <a@x.test> <b@x.test>\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b1\n\n" +
		"--b1\nContent-Type: text/plain; charset=utf-8\n\nThe report is attached.\n\n--b1\n" +
		"Content-Type: application/pdf; name=report.pdf\nContent-Disposition: attachment; filename=report.pdf\nContent-Transfer-Encoding: base64\n\n" +
		"JVBERi0xLjQKJcfsj6IKNSAwIG9iago8PC9MZW5ndGggNiAwIFI+PgpzdHJlYW0K\n--b1--\n"
	html := "From: News <news@example.org>\nTo: bob@example.test\nSubject: html only\nMessage-ID: <html.%d@consume.test>\nMIME-Version: 1.0\n" +
		"Content-Type: text/html; charset=utf-8\n\n<p>Your code is <b>493021</b>.</p><div style=\"display:none\">hidden</div>\n"
	var uids []uint32
	for i := range 4 {
		raw := multipart
		if i%2 == 1 {
			raw = html
		}
		uids = append(uids, appendRaw(t, d, folder, fmtRaw(raw, i)))
	}
	// A keyword of its own on one message: the claim keeps it.
	if _, err := d.Select(folder, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := d.Store(imap.UIDSetNum(imap.UID(uids[1])), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{"$Label1", imap.FlagFlagged}}, nil).Close(); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name   string
		before func()
		key    string
	}{
		{name: "new connection"},
		{name: "folder examined by a list", before: func() {
			if _, err := c.ListEmails(ctx, creds, mailbox.ListOptions{Folder: folder}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "folder selected by the last claim"},
		{name: "with an idempotency key", key: "consume-read-1"},
	}
	for i, st := range steps {
		if st.before != nil {
			st.before()
		}
		res, err := c.Consume(ctx, creds, mailbox.ConsumeOptions{Folder: folder, Limit: 1, IdempotencyKey: st.key})
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if len(res.Messages) != 1 || res.Messages[0].UID != uids[i] || !res.ExactlyOnce || res.More != (i < len(uids)-1) {
			t.Fatalf("%s: took %+v, want UID %d alone", st.name, res, uids[i])
		}
		read, err := c.Read(ctx, creds, mailbox.ReadOptions{Folder: folder, UID: uids[i], MaxChars: mailbox.DefaultConsumeMaxChars})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(res.Messages[0])
		want, _ := json.Marshal(read)
		if string(got) != string(want) {
			t.Errorf("%s: consumed\n%s\nread afterwards\n%s", st.name, got, want)
		}
		if !read.Flags.Seen {
			t.Errorf("%s: UID %d is not \\Seen after its claim", st.name, uids[i])
		}
	}
	if unread := allUIDs(t, d, folder, &imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}}); len(unread) != 0 {
		t.Errorf("left unread: %v", unread)
	}
}

// fmtRaw gives raw a Message-ID of its own.
func fmtRaw(raw string, i int) string {
	return strings.Replace(raw, "%d", strconv.Itoa(i), 1)
}
