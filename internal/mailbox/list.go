package mailbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

// Limits of one page.
const (
	DefaultLimit = 20
	MaxLimit     = 100
	previewBytes = 600
	previewRunes = 200
)

// ListOptions select a page of a folder.
type ListOptions struct {
	Folder string // default INBOX
	Limit  int    // default 20, at most 100
	Cursor string // from a previous Page.NextCursor
}

// cursor is the position after a page: every message with a UID below
// Before comes next. It is bound to the folder, its UIDVALIDITY and (for
// searches) the query, so it cannot be replayed against something else.
type cursor struct {
	V      int    `json:"v"`
	Folder string `json:"f"`
	UV     uint32 `json:"uv"`
	Before uint32 `json:"b"`
	Query  string `json:"q,omitempty"`
}

func (cu cursor) encode() string {
	b, _ := json.Marshal(cu)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s, folder, query string) (*cursor, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var cu cursor
	if err != nil || json.Unmarshal(b, &cu) != nil || cu.V != 1 || cu.Before == 0 {
		return nil, mailerr.New(mailerr.BadInput, "invalid cursor: pass next_cursor from a previous result unchanged")
	}
	if cu.Folder != folder {
		return nil, mailerr.Newf(mailerr.BadInput, "this cursor belongs to folder %q, not %q", cu.Folder, folder)
	}
	if cu.Query != query {
		return nil, mailerr.New(mailerr.BadInput, "this cursor belongs to a different search; start again without a cursor")
	}
	return &cu, nil
}

func queryKey(q string) string {
	if q == "" {
		return ""
	}
	h := sha256.Sum256([]byte(q))
	return base64.RawURLEncoding.EncodeToString(h[:9])
}

func normFolder(f string) string {
	f = strings.TrimSpace(f)
	if f == "" || strings.EqualFold(f, "INBOX") {
		return "INBOX"
	}
	return f
}

// ListEmails returns a page of a folder, newest first. The first page costs
// the same whatever the folder's size: the newest messages are the highest
// sequence numbers, known from the message count without any search.
func (c *Client) ListEmails(ctx context.Context, creds credentials.Credentials, o ListOptions) (*Page, error) {
	folder := normFolder(o.Folder)
	limit, err := checkLimit(o.Limit)
	if err != nil {
		return nil, err
	}
	cur, err := decodeCursor(o.Cursor, folder, "")
	if err != nil {
		return nil, err
	}
	var page *Page
	err = c.do(ctx, creds, true, func(ctx context.Context, conn *Conn) error {
		mb, err := conn.examine(folder)
		if err != nil {
			return err
		}
		cl := conn.client()
		status := cl.Status(folder, &imap.StatusOptions{NumMessages: true, NumUnseen: true, UIDValidity: true})
		var set imap.SeqSet
		if cur == nil {
			n := mb.NumMessages
			if n > 0 {
				// "*" rather than n: mail that arrived since the last
				// command is included, and the server announces it first.
				set.AddRange(uint32(max(1, int64(n)-int64(limit)+1)), 0)
			}
		} else {
			below, err := countBelow(cl, cur.Before)
			if err != nil {
				return err
			}
			if below > 0 {
				set.AddRange(uint32(max(1, int64(below)-int64(limit)+1)), below)
			}
		}
		var msgs []Summary
		if len(set) > 0 {
			msgs, err = fetchSummaries(cl, set, folder)
			if err != nil {
				return err
			}
		}
		sd, err := status.Wait()
		if err != nil {
			return imapError(err, folder)
		}
		if cur != nil && sd.UIDValidity != cur.UV {
			return uidValidityChanged(folder)
		}
		if cur != nil {
			msgs = slices.DeleteFunc(msgs, func(m Summary) bool { return m.UID >= cur.Before })
		}
		msgs = newestFirst(msgs, limit)
		page = &Page{Folder: folder, UIDValidity: sd.UIDValidity, Total: deref(sd.NumMessages), Unread: deref(sd.NumUnseen), Messages: msgs}
		if len(msgs) == limit && msgs[len(msgs)-1].UID > 1 {
			page.NextCursor = cursor{V: 1, Folder: folder, UV: sd.UIDValidity, Before: msgs[len(msgs)-1].UID}.encode()
		}
		if page.Messages == nil {
			page.Messages = []Summary{}
		}
		return nil
	})
	return page, err
}

func uidValidityChanged(folder string) error {
	return mailerr.Newf(mailerr.BadInput, "folder %q was rebuilt on the server (UIDVALIDITY changed), so this cursor is no longer valid; start again without a cursor", folder)
}

func checkLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultLimit, nil
	case limit < 0 || limit > MaxLimit:
		return 0, mailerr.Newf(mailerr.BadInput, "limit must be between 1 and %d", MaxLimit)
	}
	return limit, nil
}

// newestFirst sorts by UID, highest first, and keeps at most limit.
func newestFirst(msgs []Summary, limit int) []Summary {
	slices.SortFunc(msgs, func(a, b Summary) int { return int(int64(b.UID) - int64(a.UID)) })
	if len(msgs) > limit {
		msgs = msgs[:limit]
	}
	return msgs
}

// countBelow returns how many messages have a UID below uid, which is also
// the sequence number of the newest of them (sequence order is UID order).
func countBelow(cl *imapclient.Client, uid uint32) (uint32, error) {
	if uid <= 1 {
		return 0, nil
	}
	crit := &imap.SearchCriteria{UID: []imap.UIDSet{{imap.UIDRange{Start: 1, Stop: imap.UID(uid - 1)}}}}
	if cl.Caps().Has(imap.CapESearch) || cl.Caps().Has(imap.CapIMAP4rev2) {
		d, err := cl.Search(crit, &imap.SearchOptions{ReturnCount: true}).Wait()
		if err != nil {
			return 0, imapError(err, "")
		}
		return d.Count, nil
	}
	d, err := cl.Search(crit, nil).Wait()
	if err != nil {
		return 0, imapError(err, "")
	}
	return uint32(len(d.AllSeqNums())), nil
}

var summaryFetch = &imap.FetchOptions{
	UID: true, Flags: true, Envelope: true, RFC822Size: true, InternalDate: true,
	BodyStructure: &imap.FetchItemBodyStructure{Extended: true},
	BodySection: []*imap.FetchItemBodySection{{
		Specifier: imap.PartSpecifierText, Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: previewBytes},
	}},
}

// fetchSummaries fetches list items for a sequence or UID set, streaming.
func fetchSummaries(cl *imapclient.Client, set imap.NumSet, folder string) ([]Summary, error) {
	cmd := cl.Fetch(set, summaryFetch)
	defer cmd.Close()
	var out []Summary
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		var s Summary
		var bs imap.BodyStructure
		var text []byte
		var internal time.Time
		for item := msg.Next(); item != nil; item = msg.Next() {
			switch it := item.(type) {
			case imapclient.FetchItemDataUID:
				s.UID = uint32(it.UID)
			case imapclient.FetchItemDataFlags:
				s.Flags = flagsOf(it.Flags)
			case imapclient.FetchItemDataRFC822Size:
				s.Size = it.Size
			case imapclient.FetchItemDataInternalDate:
				internal = it.Time
			case imapclient.FetchItemDataEnvelope:
				env := it.Envelope
				s.From = firstAddress(env.From)
				s.To, s.Cc = addressesOf(env.To), addressesOf(env.Cc)
				s.Subject = mailmsg.SanitizeLine(env.Subject)
				s.Date = env.Date
			case imapclient.FetchItemDataBodyStructure:
				bs = it.BodyStructure
			case imapclient.FetchItemDataBodySection:
				if it.Literal != nil {
					text = readAtMost(it.Literal, previewBytes)
				}
			}
		}
		if s.UID == 0 {
			continue // an unsolicited FETCH (flag change) for another message
		}
		if s.Date.IsZero() {
			s.Date = internal
		}
		if bs != nil {
			s.HasAttachments = hasAttachments(bs)
			s.Preview = preview(bs, text)
		}
		out = append(out, s)
	}
	if err := cmd.Close(); err != nil {
		return nil, imapError(err, folder)
	}
	return out, nil
}

// preview is a short text for single-part text messages, from the first
// bytes of the body fetched with the list; other shapes get none (it would
// cost another round trip).
func preview(bs imap.BodyStructure, head []byte) string {
	sp, ok := bs.(*imap.BodyStructureSinglePart)
	if !ok || len(head) == 0 || !strings.EqualFold(sp.Type, "text") {
		return ""
	}
	enc := strings.ToLower(sp.Encoding)
	if enc == "base64" {
		// Decode whole 4-character groups only.
		clean := strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' || r == ' ' {
				return -1
			}
			return r
		}, string(head))
		head = []byte(clean[:len(clean)/4*4])
	}
	text, _ := mailmsg.DecodeText(bytes.NewReader(head), mailmsg.Part{
		MediaType: sp.MediaType(), Charset: sp.Params["charset"], Encoding: enc,
	})
	return mailmsg.Preview(text, previewRunes)
}

func readAtMost(r interface{ Read([]byte) (int, error) }, n int) []byte {
	buf := make([]byte, n)
	got := 0
	for got < n {
		k, err := r.Read(buf[got:])
		got += k
		if err != nil {
			break
		}
	}
	return buf[:got]
}

// examine makes folder the connection's selected mailbox, read-only, unless
// it already is: re-selecting costs time in proportion to the folder size.
// It returns the client's view of the mailbox. The client's own state is
// the truth (the server can close the mailbox or the connection at any time).
func (conn *Conn) examine(folder string) (*imapclient.SelectedMailbox, error) {
	if mb := conn.client().Mailbox(); mb != nil && conn.selected == folder && !conn.selectedRW {
		return mb, nil
	}
	data, err := conn.sel(folder, true)
	if err != nil {
		return nil, err
	}
	// go-imap (v2.0.0-beta.8) lets Select's Wait return before its reader
	// goroutine records the selected mailbox, so right after a SELECT the
	// client may not know it yet: the SELECT's own answer is the truth then.
	if mb := conn.client().Mailbox(); mb != nil && mb.Name == folder {
		return mb, nil
	}
	return &imapclient.SelectedMailbox{
		Name:           folder,
		NumMessages:    data.NumMessages,
		Flags:          data.Flags,
		PermanentFlags: data.PermanentFlags,
	}, nil
}

func (conn *Conn) sel(folder string, readOnly bool) (*imap.SelectData, error) {
	conn.selected = ""
	data, err := conn.client().Select(folder, &imap.SelectOptions{ReadOnly: readOnly}).Wait()
	if err != nil {
		return nil, imapError(err, folder)
	}
	conn.selected, conn.selectedRW, conn.uidValidity = folder, !readOnly, data.UIDValidity
	return data, nil
}
