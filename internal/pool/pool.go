// Package pool owns a keyed, bounded pool of long-lived connections: how many
// are open (in total and per group of keys), which idle one is handed out
// next, when an idle or old one is closed or replaced by a fresh one, and who
// waits when none is free. It knows nothing about IMAP: the caller supplies
// the dial, health-check and graceful-close functions. It must not log a key
// in full (a key stands for a credential), and it never does I/O while
// holding its own lock.
package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults used for zero fields of Config.
const (
	DefaultMaxTotal    = 50
	DefaultMaxPerGroup = 4
	DefaultIdleTimeout = 5 * time.Minute
	DefaultMaxLifetime = time.Hour
	DefaultCheckAfter  = 5 * time.Second
	DefaultRevalidate  = time.Minute
)

// minJanitorTick is the shortest interval between two janitor sweeps. Tests
// lower it; it is read only by New.
var minJanitorTick = time.Second

var (
	// ErrBusy is returned (wrapped, with context.DeadlineExceeded) by Get when
	// the context's deadline passed while waiting for a free connection:
	// "server busy, retry later".
	ErrBusy = errors.New("pool: no connection free (server busy)")
	// ErrClosed is returned by Get once Close has been called.
	ErrClosed = errors.New("pool: closed")
)

// Conn is a pooled connection. Close may be called from any goroutine, also
// while a graceful close of the same connection is still running.
type Conn interface{ Close() error }

// Key says what a connection is for. An idle connection is handed out
// again only to a Get with the same Conn (for IMAP a hash of host, user and
// password: a wrong password never reuses a logged-in connection). Group is
// what Config.MaxPerGroup counts: all the keys that log in to one account
// (user names the server treats as the same, with any password) share one
// bound. An empty Group means Conn. A key keeps the group it was first
// given while the pool holds anything for it.
type Key struct{ Group, Conn string }

// Config bounds the pool. A zero field gets its default.
type Config struct {
	// MaxTotal bounds the connections open or being dialled, all keys together
	// (MAX_POOL_SIZE, default 50).
	MaxTotal int
	// MaxPerGroup bounds the connections open or being dialled for one
	// group, so that one account cannot starve the others, however many
	// spellings of its name or passwords it logs in with (default 4; at most
	// MaxTotal).
	MaxPerGroup int
	// IdleTimeout closes a connection that has been idle this long (default
	// 5 min, shorter than the IMAP autologout).
	IdleTimeout time.Duration
	// MaxLifetime closes a connection this old when it is released or found
	// idle (default 1 h; negative: no limit).
	MaxLifetime time.Duration
	// CheckAfter makes Get health-check a connection that has been idle longer
	// than this before handing it out (default 5 s; negative: check on every
	// reuse).
	CheckAfter time.Duration
	// Revalidate is the age of a connection's login after which it no longer
	// serves: the janitor replaces an idle one a little before that with a
	// fresh dial (a new login) for the same key, and Get, if it finds one
	// that old, closes it and dials anew. IMAP cannot re-authenticate a
	// logged-in connection, so only a new login tells that a password has
	// changed (default 1 min; negative: never).
	Revalidate time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxTotal <= 0 {
		c.MaxTotal = DefaultMaxTotal
	}
	if c.MaxPerGroup <= 0 {
		c.MaxPerGroup = DefaultMaxPerGroup
	}
	c.MaxPerGroup = min(c.MaxPerGroup, c.MaxTotal)
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxLifetime == 0 {
		c.MaxLifetime = DefaultMaxLifetime
	}
	if c.CheckAfter == 0 {
		c.CheckAfter = DefaultCheckAfter
	}
	if c.Revalidate == 0 {
		c.Revalidate = DefaultRevalidate
	}
	return c
}

// Option configures a Pool.
type Option[C Conn] func(*Pool[C])

// WithGracefulClose makes Close call f (for example IMAP LOGOUT) on every idle
// connection, concurrently, before closing it. f must return once ctx is done
// or the connection has been closed under it.
func WithGracefulClose[C Conn](f func(ctx context.Context, c C)) Option[C] {
	return func(p *Pool[C]) { p.graceful = f }
}

// WithRefused gives the pool f, which says whether a dial error means that
// the server refused the credential itself (a wrong password), as opposed to
// a network or server failure. After such an error every idle connection of
// that key is closed: they logged in with what the server now refuses.
func WithRefused[C Conn](f func(error) bool) Option[C] {
	return func(p *Pool[C]) { p.refused = f }
}

// Stats is a snapshot of the pool's counters (since New) and gauges (now).
type Stats struct {
	Opened      uint64 // connections dialled successfully
	Reused      uint64 // Gets served with an idle connection
	Discarded   uint64 // closed by Lease.Discard or after a failed health check
	Evicted     uint64 // idle connections closed to make room for another key
	Expired     uint64 // closed for IdleTimeout or MaxLifetime
	Revalidated uint64 // closed because their login was older than Revalidate
	WaitedTotal uint64 // Gets that had to wait for a slot
	BusyErrors  uint64 // Gets that returned ErrBusy

	Waiting int // Gets waiting now
	Idle    int // idle connections
	InUse   int // slots not idle: leased, being checked, dialled or closed
}

// Pool is a keyed, bounded pool of connections of type C. Its methods are
// safe for concurrent use.
type Pool[C Conn] struct {
	cfg      Config
	check    func(context.Context, C) error
	graceful func(context.Context, C)
	refused  func(error) bool
	log      *slog.Logger
	tick     time.Duration // between two janitor sweeps

	mu     sync.Mutex
	keys   map[string]*keyState[C]
	groups map[string]*groupState[C]
	idle   list[C] // every idle conn, least recently used first
	// unproven are the idle conns that have served only the call they
	// were dialled for, least recently used first (evictable first).
	unproven list[C]
	total    int // slots held: idle + leased + checking + dialling + closing
	wHead    *waiter[C]
	wTail    *waiter[C]
	nWait    int
	closed   bool

	stop        chan struct{} // closed by Close: stops the janitor
	janitorDone chan struct{}
	closeDone   chan struct{} // closed when the first Close returns

	// renewals are the janitor's fresh dials (Revalidate); ctx ends them
	// when the pool is closed.
	renewals sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelFunc

	opened, reused, discarded, evicted, expired, revalidated, waited, busy atomic.Uint64
}

// groupState is one group's share of the pool. It exists while one of its
// keys holds a slot or has a waiter.
type groupState[C Conn] struct {
	name    string
	count   int     // slots held by the group's keys, like Pool.total
	waiting int     // waiters for the group's keys
	idle    list[C] // the group's idle conns, least recently used first
}

// keyState is one key's share of its group. It exists while the key holds
// a slot or has a waiter.
type keyState[C Conn] struct {
	key     string
	g       *groupState[C]
	count   int     // slots held by this key
	waiting int     // waiters for this key
	idle    list[C] // this key's idle conns, most recently used last
	// dial is the last Get's: the janitor renews the key's idle conns with
	// it. It lives no longer than the key's state.
	dial func(context.Context) (C, error)
}

// entry is one connection and its bookkeeping.
type entry[C Conn] struct {
	conn      C
	ks        *keyState[C]
	created   time.Time // when dial returned: the login's time
	idleSince time.Time // set when released; guarded by Pool.mu
	// proven: handed out again after the call it was dialled for. It
	// changes only while the entry is leased (in no idle list); the idle
	// lists read it under Pool.mu.
	proven bool
	links  [4]link[C]
	closed atomic.Bool
}

// grant is what a Get receives: an idle entry, or a slot to dial into (after
// closing victim, if any, whose slot it borrows), or an error.
type grant[C Conn] struct {
	entry  *entry[C]
	victim *entry[C]
	err    error
}

type waiter[C Conn] struct {
	ks         *keyState[C]
	ready      chan grant[C] // buffered: one grant, sent under Pool.mu
	prev, next *waiter[C]
	queued     bool
}

// New returns a pool. check, if not nil, is run on a connection that has been
// idle longer than CheckAfter before Get hands it out; an error discards the
// connection. logger may be nil.
func New[C Conn](cfg Config, check func(ctx context.Context, c C) error, logger *slog.Logger, opts ...Option[C]) *Pool[C] {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Pool[C]{
		cfg:         cfg.withDefaults(),
		check:       check,
		log:         logger.With("component", "pool"),
		keys:        make(map[string]*keyState[C]),
		groups:      make(map[string]*groupState[C]),
		idle:        list[C]{which: 0},
		unproven:    list[C]{which: 3},
		stop:        make(chan struct{}),
		janitorDone: make(chan struct{}),
		closeDone:   make(chan struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for _, o := range opts {
		o(p)
	}
	tick := p.cfg.IdleTimeout / 4
	if p.cfg.Revalidate > 0 {
		tick = min(tick, p.cfg.Revalidate/4)
	}
	p.tick = max(tick, minJanitorTick)
	go p.janitor(p.tick)
	return p
}

// Get returns a lease on a connection for key.
//
// It hands out the most recently used idle connection of key.Conn,
// health-checking it first if it has been idle longer than CheckAfter, and
// skipping it if its login is older than Revalidate (a failing check or an
// old login closes the connection and Get tries the next one, then dials).
// Otherwise it dials a new connection if the group and the total are under
// their bounds. When the group is at its bound, or the total is, and another
// key of the group has an idle connection, Get closes the least recently
// used of those and dials in its place; when only the total is full and the
// group holds nothing, it closes an idle connection of another group: the
// least recently used of those that have served only the call they were
// dialled for, while they are at least a tenth of MaxTotal, otherwise the
// least recently used of all. Slots being dialled count against both
// bounds. A dial error is returned as it is and leaves nothing in the pool.
//
// If no slot is free, Get waits, in FIFO order with other waiters, for a
// release anywhere in the pool. If ctx's deadline passes while waiting it
// returns an error matching both ErrBusy and context.DeadlineExceeded; if ctx
// is cancelled it returns ctx.Err() (the caller went away: not "busy"). A ctx
// already done when Get is called gives ctx.Err(). After Close, Get returns
// ErrClosed.
//
// The pool keeps dial while it holds anything for key.Conn, and the janitor
// may call it later, with a context of its own, to renew an idle connection
// (Config.Revalidate): it must not depend on the caller's request.
//
// If dial or check panics, the slot is freed and the panic goes on.
func (p *Pool[C]) Get(ctx context.Context, key Key, dial func(ctx context.Context) (C, error)) (*Lease[C], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	start := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	ks := p.keyLocked(key)
	ks.dial = dial
	g, ok := p.tryAcquireLocked(ks)
	if ok {
		p.mu.Unlock()
		return p.use(ctx, ks, g, dial, start)
	}

	w := &waiter[C]{ks: ks, ready: make(chan grant[C], 1)}
	p.enqueueLocked(w)
	p.waited.Add(1)
	p.mu.Unlock()

	select {
	case g = <-w.ready:
	case <-ctx.Done():
		p.mu.Lock()
		if w.queued {
			p.dequeueLocked(w)
			p.mu.Unlock()
		} else {
			// Granted while ctx ended: the grant is in the channel. Give it back.
			p.mu.Unlock()
			if g = <-w.ready; g.err != nil {
				return nil, g.err
			}
			p.giveBack(ks, g)
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ctx.Err()
		}
		p.busy.Add(1)
		return nil, fmt.Errorf("%w: waited %v: %w", ErrBusy, time.Since(start).Round(time.Millisecond), ctx.Err())
	}
	if g.err != nil {
		return nil, g.err
	}
	return p.use(ctx, ks, g, dial, start)
}

// keyLocked returns key's state, making it (and its group's) if missing.
func (p *Pool[C]) keyLocked(key Key) *keyState[C] {
	if ks := p.keys[key.Conn]; ks != nil {
		return ks
	}
	name := key.Group
	if name == "" {
		name = key.Conn
	}
	g := p.groups[name]
	if g == nil {
		g = &groupState[C]{name: name, idle: list[C]{which: 1}}
		p.groups[name] = g
	}
	ks := &keyState[C]{key: key.Conn, g: g, idle: list[C]{which: 2}}
	p.keys[key.Conn] = ks
	return ks
}

// tryAcquireLocked finds what ks can have now without waiting. It is also the
// rule dispatchLocked applies to each waiter, so a new Get never jumps ahead
// of a waiter that could have been served.
func (p *Pool[C]) tryAcquireLocked(ks *keyState[C]) (grant[C], bool) {
	if e := ks.idle.back(); e != nil {
		p.unidleLocked(e)
		return grant[C]{entry: e}, true
	}
	g := ks.g
	groupFull, poolFull := g.count >= p.cfg.MaxPerGroup, p.total >= p.cfg.MaxTotal
	var gr grant[C]
	switch {
	case !groupFull && !poolFull:
	case g.idle.n > 0:
		// Another key of the group (another spelling of the user name, an
		// old password) has an idle conn: this key takes its slot rather
		// than waiting for it to time out. Its slot stays counted until it
		// is closed, which the new owner does before dialling: the bound
		// holds for open sockets, not just for the books.
		gr.victim = g.idle.front()
	case groupFull:
		return grant[C]{}, false
	case g.count > 0:
		// The pool is full. A group that already holds a conn (all in use)
		// waits for one of its own to come back, which takes one call's
		// time, rather than evicting another group's warm conn: that would
		// cost two logins and two folder selections, and under load from
		// more users than the pool holds it made the pool thrash
		// (cmd/mailbox-bench, 64 callers on 16 users). Only a group holding
		// nothing evicts.
		return grant[C]{}, false
	default:
		// The group has no idle conn, so the victim belongs to another.
		if gr.victim = p.victimLocked(); gr.victim == nil {
			return grant[C]{}, false
		}
	}
	if gr.victim != nil {
		p.unidleLocked(gr.victim)
		p.evicted.Add(1)
	}
	ks.count++
	g.count++
	p.total++
	return gr, true
}

// victimLocked is the idle conn a group holding nothing closes to make
// room when the pool is full: the least recently used of those that have
// served only the call they were dialled for, while they are at least a
// tenth of the pool; otherwise the least recently used of all.
//
// Plain LRU treats a conn dialled for a one-off call like one its user
// keeps coming back to. With many users of whom few are hot (Zipf), each
// cold call's conn then pushes out the least recently used, which is as
// likely a warm user's, and a full pool keeps only the users called within
// the last second or two (cmd/mailbox-bench -users, 10,000 users and a
// pool of 256: 38% of the calls logged in; 31% with this rule). The tenth
// kept for unproven conns gives a new user's conn the time of some tens of
// logins to be reused and so become proven; and when fewer are left the
// oldest conns of all go, so conns that proved themselves once but are no
// longer used do not hold their slots until IdleTimeout.
func (p *Pool[C]) victimLocked() *entry[C] {
	if p.unproven.n >= max(1, p.cfg.MaxTotal/10) {
		return p.unproven.front()
	}
	return p.idle.front()
}

// dispatchLocked serves waiters, oldest first, with whatever is free now.
// It must run after every change that can free a slot or an idle conn.
func (p *Pool[C]) dispatchLocked() {
	for w := p.wHead; w != nil; {
		next := w.next
		if g, ok := p.tryAcquireLocked(w.ks); ok {
			p.dequeueLocked(w)
			w.ready <- g
		}
		w = next
	}
}

// use turns a grant into a lease: it vets an idle entry (trying the key's next
// idle one, then dialling, while it fails) or dials into a reserved slot.
// start is when Get was called.
func (p *Pool[C]) use(ctx context.Context, ks *keyState[C], g grant[C], dial func(context.Context) (C, error), start time.Time) (*Lease[C], error) {
	if g.victim != nil {
		p.log.DebugContext(ctx, "evicted idle connection", "key", shortKey(g.victim.ks.key), "for", shortKey(ks.key))
		p.closeEntry(g.victim)
	}
	e := g.entry
	for e != nil {
		if p.vet(ctx, e) {
			e.proven = true // e is ours: in no idle list
			p.reused.Add(1)
			return &Lease[C]{p: p, e: e, reused: true}, nil
		}
		p.closeConn(e) // e's slot is ours now: reuse it for the next conn or a dial
		p.mu.Lock()
		if closed, ctxErr := p.closed, ctx.Err(); closed || ctxErr != nil {
			p.freeSlotLocked(ks)
			p.dispatchLocked()
			p.mu.Unlock()
			if closed {
				return nil, ErrClosed
			}
			return nil, ctxErr
		}
		e = ks.idle.back()
		if e != nil {
			p.unidleLocked(e)
			p.freeSlotLocked(ks) // e brings its own slot
			p.dispatchLocked()
		}
		p.mu.Unlock()
	}
	return p.dial(ctx, ks, dial, start)
}

// vet reports whether the idle entry e may be handed out: not expired, its
// login not older than Revalidate, and healthy if it has been idle longer
// than CheckAfter.
func (p *Pool[C]) vet(ctx context.Context, e *entry[C]) bool {
	now := time.Now()
	if p.stale(e, now) { // e is ours: nobody writes idleSince now
		p.expired.Add(1)
		return false
	}
	if p.cfg.Revalidate > 0 && now.Sub(e.created) >= p.cfg.Revalidate {
		p.revalidated.Add(1)
		p.log.Debug("login too old: dialling anew", "key", shortKey(e.ks.key))
		return false
	}
	if p.check == nil || now.Sub(e.idleSince) <= p.cfg.CheckAfter {
		return true
	}
	done := false
	defer func() {
		if !done { // check panicked: the conn is in an unknown state
			p.closeEntry(e)
		}
	}()
	err := p.check(ctx, e.conn)
	done = true
	if err != nil {
		p.discarded.Add(1)
		p.log.Debug("health check failed", "key", shortKey(e.ks.key), "err", err)
		return false
	}
	return true
}

// dial dials into ks's reserved slot for a Get called at start.
func (p *Pool[C]) dial(ctx context.Context, ks *keyState[C], dial func(context.Context) (C, error), start time.Time) (*Lease[C], error) {
	done := false
	defer func() {
		if !done { // dial panicked
			p.freeSlot(ks)
		}
	}()
	t := time.Now()
	c, err := dial(ctx)
	done = true
	// How long a Get that logs in takes, and in which part: before the
	// dial (waiting for a slot, closing a victim, vetting idle conns) and
	// the dial itself.
	p.log.DebugContext(ctx, "dialled", "key", shortKey(ks.key), "before_ms", msSince(start, t), "dial_ms", msSince(t, time.Now()), "ok", err == nil)
	if err != nil {
		p.dialFailed(ks, err)
		p.freeSlot(ks)
		return nil, err
	}
	p.opened.Add(1)
	e := &entry[C]{conn: c, ks: ks, created: time.Now()}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		p.closeEntry(e)
		return nil, ErrClosed
	}
	return &Lease[C]{p: p, e: e}, nil
}

// dialFailed closes every idle conn of ks when err says the server refused
// the credential: they logged in with what it now refuses.
func (p *Pool[C]) dialFailed(ks *keyState[C], err error) {
	if p.refused == nil || !p.refused(err) {
		return
	}
	p.mu.Lock()
	var gone []*entry[C]
	for e := ks.idle.front(); e != nil; e = ks.idle.front() {
		p.unidleLocked(e)
		gone = append(gone, e)
	}
	p.mu.Unlock()
	if len(gone) > 0 {
		p.log.Debug("login refused: closing the key's idle connections", "key", shortKey(ks.key), "n", len(gone))
	}
	for _, e := range gone {
		p.discarded.Add(1)
		p.closeEntry(e)
	}
}

// giveBack returns a slot or conn that a Get for ks was granted after its ctx
// ended.
func (p *Pool[C]) giveBack(ks *keyState[C], g grant[C]) {
	switch {
	case g.entry != nil:
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			p.closeEntry(g.entry)
			return
		}
		p.pushIdleLocked(g.entry) // keeps its idleSince: it was not used
		p.dispatchLocked()
		p.mu.Unlock()
	default:
		if g.victim != nil {
			p.closeEntry(g.victim)
		}
		p.freeSlot(ks)
	}
}

// Lease is one Get's hold on a connection. End it with Release or Discard;
// only the first of those calls counts.
type Lease[C Conn] struct {
	p      *Pool[C]
	e      *entry[C]
	reused bool
	done   atomic.Bool
}

// Conn returns the leased connection.
func (l *Lease[C]) Conn() C { return l.e.conn }

// Reused reports whether the connection was idle in the pool rather than
// dialled for this lease.
func (l *Lease[C]) Reused() bool { return l.reused }

// Release returns the connection to the pool as idle, or closes it if it is
// older than MaxLifetime or the pool is closed. Call it only when the
// connection is in a known good state; otherwise call Discard.
func (l *Lease[C]) Release() {
	if !l.done.CompareAndSwap(false, true) {
		return
	}
	p, e := l.p, l.e
	now := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.closeEntry(e)
		return
	}
	if p.cfg.MaxLifetime > 0 && now.Sub(e.created) >= p.cfg.MaxLifetime {
		p.mu.Unlock()
		p.expired.Add(1)
		p.closeEntry(e)
		return
	}
	e.idleSince = now
	p.pushIdleLocked(e)
	p.dispatchLocked()
	p.mu.Unlock()
}

// Discard closes the connection and frees its slot. Use it after any error,
// timeout or cancellation, when the connection's state is unknown.
func (l *Lease[C]) Discard() {
	if !l.done.CompareAndSwap(false, true) {
		return
	}
	l.p.discarded.Add(1)
	l.p.closeEntry(l.e)
}

// Stats returns a snapshot of the pool's counters.
func (p *Pool[C]) Stats() Stats {
	p.mu.Lock()
	s := Stats{Waiting: p.nWait, Idle: p.idle.n, InUse: p.total - p.idle.n}
	p.mu.Unlock()
	s.Opened = p.opened.Load()
	s.Reused = p.reused.Load()
	s.Discarded = p.discarded.Load()
	s.Evicted = p.evicted.Load()
	s.Expired = p.expired.Load()
	s.Revalidated = p.revalidated.Load()
	s.WaitedTotal = p.waited.Load()
	s.BusyErrors = p.busy.Load()
	return s
}

// Close closes every idle connection, after the graceful close given with
// WithGracefulClose if any (all concurrently, bounded by ctx: when ctx ends,
// the connections still closing are closed under it and Close returns an
// error wrapping ctx.Err()). Waiting and later Gets get ErrClosed; leased
// connections are closed when their lease ends, without a graceful close.
// It stops the janitor and cancels its renewals in progress (their new
// connections are closed). A second call waits for the first to finish.
func (p *Pool[C]) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		select {
		case <-p.closeDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.closed = true
	var idle []*entry[C]
	for e := p.idle.front(); e != nil; e = p.idle.front() {
		p.unidleLocked(e)
		idle = append(idle, e)
	}
	for w := p.wHead; w != nil; w = p.wHead {
		p.dequeueLocked(w)
		w.ready <- grant[C]{err: ErrClosed}
	}
	p.mu.Unlock()
	defer close(p.closeDone)

	close(p.stop)
	<-p.janitorDone
	p.cancel()
	renewed := make(chan struct{})
	go func() { p.renewals.Wait(); close(renewed) }()
	select {
	case <-renewed:
	case <-ctx.Done(): // a dial that ignores its ctx: its conn is closed when it returns
	}

	if p.graceful == nil {
		for _, e := range idle {
			p.closeEntry(e)
		}
		return nil
	}
	var wg sync.WaitGroup
	for _, e := range idle {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.closeEntry(e)
			defer p.recoverPanic("graceful close")
			p.graceful(ctx, e.conn)
		}()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		for _, e := range idle {
			p.closeConn(e)
		}
		return fmt.Errorf("pool: closing idle connections: %w", ctx.Err())
	}
}

// janitor closes idle conns past IdleTimeout or MaxLifetime, and renews
// those whose login nears Revalidate, until Close.
func (p *Pool[C]) janitor(every time.Duration) {
	defer close(p.janitorDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.sweep()
		}
	}
}

func (p *Pool[C]) sweep() {
	defer p.recoverPanic("janitor")
	now := time.Now()
	var dead, old []*entry[C]
	p.mu.Lock()
	for e := p.idle.front(); e != nil; {
		next := e.links[0].next
		switch {
		case p.stale(e, now):
			p.unidleLocked(e)
			dead = append(dead, e)
		case p.renewable(e, now):
			p.unidleLocked(e)
			old = append(old, e)
			p.renewals.Add(1) // before Close can wait: it waits for the janitor first
		}
		e = next
	}
	p.mu.Unlock()
	for _, e := range dead {
		p.expired.Add(1)
		p.log.Debug("closing expired idle connection", "key", shortKey(e.ks.key))
		p.closeEntry(e)
	}
	for _, e := range old {
		go p.renew(e)
	}
}

// renewable reports whether the janitor should renew idle entry e now: its
// login would be older than Revalidate by the next sweep, give or take half a
// tick for a late sweep and the dial's time, and it will not expire for
// idleness before then anyway.
func (p *Pool[C]) renewable(e *entry[C], now time.Time) bool {
	return p.cfg.Revalidate > 0 && e.ks.dial != nil &&
		now.Sub(e.created) >= p.cfg.Revalidate-p.tick*3/2 &&
		now.Sub(e.idleSince)+p.tick < p.cfg.IdleTimeout
}

// renew replaces idle entry e, taken out of the idle lists by sweep, with a
// fresh dial for its key, in the same slot: the old conn is closed first, so
// that the server never sees more than the bounds. A refused login closes
// the key's other idle conns too (dialFailed).
func (p *Pool[C]) renew(e *entry[C]) {
	defer p.renewals.Done()
	ks := e.ks
	p.mu.Lock()
	dial := ks.dial
	p.mu.Unlock()
	p.revalidated.Add(1)
	p.closeConn(e)
	done := false
	defer func() {
		if !done { // dial panicked (recovered below)
			p.freeSlot(ks)
		}
	}()
	defer p.recoverPanic("renewing a connection")
	c, err := dial(p.ctx)
	done = true
	if err != nil {
		p.log.Debug("renewing an idle connection failed", "key", shortKey(ks.key), "err", err)
		p.dialFailed(ks, err)
		p.freeSlot(ks)
		return
	}
	p.opened.Add(1)
	// It keeps the old conn's idle time and standing: a renewal is not a
	// use.
	fresh := &entry[C]{conn: c, ks: ks, created: time.Now(), idleSince: e.idleSince, proven: e.proven}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.closeEntry(fresh)
		return
	}
	p.pushIdleLocked(fresh)
	p.dispatchLocked()
	p.mu.Unlock()
}

// stale reports whether idle entry e is past IdleTimeout or MaxLifetime.
func (p *Pool[C]) stale(e *entry[C], now time.Time) bool {
	return now.Sub(e.idleSince) >= p.cfg.IdleTimeout ||
		(p.cfg.MaxLifetime > 0 && now.Sub(e.created) >= p.cfg.MaxLifetime)
}

// closeEntry closes e's conn (once) and then frees its slot: the slot counts
// until the socket is really closed.
func (p *Pool[C]) closeEntry(e *entry[C]) {
	p.closeConn(e)
	p.freeSlot(e.ks)
}

// closeConn closes e's conn the first time it is called for e. Never call it
// with p.mu held.
func (p *Pool[C]) closeConn(e *entry[C]) {
	if !e.closed.CompareAndSwap(false, true) {
		return
	}
	defer p.recoverPanic("Conn.Close")
	if err := e.conn.Close(); err != nil {
		p.log.Debug("closing connection", "key", shortKey(e.ks.key), "err", err)
	}
}

func (p *Pool[C]) freeSlot(ks *keyState[C]) {
	p.mu.Lock()
	p.freeSlotLocked(ks)
	p.dispatchLocked()
	p.mu.Unlock()
}

func (p *Pool[C]) freeSlotLocked(ks *keyState[C]) {
	ks.count--
	ks.g.count--
	p.total--
	p.dropIfUnusedLocked(ks)
}

func (p *Pool[C]) dropIfUnusedLocked(ks *keyState[C]) {
	if ks.count != 0 || ks.waiting != 0 {
		return
	}
	if p.keys[ks.key] == ks {
		delete(p.keys, ks.key)
	}
	if g := ks.g; g.count == 0 && g.waiting == 0 && p.groups[g.name] == g {
		delete(p.groups, g.name)
	}
}

func (p *Pool[C]) pushIdleLocked(e *entry[C]) {
	p.idle.pushBack(e)
	e.ks.g.idle.pushBack(e)
	e.ks.idle.pushBack(e)
	if !e.proven {
		p.unproven.pushBack(e)
	}
}

func (p *Pool[C]) unidleLocked(e *entry[C]) {
	p.idle.remove(e)
	e.ks.g.idle.remove(e)
	e.ks.idle.remove(e)
	if !e.proven {
		p.unproven.remove(e)
	}
}

func (p *Pool[C]) enqueueLocked(w *waiter[C]) {
	w.queued = true
	w.prev = p.wTail
	if p.wTail != nil {
		p.wTail.next = w
	} else {
		p.wHead = w
	}
	p.wTail = w
	p.nWait++
	w.ks.waiting++
	w.ks.g.waiting++
}

func (p *Pool[C]) dequeueLocked(w *waiter[C]) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		p.wHead = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		p.wTail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	p.nWait--
	w.ks.waiting--
	w.ks.g.waiting--
	p.dropIfUnusedLocked(w.ks)
}

func (p *Pool[C]) recoverPanic(where string) {
	if r := recover(); r != nil {
		p.log.Error("recovered panic", "in", where, "panic", r, "stack", string(debug.Stack()))
	}
}

// msSince is b - a in milliseconds, to the microsecond.
func msSince(a, b time.Time) float64 { return float64(b.Sub(a).Microseconds()) / 1000 }

// shortKey is as much of a key as may be logged.
func shortKey(k string) string {
	if len(k) <= 8 {
		return k
	}
	return k[:8] + "…"
}

// list is an intrusive doubly linked list of entries through links[which].
type list[C Conn] struct {
	head, tail *entry[C]
	n          int
	which      int
}

type link[C Conn] struct{ prev, next *entry[C] }

func (l *list[C]) front() *entry[C] { return l.head }
func (l *list[C]) back() *entry[C]  { return l.tail }

func (l *list[C]) pushBack(e *entry[C]) {
	k := &e.links[l.which]
	k.prev, k.next = l.tail, nil
	if l.tail != nil {
		l.tail.links[l.which].next = e
	} else {
		l.head = e
	}
	l.tail = e
	l.n++
}

func (l *list[C]) remove(e *entry[C]) {
	k := &e.links[l.which]
	if k.prev != nil {
		k.prev.links[l.which].next = k.next
	} else {
		l.head = k.next
	}
	if k.next != nil {
		k.next.links[l.which].prev = k.prev
	} else {
		l.tail = k.prev
	}
	k.prev, k.next = nil, nil
	l.n--
}
