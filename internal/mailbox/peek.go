package mailbox

// Peeking at a folder: counts, the age of the oldest unread message and who
// the unread mail is from, without changing anything (EXAMINE, BODY.PEEK).

import (
	"bytes"
	"context"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

const (
	// maxBySender is how many senders a peek lists, most unread first.
	maxBySender = 20
	// bySenderSample is how many unread messages (the newest) a peek
	// reads the sender of.
	bySenderSample = 500
	// peekTagScan is how many messages mentioning a tag (the newest) a
	// peek with a tag filter checks exactly.
	peekTagScan = 10_000
)

// SenderCount is how many unread messages one sender has in a folder.
type SenderCount struct {
	From   string `json:"from" desc:"the sender's address"`
	Name   string `json:"name,omitempty" desc:"the sender's display name, when given"`
	Unread int    `json:"unread"`
}

// PeekResult is one look at a folder. With a tag filter, every count is
// about the messages that carry the tag.
type PeekResult struct {
	Folder      string `json:"folder"`
	Tag         string `json:"tag,omitempty"`
	UIDValidity uint32 `json:"uid_validity"`
	// NextCursor is where a wait for what arrives after the peek starts
	// (position.go): the folder's UIDNEXT; NextSinceUID is UIDNEXT-1,
	// the same in the older form (0: the folder's start).
	NextCursor   string `json:"next_cursor,omitempty" desc:"pass this as cursor to imap_wait_for_email to get what arrives after this look, nothing missed"`
	NextSinceUID uint32 `json:"next_since_uid" desc:"the same position in the older form, for since_uid (0: the folder's start)"`
	Total        uint32 `json:"total"`
	Unread       uint32 `json:"unread"`
	// Times are when the server received the message (INTERNALDATE), not
	// the sender's Date header; nil when there is no such message.
	OldestUnreadAt *time.Time `json:"oldest_unread_at,omitempty" desc:"when the oldest unread message arrived"`
	NewestAt       *time.Time `json:"newest_at,omitempty" desc:"when the newest message arrived"`
	// BySender counts unread messages per sender address, most first, at
	// most 20; over more than 500 unread messages, only the newest 500
	// are counted and BySenderSampled says so.
	BySender        []SenderCount `json:"by_sender" desc:"unread messages per sender, most first (at most 20 senders)"`
	BySenderSampled bool          `json:"by_sender_sampled,omitempty" desc:"true when there are more than 500 unread messages: by_sender counts the newest 500"`
	// Partial: with a tag, more than 10,000 messages mention it; the
	// counts cover the newest 10,000 of them.
	Partial bool `json:"partial,omitempty" desc:"true when more than 10,000 messages mention the tag: the counts cover the newest 10,000"`
}

// Peek looks at folder without changing anything: STATUS, one search for
// the unread messages and one FETCH of the From header of (at most 500 of)
// them. With tag, the messages whose header mentions the tag are read
// (their From and tags headers only) and counted when they carry it
// exactly.
func (c *Client) Peek(ctx context.Context, creds credentials.Credentials, folder, tag string) (*PeekResult, error) {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return nil, err
	}
	if tag != "" {
		if err := CheckTag(tag); err != nil {
			return nil, err
		}
	}
	var out *PeekResult
	if tag != "" {
		err = c.do(ctx, creds, "looking at the folder", true, func(ctx context.Context, conn *Conn) error {
			if _, err := conn.examineFresh(folder); err != nil {
				return err
			}
			out, err = peekTagged(conn.client(), folder, tag)
			return err
		})
		return out, err
	}
	// STATUS and the unread search go with the EXAMINE (behind the LOGIN
	// on a new connection), or behind a NOOP on a connection that has the
	// folder open, asked again if the server reported a change meanwhile
	// (opening.go).
	var q peekQuery
	send := func(conn *Conn, caps imap.CapSet) { q.send(conn.client(), folder, caps) }
	open := &opening{folder: folder, fresh: true, fetchless: true, send: send}
	err = c.doOpen(ctx, creds, open, "looking at the folder", true, func(ctx context.Context, conn *Conn) error {
		_, err := conn.examine(folder)
		q.wait()
		if err != nil {
			return err
		}
		cl := conn.client()
		if conn.stale() {
			send(conn, cl.Caps())
			q.wait()
		}
		out, err = peekAll(cl, folder, &q)
		return err
	})
	return out, err
}

// peekQuery is a peek's first flight: STATUS and the unread search.
type peekQuery struct {
	status     *imapclient.StatusCommand
	unseen     *imapclient.SearchCommand
	max        *imapclient.SearchCommand // the newest UID (ESEARCH), nil without
	newest     imap.UID                  // its answer (0: none)
	sd         *imap.StatusData
	ud         *imap.SearchData
	serr, uerr error
}

func (q *peekQuery) send(cl *imapclient.Client, folder string, caps imap.CapSet) {
	q.status = cl.Status(folder, peekStatus)
	var opts *imap.SearchOptions
	q.max = nil
	if caps.Has(imap.CapESearch) || caps.Has(imap.CapIMAP4rev2) {
		opts = &imap.SearchOptions{ReturnAll: true}
		q.max = cl.UIDSearch(&imap.SearchCriteria{}, &imap.SearchOptions{ReturnMax: true})
	}
	q.unseen = cl.UIDSearch(&imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}}, opts)
}

func (q *peekQuery) wait() {
	q.sd, q.serr = q.status.Wait()
	q.ud, q.uerr = q.unseen.Wait()
	q.newest = 0
	if q.max != nil {
		if md, err := q.max.Wait(); err == nil {
			q.newest = imap.UID(md.Max)
		}
	}
}

// peekStatus is what a peek asks STATUS.
var peekStatus = &imap.StatusOptions{NumMessages: true, NumUnseen: true, UIDNext: true, UIDValidity: true}

// senderSection is the header a peek reads of each message: From, and the
// tags for a tag filter.
var senderSection = &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"From", TagsHeader}, Peek: true}

// peekAll answers a peek without a tag from q's answers: the newest
// message's date and the unread senders come in one more flight.
func peekAll(cl *imapclient.Client, folder string, q *peekQuery) (*PeekResult, error) {
	if q.serr != nil {
		return nil, imapError(q.serr, folder)
	}
	if q.uerr != nil {
		return nil, searchError(q.uerr, folder)
	}
	sd, ud := q.sd, q.ud
	out := newPeek(folder, "", sd)
	out.Total, out.Unread = deref(sd.NumMessages), deref(sd.NumUnseen)
	// The newest message: by the UID the first flight found (ESEARCH),
	// read with the senders; else by its number, one more round trip.
	newestUID := imap.UID(0)
	if q.max != nil {
		newestUID = q.newest
	} else if mb := cl.Mailbox(); mb != nil && mb.NumMessages > 0 {
		// By number, not "*": go-imap hands the answer to a FETCH of
		// "*" to no command (it cannot tell which number "*" was). A
		// folder emptied since it was opened answers an error: then there
		// is no newest message.
		bufs, err := cl.Fetch(imap.SeqSetNum(mb.NumMessages), &imap.FetchOptions{UID: true, InternalDate: true}).Collect()
		if err == nil {
			for _, b := range bufs {
				at := b.InternalDate
				out.NewestAt = &at
			}
		}
	}
	unseen := ud.AllUIDs()
	slices.Sort(unseen)
	sample := unseen[max(0, len(unseen)-bySenderSample):]
	out.BySenderSampled = len(sample) < len(unseen)
	set := imap.UIDSetNum(sample...)
	if len(unseen) > 0 && sample[0] != unseen[0] {
		set.AddNum(unseen[0])
	}
	if newestUID != 0 {
		set.AddNum(newestUID)
	}
	if len(set) == 0 {
		return out, nil
	}
	senders := senderCounter{}
	err := streamFetch(cl, set, &imap.FetchOptions{UID: true, InternalDate: true, BodySection: []*imap.FetchItemBodySection{senderSection}},
		func(m peekedMessage) {
			if m.uid == newestUID {
				at := m.internal
				out.NewestAt = &at
			}
			if len(unseen) == 0 {
				return
			}
			if m.uid == unseen[0] {
				at := m.internal
				out.OldestUnreadAt = &at
			}
			if _, ok := slices.BinarySearch(sample, m.uid); ok {
				senders.add(m.from)
			}
		})
	if err != nil {
		return nil, err
	}
	out.BySender = senders.top(maxBySender)
	return out, nil
}

func peekTagged(cl *imapclient.Client, folder, tag string) (*PeekResult, error) {
	status := cl.Status(folder, &imap.StatusOptions{UIDNext: true, UIDValidity: true})
	var opts *imap.SearchOptions
	if hasESearch(cl) {
		opts = &imap.SearchOptions{ReturnAll: true}
	}
	candCmd := cl.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{tagCriterion(tag)}}, opts)
	sd, serr := status.Wait()
	cd, cerr := candCmd.Wait()
	if serr != nil {
		return nil, imapError(serr, folder)
	}
	if cerr != nil {
		return nil, searchError(cerr, folder)
	}
	out := newPeek(folder, tag, sd)
	cands := cd.AllUIDs()
	if len(cands) == 0 {
		return out, nil
	}
	slices.Sort(cands)
	if len(cands) > peekTagScan {
		cands, out.Partial = cands[len(cands)-peekTagScan:], true
	}
	var newest peekedMessage
	var unread []peekedMessage // ascending UID: the fetch answers in sequence order
	err := streamFetch(cl, imap.UIDSetNum(cands...), &imap.FetchOptions{UID: true, Flags: true, InternalDate: true, BodySection: []*imap.FetchItemBodySection{senderSection}},
		func(m peekedMessage) {
			if !slices.Contains(m.tags, tag) {
				return
			}
			out.Total++
			if m.uid > newest.uid {
				newest = m
			}
			if !m.seen {
				out.Unread++
				unread = append(unread, m)
			}
		})
	if err != nil {
		return nil, err
	}
	if newest.uid != 0 {
		out.NewestAt = &newest.internal
	}
	if len(unread) == 0 {
		return out, nil
	}
	slices.SortFunc(unread, func(a, b peekedMessage) int { return int(int64(a.uid) - int64(b.uid)) })
	out.OldestUnreadAt = &unread[0].internal
	sample := unread[max(0, len(unread)-bySenderSample):]
	out.BySenderSampled = len(sample) < len(unread)
	senders := senderCounter{}
	for _, m := range sample {
		senders.add(m.from)
	}
	out.BySender = senders.top(maxBySender)
	return out, nil
}

func newPeek(folder, tag string, sd *imap.StatusData) *PeekResult {
	out := &PeekResult{Folder: folder, Tag: tag, UIDValidity: sd.UIDValidity, BySender: []SenderCount{}}
	if sd.UIDNext > 0 {
		out.NextSinceUID = uint32(sd.UIDNext) - 1
		out.NextCursor = positionAfter(normFolder(folder), sd.UIDValidity, out.NextSinceUID)
	}
	return out
}

func hasESearch(cl *imapclient.Client) bool {
	return cl.Caps().Has(imap.CapESearch) || cl.Caps().Has(imap.CapIMAP4rev2)
}

// peekedMessage is what a peek reads of one message.
type peekedMessage struct {
	uid      imap.UID
	seen     bool
	internal time.Time
	from     *Address
	tags     []string
}

// streamFetch fetches set with opts (senderSection among them) and hands
// each message to fn as it arrives.
func streamFetch(cl *imapclient.Client, set imap.NumSet, opts *imap.FetchOptions, fn func(peekedMessage)) error {
	cmd := cl.Fetch(set, opts)
	defer cmd.Close()
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		var m peekedMessage
		for item := msg.Next(); item != nil; item = msg.Next() {
			switch it := item.(type) {
			case imapclient.FetchItemDataUID:
				m.uid = it.UID
			case imapclient.FetchItemDataFlags:
				m.seen = flagsOf(it.Flags).Seen
			case imapclient.FetchItemDataInternalDate:
				m.internal = it.Time
			case imapclient.FetchItemDataBodySection:
				if it.Literal != nil {
					m.from, m.tags = parseSenderHeader(readAtMost(it.Literal, 16<<10))
				}
			}
		}
		if m.uid != 0 {
			fn(m)
		}
	}
	if err := cmd.Close(); err != nil {
		return imapError(err, "")
	}
	return nil
}

// parseSenderHeader reads the From address and the tags from a header
// block. A From that does not parse as an address is kept as text.
func parseSenderHeader(block []byte) (*Address, []string) {
	msg, err := mail.ReadMessage(bytes.NewReader(append(bytes.TrimRight(block, "\r\n"), "\r\n\r\n"...)))
	if err != nil {
		return nil, nil
	}
	tags := mailmsg.ParseTags(strings.Join(msg.Header[TagsHeader], ","))
	raw := msg.Header.Get("From")
	if raw == "" {
		return nil, tags
	}
	p := mail.AddressParser{WordDecoder: mailmsg.WordDecoder()}
	if list, err := p.ParseList(raw); err == nil && len(list) > 0 {
		return &Address{Name: mailmsg.SanitizeLine(list[0].Name), Email: mailmsg.SanitizeLine(list[0].Address)}, tags
	}
	return &Address{Email: mailmsg.SanitizeLine(mailmsg.DecodeHeader(raw))}, tags
}

// senderCounter counts messages per address, case-insensitively.
type senderCounter map[string]*SenderCount

func (s senderCounter) add(a *Address) {
	key, email, name := "", "", ""
	if a != nil {
		key, email, name = strings.ToLower(a.Email), a.Email, a.Name
	}
	sc := s[key]
	if sc == nil {
		sc = &SenderCount{From: email}
		s[key] = sc
	}
	if sc.Name == "" {
		sc.Name = name
	}
	sc.Unread++
}

// top returns the n senders with the most messages, ties by address.
func (s senderCounter) top(n int) []SenderCount {
	out := make([]SenderCount, 0, len(s))
	for _, sc := range s {
		out = append(out, *sc)
	}
	slices.SortFunc(out, func(a, b SenderCount) int {
		if a.Unread != b.Unread {
			return b.Unread - a.Unread
		}
		return strings.Compare(a.From, b.From)
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// examineFresh is examine, plus a NOOP answered before anything else is
// sent when the connection had the folder open already. Dovecot brings a
// session's view of its mailbox up to date at the end of a command, not at
// the start, so on a connection that sat idle in the pool a SEARCH (or a
// STATUS of the selected mailbox, answered with [CLIENTBUG]) misses mail
// that arrived meanwhile. The NOOP must be waited for: pipelined with the
// SEARCH, Dovecot can run both before the view is refreshed (seen here).
func (conn *Conn) examineFresh(folder string) (*imapclient.SelectedMailbox, error) {
	reused := conn.selected == folder && !conn.selectedRW && conn.client().Mailbox() != nil && !conn.refreshed && conn.opened == nil
	mb, err := conn.examine(folder)
	if err != nil || !reused {
		return mb, err
	}
	if err := conn.client().Noop().Wait(); err != nil {
		return nil, imapError(err, folder)
	}
	if now := conn.client().Mailbox(); now != nil && now.Name == folder {
		mb = now
	}
	return mb, nil
}
