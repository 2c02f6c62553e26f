package mailbox

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
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
	// previewBytes is what a list fetches of part 1 of each message: room
	// for the MIME headers in front of a nested text part and for the
	// markup in front of an HTML body's first words.
	previewBytes = 2048
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
		return nil, mailerr.New(mailerr.BadInput, "invalid cursor: it is not a next_cursor value this gateway made").About(mailerr.SubjectCursor)
	}
	if cu.Folder != folder {
		return nil, mailerr.Newf(mailerr.BadInput, "this cursor belongs to folder %s, not %s", quote(cu.Folder), quote(folder)).About(mailerr.SubjectCursor)
	}
	if cu.Query != query {
		return nil, mailerr.New(mailerr.BadInput, "this cursor belongs to a different search").About(mailerr.SubjectCursor)
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
	folder, err := c.folderArg(ctx, creds, o.Folder)
	if err != nil {
		return nil, err
	}
	limit, err := checkLimit(o.Limit)
	if err != nil {
		return nil, err
	}
	cur, err := decodeCursor(o.Cursor, folder, "")
	if err != nil {
		return nil, err
	}
	var page *Page
	err = c.doIn(ctx, creds, folder, "listing the messages", func(ctx context.Context, conn *Conn) error {
		cl := conn.client()
		reused := conn.selected == folder && !conn.selectedRW && cl.Mailbox() != nil && conn.opened == nil
		mb, err := conn.examine(folder)
		if err != nil {
			return err
		}
		if reused {
			// Courier answers STATUS of the selected folder from the
			// session's view, which only a command brings up to date:
			// pipelined, the NOOP costs no round trip.
			cl.Noop()
		}
		status := cl.Status(folder, pageStatus)
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
			msgs, err = fetchSummaries(cl, set)
			if err != nil {
				return err
			}
		}
		if cur != nil {
			msgs = slices.DeleteFunc(msgs, func(m Summary) bool { return m.UID >= cur.Before })
		}
		if page, err = conn.newPage(folder, status, cur, msgs, limit); err != nil {
			return err
		}
		if n := len(page.Messages); n == limit && page.Messages[n-1].UID > 1 {
			page.NextCursor = cursor{V: 1, Folder: folder, UV: page.UIDValidity, Before: page.Messages[n-1].UID}.encode()
		}
		return nil
	})
	return page, err
}

// pageStatus is what a page says about its folder.
var pageStatus = &imap.StatusOptions{NumMessages: true, NumUnseen: true, UIDValidity: true}

// newPage makes the page of msgs (newest first, at most limit) once the
// folder's STATUS is in, refusing a cursor from before the folder was
// rebuilt.
func (conn *Conn) newPage(folder string, status *imapclient.StatusCommand, cur *cursor, msgs []Summary, limit int) (*Page, error) {
	sd, err := status.Wait()
	if err != nil {
		return nil, imapError(err, folder)
	}
	if cur != nil && sd.UIDValidity != cur.UV {
		return nil, uidValidityChanged(folder)
	}
	msgs = newestFirst(msgs, limit)
	if msgs == nil {
		msgs = []Summary{}
	}
	return &Page{Folder: folder, Role: conn.role, UIDValidity: sd.UIDValidity, Total: deref(sd.NumMessages), Unread: deref(sd.NumUnseen), Messages: msgs}, nil
}

func uidValidityChanged(folder string) error {
	return mailerr.Newf(mailerr.BadInput, "folder %s was rebuilt on the server (UIDVALIDITY changed), so this cursor no longer applies", quote(folder)).About(mailerr.SubjectCursor)
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

// summaryFetch asks for the first bytes of part 1 for the preview: part 1
// exists in every message (the body of a single-part message, the first
// part of a multipart), so no server refuses it, and the body structure
// says where in it the first text part lies.
var summaryFetch = &imap.FetchOptions{
	UID: true, Flags: true, Envelope: true, RFC822Size: true, InternalDate: true,
	BodyStructure: &imap.FetchItemBodyStructure{Extended: true},
	BodySection:   []*imap.FetchItemBodySection{previewSection, tagHeaderSection},
}

var previewSection = &imap.FetchItemBodySection{Part: []int{1}, Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: previewBytes}}

// fetchSummaries fetches list items for a sequence or UID set, streaming.
func fetchSummaries(cl *imapclient.Client, set imap.NumSet) ([]Summary, error) {
	cmd := cl.Fetch(set, summaryFetch)
	defer cmd.Close()
	var out []Summary
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		var s Summary
		var bs imap.BodyStructure
		var head []byte
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
				switch {
				case it.Literal == nil:
				case it.MatchCommand(tagHeaderSection):
					s.Tags = headerTags(readAtMost(it.Literal, 4096))
				default:
					head = readAtMost(it.Literal, previewBytes)
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
			s.Preview = preview(bs, head)
		}
		out = append(out, s)
	}
	if err := cmd.Close(); err != nil {
		return nil, imapError(err, "")
	}
	return out, nil
}

// headerTags reads the tags of an X-Mailbox-Tags header block.
func headerTags(block []byte) []string {
	_, v, ok := strings.Cut(string(block), ":")
	if !ok {
		return nil
	}
	return mailmsg.ParseTags(unfold.Replace(strings.TrimSpace(v)))
}

// unfold joins a folded header value's lines.
var unfold = strings.NewReplacer("\r\n ", " ", "\r\n\t", " ")

// preview is a one-line start of the body's first text part (the part a
// read shows first), from head, the first bytes of part 1. When that part
// lies inside part 1, the multipart boundaries lead to it. A message whose
// first text part is not in part 1 (an attachment comes first, or a
// multipart/alternative puts its text/plain second), or starts beyond the
// bytes fetched (a long MIME preamble or a deep nesting), gets none: finding
// it would cost another round trip.
func preview(bs imap.BodyStructure, head []byte) string {
	texts := bodyTexts(bs)
	if len(texts) == 0 || len(head) == 0 || texts[0].path[0] != 1 {
		return ""
	}
	t := texts[0]
	if mp, ok := bs.(*imap.BodyStructureMultiPart); ok {
		// Part 1 itself, then down from it: each step is a multipart's
		// boundary and the child to enter.
		var steps []mailmsg.Nested
		cur := mp.Children[0]
		for _, n := range t.path[1:] {
			m, ok := cur.(*imap.BodyStructureMultiPart)
			if !ok || m.Extended == nil {
				return ""
			}
			steps = append(steps, mailmsg.Nested{Boundary: m.Extended.Params["boundary"], Index: n})
			cur = m.Children[n-1]
		}
		head = mailmsg.NestedBody(head, steps)
	}
	return mailmsg.HeadPreview(head, t.part, previewRunes)
}

// readAtMost reads up to n bytes of a literal. The buffer is the
// literal's own size when that is smaller: most are (an empty tags header
// is 2 bytes, a short body a few hundred), and a list makes 40 of them.
func readAtMost(r imap.LiteralReader, n int) []byte {
	if size := r.Size(); size >= 0 && size < int64(n) {
		n = int(size)
	}
	buf := make([]byte, n)
	got, _ := io.ReadFull(r, buf)
	return buf[:got]
}

// examine makes folder the connection's selected mailbox, read-only, unless
// it already is: re-selecting costs time in proportion to the folder size.
// It returns the client's view of the mailbox. The client's own state is
// the truth (the server can close the mailbox or the connection at any time).
// An EXAMINE of folder the call's opening sent is read here.
func (conn *Conn) examine(folder string) (*imapclient.SelectedMailbox, error) {
	return conn.examineWith(folder, nil)
}

// examineWith is examine that sends the commands of send (nil: none) in
// the EXAMINE's flight when the folder is not selected yet, or at once.
// They must be read-only and need no answer of the EXAMINE: they fail with
// it, and examineWith reports the EXAMINE's error.
func (conn *Conn) examineWith(folder string, send func()) (*imapclient.SelectedMailbox, error) {
	data, err, sent := conn.takeOpened(folder, true)
	if !sent {
		if mb := conn.client().Mailbox(); mb != nil && conn.selected == folder && !conn.selectedRW {
			if send != nil {
				send()
			}
			return mb, nil
		}
		conn.selected, conn.role = "", ""
		cl := conn.client()
		s := startSelect(cl, folder, true, false, cl.Caps().Has(imap.CapSpecialUse))
		if send != nil {
			send()
		}
		data, err = conn.finishSelect(s)
	} else if send != nil {
		send()
	}
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

// sel selects folder and learns its special-use role with a LIST sent
// right behind the SELECT (no extra round trip).
func (conn *Conn) sel(folder string, readOnly bool) (*imap.SelectData, error) {
	conn.settleOpening()
	conn.selected, conn.role = "", ""
	cl := conn.client()
	return conn.finishSelect(startSelect(cl, folder, readOnly, false, cl.Caps().Has(imap.CapSpecialUse)))
}

// selecting is a SELECT or EXAMINE in flight, with the LIST that learns
// the folder's special-use role when asked for.
type selecting struct {
	folder   string
	readOnly bool
	sel      *imapclient.SelectCommand
	list     *imapclient.ListCommand // nil: the role is not asked
}

// startSelect sends SELECT (EXAMINE when readOnly) of folder, with the
// CONDSTORE parameter when condStore, and with role the LIST that learns
// its special-use role, without waiting.
func startSelect(cl *imapclient.Client, folder string, readOnly, condStore, role bool) *selecting {
	s := &selecting{folder: folder, readOnly: readOnly, sel: cl.Select(folder, &imap.SelectOptions{ReadOnly: readOnly, CondStore: condStore})}
	if role {
		s.list = cl.List("", folder, &imap.ListOptions{ReturnSpecialUse: true})
	}
	return s
}

// finishSelect waits for s and records its folder as the selected one,
// with its role; a failed SELECT records nothing.
func (conn *Conn) finishSelect(s *selecting) (*imap.SelectData, error) {
	data, err := s.sel.Wait()
	role := ""
	if s.list != nil {
		// A failed LIST leaves the role unknown; the SELECT decides. The
		// server may lack SPECIAL-USE when the LIST went out before its
		// capabilities were known (sendLogin): the answer is then ignored.
		ld, _ := s.list.Collect()
		for _, d := range ld {
			if d.Mailbox == s.folder && conn.client().Caps().Has(imap.CapSpecialUse) {
				role = roleOf(d)
			}
		}
	}
	if err != nil {
		return nil, conn.folderError(err, s.folder, "open")
	}
	if role == "" && s.folder == "INBOX" {
		role = "inbox"
	}
	if role == "" && conn.srv != nil && !conn.srv.HasSpecialUse() {
		role = conn.srv.Namespace.roleByName(s.folder)
	}
	conn.selected, conn.selectedRW, conn.uidValidity, conn.role = s.folder, !s.readOnly, data.UIDValidity, role
	conn.uidNext = uint32(data.UIDNext)
	conn.modSeqs = data.HighestModSeq != 0
	return data, nil
}
