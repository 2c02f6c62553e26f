// Package pool owns a keyed, bounded pool of long-lived connections: how many
// are open (in total and per key), which idle one is handed out next, when an
// idle or old one is closed, and who waits when none is free. It knows nothing
// about IMAP: the caller supplies the dial, health-check and graceful-close
// functions. It must not log a key in full (a key stands for a credential),
// and it never does I/O while holding its own lock.
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
	DefaultMaxPerKey   = 4
	DefaultIdleTimeout = 5 * time.Minute
	DefaultMaxLifetime = time.Hour
	DefaultCheckAfter  = 5 * time.Second
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

// Config bounds the pool. A zero field gets its default.
type Config struct {
	// MaxTotal bounds the connections open or being dialled, all keys together
	// (MAX_POOL_SIZE, default 50).
	MaxTotal int
	// MaxPerKey bounds the connections open or being dialled for one key, so
	// that one user cannot starve the others (default 4; at most MaxTotal).
	MaxPerKey int
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
}

func (c Config) withDefaults() Config {
	if c.MaxTotal <= 0 {
		c.MaxTotal = DefaultMaxTotal
	}
	if c.MaxPerKey <= 0 {
		c.MaxPerKey = DefaultMaxPerKey
	}
	c.MaxPerKey = min(c.MaxPerKey, c.MaxTotal)
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxLifetime == 0 {
		c.MaxLifetime = DefaultMaxLifetime
	}
	if c.CheckAfter == 0 {
		c.CheckAfter = DefaultCheckAfter
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

// Stats is a snapshot of the pool's counters (since New) and gauges (now).
type Stats struct {
	Opened      uint64 // connections dialled successfully
	Reused      uint64 // Gets served with an idle connection
	Discarded   uint64 // closed by Lease.Discard or after a failed health check
	Evicted     uint64 // idle connections closed to make room for another key
	Expired     uint64 // closed for IdleTimeout or MaxLifetime
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
	log      *slog.Logger

	mu     sync.Mutex
	keys   map[string]*keyState[C]
	idle   list[C] // every idle conn, least recently used first
	total  int     // slots held: idle + leased + checking + dialling + closing
	wHead  *waiter[C]
	wTail  *waiter[C]
	nWait  int
	closed bool

	stop        chan struct{} // closed by Close: stops the janitor
	janitorDone chan struct{}
	closeDone   chan struct{} // closed when the first Close returns

	opened, reused, discarded, evicted, expired, waited, busy atomic.Uint64
}

// keyState is one key's share of the pool. It exists while the key holds a
// slot or has a waiter.
type keyState[C Conn] struct {
	key     string
	count   int     // slots held by this key, like Pool.total
	waiting int     // waiters for this key
	idle    list[C] // this key's idle conns, most recently used last
}

// entry is one connection and its bookkeeping.
type entry[C Conn] struct {
	conn      C
	ks        *keyState[C]
	created   time.Time
	idleSince time.Time // set when released; guarded by Pool.mu
	links     [2]link[C]
	closed    atomic.Bool
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
		idle:        list[C]{which: 0},
		stop:        make(chan struct{}),
		janitorDone: make(chan struct{}),
		closeDone:   make(chan struct{}),
	}
	for _, o := range opts {
		o(p)
	}
	go p.janitor(max(p.cfg.IdleTimeout/4, minJanitorTick))
	return p
}

// Get returns a lease on a connection for key.
//
// It hands out the key's most recently used idle connection, health-checking
// it first if it has been idle longer than CheckAfter (a failing check
// discards it and Get tries the next one, then dials). Otherwise it dials a
// new connection if the key and the total are under their bounds; if only the
// total is full it first closes the least recently used idle connection of
// another key. Slots being dialled count against both bounds. A dial error is
// returned as it is and leaves nothing in the pool.
//
// If no slot is free, Get waits, in FIFO order with other waiters, for a
// release anywhere in the pool. If ctx's deadline passes while waiting it
// returns an error matching both ErrBusy and context.DeadlineExceeded; if ctx
// is cancelled it returns ctx.Err() (the caller went away: not "busy"). A ctx
// already done when Get is called gives ctx.Err(). After Close, Get returns
// ErrClosed.
//
// If dial or check panics, the slot is freed and the panic goes on.
func (p *Pool[C]) Get(ctx context.Context, key string, dial func(ctx context.Context) (C, error)) (*Lease[C], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	ks := p.keys[key]
	if ks == nil {
		ks = &keyState[C]{key: key, idle: list[C]{which: 1}}
		p.keys[key] = ks
	}
	g, ok := p.tryAcquireLocked(ks)
	if ok {
		p.mu.Unlock()
		return p.use(ctx, ks, g, dial)
	}

	w := &waiter[C]{ks: ks, ready: make(chan grant[C], 1)}
	p.enqueueLocked(w)
	p.waited.Add(1)
	p.mu.Unlock()
	start := time.Now()

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
	return p.use(ctx, ks, g, dial)
}

// tryAcquireLocked finds what ks can have now without waiting. It is also the
// rule dispatchLocked applies to each waiter, so a new Get never jumps ahead
// of a waiter that could have been served.
func (p *Pool[C]) tryAcquireLocked(ks *keyState[C]) (grant[C], bool) {
	if e := ks.idle.back(); e != nil {
		p.unidleLocked(e)
		return grant[C]{entry: e}, true
	}
	if ks.count >= p.cfg.MaxPerKey {
		return grant[C]{}, false
	}
	var g grant[C]
	if p.total >= p.cfg.MaxTotal {
		// The pool is full. A key that already holds a conn (all in use)
		// waits for one of its own to come back, which takes one call's time,
		// rather than evicting another key's warm conn: that would cost two
		// logins and two folder selections, and under load from more users
		// than the pool holds it made the pool thrash (cmd/mailbox-bench, 64
		// callers on 16 users). Only a key holding nothing evicts.
		if ks.count > 0 {
			return grant[C]{}, false
		}
		// ks has no idle conn, so the LRU one belongs to another key. Its slot
		// stays counted until it is closed, which the new owner does before
		// dialling: the bound holds for open sockets, not just for the books.
		victim := p.idle.front()
		if victim == nil {
			return grant[C]{}, false
		}
		p.unidleLocked(victim)
		p.evicted.Add(1)
		g.victim = victim
	}
	ks.count++
	p.total++
	return g, true
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
func (p *Pool[C]) use(ctx context.Context, ks *keyState[C], g grant[C], dial func(context.Context) (C, error)) (*Lease[C], error) {
	if g.victim != nil {
		p.log.Debug("evicted idle connection", "key", shortKey(g.victim.ks.key), "for", shortKey(ks.key))
		p.closeEntry(g.victim)
	}
	e := g.entry
	for e != nil {
		if p.vet(ctx, e) {
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
	return p.dial(ctx, ks, dial)
}

// vet reports whether the idle entry e may be handed out: not expired, and
// healthy if it has been idle longer than CheckAfter.
func (p *Pool[C]) vet(ctx context.Context, e *entry[C]) bool {
	now := time.Now()
	if p.stale(e, now) { // e is ours: nobody writes idleSince now
		p.expired.Add(1)
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

func (p *Pool[C]) dial(ctx context.Context, ks *keyState[C], dial func(context.Context) (C, error)) (*Lease[C], error) {
	done := false
	defer func() {
		if !done { // dial panicked
			p.freeSlot(ks)
		}
	}()
	c, err := dial(ctx)
	done = true
	if err != nil {
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
	s.WaitedTotal = p.waited.Load()
	s.BusyErrors = p.busy.Load()
	return s
}

// Close closes every idle connection, after the graceful close given with
// WithGracefulClose if any (all concurrently, bounded by ctx: when ctx ends,
// the connections still closing are closed under it and Close returns an
// error wrapping ctx.Err()). Waiting and later Gets get ErrClosed; leased
// connections are closed when their lease ends, without a graceful close.
// It stops the janitor. A second call waits for the first to finish.
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

// janitor closes idle conns past IdleTimeout or MaxLifetime until Close.
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
	var dead []*entry[C]
	p.mu.Lock()
	for e := p.idle.front(); e != nil; {
		next := e.links[0].next
		if p.stale(e, now) {
			p.unidleLocked(e)
			dead = append(dead, e)
		}
		e = next
	}
	p.mu.Unlock()
	for _, e := range dead {
		p.expired.Add(1)
		p.log.Debug("closing expired idle connection", "key", shortKey(e.ks.key))
		p.closeEntry(e)
	}
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
	p.total--
	p.dropIfUnusedLocked(ks)
}

func (p *Pool[C]) dropIfUnusedLocked(ks *keyState[C]) {
	if ks.count == 0 && ks.waiting == 0 {
		delete(p.keys, ks.key)
	}
}

func (p *Pool[C]) pushIdleLocked(e *entry[C]) {
	p.idle.pushBack(e)
	e.ks.idle.pushBack(e)
}

func (p *Pool[C]) unidleLocked(e *entry[C]) {
	p.idle.remove(e)
	e.ks.idle.remove(e)
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
	p.dropIfUnusedLocked(w.ks)
}

func (p *Pool[C]) recoverPanic(where string) {
	if r := recover(); r != nil {
		p.log.Error("recovered panic", "in", where, "panic", r, "stack", string(debug.Stack()))
	}
}

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
