package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeConn is a connection that records how often it was closed.
type fakeConn struct {
	id       int
	key      string
	group    string
	tr       *tracker
	closes   atomic.Int32
	leased   atomic.Int32 // leases holding it now (stress test)
	closedAt atomic.Int64 // UnixNano of the first Close
}

func (c *fakeConn) Close() error {
	if c.tr.onClose != nil {
		c.tr.onClose(c)
	}
	if c.closes.Add(1) == 1 {
		c.closedAt.Store(time.Now().UnixNano())
		c.tr.mu.Lock()
		c.tr.open--
		c.tr.openPer[c.group]--
		c.tr.mu.Unlock()
	}
	return nil
}

func (c *fakeConn) isClosed() bool { return c.closes.Load() > 0 }

// tracker dials fakeConns and counts how many are open, now and at most, in
// all and per group.
type tracker struct {
	mu      sync.Mutex
	all     []*fakeConn
	open    int
	openPer map[string]int // by group
	maxOpen int
	maxPer  int
	onClose func(*fakeConn) // set before use
}

func newTracker() *tracker { return &tracker{openPer: map[string]int{}} }

var errDial = errors.New("dial failed: authentication failed")

// dialer dials conns for key, in a group of its own (K(key)).
func (tr *tracker) dialer(key string) func(context.Context) (*fakeConn, error) {
	return tr.dialerIn(key, key)
}

// dialerIn dials conns for Key{group, key}.
func (tr *tracker) dialerIn(group, key string) func(context.Context) (*fakeConn, error) {
	return func(ctx context.Context) (*fakeConn, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		c := &fakeConn{id: len(tr.all) + 1, key: key, group: group, tr: tr}
		tr.all = append(tr.all, c)
		tr.open++
		tr.openPer[group]++
		tr.maxOpen = max(tr.maxOpen, tr.open)
		tr.maxPer = max(tr.maxPer, tr.openPer[group])
		return c, nil
	}
}

func (tr *tracker) snapshot() (open, maxOpen, maxPer int, all []*fakeConn) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.open, tr.maxOpen, tr.maxPer, append([]*fakeConn(nil), tr.all...)
}

func failDial(context.Context) (*fakeConn, error) { return nil, errDial }

// newPool makes a pool whose conns' Close checks that the pool's mutex is not
// held, and which is closed when the test ends.
func newPool(t *testing.T, tr *tracker, cfg Config, check func(context.Context, *fakeConn) error, opts ...Option[*fakeConn]) *Pool[*fakeConn] {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := New(cfg, check, logger, opts...)
	tr.onClose = func(*fakeConn) { assertUnlocked(t, p, "Conn.Close") }
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// assertUnlocked fails if p.mu stays locked for a second: Close and check
// must never run under the pool's lock (it would also deadlock there).
func assertUnlocked(t *testing.T, p *Pool[*fakeConn], what string) {
	deadline := time.Now().Add(time.Second)
	for !p.mu.TryLock() {
		if time.Now().After(deadline) {
			t.Errorf("%s called with the pool mutex held", what)
			return
		}
		runtime.Gosched()
	}
	p.mu.Unlock()
}

// K is the key of conns for s, in a group of its own.
func K(s string) Key { return Key{Conn: s} }

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustGet(t *testing.T, p *Pool[*fakeConn], key string, dial func(context.Context) (*fakeConn, error)) *Lease[*fakeConn] {
	t.Helper()
	l, err := p.Get(ctxTimeout(t, 5*time.Second), K(key), dial)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return l
}

// getAsync starts a Get in a goroutine and returns where its result arrives.
type result struct {
	l   *Lease[*fakeConn]
	err error
}

func getAsync(ctx context.Context, p *Pool[*fakeConn], key Key, dial func(context.Context) (*fakeConn, error)) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := p.Get(ctx, key, dial)
		ch <- result{l, err}
	}()
	return ch
}

func receive(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("Get did not return")
		return result{}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func waiting(p *Pool[*fakeConn], n int) func() bool {
	return func() bool { return p.Stats().Waiting == n }
}

// setJanitorTick lowers the janitor's minimum tick for one test.
func setJanitorTick(t *testing.T, d time.Duration) {
	old := minJanitorTick
	minJanitorTick = d
	t.Cleanup(func() { minJanitorTick = old })
}

func TestReuse(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{}, nil)
	l1 := mustGet(t, p, "alice", tr.dialer("alice"))
	if l1.Reused() {
		t.Error("first lease reports Reused")
	}
	c1 := l1.Conn()
	l1.Release()
	l2 := mustGet(t, p, "alice", tr.dialer("alice"))
	if l2.Conn() != c1 || !l2.Reused() {
		t.Fatalf("second Get: conn %d reused=%v, want conn %d reused", l2.Conn().id, l2.Reused(), c1.id)
	}
	s := p.Stats()
	if s.Opened != 1 || s.Reused != 1 || s.InUse != 1 || s.Idle != 0 {
		t.Errorf("stats = %+v, want Opened 1 Reused 1 InUse 1 Idle 0", s)
	}
	// Another key never gets alice's connection.
	l3 := mustGet(t, p, "bob", tr.dialer("bob"))
	if l3.Conn() == c1 || l3.Reused() {
		t.Error("bob got alice's connection")
	}
	l2.Release()
	l3.Release()
	if s := p.Stats(); s.Idle != 2 || s.InUse != 0 {
		t.Errorf("after release: %+v", s)
	}
}

func TestMostRecentlyUsedFirst(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{}, nil)
	a := mustGet(t, p, "k", tr.dialer("k"))
	b := mustGet(t, p, "k", tr.dialer("k"))
	a.Release()
	b.Release()
	if l := mustGet(t, p, "k", tr.dialer("k")); l.Conn() != b.Conn() {
		t.Errorf("got conn %d, want the most recently released %d", l.Conn().id, b.Conn().id)
	}
}

func TestPerKeyBound(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxTotal: 10, MaxPerGroup: 4}, nil)
	var held []*Lease[*fakeConn]
	for range 4 {
		held = append(held, mustGet(t, p, "A", tr.dialer("A")))
	}
	fifth := getAsync(ctxTimeout(t, 5*time.Second), p, K("A"), tr.dialer("A"))
	waitFor(t, "the 5th Get of A to wait", waiting(p, 1))
	select {
	case r := <-fifth:
		t.Fatalf("5th concurrent Get of one key did not wait: %+v", r)
	case <-time.After(30 * time.Millisecond):
	}

	// Another key is not starved by A.
	lb, err := p.Get(ctxTimeout(t, 100*time.Millisecond), K("B"), tr.dialer("B"))
	if err != nil {
		t.Fatalf("Get(B) while A is at its bound: %v", err)
	}
	if open, _, maxPer, _ := tr.snapshot(); open != 5 || maxPer != 4 {
		t.Errorf("open %d, max per key %d; want 5 and 4", open, maxPer)
	}

	held[2].Release()
	r := receive(t, fifth)
	if r.err != nil || r.l.Conn() != held[2].Conn() || !r.l.Reused() {
		t.Fatalf("5th Get = %+v, want the released conn", r)
	}
	if s := p.Stats(); s.WaitedTotal != 1 || s.Waiting != 0 || s.Opened != 5 {
		t.Errorf("stats = %+v", s)
	}
	lb.Release()
}

func TestTotalBoundEvictsLRUIdleOfAnotherKey(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxTotal: 3, MaxPerGroup: 2}, nil)
	la := mustGet(t, p, "A", tr.dialer("A"))
	lb := mustGet(t, p, "B", tr.dialer("B"))
	lc := mustGet(t, p, "C", tr.dialer("C"))
	la.Release() // A is now the least recently used idle conn
	lb.Release()

	ld := mustGet(t, p, "D", tr.dialer("D"))
	if !la.Conn().isClosed() || lb.Conn().isClosed() {
		t.Fatalf("after Get(D): A closed=%v B closed=%v, want only A (LRU) closed", la.Conn().isClosed(), lb.Conn().isClosed())
	}
	le := mustGet(t, p, "E", tr.dialer("E"))
	if !lb.Conn().isClosed() {
		t.Fatal("after Get(E): B's idle conn not evicted")
	}
	if s := p.Stats(); s.Evicted != 2 || s.Opened != 5 || s.Idle != 0 || s.InUse != 3 {
		t.Errorf("stats = %+v, want Evicted 2 Opened 5 InUse 3", s)
	}

	// Nothing idle: a Get for a new key waits and gets ErrBusy.
	if _, err := p.Get(ctxTimeout(t, 20*time.Millisecond), K("F"), tr.dialer("F")); !errors.Is(err, ErrBusy) {
		t.Fatalf("Get(F) with all conns in use: err = %v, want ErrBusy", err)
	}
	if open, maxOpen, _, _ := tr.snapshot(); open != 3 || maxOpen != 3 {
		t.Errorf("open %d max %d, want 3 and 3", open, maxOpen)
	}
	lc.Release()
	ld.Release()
	le.Release()
}

// A key that already holds a conn waits for its own when the pool is full,
// instead of evicting another key's idle conn (the pool would thrash under
// more users than it holds).
func TestFullPoolKeyWithConnWaitsForItsOwn(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxTotal: 2, MaxPerGroup: 2}, nil)
	la := mustGet(t, p, "A", tr.dialer("A"))
	lb := mustGet(t, p, "B", tr.dialer("B"))
	lb.Release() // B idle, A leased, pool full

	a2 := getAsync(ctxTimeout(t, 5*time.Second), p, K("A"), tr.dialer("A"))
	waitFor(t, "the second Get(A) to wait", waiting(p, 1))
	if lb.Conn().isClosed() {
		t.Fatal("B's idle conn was evicted for a key that already holds a conn")
	}
	la.Release()
	r := receive(t, a2)
	if r.err != nil || r.l.Conn() != la.Conn() || !r.l.Reused() {
		t.Fatalf("second Get(A) = %+v, want A's released conn", r)
	}
	if lb.Conn().isClosed() {
		t.Error("B's idle conn was closed")
	}
	if s := p.Stats(); s.Evicted != 0 || s.Opened != 2 {
		t.Errorf("stats = %+v, want Evicted 0 Opened 2", s)
	}
	r.l.Release()

	// A key holding nothing still evicts the LRU idle conn.
	lc := mustGet(t, p, "C", tr.dialer("C"))
	if !lb.Conn().isClosed() {
		t.Error("C did not evict B's idle conn")
	}
	lc.Release()
}

func TestWaiterOnTotalWokenBySlotOfAnotherKey(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxTotal: 2, MaxPerGroup: 2}, nil)
	la := mustGet(t, p, "A", tr.dialer("A"))
	lb := mustGet(t, p, "B", tr.dialer("B"))

	// A slot freed by a Discard of another key wakes C.
	c := getAsync(ctxTimeout(t, 5*time.Second), p, K("C"), tr.dialer("C"))
	waitFor(t, "C to wait", waiting(p, 1))
	la.Discard()
	rc := receive(t, c)
	if rc.err != nil || rc.l.Conn().key != "C" {
		t.Fatalf("C: %+v", rc)
	}

	// An idle conn released by another key wakes D, which evicts it.
	d := getAsync(ctxTimeout(t, 5*time.Second), p, K("D"), tr.dialer("D"))
	waitFor(t, "D to wait", waiting(p, 1))
	lb.Release()
	rd := receive(t, d)
	if rd.err != nil || rd.l.Conn().key != "D" {
		t.Fatalf("D: %+v", rd)
	}
	if !lb.Conn().isClosed() {
		t.Error("B's idle conn was not evicted for D")
	}
	if _, maxOpen, _, _ := tr.snapshot(); maxOpen > 2 {
		t.Errorf("%d conns open at once, bound is 2", maxOpen)
	}
	if s := p.Stats(); s.Evicted != 1 || s.WaitedTotal != 2 {
		t.Errorf("stats = %+v", s)
	}
}

func TestWaitersServedInOrder(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxPerGroup: 1}, nil)
	first := mustGet(t, p, "A", tr.dialer("A"))
	order := make(chan int, 3)
	var wg sync.WaitGroup
	for i := 1; i <= 3; i++ {
		wg.Go(func() {
			l, err := p.Get(ctxTimeout(t, 5*time.Second), K("A"), tr.dialer("A"))
			if err != nil {
				t.Error(err)
				return
			}
			if l.Conn() != first.Conn() {
				t.Errorf("waiter %d got conn %d, want the released %d", i, l.Conn().id, first.Conn().id)
			}
			order <- i
			l.Release()
		})
		waitFor(t, fmt.Sprintf("waiter %d to queue", i), waiting(p, i))
	}
	first.Release()
	wg.Wait()
	close(order)
	want := 1
	for got := range order {
		if got != want {
			t.Errorf("waiter %d served as number %d", got, want)
		}
		want++
	}
}

func TestDeadlineWhileWaitingIsErrBusy(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxTotal: 1}, nil)
	held := mustGet(t, p, "A", tr.dialer("A"))
	defer held.Release()

	const deadline = 100 * time.Millisecond
	start := time.Now()
	_, err := p.Get(ctxTimeout(t, deadline), K("A"), tr.dialer("A"))
	elapsed := time.Since(start)
	if !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrBusy wrapping context.DeadlineExceeded", err)
	}
	if elapsed < deadline-5*time.Millisecond || elapsed > deadline+150*time.Millisecond {
		t.Errorf("ErrBusy after %v, want about %v", elapsed, deadline)
	}
	if s := p.Stats(); s.BusyErrors != 1 || s.WaitedTotal != 1 || s.Waiting != 0 {
		t.Errorf("stats = %+v", s)
	}

	// Cancellation is the caller going away, not the server being busy.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := p.Get(ctx, K("B"), tr.dialer("B")); err != context.Canceled {
		t.Fatalf("cancelled wait: err = %v, want context.Canceled", err)
	}
	// A context already done does not even wait.
	if _, err := p.Get(ctx, K("B"), tr.dialer("B")); err != context.Canceled {
		t.Fatalf("Get with a done ctx: %v", err)
	}
	if s := p.Stats(); s.BusyErrors != 1 || s.WaitedTotal != 2 || s.Waiting != 0 {
		t.Errorf("stats = %+v", s)
	}
	p.mu.Lock()
	_, leftover := p.keys["B"]
	p.mu.Unlock()
	if leftover {
		t.Error("a waiter that gave up left its key in the pool")
	}
}

func TestFailedDialLeavesNothing(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxTotal: 4, MaxPerGroup: 1}, nil)
	mustGet(t, p, "A", tr.dialer("A")).Release()
	before := p.Stats()
	_, err := p.Get(ctxTimeout(t, time.Second), K("B"), failDial)
	if err != errDial {
		t.Fatalf("err = %v, want the dial error as it is", err)
	}
	if after := p.Stats(); after != before {
		t.Errorf("failed dial changed stats:\nbefore %+v\nafter  %+v", before, after)
	}
	p.mu.Lock()
	total, leftover := p.total, p.keys["B"]
	p.mu.Unlock()
	if total != 1 || leftover != nil {
		t.Errorf("after a failed dial: total %d, key state %v", total, leftover)
	}

	// The slot of a dial in progress counts against the bound, and is freed
	// when it fails: a waiter then gets it.
	release := make(chan struct{})
	slowFail := func(context.Context) (*fakeConn, error) { <-release; return nil, errDial }
	first := getAsync(ctxTimeout(t, 5*time.Second), p, K("B"), slowFail)
	waitFor(t, "the dial to start", func() bool { return p.Stats().InUse == 1 })
	second := getAsync(ctxTimeout(t, 5*time.Second), p, K("B"), tr.dialer("B"))
	waitFor(t, "the second Get to wait for the dialling slot", waiting(p, 1))
	close(release)
	if r := receive(t, first); r.err != errDial {
		t.Fatalf("first: %v", r.err)
	}
	r := receive(t, second)
	if r.err != nil {
		t.Fatalf("second Get after the failed dial: %v", r.err)
	}
	r.l.Release()
}

func TestHealthCheck(t *testing.T) {
	tr := newTracker()
	var checks atomic.Int32
	var failing atomic.Bool
	check := func(ctx context.Context, c *fakeConn) error {
		checks.Add(1)
		if c.isClosed() {
			t.Error("checked a closed conn")
		}
		if failing.Load() {
			return errors.New("NOOP failed")
		}
		return nil
	}
	const after = 30 * time.Millisecond
	var p *Pool[*fakeConn]
	p = newPool(t, tr, Config{CheckAfter: after}, func(ctx context.Context, c *fakeConn) error {
		assertUnlocked(t, p, "check")
		return check(ctx, c)
	})

	l := mustGet(t, p, "A", tr.dialer("A"))
	c1 := l.Conn()
	l.Release()
	l = mustGet(t, p, "A", tr.dialer("A"))
	if checks.Load() != 0 {
		t.Error("a conn idle shorter than CheckAfter was checked")
	}
	l.Release()

	time.Sleep(after + 10*time.Millisecond)
	l = mustGet(t, p, "A", tr.dialer("A"))
	if checks.Load() != 1 || l.Conn() != c1 || !l.Reused() {
		t.Fatalf("healthy idle conn: checks %d, conn %d reused %v", checks.Load(), l.Conn().id, l.Reused())
	}
	l.Release()

	time.Sleep(after + 10*time.Millisecond)
	failing.Store(true)
	l = mustGet(t, p, "A", tr.dialer("A"))
	if checks.Load() != 2 || !c1.isClosed() || l.Conn() == c1 || l.Reused() {
		t.Fatalf("failing check: checks %d, old closed %v, got conn %d reused %v", checks.Load(), c1.isClosed(), l.Conn().id, l.Reused())
	}
	if s := p.Stats(); s.Discarded != 1 || s.Opened != 2 || s.Reused != 2 || s.InUse != 1 {
		t.Errorf("stats = %+v", s)
	}
	l.Release()
}

func TestFailedCheckTriesNextIdle(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{CheckAfter: -1}, func(_ context.Context, c *fakeConn) error {
		if c.id == 2 {
			return errors.New("broken")
		}
		return nil
	})
	a := mustGet(t, p, "A", tr.dialer("A")) // id 1
	b := mustGet(t, p, "A", tr.dialer("A")) // id 2, broken
	a.Release()
	b.Release() // most recently used: tried first
	l := mustGet(t, p, "A", tr.dialer("A"))
	if l.Conn() != a.Conn() || !b.Conn().isClosed() {
		t.Fatalf("got conn %d (want %d), broken one closed %v", l.Conn().id, a.Conn().id, b.Conn().isClosed())
	}
	if s := p.Stats(); s.Opened != 2 || s.Discarded != 1 || s.InUse != 1 || s.Idle != 0 {
		t.Errorf("stats = %+v", s)
	}
	l.Release()
}

func TestJanitorClosesIdle(t *testing.T) {
	setJanitorTick(t, 5*time.Millisecond)
	tr := newTracker()
	const idle = 40 * time.Millisecond
	p := newPool(t, tr, Config{IdleTimeout: idle}, nil)
	l := mustGet(t, p, "A", tr.dialer("A"))
	c := l.Conn()
	released := time.Now()
	l.Release()
	waitFor(t, "the janitor to close the idle conn", c.isClosed)
	if d := time.Unix(0, c.closedAt.Load()).Sub(released); d < idle {
		t.Errorf("closed after %v idle, IdleTimeout is %v", d, idle)
	}
	if s := p.Stats(); s.Expired != 1 || s.Idle != 0 || s.InUse != 0 {
		t.Errorf("stats = %+v", s)
	}
	p.mu.Lock()
	nkeys := len(p.keys)
	p.mu.Unlock()
	if nkeys != 0 {
		t.Errorf("%d keys left after all conns closed", nkeys)
	}
}

func TestMaxLifetime(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxLifetime: 20 * time.Millisecond}, nil)
	l := mustGet(t, p, "A", tr.dialer("A"))
	time.Sleep(30 * time.Millisecond)
	l.Release()
	if !l.Conn().isClosed() {
		t.Fatal("conn past MaxLifetime not closed on release")
	}
	if s := p.Stats(); s.Expired != 1 || s.Idle != 0 || s.InUse != 0 {
		t.Errorf("stats = %+v", s)
	}
}

func TestDiscardCloses(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxPerGroup: 1}, nil)
	l := mustGet(t, p, "A", tr.dialer("A"))
	l.Discard()
	l.Release() // ignored: the first call counts
	l.Discard()
	if n := l.Conn().closes.Load(); n != 1 {
		t.Fatalf("conn closed %d times, want 1", n)
	}
	if s := p.Stats(); s.Discarded != 1 || s.Idle != 0 || s.InUse != 0 {
		t.Errorf("stats = %+v", s)
	}
	// The slot is free again.
	l2, err := p.Get(ctxTimeout(t, 50*time.Millisecond), K("A"), tr.dialer("A"))
	if err != nil || l2.Conn() == l.Conn() {
		t.Fatalf("Get after Discard: %v", err)
	}
	l2.Release()
	l2.Discard() // ignored
	if l2.Conn().isClosed() || p.Stats().Idle != 1 {
		t.Error("Discard after Release closed the conn")
	}
}

func TestConnClosePanicIsContained(t *testing.T) {
	p := New[*panicConn](Config{MaxPerGroup: 1}, nil, nil)
	defer p.Close(context.Background())
	dial := func(context.Context) (*panicConn, error) { return &panicConn{}, nil }
	l, err := p.Get(context.Background(), K("A"), dial)
	if err != nil {
		t.Fatal(err)
	}
	l.Discard() // must not panic, and must free the slot
	if _, err := p.Get(ctxTimeout(t, 50*time.Millisecond), K("A"), dial); err != nil {
		t.Fatalf("slot not freed after Close panicked: %v", err)
	}
}

type panicConn struct{}

func (*panicConn) Close() error { panic("boom") }

func TestPanicInDialOrCheckFreesSlot(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxPerGroup: 1, CheckAfter: -1}, func(context.Context, *fakeConn) error { panic("check boom") })
	mustPanic := func(f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Error("no panic")
			}
		}()
		f()
	}
	mustPanic(func() {
		p.Get(context.Background(), K("A"), func(context.Context) (*fakeConn, error) { panic("dial boom") })
	})
	l := mustGet(t, p, "A", tr.dialer("A"))
	l.Release()
	mustPanic(func() { p.Get(context.Background(), K("A"), tr.dialer("A")) })
	if !l.Conn().isClosed() {
		t.Error("conn whose check panicked was not closed")
	}
	if s := p.Stats(); s.InUse != 0 || s.Idle != 0 {
		t.Errorf("slots left after panics: %+v", s)
	}
}

func TestReleaseAfterCloseCloses(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{}, nil)
	l := mustGet(t, p, "A", tr.dialer("A"))
	idle := mustGet(t, p, "B", tr.dialer("B"))
	idle.Release()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l.Conn().isClosed() || !idle.Conn().isClosed() {
		t.Fatalf("after Close: leased conn closed %v (want false), idle conn closed %v (want true)", l.Conn().isClosed(), idle.Conn().isClosed())
	}
	if s := p.Stats(); s.Idle != 0 || s.InUse != 1 {
		t.Errorf("after Close with one lease out: %+v, want Idle 0 InUse 1", s)
	}
	l.Release()
	if !l.Conn().isClosed() {
		t.Fatal("Release after Close did not close the conn")
	}
	if _, err := p.Get(context.Background(), K("A"), tr.dialer("A")); err != ErrClosed {
		t.Fatalf("Get after Close: %v", err)
	}
	if s := p.Stats(); s.InUse != 0 || s.Idle != 0 {
		t.Errorf("stats = %+v", s)
	}
}

func TestCloseIsGraceful(t *testing.T) {
	tr := newTracker()
	var graceful sync.Map // conn id -> true
	p := newPool(t, tr, Config{MaxPerGroup: 1}, nil, WithGracefulClose(func(ctx context.Context, c *fakeConn) {
		time.Sleep(20 * time.Millisecond) // LOGOUT round trip
		if c.isClosed() {
			t.Errorf("conn %d closed before its graceful close ended", c.id)
		}
		graceful.Store(c.id, true)
	}))
	held := mustGet(t, p, "A", tr.dialer("A"))
	lb := mustGet(t, p, "B", tr.dialer("B"))
	lc := mustGet(t, p, "C", tr.dialer("C"))
	lb.Release()
	lc.Release()
	waiter := getAsync(context.Background(), p, K("A"), tr.dialer("A"))
	waitFor(t, "the waiter", waiting(p, 1))

	if err := p.Close(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, l := range []*Lease[*fakeConn]{lb, lc} {
		if _, ok := graceful.Load(l.Conn().id); !ok || l.Conn().closes.Load() != 1 {
			t.Errorf("conn %d: graceful %v, closes %d", l.Conn().id, ok, l.Conn().closes.Load())
		}
	}
	if r := receive(t, waiter); r.err != ErrClosed {
		t.Errorf("waiter: %v, want ErrClosed", r.err)
	}
	if _, err := p.Get(context.Background(), K("D"), tr.dialer("D")); err != ErrClosed {
		t.Errorf("Get after Close: %v", err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	held.Release()
	if _, ok := graceful.Load(held.Conn().id); ok || !held.Conn().isClosed() {
		t.Error("a conn released after Close should be closed, without a graceful close")
	}
}

func TestCloseBoundedByCtx(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{}, nil, WithGracefulClose(func(ctx context.Context, c *fakeConn) {
		<-ctx.Done() // a server that never answers LOGOUT
	}))
	l := mustGet(t, p, "A", tr.dialer("A"))
	l.Release()
	start := time.Now()
	err := p.Close(ctxTimeout(t, 50*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second { // bounded by the ctx, not hanging
		t.Errorf("Close took %v with a 50ms ctx", d)
	}
	if !l.Conn().isClosed() {
		t.Error("conn not closed when the graceful close ran out of time")
	}
	waitFor(t, "the slot to be freed", func() bool { return p.Stats().InUse == 0 })
	if n := l.Conn().closes.Load(); n != 1 {
		t.Errorf("closed %d times", n)
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	tr := newTracker()
	p := newPool(t, tr, Config{MaxTotal: 2, MaxPerGroup: 1}, nil, WithGracefulClose(func(context.Context, *fakeConn) {}))
	a := mustGet(t, p, "A", tr.dialer("A"))
	mustGet(t, p, "B", tr.dialer("B")).Release()
	_, _ = p.Get(ctxTimeout(t, 10*time.Millisecond), K("A"), tr.dialer("A")) // ErrBusy
	w := getAsync(context.Background(), p, K("A"), tr.dialer("A"))
	waitFor(t, "the waiter", waiting(p, 1))
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	receive(t, w)
	a.Release()
	waitFor(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= before })
	_, _, _, all := tr.snapshot()
	for _, c := range all {
		if c.closes.Load() != 1 {
			t.Errorf("conn %d closed %d times", c.id, c.closes.Load())
		}
	}
}

func TestStress(t *testing.T) {
	setJanitorTick(t, 2*time.Millisecond)
	const (
		goroutines  = 64
		gets        = 200
		keys        = 16
		groups      = 6 // keys share groups: the bound is per group
		maxTotal    = 10
		maxPerGroup = 4
	)
	tr := newTracker()
	var p *Pool[*fakeConn]
	check := func(_ context.Context, c *fakeConn) error {
		assertUnlocked(t, p, "check")
		if c.isClosed() || c.leased.Load() != 1 {
			t.Errorf("checked conn %d: closed %v, leases %d", c.id, c.isClosed(), c.leased.Load())
		}
		if rand.IntN(30) == 0 {
			return errors.New("NOOP failed")
		}
		return nil
	}
	p = newPool(t, tr, Config{
		MaxTotal:    maxTotal,
		MaxPerGroup: maxPerGroup,
		IdleTimeout: 5 * time.Millisecond,
		MaxLifetime: 4 * time.Millisecond,
		CheckAfter:  time.Millisecond,
		Revalidate:  3 * time.Millisecond,
	}, func(ctx context.Context, c *fakeConn) error {
		// The lease does not exist yet while checking: mark it here.
		c.leased.Add(1)
		defer c.leased.Add(-1)
		return check(ctx, c)
	}, WithRefused[*fakeConn](func(err error) bool { return errors.Is(err, errDial) }))

	var ok, busy, dialFailed atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			for range gets {
				k := rng.IntN(keys)
				key, group := fmt.Sprintf("key-%02d", k), fmt.Sprintf("group-%d", k%groups)
				timeout := 10 * time.Second
				if rng.IntN(20) == 0 {
					timeout = time.Duration(rng.IntN(500)) * time.Microsecond // gives up while waiting
				}
				dial := tr.dialerIn(group, key)
				if rng.IntN(20) == 0 {
					dial = failDial
				}
				slow := time.Duration(rng.IntN(200)) * time.Microsecond
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				l, err := p.Get(ctx, Key{Group: group, Conn: key}, func(ctx context.Context) (*fakeConn, error) {
					time.Sleep(slow)
					return dial(ctx)
				})
				cancel()
				switch {
				case err == nil:
				case errors.Is(err, errDial):
					dialFailed.Add(1)
					continue
				case errors.Is(err, context.DeadlineExceeded) && timeout < time.Second:
					busy.Add(1)
					continue
				default:
					t.Errorf("Get: %v", err)
					return
				}
				ok.Add(1)
				c := l.Conn()
				if n := c.leased.Add(1); n != 1 || c.isClosed() || c.key != key {
					t.Errorf("conn %d (key %s) leased for %s: %d leases, closed %v", c.id, c.key, key, n, c.isClosed())
				}
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
				} else {
					runtime.Gosched()
				}
				c.leased.Add(-1)
				if rng.IntN(10) == 0 {
					l.Discard()
					l.Release() // ignored
				} else {
					l.Release()
					if rng.IntN(10) == 0 {
						l.Discard() // ignored
					}
				}
			}
		})
	}
	wg.Wait()
	s := p.Stats()
	t.Logf("%d leases, %d gave up, %d failed dials; %+v", ok.Load(), busy.Load(), dialFailed.Load(), s)
	if s.Waiting != 0 {
		t.Errorf("after all leases ended: %+v", s)
	}
	// Only the janitor's renewals may still hold a slot, briefly.
	waitFor(t, "the janitor to close the idle conns", func() bool { s := p.Stats(); return s.Idle == 0 && s.InUse == 0 })
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	open, maxOpen, maxPer, all := tr.snapshot()
	if maxOpen > maxTotal || maxPer > maxPerGroup {
		t.Errorf("at most %d conns open (bound %d), %d for one group (bound %d)", maxOpen, maxTotal, maxPer, maxPerGroup)
	}
	if open != 0 {
		t.Errorf("%d conns still open after Close", open)
	}
	for _, c := range all {
		if n := c.closes.Load(); n != 1 {
			t.Errorf("conn %d closed %d times", c.id, n)
		}
	}
	s = p.Stats()
	if s.Opened != uint64(len(all)) || s.Idle != 0 || s.InUse != 0 || s.Waiting != 0 {
		t.Errorf("after Close: %d conns dialled, stats %+v", len(all), s)
	}
	if s.Reused == 0 || s.WaitedTotal == 0 || s.Evicted == 0 || s.Discarded == 0 || s.Expired == 0 || s.Revalidated == 0 {
		t.Errorf("stress test did not exercise every path: %+v", s)
	}
	p.mu.Lock()
	total, nkeys, ngroups := p.total, len(p.keys), len(p.groups)
	p.mu.Unlock()
	if total != 0 || nkeys != 0 || ngroups != 0 {
		t.Errorf("pool books after Close: total %d, %d keys, %d groups", total, nkeys, ngroups)
	}
}

// nopConn is a conn for the benchmark.
type nopConn struct{}

func (nopConn) Close() error { return nil }

func BenchmarkGetRelease(b *testing.B) {
	const keys = 16
	p := New[nopConn](Config{MaxTotal: 4 * keys, MaxPerGroup: 4}, func(context.Context, nopConn) error { return nil }, nil)
	defer p.Close(context.Background())
	dial := func(context.Context) (nopConn, error) { return nopConn{}, nil }
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("%064x", i) // like a hex HMAC key
		l, err := p.Get(context.Background(), K(names[i]), dial)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := names[next.Add(1)%keys]
		ctx := context.Background()
		for pb.Next() {
			l, err := p.Get(ctx, K(key), dial)
			if err != nil {
				b.Error(err)
				return
			}
			l.Release()
		}
	})
}
