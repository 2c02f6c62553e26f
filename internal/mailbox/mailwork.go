package mailbox

// What a read says beyond headers and text: the meeting invitation of a
// text/calendar part (invite), the list's unsubscribe options
// (unsubscribe) and whether the sender is verified (senderauth). The
// header fields they need come with the first FETCH of a read
// (factsSection); an invitation's calendar part takes one FETCH more.

import (
	"bytes"
	"context"
	"strconv"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/invite"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
	"github.com/mailbox-mcp/mailbox-mcp/internal/senderauth"
	"github.com/mailbox-mcp/mailbox-mcp/internal/unsubscribe"
)

// maxFactsBytes caps the header fields of factsSection: a sender can
// write any number of them.
const maxFactsBytes = 64 << 10

var factsSection = &imap.FetchItemBodySection{
	Specifier:    imap.PartSpecifierHeader,
	HeaderFields: []string{"Authentication-Results", "DKIM-Signature", "List-Unsubscribe", "List-Unsubscribe-Post", "List-Id"},
	Peek:         true, Partial: &imap.SectionPartial{Offset: 0, Size: maxFactsBytes},
}

// calendarRef is where a message's calendar part is.
type calendarRef struct {
	path              []int
	encoding, charset string
	size              uint32
}

// calendarPartOf is the message's invitation: its text/calendar part
// (the one with an iTIP method first), else an application/ics part; nil
// when there is none. Forwarded messages are not looked into.
func calendarPartOf(bs imap.BodyStructure) *calendarRef {
	var best *calendarRef
	rank := 0
	var walk func(path []int, b imap.BodyStructure)
	walk = func(path []int, b imap.BodyStructure) {
		switch p := b.(type) {
		case *imap.BodyStructureMultiPart:
			for i, ch := range p.Children {
				walk(childPath(path, i), ch)
			}
		case *imap.BodyStructureSinglePart:
			if len(path) == 0 {
				path = []int{1}
			}
			r := 0
			switch p.MediaType() {
			case "text/calendar":
				r = 2
				if p.Params["method"] != "" {
					r = 3
				}
			case "application/ics":
				r = 1
			}
			if r > rank {
				best, rank = &calendarRef{path: path, encoding: p.Encoding, charset: p.Params["charset"], size: p.Size}, r
			}
		}
	}
	walk(nil, bs)
	return best
}

// readInvite fetches and reads m's calendar part, if it has one. It never
// fails the read: what goes wrong is the Invite's problem.
func readInvite(cl *imapclient.Client, m *Message, uid uint32) {
	ref := m.calendar
	if ref == nil {
		return
	}
	// base64 takes 4/3 of the decoded size, and its line breaks.
	limit := int64(invite.MaxBytes)*4/3 + int64(invite.MaxBytes)/38 + 1024
	if int64(ref.size) > limit {
		m.Invite = invite.Unreadable("The invitation's calendar data is larger than " + strconv.Itoa(invite.MaxBytes>>10) + " KiB, so it was not read.")
		return
	}
	sec := &imap.FetchItemBodySection{Part: ref.path, Peek: true}
	bufs, err := cl.Fetch(imap.UIDSetNum(imap.UID(uid)), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
	var raw []byte
	for _, b := range bufs {
		if uint32(b.UID) == uid {
			raw = b.FindBodySection(sec)
		}
	}
	if err != nil || raw == nil {
		m.Invite = invite.Unreadable("The invitation's calendar part could not be fetched from the mail server.")
		return
	}
	data, _ := mailmsg.DecodeRaw(raw, ref.encoding, ref.charset)
	m.Invite = invite.Parse([]byte(data))
}

// judge reads the facts of m's header fields: its sender verification,
// trusting the Authentication-Results of the operator's receiving
// servers (Config.AuthServIDs) only, its unsubscribe options (one-click
// only under a trusted DKIM signature covering both list headers), and
// the reader's entry in its invitation.
func (c *Client) judge(m *Message, creds credentials.Credentials) {
	h := headerFields(m.facts)
	from := ""
	if len(m.From) > 0 {
		from = m.From[0].Email
	}
	m.Authentication = senderauth.Evaluate(c.cfg.AuthServIDs, h["authentication-results"], from)
	m.Unsubscribe = unsubscribe.Parse(strings.Join(h["list-unsubscribe"], ", "), strings.Join(h["list-unsubscribe-post"], ""), strings.Join(h["list-id"], " "))
	if m.Unsubscribe != nil {
		if d, ok := m.Authentication.SignedCovering(h["dkim-signature"], "List-Unsubscribe", "List-Unsubscribe-Post"); ok {
			m.Unsubscribe.Decide(d, m.Authentication.AuthServID)
		}
	}
	if m.Invite != nil {
		m.Invite.MarkReader(creds.User)
	}
}

// headerFields reads raw header fields (as a HEADER.FIELDS fetch returns
// them, possibly cut short) into their unfolded values by lower-case
// name, in order.
func headerFields(raw []byte) map[string][]string {
	out := map[string][]string{}
	var name string
	var value []byte
	flush := func() {
		if name != "" {
			out[name] = append(out[name], strings.TrimSpace(string(value)))
		}
		name, value = "", value[:0]
	}
	for _, line := range bytes.Split(raw, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			if name != "" {
				value = append(value, ' ')
				value = append(value, bytes.TrimSpace(line)...)
			}
			continue
		}
		flush()
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		name = strings.ToLower(string(bytes.TrimSpace(k)))
		value = append(value, bytes.TrimSpace(v)...)
	}
	flush()
	return out
}

// Invitation is a message to answer as a meeting invitation: what a
// reply needs of it, and its invitation (nil when it has no calendar
// part).
type Invitation struct {
	*Original
	Invite *invite.Invite
}

// Invitation reads message uid of folder for an answer to its
// invitation, without changing it: its threading headers and its calendar
// part, with the reader's entry marked.
func (c *Client) Invitation(ctx context.Context, creds credentials.Credentials, folder string, uid uint32) (*Invitation, error) {
	var inv *invite.Invite
	orig, err := c.readOriginal(ctx, creds, folder, uid, "reading the invitation", func(conn *Conn, b *imapclient.FetchMessageBuffer) {
		m := &Message{calendar: calendarPartOf(b.BodyStructure)}
		readInvite(conn.client(), m, uid)
		if inv = m.Invite; inv != nil {
			inv.MarkReader(creds.User)
		}
	})
	if err != nil {
		return nil, err
	}
	return &Invitation{Original: orig, Invite: inv}, nil
}
