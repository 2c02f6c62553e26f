package oauth

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

// The ledger's rules (ledger.go), one test each, against both stores:
// this process's memory and Redis. They run on the real clock (Redis
// keeps its own time for what expires): "a minute" of a code's life is
// some milliseconds here.

var bg = context.Background()

// other is the id of another replica's memory (rule 6).
const other = "another-memory"

// redisStore is a Redis store on a redis-server of the test's own.
func redisStore(t *testing.T) (*memory.Redis, *mailtest.RedisServer) {
	t.Helper()
	srv := mailtest.StartRedis(t, mailtest.RedisOptions{})
	r, err := memory.NewRedis(memory.RedisOptions{URL: srv.URL(0), Key: []byte("ledger tests: a key of 32 bytes!"), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, srv
}

// eachLedger runs f with a ledger on each store.
func eachLedger(t *testing.T, maxEntries, perAccount int, f func(t *testing.T, l *ledger)) {
	t.Run("local", func(t *testing.T) { f(t, newLedger(memory.NewLocal(nil), maxEntries, perAccount)) })
	t.Run("redis", func(t *testing.T) {
		r, _ := redisStore(t)
		f(t, newLedger(r, maxEntries, perAccount))
	})
}

func mustExchange(t *testing.T, l *ledger, code string, codeExp time.Time, account string, exp time.Time) (fam, id string) {
	t.Helper()
	fam, id, err := l.exchange(bg, code, codeExp, account, exp)
	if err != nil {
		t.Fatalf("exchange of %s: %v", code, err)
	}
	return fam, id
}

// TestLedgerSingleUse (rule 1): a code is redeemed once, and one that
// comes back revokes the sign-in it started, and is known as used even
// once that sign-in has ended; a provider state is used once; both until
// they expire.
func TestLedgerSingleUse(t *testing.T) {
	eachLedger(t, 100, 3, func(t *testing.T, l *ledger) {
		exp := time.Now().Add(time.Hour)
		code := time.Now().Add(time.Minute)
		fam, id := mustExchange(t, l, "c", code, "a", exp)
		if _, _, err := l.exchange(bg, "c", code, "a", exp); !errors.Is(err, errCodeUsed) {
			t.Fatalf("a replayed code: %v", err)
		}
		if _, err := l.refresh(bg, fam, 0, id, "a", exp); !errors.Is(err, errRevoked) {
			t.Fatalf("the sign-in of a replayed code: %v", err)
		}
		// The account's share (3) ends the first sign-in to make room for
		// the second; the first code is still known as used.
		f1, _ := mustExchange(t, l, "c1", code, "b", exp)
		tick()
		mustExchange(t, l, "c2", code, "b", exp)
		if _, err := l.refresh(bg, f1, 0, id, "b", exp); !errors.Is(err, errEnded) {
			t.Fatalf("the ended sign-in: %v", err)
		}
		if _, _, err := l.exchange(bg, "c1", code, "b", exp); !errors.Is(err, errCodeUsed) {
			t.Fatalf("the code of an ended sign-in, replayed: %v", err)
		}
		if err := l.once(bg, "st", time.Now().Add(15*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := l.once(bg, "st", time.Now().Add(15*time.Minute)); !errors.Is(err, errStateUsed) {
			t.Fatalf("a state used twice: %v", err)
		}
		if err := l.once(bg, "st2", time.Now().Add(15*time.Minute)); err != nil {
			t.Fatalf("another state: %v", err)
		}
	})
}

// TestLedgerGenerations (rules 2 and 6): each refresh moves the family
// on; an older generation revokes the family for everyone; a newer one
// than this memory has seen (another replica's refresh) is accepted, and
// so is a family it never saw, whose token names another memory.
func TestLedgerGenerations(t *testing.T) {
	eachLedger(t, 100, 64, func(t *testing.T, l *ledger) {
		exp := time.Now().Add(time.Hour)
		fam, id := mustExchange(t, l, "c", time.Now().Add(time.Minute), "a", exp)
		for gen := range uint32(3) {
			next, err := l.refresh(bg, fam, gen, id, "a", exp)
			if err != nil || next != id {
				t.Fatalf("gen %d: %v (memory %q, was %q)", gen, err, next, id)
			}
		}
		// Another replica refreshed generations 3 and 4: 5 arrives here.
		if _, err := l.refresh(bg, fam, 5, other, "a", exp); err != nil {
			t.Fatalf("a newer generation: %v", err)
		}
		if _, err := l.refresh(bg, fam, 4, id, "a", exp); !errors.Is(err, errReused) {
			t.Fatalf("an older generation: %v", err)
		}
		if _, err := l.refresh(bg, fam, 6, id, "a", exp); !errors.Is(err, errRevoked) {
			t.Fatalf("after reuse, the family's next generation: %v", err)
		}
		// A family this memory never saw starts where the token is.
		next, err := l.refresh(bg, "g", 7, other, "a", exp)
		if err != nil || next != id {
			t.Fatalf("a family of another memory: %v (memory %q)", err, next)
		}
		if _, err := l.refresh(bg, "g", 7, id, "a", exp); !errors.Is(err, errReused) {
			t.Fatalf("same generation twice: %v", err)
		}
	})
}

// TestLedgerEndingIsForGood (rule 3): a family the account's share ended
// is refused for every token of this memory, the used ones and the
// newest, however many sign-ins follow; it is not taken for another
// replica's.
func TestLedgerEndingIsForGood(t *testing.T) {
	eachLedger(t, 1000, 4, func(t *testing.T, l *ledger) {
		exp := time.Now().Add(time.Hour)
		const life, step = 60 * time.Millisecond, 70 * time.Millisecond // the codes expire as they go
		first, id := mustExchange(t, l, "c0", time.Now().Add(life), "alice", exp)
		if _, err := l.refresh(bg, first, 0, id, "alice", exp); err != nil { // generation 0 is now used
			t.Fatal(err)
		}
		var fams []string
		for i := 1; i < 30; i++ {
			time.Sleep(step)
			fam, _ := mustExchange(t, l, fmt.Sprint("c", i), time.Now().Add(life), "alice", exp)
			fams = append(fams, fam)
		}
		for gen := range uint32(3) {
			if _, err := l.refresh(bg, first, gen, id, "alice", exp); !errors.Is(err, errEnded) {
				t.Errorf("generation %d of the ended sign-in: %v", gen, err)
			}
		}
		live := 0
		for i := len(fams) - 1; i >= 0; i-- {
			if _, err := l.refresh(bg, fams[i], 0, id, "alice", exp); err == nil {
				live++
			} else if !errors.Is(err, errEnded) {
				t.Fatalf("sign-in %d: %v", i+1, err)
			} else if i == len(fams)-1 {
				t.Fatalf("the newest sign-in: %v", err)
			}
		}
		if live > 4 || live == 0 {
			t.Errorf("alice holds %d live sign-ins, want some and at most 4", live)
		}
	})
}

// TestLedgerPerAccount (rule 4): one account's sign-ins and codes make
// room among its own, never among other accounts'; when its codes alone
// fill its share it waits (a temporary error, until the oldest code
// expires), and after that it signs in again.
func TestLedgerPerAccount(t *testing.T) {
	eachLedger(t, 1000, 4, func(t *testing.T, l *ledger) {
		exp := time.Now().Add(time.Hour)
		const life = time.Second // the loop below takes a few ms
		victim, id := mustExchange(t, l, "cv", time.Now().Add(life), "alice", exp)
		if _, err := l.refresh(bg, victim, 0, id, "alice", exp); err != nil {
			t.Fatal(err)
		}
		var later *laterError
		taken := 0
		for i := range 50 {
			_, _, err := l.exchange(bg, fmt.Sprint("c", i), time.Now().Add(life), "mallory", exp)
			switch {
			case errors.As(err, &later):
				if !later.account || later.down || later.RetryAfter > life {
					t.Fatalf("mallory's share full: %+v", later)
				}
			case err != nil:
				t.Fatal(err)
			default:
				taken++
			}
		}
		// Two sign-ins fill a share of 4 (a code and a family each); the
		// third ends both families; then the codes alone fill it.
		if taken != 3 {
			t.Errorf("mallory's 50 sign-ins within a code's life: %d taken, want 3", taken)
		}
		// alice's used generation is still remembered, and her sign-in lives.
		if _, err := l.refresh(bg, victim, 0, id, "alice", exp); !errors.Is(err, errReused) {
			t.Fatalf("alice's used refresh token after mallory's sign-ins: %v", err)
		}
		// Once mallory's codes have expired she signs in again.
		time.Sleep(life + 100*time.Millisecond)
		mustExchange(t, l, "c-later", time.Now().Add(life), "mallory", exp)
	})
}

// TestLedgerKeepsRecentlyRefreshed (rule 4): the family that makes room
// is the account's least recently refreshed, not its oldest sign-in.
func TestLedgerKeepsRecentlyRefreshed(t *testing.T) {
	eachLedger(t, 1000, 3, func(t *testing.T, l *ledger) {
		exp := time.Now().Add(time.Hour)
		const life = 50 * time.Millisecond
		var id string
		signIn := func(code string) string {
			time.Sleep(life + 10*time.Millisecond) // the previous code has expired
			fam, memID := mustExchange(t, l, code, time.Now().Add(life), "a", exp)
			id = memID
			return fam
		}
		old := signIn("c0")
		newer := signIn("c1")
		time.Sleep(5 * time.Millisecond)
		if _, err := l.refresh(bg, old, 0, id, "a", exp); err != nil { // "old" is now the most recent
			t.Fatal(err)
		}
		signIn("c2") // 2 families and 2 new entries: one ends
		if _, err := l.refresh(bg, newer, 0, id, "a", exp); !errors.Is(err, errEnded) {
			t.Errorf(`"new" (least recently used): %v, want ended`, err)
		}
		if _, err := l.refresh(bg, old, 1, id, "a", exp); err != nil {
			t.Errorf(`"old" (refreshed last): %v`, err)
		}
	})
}

// TestLedgerFailsClosed (rule 5), this process's memory: a full memory
// refuses new entries with a temporary error and keeps every live one,
// so a used code stays used; once entries expire, room is made again.
func TestLedgerFailsClosed(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	now := t0
	l := newLedger(memory.NewLocal(func() time.Time { return now }), 10, 64)
	for i := range 5 {
		if _, _, err := l.exchange(bg, fmt.Sprint("code", i), t0.Add(time.Minute), fmt.Sprint("acct", i), t0.Add(time.Hour)); err != nil {
			t.Fatalf("exchange %d: %v", i, err)
		}
	}
	var later *laterError
	if _, _, err := l.exchange(bg, "code-x", t0.Add(time.Minute), "acct-x", t0.Add(time.Hour)); !errors.As(err, &later) || later.account || later.down {
		t.Fatalf("full ledger: got %v, want laterError", err)
	}
	if later.RetryAfter != time.Minute {
		t.Errorf("Retry-After %v, want 1m0s (the first code's expiry)", later.RetryAfter)
	}
	if _, err := l.refresh(bg, "unknown-fam", 3, other, "acct-y", t0.Add(time.Hour)); !errors.As(err, &later) {
		t.Fatalf("unknown family on a full ledger: got %v", err)
	}
	for i := range 10 {
		if err := l.once(bg, fmt.Sprint("state", i), t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.once(bg, "state-x", t0.Add(time.Minute)); !errors.As(err, &later) {
		t.Fatalf("a provider state on a full memory of states: got %v", err)
	}
	if err := l.once(bg, "state1", t0.Add(time.Minute)); !errors.Is(err, errStateUsed) {
		t.Fatalf("a used state on a full memory: %v", err)
	}
	// Everything remembered is still refused.
	for i := range 5 {
		if _, _, err := l.exchange(bg, fmt.Sprint("code", i), t0.Add(time.Minute), "acct", t0.Add(time.Hour)); !errors.Is(err, errCodeUsed) {
			t.Errorf("replayed code %d on a full ledger: %v", i, err)
		}
	}
	// The codes expire after a minute: room again (the families stay).
	now = t0.Add(61 * time.Second)
	fam, id, err := l.exchange(bg, "code-y", now.Add(time.Minute), "acct-y", now.Add(time.Hour))
	if err != nil {
		t.Fatalf("after the codes expired: %v", err)
	}
	if _, err := l.refresh(bg, fam, 0, id, "acct-y", now.Add(time.Hour)); err != nil {
		t.Fatalf("refresh of a live family: %v", err)
	}
	if _, err := l.refresh(bg, fam, 0, id, "acct-y", now.Add(time.Hour)); !errors.Is(err, errReused) {
		t.Fatalf("reuse of generation 0: %v", err)
	}
	// The sign-ins whose codes came back were revoked, and stay so after
	// the sweep.
	if _, err := l.refresh(bg, familyOf("code0"), 0, id, "acct0", now.Add(time.Hour)); !errors.Is(err, errRevoked) {
		t.Fatalf("the sign-in of a replayed code, after the sweep: %v", err)
	}
}

// TestLedgerFailsClosedRedis (rule 5), Redis: a server that refuses
// writes (full under noeviction) or does not answer makes every decision
// a temporary error, a replayed code included: nothing is issued, and
// nothing it held is lost; when it takes writes again the ledger goes on.
func TestLedgerFailsClosedRedis(t *testing.T) {
	r, srv := redisStore(t)
	l := newLedger(r, 1000, 64)
	exp := time.Now().Add(time.Hour)
	fam, id := mustExchange(t, l, "c", time.Now().Add(time.Minute), "a", exp)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer raw.Close()
	if err := raw.ConfigSet(bg, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	down := func(what string, err error) {
		t.Helper()
		var later *laterError
		if !errors.As(err, &later) || !later.down || later.RetryAfter <= 0 {
			t.Fatalf("%s on a full Redis: %v, want a laterError", what, err)
		}
	}
	_, _, err := l.exchange(bg, "c2", time.Now().Add(time.Minute), "a", exp)
	down("a new code", err)
	_, _, err = l.exchange(bg, "c", time.Now().Add(time.Minute), "a", exp)
	down("a replayed code", err)
	_, err = l.refresh(bg, fam, 0, id, "a", exp)
	down("a refresh", err)
	down("a provider state", l.once(bg, "st", exp))
	if err := raw.ConfigSet(bg, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	var next string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if next, err = l.refresh(bg, fam, 0, id, "a", exp); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || next != id {
		t.Fatalf("after Redis took writes again: %v", err)
	}
	if _, _, err := l.exchange(bg, "c", time.Now().Add(time.Minute), "a", exp); !errors.Is(err, errCodeUsed) {
		t.Fatalf("the code, after: %v", err)
	}
}

// TestLedgerRedisLostItsData (rule 3): a Redis that lost its data has a
// new id, so the sign-ins it held are adopted once more (their tokens
// name the old id) rather than all refused as ended.
func TestLedgerRedisLostItsData(t *testing.T) {
	r, srv := redisStore(t)
	l := newLedger(r, 1000, 3)
	exp := time.Now().Add(time.Hour)
	fam, id := mustExchange(t, l, "c", time.Now().Add(time.Minute), "a", exp)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer raw.Close()
	if err := raw.FlushAll(bg).Err(); err != nil {
		t.Fatal(err)
	}
	next, err := l.refresh(bg, fam, 0, id, "a", exp)
	if err != nil || next == id || next == "" {
		t.Fatalf("a sign-in after Redis lost its data: %v (memory %q, was %q), want adopted under a new id", err, next, id)
	}
	if _, err := l.refresh(bg, fam, 1, next, "a", exp); err != nil {
		t.Fatalf("its next refresh: %v", err)
	}
	if _, err := l.refresh(bg, fam, 1, next, "a", exp); !errors.Is(err, errReused) {
		t.Fatalf("its used token: %v", err)
	}
}

// TestLedgerReplicasShareRedis (rules 1 to 3 across replicas): two
// ledgers on one Redis are one memory.
func TestLedgerReplicasShareRedis(t *testing.T) {
	r, srv := redisStore(t)
	b, err := memory.NewRedis(memory.RedisOptions{URL: srv.URL(0), Key: []byte("ledger tests: a key of 32 bytes!"), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	la, lb := newLedger(r, 1000, 64), newLedger(b, 1000, 64)
	exp := time.Now().Add(time.Hour)
	fam, id := mustExchange(t, la, "c", time.Now().Add(time.Minute), "a", exp)
	if _, _, err := lb.exchange(bg, "c", time.Now().Add(time.Minute), "a", exp); !errors.Is(err, errCodeUsed) {
		t.Fatalf("a code redeemed at A, at B: %v", err)
	}
	fam2, id2 := mustExchange(t, la, "c2", time.Now().Add(time.Minute), "a", exp)
	if id2 != id {
		t.Fatalf("one memory, two ids: %q %q", id, id2)
	}
	if _, err := la.refresh(bg, fam2, 0, id, "a", exp); err != nil {
		t.Fatal(err)
	}
	if _, err := lb.refresh(bg, fam2, 0, id, "a", exp); !errors.Is(err, errReused) {
		t.Fatalf("a token rotated at A, replayed at B: %v", err)
	}
	if _, err := la.refresh(bg, fam2, 1, id, "a", exp); !errors.Is(err, errRevoked) {
		t.Fatalf("the newest token at A after the replay at B: %v", err)
	}
	if _, err := lb.refresh(bg, fam, 0, id, "a", exp); !errors.Is(err, errRevoked) {
		t.Fatalf("the sign-in of the code replayed at B, at B: %v", err)
	}
}

// tick lets a millisecond pass: Redis orders an account's sign-ins by the
// millisecond of each refresh.
func tick() { time.Sleep(3 * time.Millisecond) }

// TestLedgerEntrySize measures the memory one sign-in costs in this
// process (its code while the code lives, and its family), for the bound
// stated in SECURITY.md and OAUTH_MAX_GRANTS.
func TestLedgerEntrySize(t *testing.T) {
	const n = 50_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := memory.NewLocal(nil)
	l := newLedger(s, 2*n+10, 64)
	exp := time.Now().Add(time.Hour)
	for i := range n {
		// ids as real ones: 32 hex characters; accounts as mail addresses
		if _, _, err := l.exchange(bg, fmt.Sprintf("%032x", i), time.Now().Add(time.Minute), fmt.Sprintf("user%d@example.test", i), exp); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	entries := s.Entries("oauth.families")
	per := float64(after.HeapAlloc-before.HeapAlloc) / float64(entries)
	t.Logf("%.0f bytes per entry (%d entries: %d codes and families, one account each)", per, entries, n)
	if entries != 2*n {
		t.Errorf("%d entries for %d sign-ins, want %d", entries, n, 2*n)
	}
	if per > 400 {
		t.Errorf("%.0f bytes per entry: more than the 400 SECURITY.md allows for", per)
	}
	runtime.KeepAlive(l)
}
