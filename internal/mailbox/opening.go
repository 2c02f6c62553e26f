package mailbox

// How an operation begins, in as few round trips as IMAP allows.
//
// Every command whose words do not depend on an answer goes out before the
// first answer is read: the SELECT or EXAMINE of the folder, and the
// commands the operation sends first (a UID FETCH of a message the caller
// named, a SEARCH, a STATUS, a LIST). On a connection the pool dials for the
// call they follow the LOGIN in the same flight (sendLogin: over implicit
// TLS, and after STARTTLS, even before the greeting) where the server is
// known to keep commands sent there (pipelining.go), so that a cold call
// costs the TCP and TLS handshakes and then the same flights as a warm one.
// Commands after a SELECT that might fail are read-only: a server that
// refuses the SELECT has no folder selected (RFC 3501 6.3.1), so they fail
// too, and the SELECT's error is what the operation reports.
//
// Behind a LOGIN the connection's own capabilities are not known yet: an
// opening goes there only when the host was learned on an earlier
// connection (hostState), with the capabilities learned then (ESEARCH,
// LIST-STATUS, THREAD), and is known to keep what follows a LOGIN.
// Otherwise it goes right after the LOGIN's answer, one round trip later,
// as on the very first connection to a host and on every connection to a
// server that drops them (Courier).
//
// Freshness: Dovecot brings a session's view of its selected folder up to
// date at the end of a command, and runs a SEARCH pipelined behind a NOOP
// before the NOOP's refresh (NOTES.md). An opening marked fresh on a
// connection that has the folder open already sends a NOOP first and
// counts the changes the server reports (EXISTS, EXPUNGE, FETCH) while
// the flight is answered: when there were some, the operation asks again
// (Conn.stale), one more round trip only when mail changed, instead of
// always waiting for a NOOP first. go-imap hands an unasked FETCH (another
// session's flag change) to its handler on a goroutine of its own, so for
// an opening whose first commands fetch nothing (fetchless) the
// connection's wire tap counts the changes as the bytes arrive.

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// opening is how an operation begins: the folder it opens (EXAMINE, or
// SELECT for a change) and the commands it sends before reading any answer.
type opening struct {
	// folder is opened first; "" opens none.
	folder string
	// rw selects folder read-write (SELECT) rather than read-only.
	rw bool
	// either: a connection that has folder open in the other mode serves
	// as it is (a NOOP instead of a select); the operation reads it with
	// Conn.openEither.
	either bool
	// condStore sends the select with CONDSTORE (RFC 7162), so that the
	// session reports mod-sequences from its first answer on.
	condStore bool
	// fetchless: the operation's first commands fetch nothing (a STATUS,
	// a SEARCH), so every FETCH answer in the flight is the server's own
	// report of another session's change, and the connection's tap can
	// watch the flight for Conn.stale (modifiedTap.watch).
	fetchless bool
	// fresh: on a connection that has folder open already, a NOOP goes
	// first and the operation must ask Conn.stale after its first answers.
	fresh bool
	// send sends the operation's first commands on conn, choosing them by
	// caps (the host's learned capabilities behind a LOGIN, the
	// connection's own otherwise). It keeps what it sent for the
	// operation (in the closure both share) and must not wait for any
	// answer. Commands it sends must be read-only when folder is not "":
	// the SELECT may fail. The operation must read or close every
	// FETCH it sent, on every path (go-imap stalls on an unread one).
	send func(conn *Conn, caps imap.CapSet)

	// changing is set by an operation that began read-only once it may
	// have changed the mailbox: a broken connection is then not retried
	// on a fresh one (Client.run).
	changing bool

	// sentWith is the connection whose LOGIN the opening went out with
	// (set by sendLogin through dial).
	sentWith *Conn
}

type openingKey struct{}

// withOpening carries o to dial: a connection the pool dials for this
// call sends it behind the LOGIN. It travels in ctx, not in the dial
// closure, because the pool keeps the closure to renew idle connections
// later (Config.Revalidate), where no operation waits for the answers.
func withOpening(ctx context.Context, o *opening) context.Context {
	if o == nil {
		return ctx
	}
	return context.WithValue(ctx, openingKey{}, o)
}

func openingFrom(ctx context.Context) *opening {
	o, _ := ctx.Value(openingKey{}).(*opening)
	return o
}

// begin sends o on conn, a logged-in connection (pooled, or dialled with
// o sent only in part): the select if the folder is not open in the mode
// asked for (a NOOP first when it is and o is fresh), then o.send, all in
// one flight. The select is read by settleOpening.
func (conn *Conn) begin(o *opening) {
	cl := conn.client()
	conn.mark, conn.gainMark = conn.changes.Load(), conn.gains.Load()
	switch {
	case o.folder == "":
	case conn.isOpen(o.folder, o.rw) || o.either && conn.isOpen(o.folder, !o.rw):
		if o.fresh {
			// A select's own EXISTS would count as a change: only
			// a flight behind the NOOP is watched.
			if o.fetchless && conn.tap != nil {
				conn.tap.watch()
				conn.watching = true
			}
			cl.Noop()
			conn.refreshed = true
		}
	default:
		conn.selected, conn.role = "", ""
		caps := cl.Caps()
		conn.inflight = startSelect(cl, o.folder, !o.rw, o.condStore, caps.Has(imap.CapSpecialUse))
	}
	if o.send != nil {
		o.send(conn, cl.Caps())
	}
}

// isOpen says whether folder is the connection's selected folder, opened
// read-write when rw is asked (read-write serves reads too only where the
// operation allows: examine wants EXAMINE, so that nothing can change).
func (conn *Conn) isOpen(folder string, rw bool) bool {
	return conn.client().Mailbox() != nil && conn.selected == folder && conn.selectedRW == rw && conn.inflight == nil
}

// settleOpening reads the answer to the select an opening sent, and
// records the folder as selected (finishSelect). A failed select is kept
// for the operation's own examine or openRW to report, exactly as if it
// had sent it then.
func (conn *Conn) settleOpening() {
	s := conn.inflight
	if s == nil {
		return
	}
	conn.inflight = nil
	data, err := conn.finishSelect(s)
	conn.opened = &openResult{folder: s.folder, readOnly: s.readOnly, data: data, err: err}
}

// openResult is the answer to an opening's select, for the operation.
type openResult struct {
	folder   string
	readOnly bool
	data     *imap.SelectData
	err      error
}

// takeOpened returns the answer to the opening's select of folder in that
// mode, once; ok is false when there is none.
func (conn *Conn) takeOpened(folder string, readOnly bool) (data *imap.SelectData, err error, ok bool) {
	conn.settleOpening()
	r := conn.opened
	if r == nil || r.folder != folder || r.readOnly != readOnly {
		return nil, nil, false
	}
	conn.opened = nil
	return r.data, r.err, true
}

// openEither is examine or openRW for an opening with either: it reads
// the opening's select of folder (sent read-write when rw), or takes the
// folder as the connection has it open, in either mode.
func (conn *Conn) openEither(folder string, rw bool) error {
	if _, err, ok := conn.takeOpened(folder, !rw); ok {
		return err
	}
	if conn.isOpen(folder, true) || conn.isOpen(folder, false) {
		return nil
	}
	if rw {
		return conn.selectRW(folder)
	}
	_, err := conn.examine(folder)
	return err
}

// stale says, once the answers to the operation's first flight are read
// (asked before they are in, it has not seen the change yet), whether the
// server reported a change of the selected folder
// (a message arrived, left, or had its flags changed by another session)
// since the operation's first flight went out: what its first answers said
// may then miss it, and a fresh operation asks again. It also starts
// counting anew, so that asking again is needed once.
func (conn *Conn) stale() bool {
	all, _ := conn.flightChanges()
	return all
}

// staleUnread is stale for an operation that looks for unread messages
// only: it counts only the changes that may have made one, not the \Seen
// other consumers set, which would otherwise have every claim among
// several consumers ask again.
func (conn *Conn) staleUnread() bool {
	_, gains := conn.flightChanges()
	return gains
}

// flightChanges says whether the server reported a change since the
// opening went out (all), and one that may have made a message unread
// (gains), and starts counting anew. The unilateral-data handler counts
// them (countChanges), but go-imap calls its Fetch on a goroutine of its
// own, which may not have run yet: a flight the tap watched (a fetchless
// opening) is judged by what the tap saw too.
func (conn *Conn) flightChanges() (all, gains bool) {
	now, g := conn.changes.Load(), conn.gains.Load()
	all, gains = now != conn.mark, g != conn.gainMark
	conn.mark, conn.gainMark = now, g
	if conn.watching {
		conn.watching = false
		a, gn := conn.tap.unwatch()
		all, gains = all || a > 0, gains || gn > 0
	}
	return all, gains
}

// changeCounter counts what the server reports about the selected folder
// on its own (unilateral EXISTS, EXPUNGE, FETCH, FLAGS), for Conn.stale.
type changeCounter = atomic.Uint64

// countChanges is the unilateral-data handler of a pooled connection: it
// counts every change in all, and in gains those that may have made a
// message unread (anything but an EXPUNGE, or a FETCH whose flags hold
// \Seen).
func countChanges(all, gains *changeCounter) *imapclient.UnilateralDataHandler {
	return &imapclient.UnilateralDataHandler{
		Expunge: func(uint32) { all.Add(1) },
		Mailbox: func(*imapclient.UnilateralDataMailbox) {
			all.Add(1)
			gains.Add(1)
		},
		Fetch: func(msg *imapclient.FetchMessageData) {
			all.Add(1)
			// Collected: drained, or the reader waits for someone to.
			if b, err := msg.Collect(); err != nil || b.Flags == nil || !slices.ContainsFunc(b.Flags, func(f imap.Flag) bool { return sameFlag(f, imap.FlagSeen) }) {
				gains.Add(1)
			}
		},
	}
}

// sameFlag says whether a and b are one flag: IMAP compares flags
// without case.
func sameFlag(a, b imap.Flag) bool { return strings.EqualFold(string(a), string(b)) }

func hasCondStore(caps imap.CapSet) bool {
	return caps.Has(imap.CapCondStore) || caps.Has(imap.CapQResync)
}

// esearchRefused says whether err is a BAD to a search that may have gone
// in the ESEARCH form (RETURN options) on the host's learned capabilities
// while this connection's server does not offer it: asked again, the
// search goes in the plain form.
func esearchRefused(err error, cl *imapclient.Client) bool {
	var ie *imap.Error
	return asIMAP(err, &ie) && ie.Type == imap.StatusResponseTypeBad && !hasESearch(cl)
}
