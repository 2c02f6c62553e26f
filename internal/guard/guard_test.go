package guard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
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

func TestRateLimit(t *testing.T) {
	c := newClock()
	g := New(Config{RatePerMinute: 60, Burst: 3, Now: c.now})
	for i := range 3 {
		if err := g.AllowCall("Bob@x"); err != nil {
			t.Fatalf("call %d within the burst refused: %v", i, err)
		}
	}
	err := g.AllowCall("bob@x") // same user, other case
	if mailerr.KindOf(err) != mailerr.RateLimited || !strings.Contains(mailerr.Message(err), "retry in 1s") {
		t.Fatalf("4th call: %v, want rate limited with retry in 1s", err)
	}
	if err := g.AllowCall("alice@x"); err != nil {
		t.Fatalf("another user is limited too: %v", err)
	}
	c.add(time.Second)
	if err := g.AllowCall("bob@x"); err != nil {
		t.Fatalf("after a second one token is back: %v", err)
	}
	if err := g.AllowCall("bob@x"); err == nil {
		t.Fatal("only one token came back, two calls passed")
	}
	// Off: never refuses.
	off := New(Config{Now: c.now})
	for range 1000 {
		if err := off.AllowCall("bob@x"); err != nil {
			t.Fatal(err)
		}
	}
	var nilGuard *Guard
	if l, err := nilGuard.BeginLogin(context.Background(), "x"); nilGuard.AllowCall("x") != nil || err != nil {
		t.Fatal("nil guard refused")
	} else {
		l.Refused() // a nil Login is fine too
	}
}

// try begins a login and abandons it, returning BeginLogin's error.
func try(g *Guard, ctx context.Context, user string) error {
	l, err := g.BeginLogin(ctx, user)
	l.Abandoned()
	return err
}

// failLogin is one login the server refused.
func failLogin(t *testing.T, g *Guard, ctx context.Context, user string) {
	t.Helper()
	l, err := g.BeginLogin(ctx, user)
	if err != nil {
		t.Fatalf("login for %s refused before it was tried: %v", user, err)
	}
	l.Refused()
}

func TestLoginBackoff(t *testing.T) {
	c := newClock()
	g := New(Config{FailuresPerUser: 3, FailuresPerAddress: 10, Delay: 10 * time.Second, MaxDelay: 40 * time.Second, Now: c.now})
	ctx := WithClientAddr(context.Background(), "192.0.2.1")
	for i := range 2 {
		failLogin(t, g, ctx, "bob")
		_ = i
	}
	if err := try(g, ctx, "bob"); err != nil {
		t.Fatalf("3rd attempt refused before the 3rd failure: %v", err)
	}
	failLogin(t, g, ctx, "BOB")
	err := try(g, ctx, "bob")
	if mailerr.KindOf(err) != mailerr.RateLimited || !strings.Contains(mailerr.Message(err), "for 10s") {
		t.Fatalf("after 3 failures: %v", err)
	}
	// Another address is refused too: the user is in back-off.
	if try(g, WithClientAddr(context.Background(), "192.0.2.2"), "bob") == nil {
		t.Fatal("per-user back-off bypassed from another address")
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
	l, err := g.BeginLogin(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	l.Succeeded()
	failLogin(t, g, ctx, "bob")
	if err := try(g, ctx, "bob"); err != nil {
		t.Fatalf("a success did not reset the user: %v", err)
	}

	// Per address: 10 failures over 10 users block the address for all.
	c.add(time.Hour)
	for i := range 10 {
		failLogin(t, g, ctx, fmt.Sprintf("user%d", i))
	}
	if err := try(g, ctx, "fresh-user"); err == nil {
		t.Fatal("address back-off did not engage")
	}
	if err := try(g, WithClientAddr(context.Background(), "192.0.2.9"), "fresh-user"); err != nil {
		t.Fatalf("another address refused: %v", err)
	}
	// A success for one user does not reset the address.
	l, _ = g.BeginLogin(WithClientAddr(context.Background(), "192.0.2.9"), "user1")
	l.Succeeded()
	if err := try(g, ctx, "fresh-user"); err == nil {
		t.Fatal("a success reset the address count")
	}
}

func TestBoundedMemory(t *testing.T) {
	c := newClock()
	g := New(Config{RatePerMinute: 60, Burst: 5, FailuresPerUser: 3, FailuresPerAddress: 3, Delay: time.Second, MaxDelay: time.Minute, MaxKeys: 100, Now: c.now})
	for i := range 10_000 {
		ctx := WithClientAddr(context.Background(), fmt.Sprintf("10.0.%d.%d", i/256, i%256))
		if l, err := g.BeginLogin(ctx, fmt.Sprintf("user%d", i)); err == nil {
			l.Refused()
		}
		g.AllowCall(fmt.Sprintf("user%d", i))
	}
	u, a, r := g.Tracked()
	if u > 100 || a > 100 || r > 100 {
		t.Fatalf("tracked %d users, %d addresses, %d buckets; cap is 100", u, a, r)
	}
	// Entries expire: after MaxDelay*2 the tables are swept on insert.
	c.add(3 * time.Minute)
	failLogin(t, g, context.Background(), "late")
	if u, _, _ := g.Tracked(); u > 100 {
		t.Fatalf("%d users", u)
	}
	if _, ok := g.users.peek("user9999", c.now()); ok {
		t.Fatal("an expired entry is still served")
	}
}

func TestConcurrentUse(t *testing.T) {
	g := New(Config{RatePerMinute: 6000, Burst: 10, FailuresPerUser: 3, FailuresPerAddress: 3, MaxKeys: 50})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := WithClientAddr(context.Background(), fmt.Sprint("a", i))
			for j := range 500 {
				u := fmt.Sprintf("u%d", (i*j)%70)
				g.AllowCall(u)
				if l, err := g.BeginLogin(ctx, u); err == nil {
					if j%7 == 0 {
						l.Succeeded()
					} else {
						l.Refused()
					}
				}
			}
		}()
	}
	wg.Wait()
}

// Concurrent guesses cannot pass the threshold before the first one fails:
// attempts in progress count.
func TestConcurrentAttemptsCount(t *testing.T) {
	c := newClock()
	g := New(Config{FailuresPerUser: 3, Delay: time.Minute, MaxDelay: time.Minute, Now: c.now})
	ctx := context.Background()
	var held []*Login
	for i := range 10 {
		l, err := g.BeginLogin(ctx, "bob")
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
	held[0].Abandoned() // a network failure frees its slot without counting
	l, err := g.BeginLogin(ctx, "bob")
	if err != nil {
		t.Fatalf("slot not freed: %v", err)
	}
	for _, h := range append(held[1:], l) {
		h.Refused()
		h.Refused() // a second call does nothing
	}
	if err := try(g, ctx, "bob"); err == nil || !strings.Contains(mailerr.Message(err), "for 1m0s") {
		t.Fatalf("after 3 refusals: %v", err)
	}
	// After the period, one probe at a time.
	c.add(time.Minute)
	p1, err := g.BeginLogin(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.BeginLogin(ctx, "bob"); err == nil {
		t.Fatal("two probes at once after the back-off")
	}
	p1.Succeeded()
	if err := try(g, ctx, "bob"); err != nil {
		t.Fatalf("after a success: %v", err)
	}
}

// Many users behind one address (a proxy, an office) log in at once, as
// every SMTP send does: attempts in progress do not count against the
// address, only failures do.
func TestAddressCountsFailuresNotConcurrency(t *testing.T) {
	c := newClock()
	g := New(Config{FailuresPerUser: 5, FailuresPerAddress: 3, Delay: time.Minute, MaxDelay: time.Minute, Now: c.now})
	ctx := WithClientAddr(context.Background(), "192.0.2.7")
	var held []*Login
	for i := range 100 {
		l, err := g.BeginLogin(ctx, fmt.Sprintf("user%d", i))
		if err != nil {
			t.Fatalf("concurrent login %d from one address refused: %v", i, err)
		}
		held = append(held, l)
	}
	for _, l := range held[:3] {
		l.Refused()
	}
	if err := try(g, ctx, "user200"); err == nil || !strings.Contains(mailerr.Message(err), "for 1m0s") {
		t.Fatalf("after 3 failures from the address: %v, want a 1m back-off", err)
	}
	// The attempts still in flight end normally.
	for _, l := range held[3:] {
		l.Succeeded()
	}
	if err := try(g, WithClientAddr(context.Background(), "192.0.2.8"), "user200"); err != nil {
		t.Fatalf("another address is refused too: %v", err)
	}
}
