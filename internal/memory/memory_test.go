package memory_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

// sharedRedis is one redis-server for the tests that do not stop it; each
// store gets a key of its own, so their keys never meet.
var sharedRedis struct {
	once sync.Once
	srv  *mailstack.RedisServer
	err  error
}

func redisServer(t testing.TB) *mailstack.RedisServer {
	t.Helper()
	sharedRedis.once.Do(func() { sharedRedis.srv, sharedRedis.err = mailstack.StartRedis(mailstack.RedisOptions{}) })
	if err := sharedRedis.err; err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); errors.Is(err, mailstack.ErrUnavailable) && !ci {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	return sharedRedis.srv
}

func TestMain(m *testing.M) {
	code := m.Run()
	sharedRedis.once.Do(func() {})
	if sharedRedis.srv != nil {
		sharedRedis.srv.Stop()
	}
	os.Exit(code)
}

func newKey(t testing.TB) []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// newRedis makes a store on srv with a fresh key (and o's other fields).
func newRedis(t testing.TB, srv *mailstack.RedisServer, o memory.RedisOptions) *memory.Redis {
	t.Helper()
	if o.URL == "" {
		o.URL = srv.URL(0)
	}
	if o.Key == nil {
		o.Key = newKey(t)
	}
	r, err := memory.NewRedis(o)
	if err != nil {
		t.Fatal(err)
	}
	r.SetGrace(0)
	t.Cleanup(func() { r.Close() })
	return r
}

// stores are the two implementations every contract test runs against.
func stores(t *testing.T) []struct {
	name string
	make func(t *testing.T) memory.Store
} {
	return []struct {
		name string
		make func(t *testing.T) memory.Store
	}{
		{"local", func(t *testing.T) memory.Store { return memory.NewLocal(nil) }},
		{"redis", func(t *testing.T) memory.Store {
			return newRedis(t, redisServer(t), memory.RedisOptions{Timeout: 2 * time.Second})
		}},
	}
}

// eachStore runs f against a fresh store of each implementation.
func eachStore(t *testing.T, f func(t *testing.T, s memory.Store)) {
	t.Helper()
	for _, st := range stores(t) {
		t.Run(st.name, func(t *testing.T) { f(t, st.make(t)) })
	}
}

// concurrently runs f n times at once and waits for all.
func concurrently(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f(i)
		}()
	}
	close(start)
	wg.Wait()
}

var ctx = context.Background()

func TestOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, s memory.Store) {
		o := s.Once("test.once", memory.Bounds{})
		exp := time.Now().Add(time.Minute)
		use := func(scope, id string) bool {
			t.Helper()
			first, err := o.Use(ctx, scope, id, exp)
			if err != nil {
				t.Fatal(err)
			}
			return first
		}
		seen := func(scope, id string) bool {
			t.Helper()
			ok, err := o.Seen(ctx, scope, id)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if seen("alice", "n1") {
			t.Fatal("seen before any use")
		}
		if !use("alice", "n1") {
			t.Fatal("first use refused")
		}
		if use("alice", "n1") {
			t.Fatal("second use accepted")
		}
		if !seen("alice", "n1") {
			t.Fatal("not seen after use")
		}
		if !use("bob", "n1") || !use("alice", "n2") {
			t.Fatal("another scope's or another id's first use refused")
		}
		// The same memory under the same name.
		if again, _ := s.Once("test.once", memory.Bounds{}).Use(ctx, "alice", "n1", exp); again {
			t.Fatal("a second handle on the same name forgot the use")
		}
		if first, _ := s.Once("test.other", memory.Bounds{}).Use(ctx, "alice", "n1", exp); !first {
			t.Fatal("another memory's name shares the entries")
		}

		t.Run("expires", func(t *testing.T) {
			if first, _ := o.Use(ctx, "alice", "short", time.Now().Add(300*time.Millisecond)); !first {
				t.Fatal("first use refused")
			}
			time.Sleep(450 * time.Millisecond)
			if seen("alice", "short") {
				t.Fatal("seen after expiry")
			}
			if !use("alice", "short") {
				t.Fatal("use after expiry refused")
			}
		})
		t.Run("50_at_once_one_first", func(t *testing.T) {
			var firsts atomic.Int32
			concurrently(50, func(int) {
				if first, err := o.Use(ctx, "carol", "race", exp); err != nil {
					t.Error(err)
				} else if first {
					firsts.Add(1)
				}
			})
			if n := firsts.Load(); n != 1 {
				t.Fatalf("%d first uses of one id, want 1", n)
			}
		})
	})
}

func TestCounter(t *testing.T) {
	eachStore(t, func(t *testing.T, s memory.Store) {
		c := s.Counter("test.counter", memory.Bounds{})
		add := func(key string, d int64) int64 {
			t.Helper()
			n, err := c.Add(ctx, key, d, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		get := func(keys ...string) []int64 {
			t.Helper()
			v, err := c.Get(ctx, keys...)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if n := add("a", 1); n != 1 {
			t.Fatalf("first add: %d", n)
		}
		if n := add("a", 4); n != 5 {
			t.Fatalf("add 4: %d", n)
		}
		add("b", 2)
		if v := get("a", "missing", "b"); fmt.Sprint(v) != "[5 0 2]" {
			t.Fatalf("get: %v", v)
		}
		if n := add("a", -2); n != 3 {
			t.Fatalf("add -2: %d", n)
		}
		if n := add("a", -10); n != 0 {
			t.Fatalf("below zero: %d, want 0", n)
		}
		if n := add("a", 1); n != 1 {
			t.Fatalf("a count that fell to 0 is forgotten, then starts at 0: got %d", n)
		}
		if n := add("never", -1); n != 0 {
			t.Fatalf("negative add to a missing key: %d", n)
		}
		// Raise only moves up.
		for _, step := range []struct{ v, want int64 }{{100, 100}, {50, 100}, {150, 150}} {
			n, err := c.Raise(ctx, "deadline", step.v, time.Minute)
			if err != nil || n != step.want {
				t.Fatalf("raise %d: %d, %v; want %d", step.v, n, err, step.want)
			}
		}
		if err := c.Delete(ctx, "a", "deadline"); err != nil {
			t.Fatal(err)
		}
		if v := get("a", "deadline", "b"); fmt.Sprint(v) != "[0 0 2]" {
			t.Fatalf("after delete: %v", v)
		}
		if _, err := c.Add(ctx, "x", 1, 0); err == nil {
			t.Fatal("add without a lifetime accepted")
		}
		t.Run("expires", func(t *testing.T) {
			// lifetimes of 2 s, so that a loaded machine oversleeping by up
			// to a second cannot change the answer
			const life = 2 * time.Second
			if _, err := c.Add(ctx, "short", 3, life); err != nil {
				t.Fatal(err)
			}
			// each Add extends the life: a second later it is still there
			time.Sleep(time.Second)
			if n, _ := c.Add(ctx, "short", 1, life); n != 4 {
				t.Fatalf("count %d, want 4", n)
			}
			time.Sleep(time.Second)
			if v := get("short"); v[0] != 4 {
				t.Fatalf("count %d a second after the last add, want 4", v[0])
			}
			time.Sleep(1300 * time.Millisecond)
			if v := get("short"); v[0] != 0 {
				t.Fatalf("count %d after expiry, want 0", v[0])
			}
		})
		t.Run("100_adds_at_once", func(t *testing.T) {
			concurrently(100, func(int) {
				if _, err := c.Add(ctx, "many", 1, time.Minute); err != nil {
					t.Error(err)
				}
			})
			if v := get("many"); v[0] != 100 {
				t.Fatalf("count %d, want 100", v[0])
			}
		})
	})
}

func TestBucket(t *testing.T) {
	eachStore(t, func(t *testing.T, s memory.Store) {
		b := s.Bucket("test.bucket", memory.Bounds{})
		r := memory.Rate{PerMinute: 60, Burst: 3} // a token a second
		take := func(key string) time.Duration {
			t.Helper()
			w, err := b.Take(ctx, key, r)
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		t0 := time.Now()
		for i := range 3 {
			if w := take("a"); w != 0 {
				t.Fatalf("take %d of a burst of 3: wait %s", i+1, w)
			}
		}
		w := take("a")
		if lo := time.Second - time.Since(t0) - 20*time.Millisecond; w < lo || w > time.Second {
			t.Fatalf("4th take: wait %s, want from %s to 1s (a token a second, the bucket emptied %s ago)", w, lo, time.Since(t0))
		}
		// A refused take takes nothing: asking again gives no longer a wait.
		if w2 := take("a"); w2 <= 0 || w2 > w {
			t.Fatalf("5th take: wait %s after %s", w2, w)
		}
		if w := take("b"); w != 0 {
			t.Fatalf("another key waits %s", w)
		}
		time.Sleep(w + 50*time.Millisecond)
		if w := take("a"); w != 0 {
			t.Fatalf("after the wait: wait %s", w)
		}
		if w := take("a"); w == 0 {
			t.Fatal("a second token right after the refill")
		}
		if w, err := b.Take(ctx, "off", memory.Rate{}); w != 0 || err != nil {
			t.Fatalf("rate 0 (off): %s, %v", w, err)
		}
		t.Run("20_at_once_burst_5", func(t *testing.T) {
			var ok atomic.Int32
			concurrently(20, func(int) {
				w, err := b.Take(ctx, "race", memory.Rate{PerMinute: 1, Burst: 5})
				if err != nil {
					t.Error(err)
				} else if w == 0 {
					ok.Add(1)
				}
			})
			if n := ok.Load(); n != 5 {
				t.Fatalf("%d takes went through, want 5", n)
			}
		})
	})
}

func TestSlots(t *testing.T) {
	eachStore(t, func(t *testing.T, s memory.Store) {
		sl := s.Slots("test.slots", memory.Bounds{})
		exp := time.Now().Add(time.Minute)
		take := func(scope, m string, exp time.Time) memory.Taken {
			t.Helper()
			got, err := sl.Take(ctx, scope, m, exp, 2)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := take("alice", "a", exp); !got.OK || got.Count != 1 {
			t.Fatalf("a: %+v", got)
		}
		soon := time.Now().Add(30 * time.Second)
		if got := take("alice", "b", soon); !got.OK || got.Count != 2 {
			t.Fatalf("b: %+v", got)
		}
		got := take("alice", "c", exp)
		if got.OK || got.Count != 2 || got.Retry < 28*time.Second || got.Retry > 31*time.Second {
			t.Fatalf("c over the limit: %+v, want refused with a retry of about 30s (b's expiry)", got)
		}
		if got := take("alice", "a", exp); !got.OK || got.Count != 2 {
			t.Fatalf("a again (it holds a slot): %+v", got)
		}
		if got := take("bob", "c", exp); !got.OK {
			t.Fatalf("another scope: %+v", got)
		}
		if err := sl.Release(ctx, "alice", "a"); err != nil {
			t.Fatal(err)
		}
		if n, _ := sl.Count(ctx, "alice"); n != 1 {
			t.Fatalf("count after release: %d", n)
		}
		if got := take("alice", "c", exp); !got.OK {
			t.Fatalf("c after a's release: %+v", got)
		}
		t.Run("expires", func(t *testing.T) {
			if got := take("carol", "x", time.Now().Add(time.Second)); !got.OK {
				t.Fatal(got)
			}
			take("carol", "y", exp)
			if got := take("carol", "z", exp); got.OK {
				t.Fatal("z over the limit taken")
			}
			time.Sleep(1200 * time.Millisecond)
			if n, _ := sl.Count(ctx, "carol"); n != 1 {
				t.Fatalf("count after x expired: %d", n)
			}
			if got := take("carol", "z", exp); !got.OK {
				t.Fatalf("z after x expired: %+v", got)
			}
		})
		t.Run("20_at_once_limit_5", func(t *testing.T) {
			var ok atomic.Int32
			concurrently(20, func(i int) {
				got, err := sl.Take(ctx, "dave", fmt.Sprint(i), exp, 5)
				if err != nil {
					t.Error(err)
				} else if got.OK {
					ok.Add(1)
				}
			})
			if n := ok.Load(); n != 5 {
				t.Fatalf("%d slots taken, want 5", n)
			}
		})
	})
}

func TestGenerations(t *testing.T) {
	eachStore(t, func(t *testing.T, s memory.Store) {
		g := s.Generations("test.gen", memory.Bounds{})
		exp := time.Now().Add(time.Hour)
		var id string // the memory's, as the tokens carry it
		advanceAs := func(group, fam string, gen uint32, named string) memory.Outcome {
			t.Helper()
			st, err := g.Advance(ctx, group, fam, gen, named, exp, 3)
			if err != nil {
				t.Fatal(err)
			}
			if st.ID == "" || id != "" && st.ID != id {
				t.Fatalf("the memory's id %q, before %q", st.ID, id)
			}
			id = st.ID
			return st.Outcome
		}
		advance := func(group, fam string, gen uint32) memory.Outcome {
			t.Helper()
			return advanceAs(group, fam, gen, id)
		}
		startFor := func(group, fam string, startExp time.Time, limit int) memory.Started {
			t.Helper()
			st, err := g.Start(ctx, group, fam, startExp, exp, limit)
			if err != nil {
				t.Fatal(err)
			}
			if st.ID == "" || id != "" && st.ID != id {
				t.Fatalf("the memory's id %q, before %q", st.ID, id)
			}
			id = st.ID
			return st
		}
		start := func(group, fam string, limit int) memory.Started {
			t.Helper()
			return startFor(group, fam, time.Time{}, limit) // a start that counts no more
		}
		want := func(got, want memory.Outcome) {
			t.Helper()
			if got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		}

		t.Run("rotation", func(t *testing.T) {
			start("alice", "f1", 3)
			want(advance("alice", "f1", 0), memory.Advanced)
			want(advance("alice", "f1", 1), memory.Advanced)
			want(advance("alice", "f1", 2), memory.Advanced)
		})
		t.Run("a_used_token_revokes", func(t *testing.T) {
			start("alice", "f2", 3)
			want(advance("alice", "f2", 0), memory.Advanced)
			want(advance("alice", "f2", 0), memory.Reused)
			// the newest token of the family is refused too
			want(advance("alice", "f2", 1), memory.Revoked)
		})
		t.Run("unknown_of_another_memory_is_adopted", func(t *testing.T) {
			want(advanceAs("alice", "f3", 7, "another-memory"), memory.Adopted)
			want(advance("alice", "f3", 8), memory.Advanced)
			want(advance("alice", "f3", 7), memory.Reused)
		})
		t.Run("unknown_of_this_memory_was_ended", func(t *testing.T) {
			want(advance("alice", "never-held", 0), memory.Evicted)
			want(advanceAs("alice", "never-held", 0, ""), memory.Adopted) // a token from before memory ids
		})
		t.Run("ahead_moves_on", func(t *testing.T) {
			start("alice", "f4", 3)
			want(advance("alice", "f4", 5), memory.Ahead)
			want(advance("alice", "f4", 6), memory.Advanced)
			want(advance("alice", "f4", 5), memory.Reused)
		})
		t.Run("a_replayed_start_revokes", func(t *testing.T) {
			if st := start("alice", "f5", 3); st.Replayed {
				t.Fatal("a first start replayed")
			}
			want(advance("alice", "f5", 0), memory.Advanced)
			if st := start("alice", "f5", 3); !st.Replayed {
				t.Fatal("a second start of a family not replayed")
			}
			want(advance("alice", "f5", 1), memory.Revoked)
		})
		t.Run("a_start_is_remembered_after_its_family_ended", func(t *testing.T) {
			startFor("frank", "g1", time.Now().Add(time.Minute), 3)
			tick()
			startFor("frank", "g2", time.Now().Add(time.Minute), 3) // 4 entries for 3: g1 ends
			want(advance("frank", "g1", 0), memory.Evicted)
			if st := startFor("frank", "g1", time.Now().Add(time.Minute), 3); !st.Replayed {
				t.Fatal("the start of an ended family, replayed, started it again")
			}
			want(advance("frank", "g1", 0), memory.Evicted)
		})
		t.Run("eviction_ends_the_least_recently_refreshed", func(t *testing.T) {
			start("bob", "b1", 2)
			tick()
			start("bob", "b2", 2)
			tick()
			want(advance("bob", "b1", 0), memory.Advanced) // b1 is now the most recent
			tick()
			if n := start("bob", "b3", 2).Ended; n != 1 {
				t.Fatalf("start of a third family with a limit of 2 ended %d, want 1", n)
			}
			want(advance("bob", "b2", 0), memory.Evicted)
			tick()
			want(advance("bob", "b1", 1), memory.Advanced)
			tick()
			want(advance("bob", "b3", 0), memory.Advanced)
			tick()
			// an adopted family makes room the same way (limit 3 in advance)
			start("bob", "b4", 3)
			tick()
			want(advanceAs("bob", "b5", 4, "another-memory"), memory.Adopted)
			want(advance("bob", "b1", 2), memory.Evicted)
			// another group is untouched
			start("carol", "c1", 1)
			want(advance("carol", "c1", 0), memory.Advanced)
		})
		t.Run("starts_count_in_the_group", func(t *testing.T) {
			// A limit of 4: two sign-ins fill it (a start and a family
			// each); the third ends both families (their starts still
			// count); the fourth waits for the oldest start.
			soon := time.Now().Add(700 * time.Millisecond)
			startFor("mallory", "m1", soon, 4)
			tick()
			startFor("mallory", "m2", soon, 4)
			tick()
			if n := startFor("mallory", "m3", soon.Add(300*time.Millisecond), 4).Ended; n != 2 {
				t.Fatalf("the third sign-in ended %d, want 2", n)
			}
			_, err := g.Start(ctx, "mallory", "m4", soon, exp, 4)
			var full *memory.FullError
			if !errors.As(err, &full) || !full.Scope || full.RetryAfter <= 0 || full.RetryAfter > time.Second {
				t.Fatalf("a group full of starts: %v, want its FullError within a second", err)
			}
			// (a start needs room for itself and its family, so the starts
			// alone fill a group only when its limit was lowered since)
			if o, err := g.Advance(ctx, "mallory", "m5", 0, "another-memory", exp, 2); !errors.As(err, &full) || !full.Scope {
				t.Fatalf("adopting into a group full of starts: %v %v", o, err)
			}
			want(advance("mallory", "m3", 0), memory.Advanced)
			start("other", "o1", 4) // other groups are untouched
			time.Sleep(time.Until(soon) + 50*time.Millisecond)
			startFor("mallory", "m4", time.Now().Add(time.Minute), 4)
			want(advance("mallory", "m4", 0), memory.Advanced)
		})
		t.Run("expires", func(t *testing.T) {
			short := time.Now().Add(300 * time.Millisecond)
			for _, f := range []string{"d1", "d2"} {
				if _, err := g.Start(ctx, "dave", f, time.Time{}, short, 3); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(450 * time.Millisecond)
			// d2 expired: making room forgets it and ends nothing
			if n := start("dave", "d3", 2).Ended; n != 0 {
				t.Fatalf("ended %d: an expired family counted as a live one", n)
			}
			want(advance("dave", "d3", 0), memory.Advanced)
		})
		t.Run("20_refreshes_at_once_one_accepted", func(t *testing.T) {
			start("erin", "e1", 3)
			var n [8]atomic.Int32
			concurrently(20, func(int) {
				st, err := g.Advance(ctx, "erin", "e1", 0, id, exp, 3)
				if err != nil {
					t.Error(err)
					return
				}
				n[st.Outcome].Add(1)
			})
			if n[memory.Advanced].Load() != 1 || n[memory.Reused].Load() < 1 ||
				n[memory.Advanced].Load()+n[memory.Reused].Load()+n[memory.Revoked].Load() != 20 {
				t.Fatalf("advanced %d, reused %d, revoked %d: want exactly one accepted, the rest refused",
					n[memory.Advanced].Load(), n[memory.Reused].Load(), n[memory.Revoked].Load())
			}
		})
		t.Run("20_starts_at_once_one_started", func(t *testing.T) {
			var started, replayed atomic.Int32
			concurrently(20, func(int) {
				st, err := g.Start(ctx, "gina", "same", time.Now().Add(time.Minute), exp, 64)
				if err != nil {
					t.Error(err)
					return
				}
				if st.Replayed {
					replayed.Add(1)
				} else {
					started.Add(1)
				}
			})
			if started.Load() != 1 || replayed.Load() != 19 {
				t.Fatalf("started %d, replayed %d: want one start", started.Load(), replayed.Load())
			}
			want(advance("gina", "same", 0), memory.Revoked)
		})
	})
}

// tick lets a millisecond pass: Redis orders a group by the millisecond
// of each refresh.
func tick() { time.Sleep(3 * time.Millisecond) }

// A Local memory full of live entries refuses rather than forgets, where
// single use depends on it; a full Counter or Bucket forgets its oldest.
func TestLocalBounds(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	l := memory.NewLocal(clock)
	full := func(err error, want time.Duration) {
		t.Helper()
		var f *memory.FullError
		if !errors.As(err, &f) || f.RetryAfter != want {
			t.Fatalf("err %v, want a FullError retrying in %s", err, want)
		}
		if d, ok := memory.RetryAfter(err); !ok || d != want {
			t.Fatalf("RetryAfter: %s, %v", d, ok)
		}
	}

	t.Run("once", func(t *testing.T) {
		o := l.Once("bounded.once", memory.Bounds{Max: 3, PerScope: 2})
		for i, sc := range []string{"a", "a", "b"} {
			if first, err := o.Use(ctx, sc, fmt.Sprint(i), now.Add(time.Duration(10+i)*time.Minute)); !first || err != nil {
				t.Fatal(first, err)
			}
		}
		_, err := o.Use(ctx, "a", "x", now.Add(time.Hour))
		full(err, 10*time.Minute) // scope a is full: its soonest expires in 10 min
		if f := (*memory.FullError)(nil); !errors.As(err, &f) || !f.Scope {
			t.Fatalf("a full scope: %v, want a FullError of the scope", err)
		}
		_, err = o.Use(ctx, "c", "x", now.Add(time.Hour))
		full(err, 10*time.Minute) // the whole memory is full
		if first, _ := o.Use(ctx, "a", "0", now.Add(time.Hour)); first {
			t.Fatal("a full memory forgot a live entry")
		}
		now = now.Add(10*time.Minute + time.Second)
		if first, err := o.Use(ctx, "c", "x", now.Add(time.Hour)); !first || err != nil {
			t.Fatalf("after the soonest expired: %v, %v", first, err)
		}
	})
	t.Run("generations", func(t *testing.T) {
		g := l.Generations("bounded.gen", memory.Bounds{Max: 3})
		g.Start(ctx, "a", "f1", now.Add(30*time.Second), now.Add(time.Minute), 10) // a start and a family
		g.Start(ctx, "b", "f2", time.Time{}, now.Add(time.Hour), 10)
		_, err := g.Start(ctx, "c", "f3", time.Time{}, now.Add(time.Hour), 10)
		full(err, 30*time.Second)
		_, err = g.Advance(ctx, "c", "unknown", 0, "another-memory", now.Add(time.Hour), 10)
		full(err, 30*time.Second)
		if st, _ := g.Advance(ctx, "a", "f1", 0, "", now.Add(time.Hour), 10); st.Outcome != memory.Advanced {
			t.Fatalf("a known family refused when full: %s", st.Outcome)
		}
		if st, _ := g.Start(ctx, "a", "f1", time.Time{}, now.Add(time.Hour), 10); !st.Replayed {
			t.Fatal("a replayed start refused or started when full")
		}
		now = now.Add(31 * time.Second) // the start stops counting
		if _, err := g.Start(ctx, "c", "f3", time.Time{}, now.Add(time.Hour), 10); err != nil {
			t.Fatalf("after the start expired: %v", err)
		}
	})
	t.Run("slots", func(t *testing.T) {
		s := l.Slots("bounded.slots", memory.Bounds{Max: 2})
		s.Take(ctx, "a", "1", now.Add(time.Minute), 5)
		s.Take(ctx, "b", "1", now.Add(time.Hour), 5)
		_, err := s.Take(ctx, "c", "1", now.Add(time.Hour), 5)
		full(err, time.Minute)
	})
	t.Run("counter_forgets_the_oldest", func(t *testing.T) {
		c := l.Counter("bounded.counter", memory.Bounds{Max: 2})
		c.Add(ctx, "old", 1, time.Minute)
		c.Add(ctx, "new", 1, time.Hour)
		if _, err := c.Add(ctx, "newer", 1, time.Hour); err != nil {
			t.Fatal(err)
		}
		if v, _ := c.Get(ctx, "old", "new", "newer"); fmt.Sprint(v) != "[0 1 1]" {
			t.Fatalf("counts %v: the soonest-expiring entry should have gone", v)
		}
	})
}
