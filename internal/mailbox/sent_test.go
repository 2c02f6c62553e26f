package mailbox

import (
	"testing"

	"github.com/emersion/go-imap/v2"
)

func TestPickSent(t *testing.T) {
	l := func(name string, delim rune, attrs ...imap.MailboxAttr) *imap.ListData {
		return &imap.ListData{Mailbox: name, Delim: delim, Attrs: attrs}
	}
	for _, tc := range []struct {
		name string
		data []*imap.ListData
		want string
	}{
		{"special-use wins over the name", []*imap.ListData{l("INBOX", '/'), l("Sent", '/'), l("Gesendete Objekte", '/', imap.MailboxAttrSent)}, "Gesendete Objekte"},
		{"attribute case", []*imap.ListData{l("Outbox", '.', `\SENT`)}, "Outbox"},
		{"usual name, any case", []*imap.ListData{l("INBOX", '/'), l("sent items", '/')}, "sent items"},
		{"below INBOX", []*imap.ListData{l("INBOX", '.'), l("INBOX.Sent", '.')}, "INBOX.Sent"},
		{"Gmail", []*imap.ListData{l("[Gmail]", '/', imap.MailboxAttrNoSelect), l("[Gmail]/Sent Mail", '/')}, "[Gmail]/Sent Mail"},
		{"more likely name first", []*imap.ListData{l("Gesendet", '/'), l("Sent", '/')}, "Sent"},
		{"not selectable", []*imap.ListData{l("Sent", '/', imap.MailboxAttrNoSelect)}, ""},
		{"none", []*imap.ListData{l("INBOX", '/'), l("Archive", '/')}, ""},
		{"a name that only contains Sent", []*imap.ListData{l("Unsent drafts", '/')}, ""},
	} {
		if got := pickSpecial(tc.data, imap.MailboxAttrSent, sentNames); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
