package guard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

var bg = context.Background()

// eachStore runs f with a memory of each store: this process's own, and
// Redis (a redis-server of its own), both on clock c. Redis keeps its own
// time for what expires, so these tests move c only past back-off
// deadlines (which the guard compares with its clock), never to make
// counts expire: what must start afresh uses another address or account.
func eachStore(t *testing.T, f func(t *testing.T, c *clock, mem memory.Store)) {
	t.Run("local", func(t *testing.T) {
		c := newClock()
		f(t, c, memory.NewLocal(c.now))
	})
	t.Run("redis", func(t *testing.T) {
		srv := mailtest.StartRedis(t, mailtest.RedisOptions{})
		c := newClock()
		key := make([]byte, 32)
		copy(key, t.Name())
		r, err := memory.NewRedis(memory.RedisOptions{URL: srv.URL(0), Key: key, Now: c.now, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		f(t, c, r)
	})
}

func TestRateLimit(t *testing.T) {
	eachStore(t, func(t *testing.T, c *clock, mem memory.Store) {
		g := New(Config{RatePerMinute: 60, Burst: 3, Now: c.now, Memory: mem})
		for i := range 3 {
			if err := g.AllowCall(bg, "Bob@x"); err != nil {
				t.Fatalf("call %d within the burst refused: %v", i, err)
			}
		}
		err := g.AllowCall(bg, "bob@x") // same user, other case
		if mailerr.KindOf(err) != mailerr.RateLimited || !strings.Contains(mailerr.Message(err), "retry in 1s") {
			t.Fatalf("4th call: %v, want rate limited with retry in 1s", err)
		}
		if err := g.AllowCall(bg, "alice@x"); err != nil {
			t.Fatalf("another user is limited too: %v", err)
		}
		c.add(time.Second)
		if _, ok := mem.(*memory.Redis); ok {
			time.Sleep(time.Second) // Redis refills by its own clock
		}
		if err := g.AllowCall(bg, "bob@x"); err != nil {
			t.Fatalf("after a second one token is back: %v", err)
		}
		if err := g.AllowCall(bg, "bob@x"); err == nil {
			t.Fatal("only one token came back, two calls passed")
		}
		// Off: never refuses.
		off := New(Config{Now: c.now, Memory: mem})
		for range 100 {
			if err := off.AllowCall(bg, "bob@x"); err != nil {
				t.Fatal(err)
			}
		}
	})
	var nilGuard *Guard
	if l, err := nilGuard.BeginLogin(bg, credentials.New("x", "pw")); nilGuard.AllowCall(bg, "x") != nil || err != nil {
		t.Fatal("nil guard refused")
	} else {
		l.Refused(bg) // a nil Login is fine too
	}
}

// guesses makes every wrong password different, so that none is ever
// proven by another's success.
var guesses atomic.Int64

// guess is user with a password never used before.
func guess(user string) credentials.Credentials {
	return credentials.New(user, fmt.Sprint("guess-", guesses.Add(1)))
}

// try begins a login with a fresh wrong password and abandons it, returning
// BeginLogin's error.
func try(g *Guard, ctx context.Context, user string) error {
	return tryCreds(g, ctx, guess(user))
}

func tryCreds(g *Guard, ctx context.Context, creds credentials.Credentials) error {
	l, err := g.BeginLogin(ctx, creds)
	l.Abandoned(bg)
	return err
}

// failLogin is one login with a wrong password that the server refused.
func failLogin(t *testing.T, g *Guard, ctx context.Context, user string) {
	t.Helper()
	l, err := g.BeginLogin(ctx, guess(user))
	if err != nil {
		t.Fatalf("login for %s refused before it was tried: %v", user, err)
	}
	l.Refused(bg)
}

// succeed is a login with creds that the server accepted.
func succeed(t *testing.T, g *Guard, ctx context.Context, creds credentials.Credentials) {
	t.Helper()
	l, err := g.BeginLogin(ctx, creds)
	if err != nil {
		t.Fatalf("login for %s refused before it was tried: %v", creds.User, err)
	}
	l.Succeeded(bg)
}

func addr(a string) context.Context { return WithClientAddr(context.Background(), a) }

func TestLoginBackoff(t *testing.T) { eachStore(t, testLoginBackoff) }

func testLoginBackoff(t *testing.T, c *clock, mem memory.Store) {
	g := New(Config{FailuresPerUser: 3, FailuresPerAddress: 10, Delay: 10 * time.Second, MaxDelay: 40 * time.Second, Now: c.now, Memory: mem})
	ctx := addr("192.0.2.1")
	for range 2 {
		failLogin(t, g, ctx, "bob")
	}
	if err := try(g, ctx, "bob"); err != nil {
		t.Fatalf("3rd attempt refused before the 3rd failure: %v", err)
	}
	failLogin(t, g, ctx, " BOB") // the same account, spelt differently
	err := try(g, ctx, "Bob")
	if mailerr.KindOf(err) != mailerr.RateLimited || !strings.Contains(mailerr.Message(err), "for 10s") {
		t.Fatalf("after 3 failures: %v", err)
	}
	// The back-off is for bob from this address: bob from another address
	// is not locked out by these guesses.
	if err := try(g, addr("192.0.2.2"), "bob"); err != nil {
		t.Fatalf("bob from another address refused: %v", err)
	}
	// Another user from this address is fine (address threshold 10).
	if err := try(g, ctx, "alice"); err != nil {
		t.Fatalf("alice refused: %v", err)
	}
	c.add(10 * time.Second)
	if err := try(g, ctx, "bob"); err != nil {
		t.Fatalf("after the delay: %v", err)
	}
	failLogin(t, g, ctx, "bob") // 4th: doubles
	if err := try(g, ctx, "bob"); !strings.Contains(fmt.Sprint(err), "for 20s") {
		t.Fatalf("4th failure: %v, want 20s", err)
	}
	c.add(20 * time.Second)
	failLogin(t, g, ctx, "bob") // 5th: 40s
	c.add(40 * time.Second)
	failLogin(t, g, ctx, "bob") // 6th: capped at 40s
	if err := try(g, ctx, "bob"); !strings.Contains(fmt.Sprint(err), "for 40s") {
		t.Fatalf("capped: %v, want 40s", err)
	}
	c.add(40 * time.Second)
	succeed(t, g, ctx, credentials.New("bob", "right"))
	failLogin(t, g, ctx, "bob")
	if err := try(g, ctx, "bob"); err != nil {
		t.Fatalf("a success did not reset bob's count from this address: %v", err)
	}

	// Per address: 10 failures over 10 users block the address for all.
	office := addr("192.0.2.100")
	for i := range 10 {
		failLogin(t, g, office, fmt.Sprintf("user%d", i))
	}
	if err := try(g, office, "fresh-user"); err == nil {
		t.Fatal("address back-off did not engage")
	}
	if err := try(g, addr("192.0.2.9"), "fresh-user"); err != nil {
		t.Fatalf("another address refused: %v", err)
	}
	// A success for one user does not reset the address.
	succeed(t, g, addr("192.0.2.9"), credentials.New("user1", "right"))
	if err := try(g, office, "fresh-user"); err == nil {
		t.Fatal("a success reset the address count")
	}
}

// Guesses at an account from one address do not lock out its owner at
// another; guesses spread over many addresses hit the account's own,
// higher ceiling, which a credential that logged in recently passes.
func TestGuessesDoNotLockOutTheOwner(t *testing.T) { eachStore(t, testGuessesDoNotLockOutTheOwner) }

func testGuessesDoNotLockOutTheOwner(t *testing.T, c *clock, mem memory.Store) {
	g := New(Config{FailuresPerUser: 5, FailuresPerAccount: 12, FailuresPerAddress: 20,
		Delay: time.Minute, MaxDelay: 4 * time.Minute, Now: c.now, Memory: mem})
	owner := credentials.New("alice@x", "right")
	succeed(t, g, addr("192.0.2.1"), owner) // proven

	// 20 guesses from one address: that address is refused from the 6th on.
	guesser := addr("198.51.100.2")
	refused := 0
	for range 20 {
		l, err := g.BeginLogin(guesser, guess("alice@x"))
		if err != nil {
			if !strings.Contains(mailerr.Message(err), "too many failed logins") {
				t.Fatalf("unexpected refusal: %v", err)
			}
			refused++
			continue
		}
		l.Refused(bg)
	}
	if refused != 15 {
		t.Fatalf("%d of 20 guesses refused, want 15", refused)
	}
	// The owner, proven or not, is not held back at another address...
	if err := tryCreds(g, addr("192.0.2.1"), owner); err != nil {
		t.Fatalf("the owner's proven password refused: %v", err)
	}
	unproven := credentials.New("ALICE@x", "right") // a spelling that never logged in
	if err := tryCreds(g, addr("192.0.2.3"), unproven); err != nil {
		t.Fatalf("an unproven login from a clean address refused: %v", err)
	}
	// ...and the owner's proven password passes even at the guesser's address.
	if err := tryCreds(g, guesser, owner); err != nil {
		t.Fatalf("the owner's proven password refused at the guesser's address: %v", err)
	}

	// Spread guessing: 5 + 2 more failures from other addresses reach the
	// account's ceiling of 12 (5 counted from the first guesser).
	for i := range 7 {
		failLogin(t, g, addr(fmt.Sprintf("203.0.113.%d", i)), "alice@x")
	}
	if err := try(g, addr("203.0.113.200"), "alice@x"); err == nil || !strings.Contains(mailerr.Message(err), "for 1m0s") {
		t.Fatalf("after 12 failures over many addresses: %v, want the account's back-off", err)
	}
	if err := tryCreds(g, addr("192.0.2.3"), unproven); err == nil {
		t.Fatal("an unproven login passed the account's ceiling")
	}
	if err := tryCreds(g, addr("203.0.113.201"), owner); err != nil {
		t.Fatalf("the proven password refused at the account's ceiling: %v", err)
	}
	// Proven logins do not count as attempts in progress: many at once pass.
	var held []*Login
	for range 20 {
		l, err := g.BeginLogin(addr("192.0.2.1"), owner)
		if err != nil {
			t.Fatalf("concurrent proven login refused: %v", err)
		}
		held = append(held, l)
	}
	for _, l := range held {
		l.Succeeded(bg)
	}

	// The password changes: the first refusal ends the proof.
	l, err := g.BeginLogin(addr("192.0.2.1"), owner)
	if err != nil {
		t.Fatal(err)
	}
	l.Refused(bg)
	if err := tryCreds(g, addr("192.0.2.1"), owner); err == nil {
		t.Fatal("a password the server refused is still treated as proven")
	}
}

// A proof lasts 2×MaxDelay (8 min) after the last success (this
// process's memory: the test moves its clock past the proof's life).
func TestProofLasts(t *testing.T) {
	c := newClock()
	g := New(Config{FailuresPerUser: 5, FailuresPerAccount: 12, FailuresPerAddress: 20,
		Delay: time.Minute, MaxDelay: 4 * time.Minute, Now: c.now})
	fresh := credentials.New("carol@x", "right")
	succeed(t, g, addr("192.0.2.1"), fresh)
	c.add(7*time.Minute + 30*time.Second)
	for i := range 12 { // the account's back-off: until 8m30s
		failLogin(t, g, addr(fmt.Sprintf("203.0.113.%d", 100+i)), "carol@x")
	}
	if err := tryCreds(g, addr("192.0.2.7"), fresh); err != nil {
		t.Fatalf("proven 7m30s ago, refused: %v", err)
	}
	c.add(40 * time.Second)
	if err := tryCreds(g, addr("192.0.2.7"), fresh); err == nil {
		t.Fatal("a proof older than 2×MaxDelay still passes the ceiling")
	}
}

// This process's memory is bounded: 10,000 users from 10,000 addresses
// leave at most what MaxKeys allows of each kind.
func TestBoundedMemory(t *testing.T) {
	c := newClock()
	mem := memory.NewLocal(c.now)
	g := New(Config{RatePerMinute: 60, Burst: 5, FailuresPerUser: 3, FailuresPerAccount: 10, FailuresPerAddress: 3,
		SignInPerAccount: 5, SignInPerAddress: 5, Delay: time.Second, MaxDelay: time.Minute, MaxKeys: 100, Now: c.now, Memory: mem})
	for i := range 10_000 {
		ctx := WithClientAddr(bg, fmt.Sprintf("10.0.%d.%d", i/256, i%256))
		if l, err := g.BeginLogin(ctx, guess(fmt.Sprintf("user%d", i))); err == nil {
			if i%2 == 0 {
				l.Refused(bg)
			} else {
				l.Succeeded(bg)
			}
		}
		g.AllowCall(bg, fmt.Sprintf("user%d", i))
		g.AllowSignInFrom(ctx)
		g.AllowSignInAs(ctx, fmt.Sprintf("user%d", i))
	}
	// Logins in progress are bounded too: past the bound a login is
	// refused (busy), never one forgotten (it would let guesses through).
	busy := 0
	for i := range 250 {
		if _, err := g.BeginLogin(WithClientAddr(bg, "192.0.2.1"), guess(fmt.Sprintf("slow%d", i))); mailerr.KindOf(err) == mailerr.Busy {
			busy++
		}
	}
	if busy < 50 {
		t.Errorf("%d of 250 logins held in progress refused, want at least 50 (a bound of 200)", busy)
	}
	bounds := map[string]int{"guard.calls": 100, "guard.signin": 200, "guard.backoff": 400, "guard.pending": 200}
	for name, most := range bounds {
		if n := mem.Entries(name); n > most || n == 0 {
			t.Errorf("%s holds %d entries; want some, at most %d", name, n, most)
		}
	}
	// Entries expire: after MaxDelay*2 nothing of before is served.
	c.add(3 * time.Minute)
	if v, _ := g.counts.Get(bg, failuresOf("a:", "user9998")); v[0] != 0 {
		t.Fatalf("an expired count is still served: %d", v[0])
	}
}

func TestConcurrentUse(t *testing.T) {
	eachStore(t, func(t *testing.T, _ *clock, mem memory.Store) { testConcurrentUse(t, mem) })
}

func testConcurrentUse(t *testing.T, mem memory.Store) {
	g := New(Config{RatePerMinute: 6000, Burst: 10, FailuresPerUser: 3, FailuresPerAccount: 6, FailuresPerAddress: 3, MaxKeys: 50, Memory: mem})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := WithClientAddr(context.Background(), fmt.Sprint("a", i))
			for j := range 100 {
				u := fmt.Sprintf("u%d", (i*j)%70)
				g.AllowCall(bg, u)
				creds := guess(u)
				if j%3 == 0 {
					creds = credentials.New(u, "right")
				}
				if l, err := g.BeginLogin(ctx, creds); err == nil {
					if j%7 == 0 {
						l.Succeeded(bg)
					} else {
						l.Refused(bg)
					}
				}
			}
		}()
	}
	wg.Wait()
}

// Concurrent guesses cannot pass the threshold before the first one fails:
// attempts in progress count.
func TestConcurrentAttemptsCount(t *testing.T) { eachStore(t, testConcurrentAttemptsCount) }

func testConcurrentAttemptsCount(t *testing.T, c *clock, mem memory.Store) {
	g := New(Config{FailuresPerUser: 3, Delay: time.Minute, MaxDelay: time.Minute, Now: c.now, Memory: mem})
	ctx := context.Background()
	var held []*Login
	for i := range 10 {
		l, err := g.BeginLogin(ctx, guess("bob"))
		if err != nil {
			if i != 3 {
				t.Fatalf("attempt %d refused, want the 4th (index 3) to be the first", i)
			}
			if !strings.Contains(mailerr.Message(err), "at once") {
				t.Fatalf("unexpected message %q", mailerr.Message(err))
			}
			break
		}
		held = append(held, l)
	}
	if len(held) != 3 {
		t.Fatalf("%d attempts admitted at once, want 3", len(held))
	}
	held[0].Abandoned(bg) // a network failure frees its slot without counting
	l, err := g.BeginLogin(ctx, guess("bob"))
	if err != nil {
		t.Fatalf("slot not freed: %v", err)
	}
	for _, h := range append(held[1:], l) {
		h.Refused(bg)
		h.Refused(bg) // a second call does nothing
	}
	if err := try(g, ctx, "bob"); err == nil || !strings.Contains(mailerr.Message(err), "for 1m0s") {
		t.Fatalf("after 3 refusals: %v", err)
	}
	// After the period, one probe at a time.
	c.add(time.Minute)
	p1, err := g.BeginLogin(ctx, guess("bob"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.BeginLogin(ctx, guess("bob")); err == nil {
		t.Fatal("two probes at once after the back-off")
	}
	p1.Succeeded(bg)
	if err := try(g, ctx, "bob"); err != nil {
		t.Fatalf("after a success: %v", err)
	}
}

// A client's burst of first calls (many at once, over several replicas)
// queues behind the logins in progress instead of failing: the first that
// succeeds proves the password for those waiting. Concurrent guesses wait
// too, and meet the back-off their predecessors' failures started; a queue
// that does not move ends in the refusal.
func TestLoginsQueueBehindTheFirst(t *testing.T) { eachStore(t, testLoginsQueueBehindTheFirst) }

func testLoginsQueueBehindTheFirst(t *testing.T, c *clock, mem memory.Store) {
	g := New(Config{FailuresPerUser: 3, Delay: time.Minute, MaxDelay: time.Minute, Queue: 10 * time.Second, Now: c.now, Memory: mem})
	owner := credentials.New("carol", "carol's right password")
	begin := func(creds credentials.Credentials) chan error {
		done := make(chan error, 1)
		go func() {
			l, err := g.BeginLogin(bg, creds)
			if err == nil && !l.proven {
				err = errors.New("admitted unproven")
			}
			done <- err
		}()
		return done
	}
	var held []*Login
	for range 3 {
		l, err := g.BeginLogin(bg, owner)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	waiting := []chan error{begin(owner), begin(owner)}
	time.Sleep(100 * time.Millisecond)
	for _, w := range waiting {
		select {
		case err := <-w:
			t.Fatalf("a fourth login did not wait: %v", err)
		default:
		}
	}
	held[0].Succeeded(bg)
	for _, w := range waiting {
		select {
		case err := <-w:
			if err != nil {
				t.Fatalf("a queued login after the first succeeded: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a queued login was not admitted after the first succeeded")
		}
	}
	for _, l := range held[1:] {
		l.Succeeded(bg)
	}

	// Guesses: the queued one meets the back-off that the three in
	// progress start when they fail.
	held = held[:0]
	for range 3 {
		l, err := g.BeginLogin(bg, guess("dave"))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	queued := make(chan error, 1)
	go func() { queued <- tryCreds(g, bg, guess("dave")) }()
	time.Sleep(100 * time.Millisecond)
	for _, l := range held {
		l.Refused(bg)
	}
	select {
	case err := <-queued:
		if err == nil || !strings.Contains(mailerr.Message(err), "for 1m0s") {
			t.Fatalf("a queued guess after three refusals: %v, want the back-off", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a queued guess did not end after the refusals")
	}

	// A queue that does not move: refused when Queue is over.
	g = New(Config{FailuresPerUser: 1, Delay: time.Minute, MaxDelay: time.Minute, Queue: 300 * time.Millisecond, Now: c.now, Memory: mem})
	l, err := g.BeginLogin(bg, guess("erin"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Abandoned(bg)
	t0 := time.Now()
	err = try(g, bg, "erin")
	if err == nil || !strings.Contains(mailerr.Message(err), "at once") {
		t.Fatalf("behind a login that does not end: %v, want the refusal", err)
	}
	if d := time.Since(t0); d < 200*time.Millisecond || d > 3*time.Second {
		t.Fatalf("refused after %v, want about the 300ms queue", d)
	}

	// A call that ends while it waits ends the wait: a timeout, nothing
	// taken.
	g = New(Config{FailuresPerUser: 1, Delay: time.Minute, MaxDelay: time.Minute, Queue: time.Minute, Now: c.now, Memory: mem})
	l2, err := g.BeginLogin(bg, guess("frank"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 150*time.Millisecond)
	defer cancel()
	t0 = time.Now()
	_, err = g.BeginLogin(ctx, guess("frank"))
	if mailerr.KindOf(err) != mailerr.Timeout || time.Since(t0) > 3*time.Second {
		t.Fatalf("a wait whose call ended: %v after %v, want a timeout at the call's end", err, time.Since(t0))
	}
	l2.Abandoned(bg)
	if err := try(g, bg, "frank"); err != nil {
		t.Fatalf("the ended wait kept a slot: %v", err)
	}
}

// Many users behind one address (a proxy, an office) log in at once, as
// every SMTP send does: attempts in progress do not count against the
// address, only failures do.
func TestAddressCountsFailuresNotConcurrency(t *testing.T) {
	eachStore(t, testAddressCountsFailuresNotConcurrency)
}

func testAddressCountsFailuresNotConcurrency(t *testing.T, c *clock, mem memory.Store) {
	g := New(Config{FailuresPerUser: 5, FailuresPerAddress: 3, Delay: time.Minute, MaxDelay: time.Minute, Now: c.now, Memory: mem})
	ctx := WithClientAddr(context.Background(), "192.0.2.7")
	var held []*Login
	for i := range 100 {
		l, err := g.BeginLogin(ctx, guess(fmt.Sprintf("user%d", i)))
		if err != nil {
			t.Fatalf("concurrent login %d from one address refused: %v", i, err)
		}
		held = append(held, l)
	}
	for _, l := range held[:3] {
		l.Refused(bg)
	}
	if err := try(g, ctx, "user200"); err == nil || !strings.Contains(mailerr.Message(err), "for 1m0s") {
		t.Fatalf("after 3 failures from the address: %v, want a 1m back-off", err)
	}
	// The attempts still in flight end normally.
	for _, l := range held[3:] {
		l.Succeeded(bg)
	}
	if err := try(g, WithClientAddr(context.Background(), "192.0.2.8"), "user200"); err != nil {
		t.Fatalf("another address is refused too: %v", err)
	}
}

// Concurrent guesses at one account from many addresses cannot slip past
// the account's ceiling either: attempts in progress count there too.
func TestConcurrentAttemptsCountPerAccount(t *testing.T) {
	eachStore(t, testConcurrentAttemptsCountPerAccount)
}

func testConcurrentAttemptsCountPerAccount(t *testing.T, c *clock, mem memory.Store) {
	g := New(Config{FailuresPerUser: 3, FailuresPerAccount: 8, Delay: time.Minute, MaxDelay: time.Minute, Now: c.now, Memory: mem})
	var held []*Login
	for i := range 50 {
		l, err := g.BeginLogin(addr(fmt.Sprintf("203.0.113.%d", i)), guess("bob"))
		if err != nil {
			break
		}
		held = append(held, l)
	}
	if len(held) != 8 {
		t.Fatalf("%d concurrent attempts from different addresses admitted, want 8", len(held))
	}
	for _, l := range held {
		l.Refused(bg)
	}
	if err := try(g, addr("203.0.113.99"), "bob"); err == nil || !strings.Contains(mailerr.Message(err), "for 1m0s") {
		t.Fatalf("after 8 refusals: %v", err)
	}
}

// A success forgives: a user whose mail server refuses the right password
// now and then (or who mistyped it) builds up nothing at the address once
// a login of theirs succeeds, so the other users behind that address (an
// office, a proxy) are never locked out by it. Failures at other accounts,
// and failures that no success followed, still add up.
func TestAddressForgivesASuccess(t *testing.T) { eachStore(t, testAddressForgivesASuccess) }

func testAddressForgivesASuccess(t *testing.T, c *clock, mem memory.Store) {
	g := New(Config{FailuresPerUser: 5, FailuresPerAccount: 50, FailuresPerAddress: 20,
		Delay: time.Minute, MaxDelay: time.Minute, Now: c.now, Memory: mem})
	office := addr("192.0.2.50")
	flapper := credentials.New("flap@x", "right")
	refuseAt := func(at context.Context, creds credentials.Credentials) {
		t.Helper()
		l, err := g.BeginLogin(at, creds)
		if err != nil {
			t.Fatalf("%s refused before the server was asked: %v", creds.User, err)
		}
		l.Refused(bg)
	}
	refuse := func(creds credentials.Credentials) { t.Helper(); refuseAt(office, creds) }
	// 40 refusals of the right password (the server flaps), each pair of
	// them followed by a success: twice the address's threshold in all.
	for range 20 {
		refuse(flapper)
		refuse(flapper)
		succeed(t, g, office, flapper)
	}
	// Another user behind the same address, never logged in before.
	if err := try(g, office, "colleague@x"); err != nil {
		t.Fatalf("a colleague behind the flapping user's address is locked out: %v", err)
	}

	// The server refuses 4 times in a row, then recovers: the success takes
	// those 4 back as well, and leaves the address below its threshold.
	for range 4 {
		refuse(flapper)
	}
	for i := range 15 { // guesses at other accounts: 19 in all with the 4
		failLogin(t, g, office, fmt.Sprintf("victim%d@x", i))
	}
	succeed(t, g, office, flapper)
	failLogin(t, g, office, "victim-last@x") // 16: still below 20
	if err := try(g, office, "colleague@x"); err != nil {
		t.Fatalf("the flapping user's forgiven failures still count: %v", err)
	}

	// Failures at other accounts are not forgiven by someone else's
	// success: 4 more guesses reach 20, and the address is refused...
	for i := range 4 {
		failLogin(t, g, office, fmt.Sprintf("victim%d@y", i))
	}
	if err := try(g, office, "colleague@x"); err == nil || !strings.Contains(mailerr.Message(err), "too many failed logins") {
		t.Fatalf("20 failures at other accounts from one address: %v, want the address's back-off", err)
	}
	// ...even after a success of an account that failed nothing there (the
	// flapper's proven password passes the back-off, and forgives only its
	// own failures, of which it has none left).
	succeed(t, g, office, flapper)
	if err := try(g, office, "colleague@x"); err == nil {
		t.Fatal("a success of one account forgave the address's failures at others")
	}

	// A block lifts once the failures that made it are forgiven: a
	// flapping user (of an address and an account of their own: nothing
	// of the above counts) mistypes 3 times, 17 guesses at other accounts
	// make 20, and the user's proven password then logs in through the
	// back-off.
	office2, flapper2 := addr("192.0.2.51"), credentials.New("flap2@x", "right")
	succeed(t, g, office2, flapper2)
	for range 3 {
		refuseAt(office2, credentials.New("flap2@x", "typo"))
	}
	for i := range 17 {
		failLogin(t, g, office2, fmt.Sprintf("spray%d@z", i))
	}
	if err := try(g, office2, "colleague@x"); err == nil {
		t.Fatal("20 failures did not engage the address's back-off")
	}
	succeed(t, g, office2, flapper2)
	if err := try(g, office2, "colleague@x"); err != nil {
		t.Fatalf("the block stays after the failures that made it were forgiven: %v", err)
	}
	// The server's refusals of the right password end its proof, so during
	// a block the user waits like everyone else; once the block ends their
	// success takes the failures back, and the address is not refused
	// again at the next failure.
	office3, flapper3 := addr("192.0.2.52"), credentials.New("flap3@x", "right")
	succeed(t, g, office3, flapper3)
	for range 3 {
		refuseAt(office3, flapper3)
	}
	for i := range 17 {
		failLogin(t, g, office3, fmt.Sprintf("spray%d@w", i))
	}
	if err := tryCreds(g, office3, flapper3); err == nil {
		t.Fatal("20 failures did not engage the address's back-off")
	}
	c.add(time.Minute)
	succeed(t, g, office3, flapper3)
	failLogin(t, g, office3, "one-more@w")
	if err := try(g, office3, "colleague@x"); err != nil {
		t.Fatalf("after the block, a forgiven user's failures still count: %v", err)
	}
}

// Two guards on one Redis with one Secret (two replicas) are one back-off:
// failures at either count for both, and a credential proven at one is
// proven at the other, so the owner passes an account's ceiling that
// guesses spread over both replicas reached.
func TestTwoGuardsOneMemory(t *testing.T) {
	srv := mailtest.StartRedis(t, mailtest.RedisOptions{})
	c := newClock()
	store := func(key string) memory.Store {
		r, err := memory.NewRedis(memory.RedisOptions{URL: srv.URL(0), Key: []byte(key), Now: c.now, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	const key = "one ENCRYPTION_KEY, 32 bytes ..."
	cfg := func(mem memory.Store, secret string) *Guard {
		return New(Config{FailuresPerUser: 5, FailuresPerAccount: 6, FailuresPerAddress: 100, Delay: time.Minute, MaxDelay: time.Minute,
			Now: c.now, Memory: mem, Secret: []byte(secret)})
	}
	a, b := cfg(store(key), "proofs"), cfg(store(key), "proofs")
	owner := credentials.New("owner@x", "right")
	succeed(t, a, addr("192.0.2.1"), owner)
	for i := range 6 {
		failLogin(t, []*Guard{a, b}[i%2], addr(fmt.Sprintf("203.0.113.%d", i)), "owner@x")
	}
	for _, g := range []*Guard{a, b} {
		if err := try(g, addr("203.0.113.99"), "owner@x"); err == nil || !strings.Contains(mailerr.Message(err), "too many failed logins") {
			t.Fatalf("6 failures over two replicas: %v, want the account's back-off on both", err)
		}
	}
	if err := tryCreds(b, addr("192.0.2.2"), owner); err != nil {
		t.Fatalf("a password proven at A, at B: %v", err)
	}
	// A replica with another Secret does not know the proof.
	if err := tryCreds(cfg(store(key), "other"), addr("192.0.2.2"), owner); err == nil {
		t.Fatal("a proof named under another secret passed the ceiling")
	}
}
