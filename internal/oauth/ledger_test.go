package oauth

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

// TestLedgerFailsClosed: a full ledger refuses new entries with a
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
	if err := l.exchange("code-x", t0.Add(time.Minute), "fam-x", "acct-x", t0.Add(time.Hour), t0); !errors.As(err, &full) {
		t.Fatalf("full ledger: got %v, want fullError", err)
	}
	if full.RetryAfter != time.Minute {
		t.Errorf("Retry-After %v, want 1m0s (the first code's expiry)", full.RetryAfter)
	}
	if err := l.refresh("unknown-fam", 3, "acct-y", t0.Add(time.Hour), t0); !errors.As(err, &full) {
		t.Fatalf("unknown family on a full ledger: got %v", err)
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
	if err := l.refresh("fam-y", 0, "acct-y", later.Add(time.Hour), later); err != nil {
		t.Fatalf("refresh of a live family: %v", err)
	}
	if err := l.refresh("fam-y", 0, "acct-y", later.Add(time.Hour), later); !errors.Is(err, errReused) {
		t.Fatalf("reuse of generation 0: %v", err)
	}
	// The sign-ins whose codes came back were revoked, and stay so after
	// the sweep.
	if err := l.refresh("fam0", 0, "acct0", later.Add(time.Hour), later); !errors.Is(err, errRevoked) {
		t.Fatalf("the sign-in of a replayed code, after the sweep: %v", err)
	}
}

// TestLedgerGenerations: each refresh moves the family on; an older
// generation revokes the family for everyone; a newer one than this
// process has seen (another replica's refresh) is accepted.
func TestLedgerGenerations(t *testing.T) {
	l := newLedger(100, 64)
	exp := t0.Add(time.Hour)
	if err := l.exchange("c", t0.Add(time.Minute), "f", "a", exp, t0); err != nil {
		t.Fatal(err)
	}
	for gen := range uint32(3) {
		if err := l.refresh("f", gen, "a", exp, t0); err != nil {
			t.Fatalf("gen %d: %v", gen, err)
		}
	}
	// Another replica refreshed generations 3 and 4: 5 arrives here.
	if err := l.refresh("f", 5, "a", exp, t0); err != nil {
		t.Fatalf("a newer generation: %v", err)
	}
	if err := l.refresh("f", 4, "a", exp, t0); !errors.Is(err, errReused) {
		t.Fatalf("an older generation: %v", err)
	}
	if err := l.refresh("f", 6, "a", exp, t0); !errors.Is(err, errRevoked) {
		t.Fatalf("after reuse, the family's next generation: %v", err)
	}
	// A code that comes back revokes the sign-in it started.
	if err := l.exchange("c2", t0.Add(time.Minute), "h", "a", exp, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.exchange("c2", t0.Add(time.Minute), "h2", "a", exp, t0); !errors.Is(err, errCodeUsed) {
		t.Fatalf("a replayed code: %v", err)
	}
	if err := l.refresh("h", 0, "a", exp, t0); !errors.Is(err, errRevoked) {
		t.Fatalf("the sign-in of a replayed code: %v", err)
	}
	// A family this process never saw starts where the token is.
	if err := l.refresh("g", 7, "a", exp, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.refresh("g", 7, "a", exp, t0); !errors.Is(err, errReused) {
		t.Fatalf("same generation twice: %v", err)
	}
}

// TestLedgerPerAccount: one account's sign-ins make room among its own
// (the least recently refreshed goes), never among other accounts'.
func TestLedgerPerAccount(t *testing.T) {
	l := newLedger(1000, 3)
	exp := t0.Add(time.Hour)
	for i := range 3 {
		if err := l.exchange(fmt.Sprint("c", i), t0.Add(time.Minute), fmt.Sprint("f", i), "mallory", exp, t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.exchange("cv", t0.Add(time.Minute), "victim", "alice", exp, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.refresh("victim", 0, "alice", exp, t0); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 50; i++ {
		if err := l.exchange(fmt.Sprint("c", i), t0.Add(time.Minute), fmt.Sprint("f", i), "mallory", exp, t0); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(l.accounts["mallory"]); n != 3 {
		t.Errorf("mallory holds %d families, want 3", n)
	}
	// alice's used generation is still remembered.
	if err := l.refresh("victim", 0, "alice", exp, t0); !errors.Is(err, errReused) {
		t.Fatalf("alice's used refresh token after mallory's sign-ins: %v", err)
	}
}

// TestLedgerKeepsRecentlyRefreshed: the family that makes room is the
// account's least recently refreshed, not its oldest sign-in.
func TestLedgerKeepsRecentlyRefreshed(t *testing.T) {
	l := newLedger(1000, 2)
	exp := t0.Add(time.Hour)
	l.exchange("c0", t0.Add(time.Minute), "old", "a", exp, t0)
	l.exchange("c1", t0.Add(time.Minute), "new", "a", exp, t0)
	if err := l.refresh("old", 0, "a", exp, t0); err != nil { // "old" is now the most recent
		t.Fatal(err)
	}
	l.exchange("c2", t0.Add(time.Minute), "newest", "a", exp, t0)
	if _, ok := l.families["new"]; ok {
		t.Error(`"new" (least recently used) was kept`)
	}
	if _, ok := l.families["old"]; !ok {
		t.Error(`"old" (refreshed last) was dropped`)
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
