package mailbox

// Consuming unread mail: return it and mark exactly that \Seen, so that
// consumers on any number of gateways never get the same message twice,
// and never leave \Seen a message that no caller received.
//
// With CONDSTORE (RFC 7162) the claim is a conditional STORE: UID SEARCH
// UNSEEN with a MODSEQ criterion answers the candidates and the highest
// mod-sequence among them, M; UID STORE (UNCHANGEDSINCE M) +FLAGS.SILENT
// (\Seen) changes only the candidates nobody changed since, names the
// others in the tagged OK [MODIFIED set], and reports each message it
// changed in an untagged FETCH with its MODSEQ (even with .SILENT).
// go-imap (v2.0.0-beta.8) drops the MODIFIED code and gives the STORE
// every untagged FETCH for its UIDs, so the claim's connection has its
// wire tapped for the STORE's whole answer (every pooled connection has
// the tap), and what it claimed is decided from that (storeAnswer.won):
// what [MODIFIED] names is not ours; what it does not name and the server
// reports changed is. What
// FLAGS in that answer mean differs by server (Server.storeFlags): Cyrus
// reports FLAGS for its own .SILENT store (its UNCHANGEDSINCE is atomic:
// [MODIFIED] decides alone), Dovecot only for another session's change
// (and its check is not atomic across sessions: see won). Where the answer
// cannot tell whether this STORE set \Seen, the message is returned and
// named in AtLeastOnce: never dropped.
//
// A claim with an idempotency key is recorded on the messages too (a
// keyword of the key's slot, in the STORE that sets \Seen) and in record
// messages: its candidates before the STORE, what it took once decided.
// A retry with the same key, from any gateway, after the answer was lost
// (the gateway killed, the connection dropped), returns the same batch
// (claimrecord.go).

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Consume limits.
const (
	DefaultConsumeLimit    = 10
	MaxConsumeLimit        = 50
	DefaultConsumeMaxChars = 20_000

	// claimAttempts is how many conditional stores one consume tries
	// when other consumers take its candidates first.
	claimAttempts = 3
)

// ConsumeOptions say which unread messages to take.
type ConsumeOptions struct {
	Folder string // default INBOX
	// From matches a substring of the From header, as a search does.
	From string
	// Tag matches messages carrying exactly this tag (TagsHeader).
	Tag string
	// Limit is the most messages to take: default 10, at most 50.
	Limit int
	// MaxChars caps each message's text: default 20,000, at most
	// MaxMaxChars. A longer text is cut (Truncated, NextOffset), as Read
	// does; the rest can be read with Read.
	MaxChars int
	// IdempotencyKey, when set, makes a retry with the same key return the
	// batch the first call claimed, even if its answer was lost.
	IdempotencyKey string
}

// Consumed is what one consume took.
type Consumed struct {
	Folder      string `json:"folder"`
	UIDValidity uint32 `json:"uid_validity"`
	// Messages are the messages taken, oldest first, each read as Read
	// reads it; they are now \Seen.
	Messages []Message `json:"messages" desc:"the unread messages taken, oldest first, each with its text as a read returns it; they are now marked read"`
	More     bool      `json:"more" desc:"more unread messages matched than the limit; call again for the next ones"`
	// ExactlyOnce says which guarantee held: true when the server has
	// CONDSTORE and every message here was marked \Seen by this call
	// alone, so no other consumer got or will get it; false on a server
	// without it, where two consumers at the same moment can both get a
	// message (at least once).
	ExactlyOnce bool `json:"exactly_once" desc:"true: no other consumer got or will get these messages (the mail server supports conditional stores); false: a consumer running at the same moment may have got some of them too"`
	// AtLeastOnce names the messages returned although the server's
	// answer could not tell whether another consumer took them too.
	AtLeastOnce []uint32 `json:"at_least_once,omitempty" desc:"UIDs of messages returned at least once rather than exactly once: the mail server's answer could not tell whether another consumer took them at the same moment, so they are returned rather than risk leaving them read and unreturned"`
	// Repeated says the batch was claimed by an earlier call with the
	// same idempotency key: it is returned again, nothing new was taken.
	Repeated bool     `json:"repeated,omitempty" desc:"true: an earlier call with this idempotency_key took these messages; they are returned again and nothing new was taken"`
	Warnings []string `json:"warnings,omitempty"`
}

// Consume takes the unread messages of a folder that match o, oldest first,
// and marks exactly those \Seen; see Consumed.ExactlyOnce for the guarantee.
//
// It first looks on a pooled connection (EXAMINE, one search), so that
// finding nothing costs no more than a search and leaves the folder
// examined, not selected. The claim then runs on a pooled connection too
// (claimExactly). If a message cannot be read after it was claimed, the
// claimed messages that were not returned are marked unread again (on a
// pooled connection) so that another consumer gets them; only if that fails too do they stay read without having been
// returned.
func (c *Client) Consume(ctx context.Context, creds credentials.Credentials, o ConsumeOptions) (*Consumed, error) {
	folder, err := c.folderArg(ctx, creds, o.Folder)
	if err != nil {
		return nil, err
	}
	limit, maxChars := o.Limit, o.MaxChars
	switch {
	case limit == 0:
		limit = DefaultConsumeLimit
	case limit < 0 || limit > MaxConsumeLimit:
		return nil, mailerr.Newf(mailerr.BadInput, "limit must be between 1 and %d", MaxConsumeLimit)
	}
	switch {
	case maxChars == 0:
		maxChars = DefaultConsumeMaxChars
	case maxChars < 0 || maxChars > MaxMaxChars:
		return nil, mailerr.Newf(mailerr.BadInput, "max_chars must be between 1 and %d", MaxMaxChars)
	}
	if err := checkTerm("from", o.From); err != nil {
		return nil, err
	}
	var claim *claimKey
	if o.IdempotencyKey != "" {
		k, err := newClaimKey(o.IdempotencyKey)
		if err != nil {
			return nil, err
		}
		claim = k
	}
	var crit imap.SearchCriteria
	if o.From != "" {
		crit.Header = append(crit.Header, imap.SearchCriteriaHeaderField{Key: "From", Value: o.From})
	}
	if o.Tag != "" {
		if err := CheckTag(o.Tag); err != nil {
			return nil, err
		}
		crit.Header = append(crit.Header, tagCriterion(o.Tag))
	}

	srv, err := c.Server(ctx, creds)
	if err != nil {
		return nil, err
	}
	if claim != nil {
		if claim.folder, err = c.recordsFolder(srv); err != nil {
			return nil, err
		}
		if out, err := c.replay(ctx, creds, srv, folder, claim, maxChars); out != nil || err != nil {
			return out, err
		}
	}
	sp := claimSpec{folder: folder, crit: crit, tag: o.Tag, limit: limit, maxChars: maxChars, key: claim, srv: srv}
	if claim == nil && hasCondStore(srv.caps) {
		return claimOnPool(ctx, c, creds, sp)
	}
	var found, condStore bool
	var uv uint32
	// The search goes with the EXAMINE (behind the LOGIN on a new
	// connection), or behind a NOOP on a connection that has the folder
	// open, asked again if the server reported a change meanwhile.
	var search *imapclient.SearchCommand
	open := &opening{folder: folder, fresh: true, send: func(conn *Conn, _ imap.CapSet) {
		search = unreadSearch(conn.client(), crit, false)
	}}
	err = c.doOpen(ctx, creds, open, "looking for unread messages", true, func(ctx context.Context, conn *Conn) error {
		_, err := conn.examine(folder)
		if err != nil {
			search.Wait()
			return err
		}
		cl := conn.client()
		// Whether the server reported a change is known once the
		// flight's answers are in.
		if search.Wait(); conn.stale() {
			search = unreadSearch(cl, crit, false)
		}
		condStore = hasCondStore(cl.Caps())
		uv = conn.uidValidity
		uids, _, _, err := pickUnreadFrom(cl, search, o.Tag, 1)
		found = len(uids) > 0
		return err
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return &Consumed{Folder: folder, UIDValidity: uv, Messages: []Message{}, ExactlyOnce: condStore}, nil
	}
	take := claimExactly
	if !condStore {
		take = claimLoosely
	}
	return take(ctx, c, creds, sp)
}

// claimOnPool is Consume without an idempotency key on a server with
// CONDSTORE: the look and the claim on one pooled connection, which reads
// the conditional STORE's answer through its modifiedTap (no login per
// claim). The folder opens read-write (CONDSTORE) with the search for the
// candidates and their MODSEQ in its flight (behind the LOGIN on a new
// connection), or behind a NOOP where the connection has it open in
// either mode; the candidates' flags and the start of their reads come in
// one FETCH, then the conditional STORE: three round trips when there is
// mail, one when there is none.
func claimOnPool(ctx context.Context, c *Client, creds credentials.Credentials, sp claimSpec) (*Consumed, error) {
	x := newExactClaim(sp)
	var search *imapclient.SearchCommand
	open := &opening{folder: sp.folder, rw: true, either: true, condStore: true, fresh: true, fetchless: true, send: func(conn *Conn, _ imap.CapSet) {
		search = unreadSearch(conn.client(), sp.crit, true)
	}}
	err := c.doOpen(ctx, creds, open, "looking for unread messages", true, func(ctx context.Context, conn *Conn) error {
		if err := conn.openEither(sp.folder, true); err != nil {
			search.Wait()
			return err
		}
		cl := conn.client()
		// Whether the server reported a change is known once the
		// flight's answers are in.
		if search.Wait(); conn.staleUnread() {
			search = unreadSearch(cl, sp.crit, true)
		}
		x.out.UIDValidity = conn.uidValidity
		var first *firstPick
		uids, more, modSeq, err := pickUnreadFrom(cl, search, sp.tag, sp.limit)
		switch {
		case err != nil && conn.modSeqs:
			return err
		case err != nil:
			// A folder without mod-sequences (NOMODSEQ) refuses the
			// MODSEQ criterion: take looks again its own way.
		case len(uids) == 0:
			return nil
		default:
			first = &firstPick{uids: uids, more: more, modSeq: modSeq, uidValidity: conn.uidValidity}
		}
		if conn.tap == nil {
			return mailerr.New(mailerr.Internal, "the pooled connection cannot read a conditional store's answer")
		}
		// From here a STORE may go out: a broken connection is not
		// retried on another (the claimed messages go back: unclaim).
		open.changing = true
		if err := x.take(ctx, c, creds, conn, conn.tap, first); err != nil {
			return err
		}
		return x.read(ctx, c, conn)
	})
	if err != nil {
		c.unclaim(ctx, creds, sp, x.out.UIDValidity, notReturned(x.claimed, x.out.Messages))
		return nil, err
	}
	return x.finish(), nil
}

// firstPick is a claim's first candidates, found on the connection the
// claim runs on: the oldest unread matches, whether there are more, the
// highest MODSEQ among the matches, and the UIDVALIDITY they are of.
type firstPick struct {
	uids        []imap.UID
	more        bool
	modSeq      uint64
	uidValidity uint32
}

// claimSpec is what one consume claims.
type claimSpec struct {
	folder          string
	crit            imap.SearchCriteria
	tag             string
	limit, maxChars int
	key             *claimKey // nil: no idempotency key
	srv             *Server
}

// claimExactly claims with a conditional STORE on a connection of its own
// with a modifiedTap (reading the STORE's whole answer), then reads what
// it claimed there: the claim with an idempotency key, whose records are
// written on pooled connections while the claim holds its connection (on
// a pooled one, a nested lease could wait for itself).
func claimExactly(ctx context.Context, c *Client, creds credentials.Credentials, sp claimSpec) (*Consumed, error) {
	cl := newExactClaim(sp)
	tap := &modifiedTap{}
	cfg, err := c.hostConfig(creds)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	conn, err := dialOwn(dctx, cfg, creds, func(o *imapclient.Options) { o.DebugWriter = tap })
	cancel()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	err = c.within(ctx, conn, "marking the messages read", func() error { return cl.take(ctx, c, creds, conn, tap, nil) })
	if err != nil {
		// What earlier rounds claimed goes back; what the failed STORE
		// did, if anything, cannot be known (a retry with the same
		// idempotency key finds it by its record).
		c.unclaim(ctx, creds, sp, cl.out.UIDValidity, cl.claimed)
		return nil, err
	}
	// Decided: a retry returns exactly this.
	c.recordDone(ctx, creds, sp, cl.out.UIDValidity, cl.claimed, cl.out.ExactlyOnce && len(cl.loose) == 0, cl.looseClaimed())
	if err := cl.read(ctx, c, conn); err != nil {
		c.unclaim(ctx, creds, sp, cl.out.UIDValidity, notReturned(cl.claimed, cl.out.Messages))
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn.Logout(lctx)
	return cl.finish(), nil
}

// exactClaim is one claimExactly: what it has claimed so far.
type exactClaim struct {
	sp      claimSpec
	out     *Consumed
	claimed []imap.UID
	// loose: claimed messages another session may have had too.
	loose map[imap.UID]bool
	// heads: the answer to each claimed message's first read FETCH
	// (startHeadsAndStructures), fetched before the STORE with the flags
	// that decide it (won).
	heads map[imap.UID]*imapclient.FetchMessageBuffer
}

func newExactClaim(sp claimSpec) *exactClaim {
	return &exactClaim{
		sp:    sp,
		out:   &Consumed{Folder: sp.folder, Messages: []Message{}, ExactlyOnce: true},
		loose: map[imap.UID]bool{},
		heads: map[imap.UID]*imapclient.FetchMessageBuffer{},
	}
}

// take claims the folder's oldest unread matches on conn with
// conditional STOREs, tap reading their answers. first, when not nil, is
// the first candidates, found on conn with the folder open: taken as
// they are when it is open read-write with mod-sequences, else with the
// SELECT (CONDSTORE) in one flight. Without first, the SELECT goes with
// the first search.
func (x *exactClaim) take(ctx context.Context, c *Client, creds credentials.Credentials, conn *Conn, tap *modifiedTap, first *firstPick) error {
	sp, out, folder := x.sp, x.out, x.sp.folder
	cl := conn.client()
	var search *imapclient.SearchCommand
	// heads is the first attempt's FETCH of its candidates, when it went
	// out with the SELECT.
	var heads *imapclient.FetchCommand
	// (Right after a SELECT go-imap may not know the mailbox yet:
	// conn.selected is the truth.)
	openRW := conn.selected == folder && conn.selectedRW && conn.inflight == nil
	if first == nil || !openRW || !conn.modSeqs || conn.uidValidity != first.uidValidity {
		// The SELECT and what follows it go in one flight: they fail
		// with a SELECT that fails.
		conn.settleOpening()
		conn.selected, conn.role = "", ""
		sel := startSelect(cl, folder, false, true, false)
		if first != nil {
			heads = startHeadsAndStructures(cl, imap.UIDSetNum(first.uids...), true)
		} else {
			search = unreadSearch(cl, sp.crit, true)
		}
		sd, err := conn.finishSelect(sel)
		settle := func() {
			if search != nil {
				search.Wait()
			}
			if heads != nil {
				heads.Close()
			}
			search, heads = nil, nil
		}
		if err != nil {
			settle()
			return err
		}
		out.UIDValidity = sd.UIDValidity
		if sd.HighestModSeq == 0 {
			// NOMODSEQ: this folder keeps no mod-sequences.
			settle()
			out.ExactlyOnce = false
			uids, more, _, err := pickUnread(cl, sp.crit, sp.tag, sp.limit, false)
			if err != nil || len(uids) == 0 {
				return err
			}
			out.More = more
			if err := c.recordClaim(ctx, creds, sp, out.UIDValidity, uids, false); err != nil {
				return err
			}
			if err := storePlain(cl, uids, sp.key); err != nil {
				return err
			}
			x.claimed = uids
			return nil
		}
		if first != nil && sd.UIDValidity != first.uidValidity {
			// The folder was rebuilt meanwhile: its UIDs name other
			// messages now.
			settle()
			first, search = nil, unreadSearch(cl, sp.crit, true)
		}
	} else {
		out.UIDValidity = conn.uidValidity
	}
	// A consumer that lost the race for every candidate tries again
	// (a few times) rather than answering "nothing" while unread
	// messages are there.
	for attempt := 0; attempt < claimAttempts && len(x.claimed) < sp.limit; attempt++ {
		var uids []imap.UID
		var more bool
		var modSeq uint64
		var err error
		switch {
		case attempt == 0 && first != nil:
			uids, more, modSeq = first.uids, first.more, first.modSeq
		case attempt == 0:
			uids, more, modSeq, err = pickUnreadFrom(cl, search, sp.tag, sp.limit)
		default:
			uids, more, modSeq, err = pickUnread(cl, sp.crit, sp.tag, sp.limit-len(x.claimed), true)
		}
		if err != nil || len(uids) == 0 {
			if heads != nil {
				heads.Close()
			}
			out.More = false
			return err
		}
		out.More = more
		// The flags before the STORE (what another session's change
		// looks like in its answer: won), with what each message's read
		// begins with.
		if heads == nil {
			heads = startHeadsAndStructures(cl, imap.UIDSetNum(uids...), true)
		}
		prior, bufs, err := collectHeads(heads, uids)
		heads = nil
		if err != nil {
			return err
		}
		if err := c.recordClaim(ctx, creds, sp, out.UIDValidity, uids, true); err != nil {
			return err
		}
		// The key's keyword goes in the STORE that sets \Seen: a
		// message carries both or neither, whatever happens next.
		flags := []imap.Flag{imap.FlagSeen}
		if sp.key != nil {
			flags = append(flags, sp.key.keyword)
		}
		tap.arm()
		serr := cl.Store(imap.UIDSetNum(uids...), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: flags},
			&imap.StoreOptions{UnchangedSince: modSeq}).Close()
		ans := tap.disarm()
		if serr != nil {
			return imapError(serr, folder)
		}
		if !ans.answered {
			return mailerr.New(mailerr.Internal, "could not tell which messages the conditional store changed")
		}
		c.learnStoreFlags(conn, ans)
		won, unsure, exact := ans.won(uids, prior, sp.srv.storeFlags(), sp.key != nil)
		out.ExactlyOnce = out.ExactlyOnce && exact
		for _, u := range unsure {
			x.loose[u] = true
		}
		for _, u := range won {
			if b := bufs[u]; b != nil {
				x.heads[u] = b
			}
		}
		x.claimed = append(x.claimed, won...)
		if len(won) == len(uids) {
			break
		}
		// Some were taken by another consumer: what is left may
		// still be there.
		out.More = true
	}
	return nil
}

// collectHeads reads the answer to startHeadsAndStructures of uids: each
// message's flags (normFlags), and the answer itself, for its read. A
// message missing from the answer (expunged) has neither.
func collectHeads(cmd *imapclient.FetchCommand, uids []imap.UID) (map[uint32][]string, map[imap.UID]*imapclient.FetchMessageBuffer, error) {
	bufs, err := cmd.Collect()
	if err != nil {
		return nil, nil, imapError(err, "")
	}
	prior := map[uint32][]string{}
	out := map[imap.UID]*imapclient.FetchMessageBuffer{}
	for _, b := range bufs {
		// Unsolicited FETCH answers (another session's flag change) may
		// come along: the one with the structure is the answer.
		if !slices.Contains(uids, b.UID) || b.BodyStructure == nil {
			continue
		}
		prior[uint32(b.UID)] = normFlags(b.Flags)
		out[b.UID] = b
	}
	return prior, out, nil
}

// read reads what x claimed into its answer (readClaimed), each message
// from its first FETCH's answer where the claim has it, with the flags
// the claim set added to the flags it read before.
func (x *exactClaim) read(ctx context.Context, c *Client, conn *Conn) error {
	set := []imap.Flag{imap.FlagSeen}
	if x.sp.key != nil {
		set = append(set, x.sp.key.keyword)
	}
	return readClaimed(ctx, c, conn, x.sp.folder, x.claimed, x.sp.maxChars, x.out, x.heads, set)
}

// looseClaimed is what x claimed at least once.
func (x *exactClaim) looseClaimed() []imap.UID {
	var out []imap.UID
	for _, u := range x.claimed {
		if x.loose[u] {
			out = append(out, u)
		}
	}
	return out
}

// finish marks what was returned at least once, not exactly once.
func (x *exactClaim) finish() *Consumed {
	out := x.out
	for _, m := range out.Messages {
		if x.loose[imap.UID(m.UID)] {
			out.AtLeastOnce = append(out.AtLeastOnce, m.UID)
		}
	}
	if len(out.AtLeastOnce) > 0 {
		out.ExactlyOnce = false
	}
	return out
}

// fetchFlags fetches the flags of uids in the selected folder, lower-cased,
// without \Recent.
func fetchFlags(cl *imapclient.Client, uids []imap.UID) (map[uint32][]string, error) {
	bufs, err := cl.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, Flags: true}).Collect()
	if err != nil {
		return nil, imapError(err, "")
	}
	out := map[uint32][]string{}
	for _, b := range bufs {
		out[uint32(b.UID)] = normFlags(b.Flags)
	}
	return out, nil
}

func normFlags[F ~string](fs []F) []string {
	out := []string{}
	for _, f := range fs {
		if l := strings.ToLower(string(f)); l != `\recent` {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// claimLoosely is the claim for a server without CONDSTORE: a plain STORE
// on a pooled connection. Two consumers at the same moment can both get a
// message.
func claimLoosely(ctx context.Context, c *Client, creds credentials.Credentials, sp claimSpec) (*Consumed, error) {
	folder := sp.folder
	out := &Consumed{Folder: folder, Messages: []Message{}}
	var claimed []imap.UID
	err := c.do(ctx, creds, "marking the messages read", false, func(ctx context.Context, conn *Conn) error {
		if err := conn.selectRW(folder); err != nil {
			return err
		}
		out.UIDValidity = conn.uidValidity
		uids, more, _, err := pickUnread(conn.client(), sp.crit, sp.tag, sp.limit, false)
		if err != nil || len(uids) == 0 {
			return err
		}
		out.More = more
		if err := c.recordClaim(ctx, creds, sp, out.UIDValidity, uids, false); err != nil {
			return err
		}
		if err := storePlain(conn.client(), uids, sp.key); err != nil {
			return err
		}
		claimed = uids
		c.recordDone(ctx, creds, sp, out.UIDValidity, claimed, false, nil)
		return readClaimed(ctx, c, conn, folder, claimed, sp.maxChars, out, nil, nil)
	})
	if err != nil {
		c.unclaim(ctx, creds, sp, out.UIDValidity, notReturned(claimed, out.Messages))
		return nil, err
	}
	return out, nil
}

// notReturned is the claimed UIDs that are not among msgs.
func notReturned(claimed []imap.UID, msgs []Message) []imap.UID {
	var out []imap.UID
	for _, u := range claimed {
		if !slices.ContainsFunc(msgs, func(m Message) bool { return m.UID == uint32(u) }) {
			out = append(out, u)
		}
	}
	return out
}

// storePlain marks uids \Seen (and with the key's keyword)
// unconditionally.
func storePlain(cl *imapclient.Client, uids []imap.UID, key *claimKey) error {
	flags := []imap.Flag{imap.FlagSeen}
	if key != nil {
		flags = append(flags, key.keyword)
	}
	if err := cl.Store(imap.UIDSetNum(uids...), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: flags}, nil).Close(); err != nil {
		return imapError(err, "")
	}
	return nil
}

// pickUnread finds the oldest unread messages matching crit and tag, at most
// limit, and says whether there are more. With modSeq it also returns the
// highest mod-sequence among all the unread matches (RFC 7162: a search
// with a MODSEQ criterion answers it).
func pickUnread(cl *imapclient.Client, crit imap.SearchCriteria, tag string, limit int, modSeq bool) ([]imap.UID, bool, uint64, error) {
	return pickUnreadFrom(cl, unreadSearch(cl, crit, modSeq), tag, limit)
}

// unreadSearch sends pickUnread's search.
func unreadSearch(cl *imapclient.Client, crit imap.SearchCriteria, modSeq bool) *imapclient.SearchCommand {
	crit.NotFlag = append(slices.Clip(crit.NotFlag), imap.FlagSeen)
	if modSeq {
		crit.ModSeq = &imap.SearchCriteriaModSeq{ModSeq: 1} // every message: only for the answer's MODSEQ
	}
	var opts *imap.SearchOptions
	if cl.Caps().Has(imap.CapESearch) || cl.Caps().Has(imap.CapIMAP4rev2) {
		opts = &imap.SearchOptions{ReturnAll: true}
	}
	return cl.UIDSearch(&crit, opts)
}

// pickUnreadFrom is pickUnread once its search (unreadSearch) is sent.
func pickUnreadFrom(cl *imapclient.Client, search *imapclient.SearchCommand, tag string, limit int) ([]imap.UID, bool, uint64, error) {
	d, err := search.Wait()
	if err != nil {
		return nil, false, 0, searchError(err, "")
	}
	uids := d.AllUIDs()
	slices.Sort(uids)
	more := false
	if tag != "" {
		if uids, more, err = filterTagged(cl, uids, tag, limit); err != nil {
			return nil, false, 0, err
		}
	} else if len(uids) > limit {
		uids, more = uids[:limit], true
	}
	return uids, more, d.ModSeq, nil
}

// readClaimed reads the claimed messages into out, in UID order. A message
// expunged since the claim is left out with a warning. A message in heads
// is read on from that answer to its first FETCH, made before the claim:
// set, the flags the claim set, are added to the flags it carries.
func readClaimed(ctx context.Context, c *Client, conn *Conn, folder string, uids []imap.UID, maxChars int, out *Consumed, heads map[imap.UID]*imapclient.FetchMessageBuffer, set []imap.Flag) error {
	gone := 0
	for _, uid := range uids {
		var m *Message
		err := c.within(ctx, conn, "reading the messages", func() error {
			b := heads[uid]
			if b == nil {
				var err error
				m, err = readMessage(conn.client(), folder, uint32(uid), 0, maxChars)
				return err
			}
			head, bs, guess, err := headerAndStructureOf(b, folder)
			if err != nil {
				return err
			}
			head.Flags = flagsOf(withFlags(b.Flags, set))
			m, err = readRest(conn.client(), head, bs, guess, uint32(uid), 0, maxChars, false)
			return err
		})
		if mailerr.KindOf(err) == mailerr.NotFound && mailerr.SubjectOf(err) == mailerr.SubjectMessage {
			gone++
			continue
		}
		if err != nil {
			return err
		}
		out.Messages = append(out.Messages, *m)
	}
	if gone > 0 {
		out.Warnings = append(out.Warnings, strconv.Itoa(gone)+" message(s) were deleted by someone else before they could be read")
	}
	return nil
}

// withFlags is flags with those of set it lacks (compared as IMAP
// compares them: without case) added.
func withFlags(flags, set []imap.Flag) []imap.Flag {
	out := slices.Clip(flags)
	for _, f := range set {
		if !slices.ContainsFunc(flags, func(g imap.Flag) bool { return sameFlag(f, g) }) {
			out = append(out, f)
		}
	}
	return out
}

// unclaim marks claimed messages that were not returned unread again, so
// that another consumer gets them, and takes the key's keyword off them
// (a retry with the key then leaves them be). It runs after the call
// failed, on a pooled connection, even if the caller has gone away.
func (c *Client) unclaim(ctx context.Context, creds credentials.Credentials, sp claimSpec, uidValidity uint32, uids []imap.UID) {
	if len(uids) == 0 {
		return
	}
	folder := sp.folder
	flags := []imap.Flag{imap.FlagSeen}
	if sp.key != nil {
		flags = append(flags, sp.key.keyword)
	}
	ctx = context.WithoutCancel(ctx)
	err := c.do(ctx, creds, "marking the messages unread again", false, func(ctx context.Context, conn *Conn) error {
		if err := conn.selectRW(folder); err != nil {
			return err
		}
		if uidValidity != 0 && conn.uidValidity != uidValidity {
			return uidValidityChanged(folder)
		}
		return conn.client().Store(imap.UIDSetNum(uids...), &imap.StoreFlags{Op: imap.StoreFlagsDel, Silent: true, Flags: flags}, nil).Close()
	})
	if err != nil {
		c.log.WarnContext(ctx, "claimed messages stay read without having been returned", "folder", folder, "count", len(uids), "err", err)
	}
}

// modifiedTap reads the wire (as go-imap's DebugWriter, which gets both
// directions) while armed, for what the server says about the conditional
// STORE: the MODIFIED set of its tagged answer and the untagged FETCH of
// each message. Disarmed, it drops everything at once: the login went
// through it too.
type modifiedTap struct {
	mu      sync.Mutex
	armed   bool
	line    []byte
	tooLong bool
	ans     storeAnswer
	// watching: counting in changes what the server reports unasked
	// about the folder, and in gains what of it may have made a message
	// unread (watch).
	watching bool
	changes  int
	gains    int
}

// storeAnswer is what the server answered to a conditional STORE.
type storeAnswer struct {
	answered bool
	modified uidRanges
	fetched  map[uint32]fetchedChange
}

// fetchedChange is an untagged FETCH about one message in the answer: its
// MODSEQ, and the FLAGS it carried, if any.
type fetchedChange struct {
	modSeq uint64
	flags  bool
	list   []string // the flags, lower-cased, without \Recent (when flags)
}

// flagsInStore says what FLAGS in the answer to the gateway's own .SILENT
// conditional STORE mean on a server (Server.storeFlags).
type flagsInStore int

const (
	// flagsUnknown: either; a message reported with FLAGS may have been
	// another session's change, so it is returned at least once.
	flagsUnknown flagsInStore = iota
	// flagsFromOthers (Dovecot): the server reports its own change with
	// MODSEQ alone; FLAGS mean another session changed the message.
	flagsFromOthers
	// flagsEchoed (Cyrus): the server reports its own change with FLAGS
	// as well, one MODSEQ per message; its UNCHANGEDSINCE is atomic, so
	// [MODIFIED] decides alone.
	flagsEchoed
)

// won says which of uids this STORE claimed: won (every message whose
// \Seen this STORE may have set, never fewer), unsure (those of won that
// another consumer may have taken at the same moment: returned at least
// once), and whether the answer let that be told exactly.
//
// What the protocol guarantees (RFC 7162 3.1.3): a message named in
// [MODIFIED] failed the UNCHANGEDSINCE test and was not changed; every
// message the STORE changed is reported in an untagged FETCH with its
// MODSEQ, .SILENT or not. So a message neither named nor reported was not
// changed by it. A reported one was, unless the report is about another
// session's change alone, which only FLAGS can betray, and what FLAGS mean
// depends on the server (mode):
//
//   - flagsEchoed (Cyrus): FLAGS come with the server's own change: won.
//   - flagsFromOthers (Dovecot 2.3): its check is not atomic across
//     sessions (two STOREs at the same moment can both pass on one
//     message; seen here: 8 consumers, one message in ten runs returned
//     twice), but its report tells them apart: its own change comes with
//     MODSEQ alone, and FLAGS mean another session changed the message.
//     The STORE that set \Seen first sees its message clean; the other one
//     sees that change, with FLAGS, and its own STORE changed nothing. A
//     message reported with FLAGS is still this STORE's when its MODSEQ is
//     this STORE's own (the MODSEQ of its clean ones: another session
//     changed some other flag first). It is another's when the flags
//     reported are exactly the flags before the STORE plus \Seen: another
//     session set \Seen before this STORE, which then changed nothing.
//     Anything else cannot be told: returned, at least once. A STORE that
//     also sets a key's keyword (keyed) changes a message another session
//     set \Seen on first, so its own MODSEQ there proves nothing: with a
//     key, only the flags before plus \Seen alone tell (a STORE that
//     changed nothing), and any other report is at least once.
//   - flagsUnknown: a message reported with FLAGS is returned, at least once.
//
// A server that reports nothing at all (against RFC 7162) leaves only
// MODIFIED to go by: then the claim is not known to be exact.
func (a storeAnswer) won(uids []imap.UID, prior map[uint32][]string, mode flagsInStore, keyed bool) (won, unsure []imap.UID, exact bool) {
	own := map[uint64]bool{}
	for _, f := range a.fetched {
		if !f.flags {
			own[f.modSeq] = true
		}
	}
	// Silent: messages left unmodified, yet no FETCH about any of them.
	silent := len(a.fetched) == 0 && slices.ContainsFunc(uids, func(u imap.UID) bool { return !a.modified.has(u) })
	for _, u := range uids {
		if a.modified.has(u) {
			continue
		}
		f, ok := a.fetched[uint32(u)]
		switch {
		case silent:
			won = append(won, u)
		case !ok:
			// not reported: this STORE did not change it
		case !f.flags || mode == flagsEchoed:
			won = append(won, u)
		case mode == flagsFromOthers && !keyed && own[f.modSeq]:
			won = append(won, u)
		case mode == flagsFromOthers && slices.Equal(f.list, seenAdded(prior[uint32(u)])):
			// another session set \Seen first; this STORE changed nothing
		default:
			won = append(won, u)
			unsure = append(unsure, u)
		}
	}
	return won, unsure, !silent && len(unsure) == 0
}

// seenAdded is flags (normFlags) with \seen added.
func seenAdded(flags []string) []string {
	if flags == nil {
		return nil
	}
	return normFlags(append(slices.Clone(flags), `\seen`))
}

var (
	storeCommand = regexp.MustCompile(`^\S+ UID STORE [^\r\n]*\r\n$`)
	taggedStatus = regexp.MustCompile(`^[A-Za-z0-9]+ (?i:(OK|NO|BAD))(?: (.*))?$`)
	modifiedCode = regexp.MustCompile(`^\[(?i:MODIFIED) ([0-9:,*]+)\]`)
	fetchLine    = regexp.MustCompile(`^\* \d+ (?i:FETCH) \((.*)\)$`)
	fetchUID     = regexp.MustCompile(`(?i:\bUID) (\d+)`)
	fetchModSeq  = regexp.MustCompile(`(?i:\bMODSEQ) \((\d+)\)`)
	fetchFlagsRe = regexp.MustCompile(`(?i:\bFLAGS) \(([^)]*)\)`)
)

// maxTapLine bounds a line kept while armed; the lines it looks for are
// short (a MODIFIED set of at most MaxConsumeLimit UIDs, FETCH FLAGS).
const maxTapLine = 64 << 10

func (t *modifiedTap) arm() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed, t.line, t.tooLong = true, t.line[:0], false
	t.ans = storeAnswer{fetched: map[uint32]fetchedChange{}}
}

// watch counts, until unwatch, the untagged EXISTS, EXPUNGE and FETCH
// answers (changes), and of those the EXISTS and the FETCH answers whose
// flags lack \Seen or that carry none (gains), while only commands that
// fetch nothing are in flight (a NOOP, a STATUS, a SEARCH): every FETCH
// answer is then the server's own report of another session's change. It
// is read here, as the bytes arrive, because go-imap hands an unasked
// FETCH to the connection's handler on a goroutine of its own
// (countChanges), which may not have run when the flight's last answer is
// in.
func (t *modifiedTap) watch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watching, t.changes, t.gains, t.line, t.tooLong = true, 0, 0, t.line[:0], false
}

// unwatch stops watch and says how many such reports came.
func (t *modifiedTap) unwatch() (changes, gains int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watching = false
	if !t.armed {
		t.line = nil
	}
	return t.changes, t.gains
}

// disarm stops reading and returns what the STORE's answer said.
func (t *modifiedTap) disarm() storeAnswer {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed = false
	if !t.watching {
		t.line = nil
	}
	return t.ans
}

func (t *modifiedTap) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The STORE command comes in one write of its own (go-imap flushes
	// each command whole): it is the only thing sent while armed, and
	// must not mix with the answer's bytes in the line being read.
	if !t.armed && !t.watching || storeCommand.Match(p) {
		return len(p), nil
	}
	if !t.armed && clientCommand.Match(p) && !taggedStatus.Match(bytes.TrimRight(p, "\r\n")) {
		// A command the gateway sent while watching (go-imap tags
		// them T1, T2, ...): kept out of a line being read, as the
		// STORE is.
		return len(p), nil
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.keep(p)
			break
		}
		t.keep(p[:i])
		if !t.tooLong {
			t.inspect(strings.TrimRight(string(t.line), "\r"))
		}
		t.line, t.tooLong = t.line[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// keep adds b to the line being read; a line past maxTapLine is skipped
// whole.
func (t *modifiedTap) keep(b []byte) {
	if t.tooLong || len(t.line)+len(b) > maxTapLine {
		t.tooLong = true
		return
	}
	t.line = append(t.line, b...)
}

// inspect looks at one line the server sent. While armed only the STORE is
// in flight: the one tagged status line is its answer, and the untagged
// FETCHes before it report changes.
func (t *modifiedTap) inspect(line string) {
	if t.watching && folderChange.MatchString(line) {
		t.changes++
		if unreadGain(line) {
			t.gains++
		}
	}
	if !t.armed || t.ans.answered {
		return
	}
	if m := fetchLine.FindStringSubmatch(line); m != nil {
		u, ms := fetchUID.FindStringSubmatch(m[1]), fetchModSeq.FindStringSubmatch(m[1])
		if u == nil {
			return
		}
		uid, _ := strconv.ParseUint(u[1], 10, 32)
		f := t.ans.fetched[uint32(uid)]
		if ms != nil {
			f.modSeq, _ = strconv.ParseUint(ms[1], 10, 64)
		}
		if fl := fetchFlagsRe.FindStringSubmatch(m[1]); fl != nil {
			f.flags = true
			f.list = normFlags(strings.Fields(fl[1]))
		}
		t.ans.fetched[uint32(uid)] = f
		return
	}
	m := taggedStatus.FindStringSubmatch(line)
	if m == nil {
		return
	}
	t.ans.answered = true
	if c := modifiedCode.FindStringSubmatch(m[2]); c != nil {
		t.ans.modified = parseUIDRanges(c[1])
	}
}

var (
	existsLine    = regexp.MustCompile(`^\* \d+ (?i:EXISTS)$`)
	folderChange  = regexp.MustCompile(`^\* \d+ (?i:EXISTS$|EXPUNGE$|FETCH \()`)
	clientCommand = regexp.MustCompile(`^T\d+ [A-Z]+[^\r\n]*\r\n$`)
)

// unreadGain says whether line, an answer the server sent, reports a
// change that may have made a message unread: a new message (EXISTS), or
// flags without \Seen (or none: the report does not say).
func unreadGain(line string) bool {
	if existsLine.MatchString(line) {
		return true
	}
	m := fetchLine.FindStringSubmatch(line)
	if m == nil {
		return false
	}
	fl := fetchFlagsRe.FindStringSubmatch(m[1])
	return fl == nil || !slices.Contains(normFlags(strings.Fields(fl[1])), `\seen`)
}

// uidRanges is a parsed sequence set of UIDs ("2:3,7").
type uidRanges [][2]uint32

func parseUIDRanges(s string) uidRanges {
	var out uidRanges
	num := func(v string) uint32 {
		if v == "*" {
			return ^uint32(0)
		}
		n, _ := strconv.ParseUint(v, 10, 32)
		return uint32(n)
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, ":")
		a := num(lo)
		b := a
		if isRange {
			b = num(hi)
		}
		out = append(out, [2]uint32{min(a, b), max(a, b)})
	}
	return out
}

func (r uidRanges) has(u imap.UID) bool {
	for _, x := range r {
		if uint32(u) >= x[0] && uint32(u) <= x[1] {
			return true
		}
	}
	return false
}
