package mailbox

// Waiting for new mail (a long poll). A wait holds a connection of its own,
// outside the pool: it sits in IDLE for up to an hour, and a pooled
// connection must never be kept that long nor see a handler for unsolicited
// responses that another call installed. The number of waits is capped on
// the whole gateway and per account, since each one is a login at the mail
// server.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Wait limits and defaults.
const (
	DefaultWaitTimeout = 25 * time.Second
	MaxWaitTimeout     = time.Hour
	// MaxWaitMessages is the most messages one wait returns; More says
	// when there were more.
	MaxWaitMessages = 50
	// DefaultMaxWaiters and DefaultMaxWaitersPerUser are the caps until
	// SetWaitLimits changes them.
	DefaultMaxWaiters        = 500
	DefaultMaxWaitersPerUser = 10

	// DefaultWaitRecheck is how often a wait in IDLE looks for itself
	// until SetWaitRecheck changes it (WAIT_RECHECK).
	DefaultWaitRecheck = 10 * time.Second

	// pollInterval is how often a wait looks for new mail on a server
	// without IDLE.
	pollInterval = 2 * time.Second
	// waitMargin is kept before the caller's deadline, so that a wait
	// ends with its timeout result rather than as a cancelled call.
	waitMargin = 500 * time.Millisecond
	// waitGrace is how long past its end a wait waits for the server
	// (the answer to the DONE that ends IDLE, a last look): a server
	// gone silent then ends the wait with its timeout result, by its own
	// deadline, not the call's.
	waitGrace = time.Second
	// maxWaitReconnects is how many times in a row a wait dials again
	// after losing its connection (the server restarted or kicked it).
	maxWaitReconnects = 3

	stepWaitMail = "waiting for new mail"
)

// progressInterval is how often a wait calls its progress function (a
// variable so that tests need not wait 10 s).
var progressInterval = 10 * time.Second

// WaitOptions say what a wait waits for.
type WaitOptions struct {
	Folder string // default INBOX
	// From matches a substring of the From header, as a search does.
	From string
	// Tag matches messages carrying exactly this tag (TagsHeader).
	Tag string
	// UnreadOnly skips messages that are already \Seen when the wait
	// looks at them.
	UnreadOnly bool
	// Cursor is where the wait starts (position.go): the NextCursor of an
	// earlier wait or peek of this folder. Messages from the cursor on
	// count as new, and those already there are returned at once.
	Cursor string
	// SinceUID is the older form of the cursor (a NextSinceUID): messages
	// with a higher UID count as new; 0 is the start of the folder. With
	// neither, only mail newer than the call counts (the folder's
	// UIDNEXT when the wait opens it).
	SinceUID *uint32
	// UIDValidity is the folder's UIDVALIDITY that SinceUID belongs to
	// (a previous result's); 0: not checked.
	UIDValidity uint32
	// Timeout is how long to wait: default DefaultWaitTimeout, at most
	// MaxWaitTimeout. The caller's context deadline, when sooner, wins
	// (less a margin, so that the wait still returns its timeout result).
	Timeout time.Duration
}

// WaitResult is what a wait found: new messages, or a timeout.
type WaitResult struct {
	Folder      string `json:"folder"`
	UIDValidity uint32 `json:"uid_validity" desc:"the folder's UIDVALIDITY: UIDs and next_since_uid are valid as long as it stays the same (next_cursor carries it)"`
	// Messages are the new matching messages, oldest first; empty (not
	// nil) on a timeout.
	Messages []Summary `json:"messages" desc:"the new messages that match, oldest first; empty when the wait timed out"`
	// NextCursor is the cursor for the next wait: every message before it
	// has been looked at (and the matching ones returned), so passing it
	// as Cursor misses nothing and repeats nothing. NextSinceUID is the
	// same in the older form: every UID up to it looked at (0: none).
	NextCursor   string `json:"next_cursor" desc:"pass this as cursor to the next wait: every message before it has been looked at, so nothing is missed or returned twice between two waits (it names the folder and its UIDVALIDITY)"`
	NextSinceUID uint32 `json:"next_since_uid" desc:"the same position in the older form (every UID up to this one looked at; 0: none yet, the folder's start): passing it as since_uid also misses nothing"`
	More         bool   `json:"more,omitempty" desc:"more matching messages arrived than one answer holds; the next wait with next_cursor returns them at once"`
	TimedOut     bool   `json:"timed_out" desc:"true when nothing matching arrived in time; not an error"`
}

// SetWaitLimits sets the caps on waits in progress: total on this Client,
// and perUser for one account (the user name trimmed and lower-cased, the
// way Dovecot's %Lu sees it). 0 or less means no cap. Waits already
// running are not affected.
func (c *Client) SetWaitLimits(total, perUser int) {
	ws := c.waits()
	ws.mu.Lock()
	ws.total, ws.perUser = total, perUser
	ws.mu.Unlock()
}

// SetWaitPoll makes waits poll the server with NOOP every d instead of
// sitting in IDLE; 0 (the default) uses IDLE where the server offers it
// and polls every 2 seconds where it does not. Polling costs a command per
// wait every d, but IDLE is only as quick as the server: Dovecot 2.3 tells
// an IDLE client of new mail 0.5 s after it arrived (a delay compiled into
// it), so a wake-up under 100 ms needs polling there (measured: p50 60 ms
// with d = 100 ms). Waits already running keep their setting.
func (c *Client) SetWaitPoll(d time.Duration) {
	ws := c.waits()
	ws.mu.Lock()
	ws.pollEvery = max(d, 0)
	ws.mu.Unlock()
}

// SetWaitRecheck makes a wait in IDLE look at the folder itself every d
// (DONE, NOOP, the search, IDLE again), so that it wakes within d on a
// server whose IDLE reports new mail late or never: Cyrus without idled
// and Courier with its defaults report it only on their own 60 s poll. 0
// turns it off (IDLE alone). Waits already running keep their setting.
func (c *Client) SetWaitRecheck(d time.Duration) {
	ws := c.waits()
	ws.mu.Lock()
	ws.recheck = max(d, 0)
	ws.mu.Unlock()
}

// Waiting returns how many waits are in progress.
func (c *Client) Waiting() int {
	ws := c.waits()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.n
}

// CloseWaits ends every wait in progress with a timeout result (so that
// its client simply waits again, on another replica or after a restart)
// and refuses new ones. Call it when shutting down, before waiting for
// requests to finish: a wait can last an hour.
func (c *Client) CloseWaits() {
	ws := c.waits()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if !ws.closed {
		ws.closed = true
		close(ws.stop)
	}
}

// waitState counts the waits of one Client.
type waitState struct {
	mu             sync.Mutex
	total, perUser int
	n              int
	byUser         map[string]int
	pollEvery      time.Duration
	recheck        time.Duration
	closed         bool
	stop           chan struct{} // closed by CloseWaits
}

// waitStates holds each Client's waitState without keeping the Client
// alive. (A field of Client would do the same; client.go is not this
// file's.)
var waitStates sync.Map // weak.Pointer[Client] -> *waitState

func (c *Client) waits() *waitState {
	key := weak.Make(c)
	if ws, ok := waitStates.Load(key); ok {
		return ws.(*waitState)
	}
	ws, loaded := waitStates.LoadOrStore(key, &waitState{
		total: DefaultMaxWaiters, perUser: DefaultMaxWaitersPerUser, recheck: DefaultWaitRecheck,
		byUser: map[string]int{}, stop: make(chan struct{}),
	})
	if !loaded {
		runtime.AddCleanup(c, func(k weak.Pointer[Client]) { waitStates.Delete(k) }, key)
	}
	return ws.(*waitState)
}

// acquire counts one more wait for account, or refuses over a cap.
func (ws *waitState) acquire(account string) (release func(), err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	switch {
	case ws.closed:
		return nil, mailerr.New(mailerr.Unavailable, "the gateway is shutting down; retry shortly")
	case ws.perUser > 0 && ws.byUser[account] >= ws.perUser:
		return nil, mailerr.Newf(mailerr.Busy, "too many waits at once for this account (the limit is %d); retry when one of them has ended", ws.perUser)
	case ws.total > 0 && ws.n >= ws.total:
		return nil, mailerr.Newf(mailerr.Busy, "too many waits at once on this gateway (the limit is %d); retry in a few seconds", ws.total)
	}
	ws.n++
	ws.byUser[account]++
	var once sync.Once
	return func() {
		once.Do(func() {
			ws.mu.Lock()
			defer ws.mu.Unlock()
			ws.n--
			if ws.byUser[account]--; ws.byUser[account] <= 0 {
				delete(ws.byUser, account)
			}
		})
	}, nil
}

// Wait long-polls folder for new mail that matches o: it returns as soon
// as there is some, or a result with TimedOut once o.Timeout has passed.
//
// First it returns the matching messages above the cursor that are already
// there (o.SinceUID; without it the cursor is UIDNEXT-1 when the folder is
// opened, so only mail arriving during the call counts). Then it waits on a
// connection of its own: in IDLE when the server has it (woken by the
// server's EXISTS), else looking every 2 seconds. progress, when not nil,
// is called about every 10 seconds while waiting, on the calling goroutine.
//
// The caller's context ending closes the connection at once. A lost
// connection is dialled again (up to 3 times in a row); a folder whose
// UIDVALIDITY changes meanwhile is an error about the cursor.
func (c *Client) Wait(ctx context.Context, creds credentials.Credentials, o WaitOptions, progress func()) (*WaitResult, error) {
	folder, err := c.folderArg(ctx, creds, o.Folder)
	if err != nil {
		return nil, err
	}
	o.Folder = folder
	if o.Cursor != "" {
		if o.SinceUID != nil {
			return nil, mailerr.New(mailerr.BadInput, "give cursor or since_uid, not both (cursor is the newer form of the same position)")
		}
		p, err := parsePosition(o.Cursor, normFolder(folder))
		if err != nil {
			return nil, err
		}
		since := p.Next - 1
		o.SinceUID, o.UIDValidity = &since, p.UV
	}
	w, err := newWaiter(c, o, progress)
	if err != nil {
		return nil, err
	}
	ws := c.waits()
	release, err := ws.acquire(creds.AccountKey())
	if err != nil {
		return nil, err
	}
	defer release()
	ws.mu.Lock()
	w.stop, w.pollEvery, w.recheck = ws.stop, ws.pollEvery, ws.recheck
	ws.mu.Unlock()
	w.end = time.Now().Add(w.timeout)
	w.stopBy = w.end.Add(waitGrace)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-waitMargin).Before(w.end) {
		w.end = dl.Add(-waitMargin)
		w.stopBy = dl.Add(-waitMargin / 2)
	}
	return w.run(ctx, creds)
}

// waiter is one wait in progress.
type waiter struct {
	c         *Client
	folder    string
	crit      imap.SearchCriteria // without the UID range
	tag       string
	since     *uint32 // nil: from now
	wantUV    uint32
	timeout   time.Duration
	pollEvery time.Duration // 0: IDLE where offered
	recheck   time.Duration // in IDLE, look anyway this often; 0: never
	progress  func()
	stop      <-chan struct{}
	end       time.Time
	// stopBy bounds every command of the wait: its end plus waitGrace
	// (within the caller's deadline).
	stopBy time.Time

	// Set when the folder is first opened.
	started bool
	uv      uint32
	base    uint32 // every UID up to base has been looked at
	waited  bool   // the current session got as far as waiting

	rechecking bool // the look under way follows a re-check, not IDLE
}

func newWaiter(c *Client, o WaitOptions, progress func()) (*waiter, error) {
	w := &waiter{c: c, folder: normFolder(o.Folder), tag: o.Tag, since: o.SinceUID, wantUV: o.UIDValidity, progress: progress}
	if w.since != nil {
		// A wait that ends before it has looked hands the cursor back.
		w.base, w.uv = *w.since, w.wantUV
	}
	switch {
	case o.Timeout == 0:
		w.timeout = DefaultWaitTimeout
	case o.Timeout < 0 || o.Timeout > MaxWaitTimeout:
		return nil, mailerr.Newf(mailerr.BadInput, "the wait's timeout must be between 1 and %d seconds", int(MaxWaitTimeout/time.Second))
	default:
		w.timeout = o.Timeout
	}
	if err := checkTerm("from", o.From); err != nil {
		return nil, err
	}
	if o.From != "" {
		w.crit.Header = append(w.crit.Header, imap.SearchCriteriaHeaderField{Key: "From", Value: o.From})
	}
	if o.Tag != "" {
		if err := CheckTag(o.Tag); err != nil {
			return nil, err
		}
		w.crit.Header = append(w.crit.Header, tagCriterion(o.Tag))
	}
	if o.UnreadOnly {
		w.crit.NotFlag = []imap.Flag{imap.FlagSeen}
	}
	return w, nil
}

// checkTerm refuses a search term that cannot go into an IMAP command as
// is (line breaks, NUL) or is unreasonably long; name is the argument.
func checkTerm(name, s string) error {
	if strings.ContainsAny(s, "\r\n\x00") {
		return mailerr.Newf(mailerr.BadInput, "%s cannot contain line breaks or NUL characters", name)
	}
	if len(s) > 1000 {
		return mailerr.Newf(mailerr.BadInput, "%s is too long (at most 1000 bytes)", name)
	}
	return nil
}

func (w *waiter) timedOut() *WaitResult {
	return w.result(nil, w.base, false)
}

// result is the wait's answer: msgs, and the cursor after next (every UID
// up to it looked at); no messages is a timeout.
func (w *waiter) result(msgs []Summary, next uint32, more bool) *WaitResult {
	r := &WaitResult{Folder: w.folder, UIDValidity: w.uv, Messages: msgs, NextSinceUID: next, NextCursor: positionAfter(w.folder, w.uv, next), More: more}
	if len(msgs) == 0 {
		r.Messages, r.TimedOut = []Summary{}, true
	}
	return r
}

// run runs sessions until one returns, dialling again after a lost
// connection.
func (w *waiter) run(ctx context.Context, creds credentials.Credentials) (*WaitResult, error) {
	for failures := 0; ; failures++ {
		res, err := w.session(ctx, creds)
		if err == nil {
			return res, nil
		}
		if errors.Is(err, errWaitOver) {
			if !w.started {
				return nil, mailerr.Wrap(mailerr.Timeout, err, fmt.Sprintf("the mail server did not answer within the wait's own limit (timeout_s, %s), before the wait could look at the folder", w.timeout))
			}
			// The server did not answer before the wait's end: what it
			// has looked at stands (the cursor), and the time is up.
			return w.timedOut(), nil
		}
		if w.waited {
			failures, w.waited = 0, false
		}
		if ctx.Err() != nil || mailerr.KindOf(err) != mailerr.Unavailable || failures >= maxWaitReconnects {
			return nil, err
		}
		w.c.log.DebugContext(ctx, "wait: dialling again", "err", err)
		pause := time.NewTimer(min(time.Second, time.Until(w.end)))
		select {
		case <-pause.C:
		case <-w.stop:
		case <-ctx.Done():
			pause.Stop()
			return nil, mailerr.TimedOut(ctx, stepWaitMail)
		}
		if !time.Now().Before(w.end) || stopped(w.stop) {
			return w.timedOut(), nil
		}
	}
}

func stopped(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// session is one connection's share of the wait.
func (w *waiter) session(ctx context.Context, creds credentials.Credentials) (*WaitResult, error) {
	c := w.c
	// The server announces new mail with EXISTS, in IDLE or in answer to
	// any command; one pending signal is enough.
	wake := make(chan struct{}, 1)
	handler := &imapclient.UnilateralDataHandler{Mailbox: func(d *imapclient.UnilateralDataMailbox) {
		if d.NumMessages != nil {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}}
	cfg, err := c.hostConfig(creds)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	dctx, cancelEnd := context.WithDeadlineCause(dctx, w.stopBy, errWaitOver)
	conn, err := dialOwn(dctx, cfg, creds, func(o *imapclient.Options) { o.UnilateralDataHandler = handler })
	cancelEnd()
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, mailerr.TimedOut(ctx, stepWaitMail)
		}
		if errors.Is(context.Cause(dctx), errWaitOver) {
			return nil, errWaitOver
		}
		return nil, err
	}
	defer conn.Close()
	// The caller going away ends the wait at once, whatever it is doing:
	// closing the socket unblocks go-imap, IDLE included.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	cl := conn.client()

	if err := w.open(ctx, conn); err != nil {
		return nil, err
	}
	// IDLE where offered, unless the operator asked for polling: Dovecot
	// 2.3 reports new mail in IDLE only 0.5 s after it arrived (a delay
	// compiled into its mailbox watcher), while any command, NOOP
	// included, makes it look at once.
	every := w.pollEvery
	idle := every <= 0 && (cl.Caps().Has(imap.CapIdle) || cl.Caps().Has(imap.CapIMAP4rev2))
	if every <= 0 {
		every = pollInterval
	}
	deadline := time.NewTimer(time.Until(w.end))
	defer deadline.Stop()
	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	for look := true; ; {
		if look {
			// Drained before looking, so that mail announced while
			// looking wakes the next round.
			select {
			case <-wake:
			default:
			}
			res, err := w.check(ctx, conn)
			if err != nil {
				return nil, err
			}
			if res != nil {
				if w.rechecking {
					c.noteLazyIdle(conn)
				}
				w.goodbye(ctx, conn)
				return res, nil
			}
			w.rechecking = false
			w.waited = true
		}
		var done bool
		var err error
		if idle {
			var rechecked bool
			rechecked, done, err = w.idle(ctx, conn, wake, deadline.C, tick.C)
			look = true
			if err == nil && !done && rechecked {
				// IDLE said nothing for a while: ask. The NOOP makes every
				// server look at the folder now; a message found then was
				// not announced by IDLE.
				if err = w.within(ctx, conn, stepWaitMail, func() error { return cl.Noop().Wait() }); err != nil {
					err = w.lost(ctx, err)
				}
				w.rechecking = true
			}
		} else {
			poll := time.NewTimer(every)
			var woken bool
			woken, done, err = w.sleep(ctx, cl, wake, poll.C, deadline.C, tick.C)
			poll.Stop()
			// Announced by the last command: no need to ask.
			look = woken
			if err == nil && !done && !woken {
				// The server answers NOOP with EXISTS when mail has come.
				if err = w.within(ctx, conn, stepWaitMail, func() error { return cl.Noop().Wait() }); err != nil {
					err = w.lost(ctx, err)
				}
				select {
				case <-wake:
					look = true
				default:
					look = false
				}
			}
		}
		if err != nil {
			return nil, err
		}
		if done {
			w.goodbye(ctx, conn)
			return w.timedOut(), nil
		}
	}
}

// idle waits in IDLE until the server announces mail, the re-check is
// due (rechecked), or the wait is over, and leaves IDLE (DONE, and the
// server's OK to it) before returning.
func (w *waiter) idle(ctx context.Context, conn *Conn, wake <-chan struct{}, deadline, tick <-chan time.Time) (rechecked, done bool, err error) {
	cl := conn.client()
	var cmd *imapclient.IdleCommand
	if err := w.within(ctx, conn, stepWaitMail, func() error {
		var err error
		cmd, err = cl.Idle()
		return err
	}); err != nil {
		return false, false, w.lost(ctx, err)
	}
	var recheck <-chan time.Time
	if w.recheck > 0 {
		t := time.NewTimer(w.recheck)
		defer t.Stop()
		recheck = t.C
	}
	var woken bool
	woken, done, err = w.sleep(ctx, cl, wake, recheck, deadline, tick)
	if err != nil {
		return false, false, err
	}
	err = w.within(ctx, conn, stepWaitMail, func() error {
		if err := cmd.Close(); err != nil {
			return err
		}
		return cmd.Wait()
	})
	if err != nil && !done {
		return false, false, w.lost(ctx, err)
	}
	return !woken && !done, done, nil
}

// sleep waits for a reason to look again: new mail announced (woken), or
// the poll interval over. done says the wait is over: its time is up or the
// gateway is shutting down. progress is called meanwhile.
func (w *waiter) sleep(ctx context.Context, cl *imapclient.Client, wake <-chan struct{}, poll, deadline, tick <-chan time.Time) (woken, done bool, err error) {
	for {
		select {
		case <-wake:
			return true, false, nil
		case <-poll:
			return false, false, nil
		case <-tick:
			if w.progress != nil {
				w.progress()
			}
		case <-deadline:
			return false, true, nil
		case <-w.stop:
			return false, true, nil
		case <-ctx.Done():
			return false, false, mailerr.TimedOut(ctx, stepWaitMail)
		case <-cl.Closed():
			return false, false, w.lost(ctx, nil)
		}
	}
}

// lost is the error for a connection that broke while waiting.
func (w *waiter) lost(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return mailerr.TimedOut(ctx, stepWaitMail)
	}
	if errors.Is(err, errWaitOver) {
		return err
	}
	if mailerr.KindOf(err) == mailerr.Timeout {
		return err
	}
	return mailerr.Wrap(mailerr.Unavailable, err, "the connection to the mail server was lost while waiting for new mail")
}

// goodbye logs out politely, bounded; the connection is closed anyway.
func (w *waiter) goodbye(ctx context.Context, conn *Conn) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn.Logout(ctx)
}

// open opens the folder read-only and, the first time, sets the cursor.
func (w *waiter) open(ctx context.Context, conn *Conn) error {
	cl := conn.client()
	var sd *imap.SelectData
	err := w.within(ctx, conn, "opening the folder", func() error {
		var err error
		if sd, err = cl.Select(w.folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
			return conn.folderError(err, w.folder, "open")
		}
		if sd.UIDNext == 0 {
			// A server that leaves UIDNEXT out of SELECT (it should not).
			st, err := cl.Status(w.folder, &imap.StatusOptions{UIDNext: true}).Wait()
			if err != nil {
				return imapError(err, w.folder)
			}
			sd.UIDNext = st.UIDNext
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case w.started && sd.UIDValidity != w.uv:
		return uidValidityChanged(w.folder)
	case w.started:
		return nil
	case w.wantUV != 0 && sd.UIDValidity != w.wantUV:
		return uidValidityChanged(w.folder)
	}
	w.started, w.uv = true, sd.UIDValidity
	switch {
	case w.since != nil:
		w.base = *w.since
	case sd.UIDNext > 0:
		w.base = uint32(sd.UIDNext) - 1
	}
	return nil
}

// check looks for matching messages above the cursor and moves the cursor
// past everything it looked at. It returns nil when nothing matched.
func (w *waiter) check(ctx context.Context, conn *Conn) (*WaitResult, error) {
	var res *WaitResult
	err := w.within(ctx, conn, "looking for new mail", func() error {
		cl := conn.client()
		first := imap.UID(w.base + 1)
		above := []imap.UIDSet{{imap.UIDRange{Start: first, Stop: 0}}}
		// The highest UID first, then the matches: mail arriving between
		// the two searches lies above it and is left for the next round.
		// Pipelined only with ESEARCH: Dovecot may answer the second
		// search before the first one's tagged OK, and go-imap hands an
		// untagged SEARCH (which names no command) to the first search
		// pending; an ESEARCH answer carries its command's tag.
		crit := w.crit
		crit.UID = above
		var md, mm *imap.SearchData
		var err, merr error
		if cl.Caps().Has(imap.CapESearch) || cl.Caps().Has(imap.CapIMAP4rev2) {
			maxCmd := cl.UIDSearch(&imap.SearchCriteria{UID: above}, &imap.SearchOptions{ReturnMax: true})
			matchCmd := cl.UIDSearch(&crit, &imap.SearchOptions{ReturnAll: true})
			md, err = maxCmd.Wait()
			mm, merr = matchCmd.Wait()
		} else {
			if md, err = cl.UIDSearch(&imap.SearchCriteria{UID: above}, nil).Wait(); err == nil {
				mm, merr = cl.UIDSearch(&crit, nil).Wait()
			}
		}
		if err != nil {
			return searchError(err, w.folder)
		}
		if merr != nil {
			return searchError(merr, w.folder)
		}
		last := imap.UID(md.Max)
		for _, u := range md.AllUIDs() {
			last = max(last, u)
		}
		// "N:*" also answers the last message when N is beyond it.
		if last < first {
			return nil
		}
		var uids []imap.UID
		for _, u := range mm.AllUIDs() {
			if u >= first && u <= last {
				uids = append(uids, u)
			}
		}
		slices.Sort(uids)
		more := false
		if w.tag != "" {
			if uids, more, err = filterTagged(cl, uids, w.tag, MaxWaitMessages); err != nil {
				return err
			}
		} else if len(uids) > MaxWaitMessages {
			uids, more = uids[:MaxWaitMessages], true
		}
		next := uint32(last)
		if more {
			next = uint32(uids[len(uids)-1])
		}
		var msgs []Summary
		if len(uids) > 0 {
			if msgs, err = fetchSummaries(cl, imap.UIDSetNum(uids...)); err != nil {
				return err
			}
		}
		w.base = next
		if len(msgs) == 0 {
			return nil // none, or expunged in the meantime
		}
		slices.SortFunc(msgs, func(a, b Summary) int { return int(int64(a.UID) - int64(b.UID)) })
		res = w.result(msgs, next, more)
		return nil
	})
	return res, err
}

// within is Client.within bounded by the wait's own end as well
// (stopBy): a command the server leaves unanswered past it returns
// errWaitOver, and the wait ends with its timeout result.
func (w *waiter) within(ctx context.Context, conn *Conn, step string, op func() error) error {
	wctx, cancel := context.WithDeadlineCause(ctx, w.stopBy, errWaitOver)
	defer cancel()
	err := w.c.within(wctx, conn, step, op)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), errWaitOver) {
		return errWaitOver
	}
	return err
}

// errWaitOver: the wait's end (and its grace) passed while the server had
// not answered; the wait ends with its timeout result.
var errWaitOver = errors.New("the wait is over")

// within runs op on conn under the IMAP timeout as well as ctx: if either
// ends first, conn is closed (see bridge).
func (c *Client) within(ctx context.Context, conn *Conn, step string, op func() error) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	return bridge(ctx, conn, step, op)
}
