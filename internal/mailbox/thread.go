package mailbox

// A conversation from one message: every message linked to it by
// Message-ID, In-Reply-To and References, across its folder, INBOX, the
// Sent folder and folders the caller names. In the message's own folder the
// server's THREAD gives the first candidates (REFS, Dovecot's REFERENCES
// without the merging of threads by subject, where offered); header
// searches for the ids known so far find the rest, in every folder, until
// no new id turns up. A candidate joins only when its own ids link it to
// the conversation, so a subject that merely matches never does.

import (
	"bytes"
	"context"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
)

const (
	// MaxThreadMessages is the most messages a thread returns (the
	// newest); Truncated says when there were more.
	MaxThreadMessages = 200
	// MaxThreadFolders is the most extra folders a thread may search.
	MaxThreadFolders = 10

	threadSnippetRunes = 300
	threadSnippetBytes = 4096
	// maxThreadRounds bounds the rounds of searching for new ids.
	maxThreadRounds = 6
	// threadIDsPerSearch is how many ids one SEARCH looks for (three
	// headers each, OR-ed).
	threadIDsPerSearch = 20
	// threadREFS is Dovecot's REFERENCES without subject merging.
	threadREFS imap.ThreadAlgorithm = "REFS"
)

// Location is where one copy of a message is.
type Location struct {
	Folder string `json:"folder"`
	UID    uint32 `json:"uid"`
}

// ThreadMessage is one message of a conversation.
type ThreadMessage struct {
	Folder string `json:"folder"`
	UID    uint32 `json:"uid"`
	// AlsoIn lists the other copies of the same message (same
	// Message-ID) in the folders searched: a message sent to oneself, or
	// kept in Sent and received back.
	AlsoIn    []Location `json:"also_in,omitempty" desc:"other folders holding a copy of this message (same Message-ID)"`
	From      *Address   `json:"from,omitempty"`
	To        []Address  `json:"to,omitempty"`
	Cc        []Address  `json:"cc,omitempty"`
	Subject   string     `json:"subject"`
	Date      time.Time  `json:"date"`
	MessageID string     `json:"message_id,omitempty"`
	InReplyTo string     `json:"in_reply_to,omitempty" desc:"the Message-ID of the message this one answers"`
	Flags     Flags      `json:"flags"`
	Tags      []string   `json:"tags,omitempty"`
	// Snippet is the start of the first text part, about 300 characters.
	Snippet string `json:"snippet" desc:"the start of the message's text, about 300 characters"`
}

// ThreadResult is a conversation, oldest first.
type ThreadResult struct {
	Messages  []ThreadMessage `json:"messages"`
	Folders   []string        `json:"folders" desc:"the folders searched"`
	Truncated bool            `json:"truncated" desc:"true when the conversation has more than 200 messages: the newest 200 are listed"`
}

// Thread returns the conversation of message uid in folder: every message
// linked to it by Message-ID, In-Reply-To and References in folder, INBOX,
// the Sent folder (found as SaveSent finds it) and alsoFolders, oldest
// first, one entry per Message-ID (the copy in folder, else one outside
// Sent, with the others in AlsoIn), each with a short snippet of its text.
// Nothing is changed (EXAMINE, BODY.PEEK).
func (c *Client) Thread(ctx context.Context, creds credentials.Credentials, folder string, uid uint32, alsoFolders []string) (*ThreadResult, error) {
	folder, err := c.folderArg(ctx, creds, folder)
	if err != nil {
		return nil, err
	}
	if uid == 0 {
		return nil, badUID()
	}
	if len(alsoFolders) > MaxThreadFolders {
		return nil, mailerr.Newf(mailerr.BadInput, "at most %d extra folders can be searched", MaxThreadFolders)
	}
	also := make([]string, 0, len(alsoFolders))
	for _, f := range alsoFolders {
		if strings.TrimSpace(f) == "" {
			continue
		}
		p, err := c.folderArg(ctx, creds, f)
		if err != nil {
			return nil, err
		}
		also = append(also, p)
	}
	alsoFolders = also
	var out *ThreadResult
	// The message's FETCH and the server's THREAD go with the EXAMINE
	// (behind the LOGIN on a new connection), or behind a NOOP on a
	// connection that has the folder open, asked again if the server
	// reported a change meanwhile (opening.go).
	var first threadStart
	send := func(conn *Conn, caps imap.CapSet) { first.send(conn.client(), uid, caps) }
	open := &opening{folder: folder, fresh: true, send: send}
	err = c.doOpen(ctx, creds, open, "collecting the conversation", true, func(ctx context.Context, conn *Conn) error {
		defer first.seed.Close()
		t := &threadWalk{conn: conn, known: map[Location]*threadMsg{}, members: map[Location]bool{},
			ids: map[string]bool{}, searched: map[string]map[string]bool{}}
		if _, err := conn.examine(folder); err != nil {
			first.seed.Close()
			first.wait()
			return err
		}
		if first.read(t, folder, uid); conn.stale() {
			t.known = map[Location]*threadMsg{}
			send(conn, conn.client().Caps())
			first.read(t, folder, uid)
		}
		var err error
		out, err = t.run(folder, uid, alsoFolders, &first)
		return err
	})
	return out, err
}

// threadStart is a thread's first flight: the message's FETCH and, where
// the server can thread, its THREAD of the folder.
type threadStart struct {
	seed      *imapclient.FetchCommand
	thread    *imapclient.ThreadCommand // nil: the server cannot thread
	seedMsg   []*threadMsg
	seedErr   error
	data      []imapclient.ThreadData
	threadErr error
}

func (s *threadStart) send(cl *imapclient.Client, uid uint32, caps imap.CapSet) {
	s.seed = cl.Fetch(imap.UIDSetNum(imap.UID(uid)), threadFetch)
	s.thread = nil
	if algo := threadAlgorithm(caps); algo != "" {
		s.thread = cl.UIDThread(&imapclient.ThreadOptions{Algorithm: algo, SearchCriteria: &imap.SearchCriteria{}})
	}
}

// read reads the answers (the seed's FETCH first: it streams).
func (s *threadStart) read(t *threadWalk, folder string, uid uint32) {
	s.seedMsg, s.seedErr = t.collect(folder, []imap.UID{imap.UID(uid)}, s.seed)
	s.wait()
}

// wait waits for the THREAD.
func (s *threadStart) wait() {
	s.data, s.threadErr = nil, nil
	if s.thread != nil {
		s.data, s.threadErr = s.thread.Wait()
	}
}

// threadAlgorithm is the THREAD algorithm the walk asks for among caps
// (REFS, else REFERENCES), "" when the server has neither.
func threadAlgorithm(caps imap.CapSet) imap.ThreadAlgorithm {
	var algo imap.ThreadAlgorithm
	for _, a := range caps.ThreadAlgorithms() {
		switch {
		case strings.EqualFold(string(a), string(threadREFS)):
			algo = threadREFS
		case strings.EqualFold(string(a), string(imap.ThreadReferences)) && algo == "":
			algo = imap.ThreadReferences
		}
	}
	return algo
}

// threadMsg is what the walk knows of one copy of a message.
type threadMsg struct {
	loc      Location
	id       string   // Message-ID, without brackets
	links    []string // In-Reply-To and References ids
	sum      Summary
	bs       imap.BodyStructure
	tags     []string
	inReply  string
	internal time.Time
	part1    []byte // the start of part 1 (threadFirstPart), nil if none came
}

type threadWalk struct {
	conn      *Conn
	folders   []string
	sent      string
	known     map[Location]*threadMsg
	members   map[Location]bool
	ids       map[string]bool            // the conversation's message ids
	searched  map[string]map[string]bool // folder -> ids searched there
	truncated bool
}

// run walks the conversation from message uid of folder, the selected
// one, with the first flight's answers.
func (t *threadWalk) run(folder string, uid uint32, also []string, first *threadStart) (*ThreadResult, error) {
	seed, err := first.seedMsg, first.seedErr
	if err != nil {
		return nil, err
	}
	if len(seed) == 0 {
		return nil, noMessage(uid, folder)
	}
	t.join(seed[0])
	threaded, err := t.fromThread(folder, uid, first)
	if err != nil {
		return nil, err
	}
	if threaded {
		// The server's thread holds every message of folder that links to
		// the ids it brings: they need no search there.
		t.close()
		t.searched[folder] = map[string]bool{}
		for id := range t.ids {
			t.searched[folder][id] = true
		}
	}
	sent, err := t.conn.sentFolder()
	if err != nil {
		return nil, err
	}
	t.sent = sent
	t.folders = []string{folder}
	var named []string
	for i, f := range append([]string{"INBOX", sent}, also...) {
		if strings.TrimSpace(f) == "" {
			continue
		}
		f = normFolder(f)
		if i >= 2 {
			named = append(named, f)
		}
		if !slices.Contains(t.folders, f) {
			t.folders = append(t.folders, f)
		}
	}
	t.close()
	for round := 0; round < maxThreadRounds && !t.truncated; round++ {
		progress := false
		for _, f := range t.folders {
			did, err := t.searchIn(f, !slices.Contains(named, f))
			if err != nil {
				return nil, err
			}
			progress = progress || did
			t.close()
			if t.truncated {
				break
			}
		}
		if !progress {
			break
		}
	}
	return t.result(folder)
}

// fromThread adds the server's thread of uid in folder (the selected one),
// first's THREAD, to the candidates, where the server can thread, and says
// whether it did.
func (t *threadWalk) fromThread(folder string, uid uint32, first *threadStart) (bool, error) {
	if first.thread == nil || first.threadErr != nil {
		// The searches find the conversation anyway.
		return false, nil
	}
	data := first.data
	var uids []imap.UID
	for _, tree := range data {
		if all := threadUIDs(tree); slices.Contains(all, uid) {
			for _, u := range all {
				uids = append(uids, imap.UID(u))
			}
			break
		}
	}
	if len(uids) > 4*MaxThreadMessages {
		uids, t.truncated = uids[len(uids)-4*MaxThreadMessages:], true
	}
	if _, err := t.fetch(folder, uids); err != nil {
		return false, err
	}
	return true, nil
}

func threadUIDs(d imapclient.ThreadData) []uint32 {
	out := slices.Clone(d.Chain)
	for _, s := range d.SubThreads {
		out = append(out, threadUIDs(s)...)
	}
	return out
}

// searchIn looks in folder for the conversation's ids not yet looked for
// there, and fetches what is new. A folder that does not exist is an error
// when the caller named it (required), else skipped.
func (t *threadWalk) searchIn(folder string, optional bool) (bool, error) {
	done := t.searched[folder]
	if done == nil {
		done = map[string]bool{}
		t.searched[folder] = done
	}
	var ids []string
	for id := range t.ids {
		if !done[id] {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return false, nil
	}
	slices.Sort(ids)
	// The first search goes with the EXAMINE of a folder not open yet; on
	// the open one (the walk began there, fresh) at once.
	var firstSearch *imapclient.SearchCommand
	first := ids[:min(threadIDsPerSearch, len(ids))]
	if _, err := t.conn.examineWith(folder, func() { firstSearch = t.conn.client().UIDSearch(idCriteria(first), nil) }); err != nil {
		if firstSearch != nil {
			firstSearch.Wait()
		}
		if optional && mailerr.KindOf(err) == mailerr.NotFound {
			for _, id := range ids {
				done[id] = true
			}
			return false, nil
		}
		return false, err
	}
	cl := t.conn.client()
	var found []imap.UID
	for start := 0; start < len(ids); start += threadIDsPerSearch {
		chunk := ids[start:min(start+threadIDsPerSearch, len(ids))]
		search := firstSearch
		if start > 0 {
			search = cl.UIDSearch(idCriteria(chunk), nil)
		}
		d, err := search.Wait()
		if err != nil {
			return false, searchError(err, folder)
		}
		for _, u := range d.AllUIDs() {
			if t.known[Location{folder, uint32(u)}] == nil && !slices.Contains(found, u) {
				found = append(found, u)
			}
		}
		for _, id := range chunk {
			done[id] = true
		}
	}
	slices.Sort(found)
	if len(found) > 4*MaxThreadMessages {
		found, t.truncated = found[len(found)-4*MaxThreadMessages:], true
	}
	_, err := t.fetch(folder, found)
	return true, err
}

// idCriteria matches a message whose Message-ID, References or
// In-Reply-To mentions one of ids: a balanced tree of ORs.
func idCriteria(ids []string) *imap.SearchCriteria {
	var terms []imap.SearchCriteria
	for _, id := range ids {
		for _, h := range []string{"Message-ID", "References", "In-Reply-To"} {
			terms = append(terms, imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: h, Value: "<" + id + ">"}}})
		}
	}
	for len(terms) > 1 {
		var next []imap.SearchCriteria
		for i := 0; i < len(terms); i += 2 {
			if i+1 == len(terms) {
				next = append(next, terms[i])
				break
			}
			next = append(next, imap.SearchCriteria{Or: [][2]imap.SearchCriteria{{terms[i], terms[i+1]}}})
		}
		terms = next
	}
	return &terms[0]
}

// threadFetch is what the walk reads of a candidate: with the start of
// part 1, which is the snippet's text in most messages (a single part, or
// a plain text first part), so that its snippet needs no FETCH of its own.
var threadFetch = &imap.FetchOptions{
	UID: true, Flags: true, Envelope: true, InternalDate: true,
	BodyStructure: &imap.FetchItemBodyStructure{Extended: true},
	BodySection:   []*imap.FetchItemBodySection{threadHeaderSection, threadFirstPart},
}

var threadFirstPart = &imap.FetchItemBodySection{Part: []int{1}, Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: threadSnippetBytes}}

var threadHeaderSection = &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader,
	HeaderFields: []string{"Message-ID", "In-Reply-To", "References", TagsHeader}, Peek: true}

// fetch reads uids of folder (the selected one) into known and returns them.
func (t *threadWalk) fetch(folder string, uids []imap.UID) ([]*threadMsg, error) {
	if len(uids) == 0 {
		return nil, nil
	}
	return t.collect(folder, uids, t.conn.client().Fetch(imap.UIDSetNum(uids...), threadFetch))
}

// collect is fetch once its FETCH (threadFetch of uids) is sent.
func (t *threadWalk) collect(folder string, uids []imap.UID, cmd *imapclient.FetchCommand) ([]*threadMsg, error) {
	bufs, err := cmd.Collect()
	if err != nil {
		return nil, imapError(err, folder)
	}
	var out []*threadMsg
	for _, b := range bufs {
		if b.UID == 0 || !slices.Contains(uids, b.UID) || b.Envelope == nil {
			continue
		}
		m := &threadMsg{loc: Location{folder, uint32(b.UID)}, bs: b.BodyStructure, internal: b.InternalDate}
		env := b.Envelope
		m.sum = Summary{UID: uint32(b.UID), From: firstAddress(env.From), To: addressesOf(env.To), Cc: addressesOf(env.Cc),
			Subject: mailmsg.SanitizeLine(env.Subject), Date: env.Date, Flags: flagsOf(b.Flags)}
		if m.sum.Date.IsZero() {
			m.sum.Date = b.InternalDate
		}
		var h mail.Header
		raw := b.FindBodySection(threadHeaderSection)
		if msg, err := mail.ReadMessage(bytes.NewReader(append(bytes.TrimRight(raw, "\r\n"), "\r\n\r\n"...))); err == nil {
			h = msg.Header
		}
		if ids := msgIDs(h.Get("Message-ID")); len(ids) > 0 {
			m.id = ids[0]
		} else if mailmsg.ValidMessageID(env.MessageID) {
			m.id = env.MessageID
		}
		inReply := msgIDs(h.Get("In-Reply-To"))
		if len(inReply) > 0 {
			m.inReply = inReply[0]
		}
		m.links = append(inReply, msgIDs(strings.Join(h["References"], " "))...)
		m.tags = mailmsg.ParseTags(strings.Join(h[TagsHeader], ","))
		m.part1 = b.FindBodySection(threadFirstPart)
		t.known[m.loc] = m
		out = append(out, m)
	}
	return out, nil
}

// join makes m part of the conversation, with its ids.
func (t *threadWalk) join(m *threadMsg) {
	t.members[m.loc] = true
	if m.id != "" {
		t.ids[m.id] = true
	}
	for _, l := range m.links {
		t.ids[l] = true
	}
	if len(t.members) >= 4*MaxThreadMessages {
		t.truncated = true
	}
}

// close joins every known message linked to the conversation, until none
// is left to join.
func (t *threadWalk) close() {
	for changed := true; changed && !t.truncated; {
		changed = false
		for loc, m := range t.known {
			if t.members[loc] || !t.linked(m) {
				continue
			}
			t.join(m)
			changed = true
		}
	}
}

func (t *threadWalk) linked(m *threadMsg) bool {
	if m.id != "" && t.ids[m.id] {
		return true
	}
	return slices.ContainsFunc(m.links, func(id string) bool { return t.ids[id] })
}

// result keeps one copy per Message-ID, adds the snippets and sorts.
func (t *threadWalk) result(folder string) (*ThreadResult, error) {
	rank := func(m *threadMsg) int {
		switch {
		case m.loc.Folder == folder:
			return 0
		case m.loc.Folder != t.sent:
			return 1 + slices.Index(t.folders, m.loc.Folder)
		}
		return 100
	}
	byID := map[string][]*threadMsg{}
	var keys []string
	for loc := range t.members {
		m := t.known[loc]
		key := m.id
		if key == "" {
			key = "\x00" + loc.Folder + "\x00" + strconv.FormatUint(uint64(loc.UID), 10)
		}
		if byID[key] == nil {
			keys = append(keys, key)
		}
		byID[key] = append(byID[key], m)
	}
	var primary []*threadMsg
	also := map[*threadMsg][]Location{}
	for _, k := range keys {
		copies := byID[k]
		slices.SortFunc(copies, func(a, b *threadMsg) int {
			if d := rank(a) - rank(b); d != 0 {
				return d
			}
			return int(int64(a.loc.UID) - int64(b.loc.UID))
		})
		primary = append(primary, copies[0])
		for _, c := range copies[1:] {
			also[copies[0]] = append(also[copies[0]], c.loc)
		}
	}
	slices.SortFunc(primary, func(a, b *threadMsg) int {
		if c := a.sum.Date.Compare(b.sum.Date); c != 0 {
			return c
		}
		if c := strings.Compare(a.loc.Folder, b.loc.Folder); c != 0 {
			return c
		}
		return int(int64(a.loc.UID) - int64(b.loc.UID))
	})
	out := &ThreadResult{Folders: t.folders, Truncated: t.truncated}
	if len(primary) > MaxThreadMessages {
		primary, out.Truncated = primary[len(primary)-MaxThreadMessages:], true
	}
	snippets, err := t.snippets(primary)
	if err != nil {
		return nil, err
	}
	out.Messages = make([]ThreadMessage, 0, len(primary))
	for _, m := range primary {
		out.Messages = append(out.Messages, ThreadMessage{
			Folder: m.loc.Folder, UID: m.loc.UID, AlsoIn: also[m],
			From: m.sum.From, To: m.sum.To, Cc: m.sum.Cc, Subject: m.sum.Subject, Date: m.sum.Date,
			MessageID: m.id, InReplyTo: m.inReply, Flags: m.sum.Flags, Tags: m.tags, Snippet: snippets[m.loc],
		})
	}
	return out, nil
}

// snippets fetches the start of the first text part of msgs: per folder,
// one FETCH per part number.
func (t *threadWalk) snippets(msgs []*threadMsg) (map[Location]string, error) {
	out := map[Location]string{}
	type group struct {
		path []int
		uids []imap.UID
	}
	byFolder := map[string]map[string]*group{}
	var order []string
	for _, m := range msgs {
		if m.bs == nil {
			continue
		}
		texts := previewTexts(m.bs)
		if len(texts) == 0 {
			continue
		}
		if m.part1 != nil && slices.Equal(texts[0].path, threadFirstPart.Part) {
			// Fetched with the message.
			out[m.loc] = mailmsg.HeadPreview(m.part1, texts[0].part, threadSnippetRunes)
			continue
		}
		f := m.loc.Folder
		if byFolder[f] == nil {
			byFolder[f] = map[string]*group{}
			order = append(order, f)
		}
		// The part's charset and encoding differ per message: grouped by
		// path only for the FETCH, decoded with each message's own part.
		key := partID(texts[0].path)
		g := byFolder[f][key]
		if g == nil {
			g = &group{path: texts[0].path}
			byFolder[f][key] = g
		}
		g.uids = append(g.uids, imap.UID(m.loc.UID))
	}
	for _, f := range order {
		// The messages are known: no NOOP is needed to see them. The
		// first FETCH goes with the EXAMINE; one at a time after that
		// (Dovecot answers pipelined FETCHes interleaved, and go-imap
		// stalls while an answer waits for a reader).
		first := true
		for _, g := range byFolder[f] {
			sec := &imap.FetchItemBodySection{Part: g.path, Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: threadSnippetBytes}}
			var cmd *imapclient.FetchCommand
			send := func() {
				cmd = t.conn.client().Fetch(imap.UIDSetNum(g.uids...), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{sec}})
			}
			if first {
				first = false
				if _, err := t.conn.examineWith(f, send); err != nil {
					cmd.Close()
					return nil, err
				}
			} else {
				send()
			}
			bufs, err := cmd.Collect()
			if err != nil {
				return nil, imapError(err, f)
			}
			for _, b := range bufs {
				loc := Location{f, uint32(b.UID)}
				m := t.known[loc]
				if m == nil {
					continue
				}
				texts := previewTexts(m.bs)
				if len(texts) == 0 {
					continue
				}
				out[loc] = mailmsg.HeadPreview(b.FindBodySection(sec), texts[0].part, threadSnippetRunes)
			}
		}
	}
	return out, nil
}
