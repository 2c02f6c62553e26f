package oauth

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// The ledger's rules (ledger.go), one test each. A shared store for the
// ledger must pass the same ones.

var t0 = time.Unix(1_800_000_000, 0)

// other is the id of another replica's ledger (rule 6).
const other = "another-ledger"

// TestLedgerSingleUse (rule 1): a code is redeemed once, and one that
// comes back revokes the sign-in it started; a provider state is used
// once; both until they expire.
func TestLedgerSingleUse(t *testing.T) {
	l := newLedger(100, 64)
	exp := t0.Add(time.Hour)
	if err := l.exchange("c", t0.Add(time.Minute), "f", "a", exp, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.exchange("c", t0.Add(time.Minute), "f2", "a", exp, t0); !errors.Is(err, errCodeUsed) {
		t.Fatalf("a replayed code: %v", err)
	}
	if err := l.refresh("f", 0, l.id, "a", exp, t0); !errors.Is(err, errRevoked) {
		t.Fatalf("the sign-in of a replayed code: %v", err)
	}
	if _, ok := l.families["f2"]; ok {
		t.Error("the replay started a sign-in")
	}
	if err := l.once("st", t0.Add(15*time.Minute), t0); err != nil {
		t.Fatal(err)
	}
	if err := l.once("st", t0.Add(15*time.Minute), t0.Add(time.Minute)); !errors.Is(err, errStateUsed) {
		t.Fatalf("a state used twice: %v", err)
	}
	if err := l.once("st2", t0.Add(15*time.Minute), t0); err != nil {
		t.Fatalf("another state: %v", err)
	}
}

// TestLedgerGenerations (rules 2 and 6): each refresh moves the family
// on; an older generation revokes the family for everyone; a newer one
// than this process has seen (another replica's refresh) is accepted, and
// so is a family this process never saw.
func TestLedgerGenerations(t *testing.T) {
	l := newLedger(100, 64)
	exp := t0.Add(time.Hour)
	if err := l.exchange("c", t0.Add(time.Minute), "f", "a", exp, t0); err != nil {
		t.Fatal(err)
	}
	for gen := range uint32(3) {
		if err := l.refresh("f", gen, l.id, "a", exp, t0); err != nil {
			t.Fatalf("gen %d: %v", gen, err)
		}
	}
	// Another replica refreshed generations 3 and 4: 5 arrives here.
	if err := l.refresh("f", 5, other, "a", exp, t0); err != nil {
		t.Fatalf("a newer generation: %v", err)
	}
	if err := l.refresh("f", 4, l.id, "a", exp, t0); !errors.Is(err, errReused) {
		t.Fatalf("an older generation: %v", err)
	}
	if err := l.refresh("f", 6, l.id, "a", exp, t0); !errors.Is(err, errRevoked) {
		t.Fatalf("after reuse, the family's next generation: %v", err)
	}
	// A family this process never saw starts where the token is.
	if err := l.refresh("g", 7, other, "a", exp, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.refresh("g", 7, l.id, "a", exp, t0); !errors.Is(err, errReused) {
		t.Fatalf("same generation twice: %v", err)
	}
}

// TestLedgerEndingIsForGood (rule 3): a family the account's share ended
// is refused for every token this ledger let be issued, the used ones and
// the newest, however many sign-ins follow; it is not taken for another
// replica's.
func TestLedgerEndingIsForGood(t *testing.T) {
	l := newLedger(1000, 4)
	exp := t0.Add(time.Hour)
	if err := l.exchange("c0", t0.Add(time.Minute), "first", "alice", exp, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.refresh("first", 0, l.id, "alice", exp, t0); err != nil { // generation 0 is now used
		t.Fatal(err)
	}
	for i := 1; i < 30; i++ {
		now := t0.Add(time.Duration(i) * time.Minute) // the codes expire as they go
		if err := l.exchange(fmt.Sprint("c", i), now.Add(time.Minute), fmt.Sprint("f", i), "alice", exp, now); err != nil {
			t.Fatalf("sign-in %d: %v", i, err)
		}
	}
	now := t0.Add(40 * time.Minute)
	for gen := range uint32(3) {
		if err := l.refresh("first", gen, l.id, "alice", exp, now); !errors.Is(err, errEnded) {
			t.Errorf("generation %d of the ended sign-in: %v", gen, err)
		}
	}
	if err := l.refresh("f29", 0, l.id, "alice", exp, now); err != nil {
		t.Fatalf("the newest sign-in: %v", err)
	}
	if n := len(l.accounts["alice"].families); n > 4 {
		t.Errorf("alice holds %d sign-ins, want at most 4", n)
	}
}

// TestLedgerPerAccount (rule 4): one account's sign-ins and codes make
// room among its own, never among other accounts'; when its codes alone
// fill its share it waits (a temporary error, until the oldest code
// expires), and after that it signs in again.
func TestLedgerPerAccount(t *testing.T) {
	l := newLedger(1000, 4)
	exp := t0.Add(time.Hour)
	if err := l.exchange("cv", t0.Add(time.Minute), "victim", "alice", exp, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.refresh("victim", 0, l.id, "alice", exp, t0); err != nil {
		t.Fatal(err)
	}
	var full *fullError
	taken := 0
	for i := range 50 {
		now := t0.Add(time.Duration(i) * time.Second)
		err := l.exchange(fmt.Sprint("c", i), now.Add(time.Minute), fmt.Sprint("f", i), "mallory", exp, now)
		switch {
		case errors.As(err, &full):
			if !full.account || full.RetryAfter > time.Minute {
				t.Fatalf("mallory's share full: %+v", full)
			}
		case err != nil:
			t.Fatal(err)
		default:
			taken++
		}
		if held := l.accounts["mallory"].held(); held > 4 {
			t.Fatalf("mallory holds %d entries, want at most 4", held)
		}
	}
	if taken == 0 || taken == 50 {
		t.Errorf("mallory's 50 sign-ins in 50 s: %d taken, want some and not all", taken)
	}
	// alice's used generation is still remembered, and her sign-in lives.
	if err := l.refresh("victim", 0, l.id, "alice", exp, t0.Add(time.Minute)); !errors.Is(err, errReused) {
		t.Fatalf("alice's used refresh token after mallory's sign-ins: %v", err)
	}
	// A minute later mallory's codes have expired: she signs in again.
	later := t0.Add(3 * time.Minute)
	if err := l.exchange("c-later", later.Add(time.Minute), "f-later", "mallory", exp, later); err != nil {
		t.Fatalf("mallory a minute later: %v", err)
	}
}

// TestLedgerKeepsRecentlyRefreshed (rule 4): the family that makes room
// is the account's least recently refreshed, not its oldest sign-in.
func TestLedgerKeepsRecentlyRefreshed(t *testing.T) {
	l := newLedger(1000, 3)
	exp := t0.Add(time.Hour)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) } // codes last a minute
	l.exchange("c0", at(1), "old", "a", exp, at(0))
	l.exchange("c1", at(3), "new", "a", exp, at(2))
	if err := l.refresh("old", 0, l.id, "a", exp, at(4)); err != nil { // "old" is now the most recent
		t.Fatal(err)
	}
	l.exchange("c2", at(5), "newest", "a", exp, at(4)) // 2 families and 2 new entries: one ends
	if _, ok := l.families["new"]; ok {
		t.Error(`"new" (least recently used) was kept`)
	}
	if _, ok := l.families["old"]; !ok {
		t.Error(`"old" (refreshed last) was dropped`)
	}
}

// TestLedgerFailsClosed (rule 5): a full ledger refuses new entries with a
// temporary error and keeps every live one, so a used code stays used;
// once entries expire, room is made again.
func TestLedgerFailsClosed(t *testing.T) {
	l := newLedger(10, 64)
	for i := range 5 {
		if err := l.exchange(fmt.Sprint("code", i), t0.Add(time.Minute), fmt.Sprint("fam", i), fmt.Sprint("acct", i), t0.Add(time.Hour), t0); err != nil {
			t.Fatalf("exchange %d: %v", i, err)
		}
	}
	var full *fullError
	if err := l.exchange("code-x", t0.Add(time.Minute), "fam-x", "acct-x", t0.Add(time.Hour), t0); !errors.As(err, &full) || full.account {
		t.Fatalf("full ledger: got %v, want fullError", err)
	}
	if full.RetryAfter != time.Minute {
		t.Errorf("Retry-After %v, want 1m0s (the first code's expiry)", full.RetryAfter)
	}
	if err := l.refresh("unknown-fam", 3, other, "acct-y", t0.Add(time.Hour), t0); !errors.As(err, &full) {
		t.Fatalf("unknown family on a full ledger: got %v", err)
	}
	if err := l.once("state", t0.Add(time.Minute), t0); !errors.As(err, &full) {
		t.Fatalf("a provider state on a full ledger: got %v", err)
	}
	// Everything remembered is still refused.
	for i := range 5 {
		if err := l.exchange(fmt.Sprint("code", i), t0.Add(time.Minute), "other", "acct", t0.Add(time.Hour), t0); !errors.Is(err, errCodeUsed) {
			t.Errorf("replayed code %d on a full ledger: %v", i, err)
		}
	}
	// The codes expire after a minute: room again (the families stay).
	later := t0.Add(61 * time.Second)
	if err := l.exchange("code-y", later.Add(time.Minute), "fam-y", "acct-y", later.Add(time.Hour), later); err != nil {
		t.Fatalf("after the codes expired: %v", err)
	}
	if err := l.refresh("fam-y", 0, l.id, "acct-y", later.Add(time.Hour), later); err != nil {
		t.Fatalf("refresh of a live family: %v", err)
	}
	if err := l.refresh("fam-y", 0, l.id, "acct-y", later.Add(time.Hour), later); !errors.Is(err, errReused) {
		t.Fatalf("reuse of generation 0: %v", err)
	}
	// The sign-ins whose codes came back were revoked, and stay so after
	// the sweep.
	if err := l.refresh("fam0", 0, l.id, "acct0", later.Add(time.Hour), later); !errors.Is(err, errRevoked) {
		t.Fatalf("the sign-in of a replayed code, after the sweep: %v", err)
	}
	// Accounts whose entries all expired are forgotten with them.
	much := t0.Add(2 * time.Hour)
	l.room(l.max, much)
	if len(l.accounts) != 0 || l.size() != 0 {
		t.Errorf("after everything expired: %d accounts, %d entries", len(l.accounts), l.size())
	}
}

// TestLedgerEntrySize measures the memory one entry costs, for the bound
// stated in SECURITY.md and OAUTH_MAX_GRANTS.
func TestLedgerEntrySize(t *testing.T) {
	const n = 100_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := newLedger(2*n+10, 64)
	exp := t0.Add(time.Hour)
	for i := range n / 2 {
		// ids as real ones: 32 hex characters; accounts as mail addresses
		code, fam := fmt.Sprintf("%032x", i), fmt.Sprintf("%032x", n+i)
		if err := l.exchange(code, t0.Add(time.Minute), fam, fmt.Sprintf("user%d@example.test", i), exp, t0); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / float64(l.size())
	t.Logf("%.0f bytes per entry (%d entries: codes and families, one account each)", per, l.size())
	if per > 400 {
		t.Errorf("%.0f bytes per entry: more than the 400 SECURITY.md allows for", per)
	}
	runtime.KeepAlive(l)
}
