package pool

import (
	"fmt"
	"testing"
)

// cycle makes key's conn idle in the pool: a Get and a Release (dialled the
// first time, reused after).
func cycle(t *testing.T, p *Pool[*fakeConn], tr *tracker, key string) *fakeConn {
	t.Helper()
	l := mustGet(t, p, key, tr.dialer(key))
	l.Release()
	return l.Conn()
}

// A full pool makes room for a new user by closing an idle conn that has
// served only the call it was dialled for, before one its user came back
// to, even when the latter is the least recently used: under many users
// of whom few are hot, plain LRU lets one-off users push out the hot ones.
func TestFullPoolEvictsOneCallConnFirst(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxTotal: 3, MaxPerGroup: 2}, nil)
	a := cycle(t, p, tr, "A")
	cycle(t, p, tr, "A") // A has served two calls; it is the least recently used
	b := cycle(t, p, tr, "B")
	c := cycle(t, p, tr, "C")

	ld := mustGet(t, p, "D", tr.dialer("D"))
	if !b.isClosed() || a.isClosed() || c.isClosed() {
		t.Fatalf("after Get(D): closed A=%v B=%v C=%v, want only B (the oldest one-call conn)", a.isClosed(), b.isClosed(), c.isClosed())
	}
	le := mustGet(t, p, "E", tr.dialer("E"))
	if !c.isClosed() || a.isClosed() {
		t.Fatalf("after Get(E): closed A=%v C=%v, want C", a.isClosed(), c.isClosed())
	}
	// No one-call conn is idle (D's and E's are leased): the LRU goes.
	lf := mustGet(t, p, "F", tr.dialer("F"))
	if !a.isClosed() {
		t.Fatal("after Get(F): A's idle conn, the only one, was not evicted")
	}
	if s := p.Stats(); s.Evicted != 3 || s.Opened != 6 || s.Reused != 1 {
		t.Errorf("stats = %+v, want Evicted 3 Opened 6 Reused 1", s)
	}
	ld.Release()
	le.Release()
	lf.Release()
}

// One-call conns are evicted first only while they are at least a tenth of
// the pool: below that the least recently used of all goes, so that conns
// whose users stopped calling do not keep their slots, and a new user's
// conn has time to be reused.
func TestFullPoolKeepsATenthForOneCallConns(t *testing.T) {
	tr := newTracker()
	p := newPool(t, tr, Config{MaxTotal: 20, MaxPerGroup: 2}, nil) // a tenth: 2
	var proven []*fakeConn
	for i := range 19 {
		k := fmt.Sprintf("p%02d", i)
		cycle(t, p, tr, k)
		proven = append(proven, cycle(t, p, tr, k))
	}
	u := cycle(t, p, tr, "u") // the one one-call conn, the most recent

	var held []*Lease[*fakeConn]
	for i := range 2 {
		k := fmt.Sprintf("n%d", i)
		held = append(held, mustGet(t, p, k, tr.dialer(k)))
		if !proven[i].isClosed() || u.isClosed() {
			t.Fatalf("Get(%s) with one one-call conn idle: closed %s=%v u=%v, want the least recently used (%s)",
				k, proven[i].key, proven[i].isClosed(), u.isClosed(), proven[i].key)
		}
	}
	for _, l := range held {
		l.Release()
	}
	// u, n0 and n1 are idle one-call conns now: u, the oldest, goes.
	l := mustGet(t, p, "x", tr.dialer("x"))
	if !u.isClosed() || proven[2].isClosed() {
		t.Fatalf("Get(x) with three one-call conns idle: closed u=%v %s=%v, want u", u.isClosed(), proven[2].key, proven[2].isClosed())
	}
	l.Release()
	if open, maxOpen, _, _ := tr.snapshot(); open != 20 || maxOpen != 20 {
		t.Errorf("open %d, most %d; want 20 and 20", open, maxOpen)
	}
}
