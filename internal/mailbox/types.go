package mailbox

import (
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Address is one mailbox address with its display name.
type Address struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email"`
}

// Flags are the standard IMAP flags, plus any keywords.
type Flags struct {
	Seen     bool     `json:"seen"`
	Flagged  bool     `json:"flagged"`
	Answered bool     `json:"answered"`
	Draft    bool     `json:"draft"`
	Deleted  bool     `json:"deleted,omitempty"`
	Keywords []string `json:"keywords,omitempty"`
}

// Summary is one message in a list or search result.
type Summary struct {
	UID            uint32    `json:"uid"`
	From           *Address  `json:"from,omitempty"`
	To             []Address `json:"to,omitempty"`
	Cc             []Address `json:"cc,omitempty"`
	Subject        string    `json:"subject"`
	Date           time.Time `json:"date"`
	Flags          Flags     `json:"flags"`
	Size           int64     `json:"size"`
	HasAttachments bool      `json:"has_attachments" desc:"true when the message has a part a mail client shows as an attachment: the same parts the read lists"`
	Preview        string    `json:"preview,omitempty" desc:"the start of the body's first text part (text/plain preferred, HTML converted), one line; absent when that part is not at the start of the message"`
	Tags           []string  `json:"tags,omitempty" desc:"the message's tags (X-Mailbox-Tags header), as agents set them when sending"`
}

// Page is one page of a folder listing or a search, newest first.
type Page struct {
	Folder string `json:"folder"`
	// Role is the folder's special-use role (RFC 6154), so that a reader
	// knows a list of Sent or Drafts is about recipients, not senders.
	Role        string    `json:"role,omitempty" desc:"the folder's special use when the server says: inbox, sent, drafts, trash, junk, archive, all or flagged"`
	UIDValidity uint32    `json:"uid_validity"`
	Total       uint32    `json:"total"`
	Unread      uint32    `json:"unread"`
	Matched     *uint32   `json:"matched,omitempty"` // search only: how many messages match in all
	Messages    []Summary `json:"messages"`
	NextCursor  string    `json:"next_cursor,omitempty"`
}

func flagsOf(fs []imap.Flag) Flags {
	var f Flags
	for _, x := range fs {
		switch strings.ToLower(string(x)) {
		case `\seen`:
			f.Seen = true
		case `\flagged`:
			f.Flagged = true
		case `\answered`:
			f.Answered = true
		case `\draft`:
			f.Draft = true
		case `\deleted`:
			f.Deleted = true
		case `\recent`:
		default:
			if !strings.HasPrefix(string(x), `\`) {
				f.Keywords = append(f.Keywords, mailmsg.SanitizeLine(string(x)))
			}
		}
	}
	return f
}

func addressOf(a imap.Address) (Address, bool) {
	email := a.Addr()
	if email == "" {
		return Address{}, false // group markers
	}
	return Address{Name: mailmsg.SanitizeLine(a.Name), Email: mailmsg.SanitizeLine(email)}, true
}

func addressesOf(as []imap.Address) []Address {
	var out []Address
	for _, a := range as {
		if x, ok := addressOf(a); ok {
			out = append(out, x)
		}
	}
	return out
}

func firstAddress(as []imap.Address) *Address {
	for _, a := range as {
		if x, ok := addressOf(a); ok {
			return &x
		}
	}
	return nil
}
