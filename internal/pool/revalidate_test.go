package pool

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

var errRefused = errors.New("login refused")

func isRefused(err error) bool { return errors.Is(err, errRefused) }

// switchable dials conns for key until refuse is set, then fails as a
// server refusing the password would; it counts the refusals.
type switchable struct {
	tr       *tracker
	key      string
	refuse   atomic.Bool
	refusals atomic.Int32
}

func (s *switchable) dial(ctx context.Context) (*fakeConn, error) {
	if s.refuse.Load() {
		s.refusals.Add(1)
		return nil, errRefused
	}
	return s.tr.dialer(s.key)(ctx)
}

// A conn whose login is older than Revalidate is not handed out: Get
// closes it and dials anew; a younger one is reused.
func TestRevalidateOnGet(t *testing.T) {
	setJanitorTick(t, time.Hour) // no sweep during the test: only Get acts
	tr := newTracker()
	const revalidate = 60 * time.Millisecond
	p := newPool(t, tr, Config{Revalidate: revalidate}, nil)
	l := mustGet(t, p, "A", tr.dialer("A"))
	old := l.Conn()
	l.Release()
	if l := mustGet(t, p, "A", tr.dialer("A")); l.Conn() != old || !l.Reused() {
		t.Fatalf("a login younger than Revalidate was not reused (conn %d)", l.Conn().id)
	} else {
		l.Release()
	}
	time.Sleep(revalidate + 10*time.Millisecond)
	l = mustGet(t, p, "A", tr.dialer("A"))
	if l.Conn() == old || l.Reused() || !old.isClosed() {
		t.Fatalf("login older than Revalidate: got conn %d reused %v, old closed %v; want a fresh dial",
			l.Conn().id, l.Reused(), old.isClosed())
	}
	if s := p.Stats(); s.Revalidated != 1 || s.Opened != 2 || s.InUse != 1 || s.Idle != 0 {
		t.Errorf("stats = %+v, want Revalidated 1 Opened 2", s)
	}
	l.Release()
}

// When the fresh login of a stale conn is refused (the password changed),
// Get fails with the dial's error and nothing of the key is left.
func TestRevalidateOnGetRefused(t *testing.T) {
	setJanitorTick(t, time.Hour)
	tr := newTracker()
	const revalidate = 40 * time.Millisecond
	p := newPool(t, tr, Config{Revalidate: revalidate}, nil, WithRefused[*fakeConn](isRefused))
	sw := &switchable{tr: tr, key: "A"}
	a := mustGet(t, p, "A", sw.dial)
	b := mustGet(t, p, "A", sw.dial)
	a.Release()
	b.Release()
	time.Sleep(revalidate + 10*time.Millisecond)
	sw.refuse.Store(true)
	if _, err := p.Get(ctxTimeout(t, time.Second), K("A"), sw.dial); !errors.Is(err, errRefused) {
		t.Fatalf("Get after the password changed: %v, want the refusal", err)
	}
	if !a.Conn().isClosed() || !b.Conn().isClosed() || sw.refusals.Load() != 1 {
		t.Errorf("a closed %v, b closed %v, %d refused logins (want both closed, 1 login)", a.Conn().isClosed(), b.Conn().isClosed(), sw.refusals.Load())
	}
	if s := p.Stats(); s.Idle != 0 || s.InUse != 0 {
		t.Errorf("stats = %+v", s)
	}
}

// The janitor renews an idle conn before its login reaches Revalidate, off
// the request path: the next Get reuses the fresh conn.
func TestJanitorRenews(t *testing.T) {
	setJanitorTick(t, 10*time.Millisecond)
	tr := newTracker()
	const revalidate, tick = 400 * time.Millisecond, 100 * time.Millisecond // tick: Revalidate/4
	p := newPool(t, tr, Config{Revalidate: revalidate}, nil)
	l := mustGet(t, p, "A", tr.dialer("A"))
	dialled := time.Now()
	old := l.Conn()
	l.Release()
	waitFor(t, "the janitor to renew the conn", func() bool {
		_, _, _, all := tr.snapshot()
		return len(all) == 2 && old.isClosed() && p.Stats().Idle == 1
	})
	// Due at the first sweep from Revalidate - 1.5 ticks on: before
	// Revalidate, with half a tick to spare.
	age := time.Unix(0, old.closedAt.Load()).Sub(dialled)
	t.Logf("renewed at a login age of %v (Revalidate %v, sweeps every %v)", age, revalidate, tick)
	if age < revalidate-tick*3/2 || age >= revalidate {
		t.Errorf("renewed at login age %v, want from %v to before %v", age, revalidate-tick*3/2, revalidate)
	}
	_, _, maxPer, all := tr.snapshot()
	if maxPer != 1 {
		t.Errorf("%d conns open at once for the key while renewing, want 1 (old closed first)", maxPer)
	}
	l = mustGet(t, p, "A", tr.dialer("A"))
	if l.Conn() != all[1] || !l.Reused() {
		t.Fatalf("Get after the renewal: conn %d reused %v, want the renewed conn %d", l.Conn().id, l.Reused(), all[1].id)
	}
	if s := p.Stats(); s.Revalidated != 1 || s.Opened != 2 || s.Reused != 1 {
		t.Errorf("stats = %+v", s)
	}
	l.Release()
}

// A renewal the server refuses closes every idle conn of that key, even
// ones logged in more recently: the password they used is no longer good.
func TestJanitorRenewalRefusedClosesKey(t *testing.T) {
	setJanitorTick(t, 10*time.Millisecond)
	tr := newTracker()
	const revalidate = 400 * time.Millisecond // tick 100 ms: renewal at a login age of 250-350 ms
	p := newPool(t, tr, Config{Revalidate: revalidate}, nil, WithRefused[*fakeConn](isRefused))
	sw := &switchable{tr: tr, key: "A"}
	older := mustGet(t, p, "A", sw.dial)
	time.Sleep(150 * time.Millisecond)
	younger := mustGet(t, p, "A", sw.dial)
	other := mustGet(t, p, "B", tr.dialer("B"))
	older.Release()
	younger.Release()
	other.Release()
	sw.refuse.Store(true)
	waitFor(t, "the key's idle conns to be closed", func() bool {
		return older.Conn().isClosed() && younger.Conn().isClosed()
	})
	if n := sw.refusals.Load(); n != 1 {
		t.Errorf("%d refused logins, want 1 (the older conn's renewal; the younger is closed with it)", n)
	}
	if other.Conn().isClosed() {
		t.Error("another key's conn was closed")
	}
	if s := p.Stats(); s.Idle != 1 || s.InUse != 0 {
		t.Errorf("stats = %+v, want only B idle", s)
	}
}

// Close cancels a renewal in progress and waits for it: nothing is left.
func TestCloseCancelsRenewal(t *testing.T) {
	setJanitorTick(t, 5*time.Millisecond)
	tr := newTracker()
	p := New[*fakeConn](Config{Revalidate: 20 * time.Millisecond}, nil, nil)
	started := make(chan struct{}, 1)
	first := true
	dial := func(ctx context.Context) (*fakeConn, error) {
		if first {
			first = false
			return tr.dialer("A")(ctx)
		}
		started <- struct{}{}
		<-ctx.Done() // a server that never answers
		return nil, ctx.Err()
	}
	l, err := p.Get(context.Background(), K("A"), dial)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	<-started
	start := time.Now()
	if err := p.Close(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	if s := p.Stats(); s.InUse != 0 || s.Idle != 0 || !l.Conn().isClosed() {
		t.Errorf("after Close: %+v, old conn closed %v", s, l.Conn().isClosed())
	}
}
