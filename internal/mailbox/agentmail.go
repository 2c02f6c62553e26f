package mailbox

// Operations the agents package composes: delivering one message into
// several folders by APPEND (no SMTP), the counts and newest arrival of a
// set of folders, finding messages by the exact value of a header, and
// the read messages older than a date. They know nothing of agents: the
// folders, headers and values are the caller's.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message/textproto"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Delivery is one copy of a message to APPEND: into Folder, with \Seen
// when Seen (the sender's own copy).
type Delivery struct {
	Folder string
	Seen   bool
}

// AppendEach appends raw, with date as its internal date, to every folder
// of to, in order, on one connection. It returns the UIDs of the copies (0
// where the server does not say: no UIDPLUS). On a failure it returns the
// UIDs of the copies made before it, with the error: those stay.
func (c *Client) AppendEach(ctx context.Context, creds credentials.Credentials, raw []byte, date time.Time, to []Delivery) ([]uint32, error) {
	var uids []uint32
	err := c.do(ctx, creds, "delivering the message", false, func(ctx context.Context, conn *Conn) error {
		for _, d := range to {
			var flags []imap.Flag
			if d.Seen {
				flags = []imap.Flag{imap.FlagSeen}
			}
			uid, err := conn.append(d.Folder, raw, flags, date)
			if err != nil {
				return err
			}
			uids = append(uids, uint32(uid))
		}
		return nil
	})
	return uids, err
}

// FolderNames lists the selectable folders matching the LIST pattern (e.g.
// "Agents/%": the direct children of Agents), unsanitised, in the server's
// order: the caller maps them back to what they stand for.
func (c *Client) FolderNames(ctx context.Context, creds credentials.Credentials, pattern string) ([]string, error) {
	var out []string
	err := c.do(ctx, creds, "listing the folders", true, func(ctx context.Context, conn *Conn) error {
		data, err := conn.client().List("", pattern, nil).Collect()
		if err != nil {
			return imapError(err, "")
		}
		for _, d := range data {
			if selectable(d) {
				out = append(out, d.Mailbox)
			}
		}
		return nil
	})
	return out, err
}

// HeaderMatch selects messages whose header Name has exactly Value
// (compared case-insensitively, blanks trimmed); an empty Value selects
// every message that has the header.
type HeaderMatch struct{ Name, Value string }

// criterion is the SEARCH key that narrows to the candidates: IMAP matches
// a substring, so the exact value is checked on the fetched header.
func (m HeaderMatch) criterion() imap.SearchCriteriaHeaderField {
	return imap.SearchCriteriaHeaderField{Key: m.Name, Value: m.Value}
}

func (m HeaderMatch) matches(h map[string]string) bool {
	v, ok := h[strings.ToLower(m.Name)]
	if m.Value == "" {
		return ok
	}
	return ok && strings.EqualFold(strings.TrimSpace(v), strings.TrimSpace(m.Value))
}

// FolderActivity is one folder's counts and newest arrival.
type FolderActivity struct {
	Folder        string
	Total, Unread uint32
	// Newest is the newest message's internal date (its arrival), zero
	// for an empty folder.
	Newest time.Time
	// UnreadMatching counts the unread messages matching the HeaderMatch
	// asked for (0 when none was asked).
	UnreadMatching int
}

// Activity returns the counts of every selectable folder matching the LIST
// pattern, in one LIST-STATUS round trip where the server has it (else
// pipelined STATUS), then, on the same connection, each non-empty folder's
// newest arrival and, with unread set, how many of its unread messages
// match it.
func (c *Client) Activity(ctx context.Context, creds credentials.Credentials, pattern string, unread *HeaderMatch) ([]FolderActivity, error) {
	var out []FolderActivity
	err := c.do(ctx, creds, "counting the folders' messages", true, func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		caps := cl.Caps()
		opts := &imap.ListOptions{}
		listStatus := caps.Has(imap.CapListStatus) || caps.Has(imap.CapIMAP4rev2)
		if listStatus {
			opts.ReturnStatus = folderStatus
		}
		data, err := cl.List("", pattern, opts).Collect()
		if err != nil {
			return imapError(err, "")
		}
		var pending []*statusWait
		for _, d := range data {
			if !selectable(d) {
				continue
			}
			f := FolderActivity{Folder: d.Mailbox}
			if d.Status != nil {
				f.Total, f.Unread = deref(d.Status.NumMessages), deref(d.Status.NumUnseen)
			} else {
				pending = append(pending, &statusWait{i: len(out), cmd: cl.Status(d.Mailbox, folderStatus)})
			}
			out = append(out, f)
		}
		for _, p := range pending {
			sd, err := p.cmd.Wait()
			if err != nil {
				if asIMAP(err, new(*imap.Error)) {
					continue // vanished between LIST and STATUS
				}
				return imapError(err, "")
			}
			out[p.i].Total, out[p.i].Unread = deref(sd.NumMessages), deref(sd.NumUnseen)
		}
		for i := range out {
			if out[i].Total == 0 {
				continue
			}
			if err := folderDetail(conn, &out[i], unread); err != nil {
				if mailerr.KindOf(err) == mailerr.NotFound {
					continue
				}
				return err
			}
		}
		return nil
	})
	return out, err
}

// folderDetail adds f's newest arrival and matching unread count: EXAMINE
// (fresh), FETCH of the last message's INTERNALDATE, and UID SEARCH UNSEEN
// HEADER checked exactly.
func folderDetail(conn *Conn, f *FolderActivity, unread *HeaderMatch) error {
	mb, err := conn.examineFresh(f.Folder)
	if err != nil {
		return err
	}
	cl := conn.client()
	if mb.NumMessages > 0 {
		bufs, err := cl.Fetch(imap.SeqSetNum(mb.NumMessages), &imap.FetchOptions{InternalDate: true}).Collect()
		if err != nil {
			return imapError(err, f.Folder)
		}
		for _, b := range bufs {
			f.Newest = b.InternalDate
		}
	}
	if unread == nil || f.Unread == 0 {
		return nil
	}
	data, err := cl.UIDSearch(&imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}, Header: []imap.SearchCriteriaHeaderField{unread.criterion()}}, nil).Wait()
	if err != nil {
		return imapError(err, f.Folder)
	}
	msgs, err := fetchHeaders(cl, f.Folder, data.AllUIDs(), []string{unread.Name})
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if unread.matches(m.Header) {
			f.UnreadMatching++
		}
	}
	return nil
}

// HeaderMessage is a message found by its header.
type HeaderMessage struct {
	UID  uint32
	Seen bool
	// Date is the message's internal date (its arrival in the folder).
	Date time.Time
	// Header holds the fields asked for, by lower-case name: each one's
	// first value, RFC 2047 decoded and sanitised to one line.
	Header map[string]string
	// Text is the start of the message's text, when asked for.
	Text string
}

// FindByHeader returns the messages of folder matching m, oldest (lowest
// UID) first, with the header fields asked for (m's own included) and,
// with textChars > 0, the first textChars characters of each one's text.
// Reading changes nothing (EXAMINE, BODY.PEEK).
func (c *Client) FindByHeader(ctx context.Context, creds credentials.Credentials, folder string, m HeaderMatch, fields []string, textChars int) ([]HeaderMessage, error) {
	fields = append([]string{m.Name}, fields...)
	var out []HeaderMessage
	err := c.do(ctx, creds, "searching the folder", true, func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examineFresh(folder); err != nil {
			return err
		}
		cl := conn.client()
		data, err := cl.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{m.criterion()}, NotFlag: []imap.Flag{imap.FlagDeleted}}, nil).Wait()
		if err != nil {
			return imapError(err, folder)
		}
		msgs, err := fetchHeaders(cl, folder, data.AllUIDs(), fields)
		if err != nil {
			return err
		}
		out = out[:0]
		for _, msg := range msgs {
			if !m.matches(msg.Header) {
				continue
			}
			if textChars > 0 {
				if full, err := readMessage(cl, folder, msg.UID, 0, textChars); err == nil {
					msg.Text = full.Text
				} else if mailerr.KindOf(err) != mailerr.NotFound {
					return err
				}
			}
			out = append(out, msg)
		}
		return nil
	})
	return out, err
}

// fetchHeaders reads fields, the flags and the internal date of uids of
// the selected folder, in UID order.
func fetchHeaders(cl *imapclient.Client, folder string, uids []imap.UID, fields []string) ([]HeaderMessage, error) {
	if len(uids) == 0 {
		return nil, nil
	}
	sec := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: fields, Peek: true}
	bufs, err := cl.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, Flags: true, InternalDate: true, BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
	if err != nil {
		return nil, imapError(err, folder)
	}
	out := make([]HeaderMessage, 0, len(bufs))
	for _, b := range bufs {
		if b.UID == 0 {
			continue
		}
		out = append(out, HeaderMessage{UID: uint32(b.UID), Seen: flagsOf(b.Flags).Seen, Date: b.InternalDate, Header: parseFields(b.FindBodySection(sec))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out, nil
}

// parseFields reads a header block into lower-case name -> first value,
// decoded and made one safe line. A damaged block gives what was read.
func parseFields(block []byte) map[string]string {
	out := map[string]string{}
	h, err := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(block)))
	if err != nil && !errors.Is(err, bufio.ErrBufferFull) && h.Len() == 0 {
		return out
	}
	fields := h.Fields()
	for fields.Next() {
		k := strings.ToLower(fields.Key())
		if _, seen := out[k]; !seen {
			out[k] = mailmsg.SanitizeLine(mailmsg.DecodeHeader(fields.Value()))
		}
	}
	return out
}

// SeenBefore returns the UIDs of folder's read messages that arrived
// before the day of before (IMAP's BEFORE compares dates, not times, in
// the server's time zone), not counting those marked \Deleted. A folder
// that does not exist has none. It also returns the folder's UIDVALIDITY
// (0 when there is no folder), which the UIDs belong to.
func (c *Client) SeenBefore(ctx context.Context, creds credentials.Credentials, folder string, before time.Time) ([]uint32, uint32, error) {
	var out []uint32
	var validity uint32
	err := c.do(ctx, creds, "searching the folder", true, func(ctx context.Context, conn *Conn) error {
		if _, err := conn.examineFresh(folder); err != nil {
			return err
		}
		validity = conn.uidValidity
		data, err := conn.client().UIDSearch(&imap.SearchCriteria{
			Flag: []imap.Flag{imap.FlagSeen}, NotFlag: []imap.Flag{imap.FlagDeleted}, Before: before,
		}, nil).Wait()
		if err != nil {
			return imapError(err, folder)
		}
		for _, u := range data.AllUIDs() {
			out = append(out, uint32(u))
		}
		return nil
	})
	if mailerr.KindOf(err) == mailerr.NotFound {
		return nil, 0, nil
	}
	return out, validity, err
}
