package pool

import (
	"testing"
	"time"
)

// Keys of one group (spellings of one account's user name, or its
// passwords) share MaxPerGroup; idle reuse still needs the exact key.
func TestGroupBoundAcrossKeys(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxTotal: 10, MaxPerGroup: 2}, nil)
	alice := func(spelling string) Key { return Key{Group: "alice", Conn: spelling} }
	get := func(spelling string) *Lease[*fakeConn] {
		t.Helper()
		l, err := p.Get(ctxTimeout(t, 5*time.Second), alice(spelling), tr.dialerIn("alice", spelling))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l1 := get("alice")
	l2 := get("ALICE")
	third := getAsync(ctxTimeout(t, 5*time.Second), p, alice("Alice"), tr.dialerIn("alice", "Alice"))
	waitFor(t, "a third spelling to wait at the group's bound", waiting(p, 1))

	// Another group is not held up.
	lb := mustGet(t, p, "bob", tr.dialer("bob"))
	lb.Release()

	// A conn of one spelling is never handed to another: the released
	// "alice" conn is closed and "Alice" dials in its slot.
	l1.Release()
	r := receive(t, third)
	if r.err != nil || r.l.Conn() == l1.Conn() || r.l.Reused() || r.l.Conn().key != "Alice" {
		t.Fatalf("third spelling got %+v", r)
	}
	if !l1.Conn().isClosed() {
		t.Error("the other spelling's idle conn was not closed to make room")
	}
	if _, _, maxPer, _ := tr.snapshot(); maxPer != 2 {
		t.Errorf("at most %d conns open for the group at once, want 2", maxPer)
	}
	if s := p.Stats(); s.Evicted != 1 || s.Opened != 4 {
		t.Errorf("stats = %+v, want Evicted 1 Opened 4", s)
	}
	// The same spelling does reuse its own conn.
	l2.Release()
	again := get("ALICE")
	if again.Conn() != l2.Conn() || !again.Reused() {
		t.Errorf("ALICE got conn %d reused %v, want its own %d", again.Conn().id, again.Reused(), l2.Conn().id)
	}
	again.Release()
	r.l.Release()
}

// A group at its bound with only idle conns of other keys does not wait
// for them to time out: the least recently used is closed for the new key.
func TestGroupFullOfIdleMakesRoom(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxTotal: 10, MaxPerGroup: 2}, nil)
	k := func(s string) Key { return Key{Group: "g", Conn: s} }
	a, err := p.Get(ctxTimeout(t, time.Second), k("a"), tr.dialerIn("g", "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Get(ctxTimeout(t, time.Second), k("b"), tr.dialerIn("g", "b"))
	if err != nil {
		t.Fatal(err)
	}
	a.Release() // least recently used
	b.Release()
	c, err := p.Get(ctxTimeout(t, 100*time.Millisecond), k("c"), tr.dialerIn("g", "c"))
	if err != nil {
		t.Fatalf("Get(c) with the group full of idle conns: %v", err)
	}
	if !a.Conn().isClosed() || b.Conn().isClosed() {
		t.Errorf("a closed %v, b closed %v: want only the LRU (a) closed", a.Conn().isClosed(), b.Conn().isClosed())
	}
	if open, _, maxPer, _ := tr.snapshot(); open != 2 || maxPer != 2 {
		t.Errorf("open %d, most for the group %d; want 2 and 2", open, maxPer)
	}
	c.Release()
}

// Waiters of one group are served in their order whatever their key: a
// spelling that arrives later does not overtake by reusing its own conn.
func TestGroupWaitersFIFO(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxTotal: 10, MaxPerGroup: 1}, nil)
	k := func(s string) Key { return Key{Group: "g", Conn: s} }
	held, err := p.Get(ctxTimeout(t, time.Second), k("a"), tr.dialerIn("g", "a"))
	if err != nil {
		t.Fatal(err)
	}
	first := getAsync(ctxTimeout(t, 5*time.Second), p, k("b"), tr.dialerIn("g", "b"))
	waitFor(t, "b to wait", waiting(p, 1))
	second := getAsync(ctxTimeout(t, 5*time.Second), p, k("a"), tr.dialerIn("g", "a"))
	waitFor(t, "a to wait", waiting(p, 2))
	held.Release()
	rb := receive(t, first)
	if rb.err != nil || rb.l.Conn().key != "b" {
		t.Fatalf("first waiter: %+v", rb)
	}
	select {
	case r := <-second:
		t.Fatalf("the later waiter was served while the group was full: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
	rb.l.Release()
	ra := receive(t, second)
	if ra.err != nil || ra.l.Conn().key != "a" {
		t.Fatalf("second waiter: %+v", ra)
	}
	ra.l.Release()
	if _, _, maxPer, _ := tr.snapshot(); maxPer != 1 {
		t.Errorf("%d conns of the group open at once, bound 1", maxPer)
	}
}
