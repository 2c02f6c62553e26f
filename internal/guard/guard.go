// Package guard owns the gateway's abuse limits: a per-user token-bucket rate
// limit on tool calls, and a login-failure back-off keyed by user and by
// client address, so that the gateway cannot be used to guess passwords
// against the mail server. It also carries the client's address in the
// request context (set by httpapi). Its memory is bounded: entries expire and
// the number of tracked keys is capped. It never stores a password, and it
// does no I/O.
package guard

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// DefaultMaxKeys bounds the keys tracked by each table when Config.MaxKeys is 0.
const DefaultMaxKeys = 100_000

// Config sets the limits. Zero values switch a limit off.
type Config struct {
	// RatePerMinute is the sustained number of tool calls one user may make
	// per minute; 0 switches the rate limit off.
	RatePerMinute float64
	// Burst is how many calls a user may make at once above the sustained
	// rate (at least 1 when the rate limit is on).
	Burst int

	// FailuresPerUser is how many failed logins in a row for one user name
	// start the back-off; 0 switches the per-user back-off off.
	FailuresPerUser int
	// FailuresPerAddress is the same for one client address (all user names
	// together); 0 switches the per-address back-off off.
	FailuresPerAddress int
	// Delay is the first refusal period; each further failure doubles it, up
	// to MaxDelay.
	Delay    time.Duration
	MaxDelay time.Duration

	// MaxKeys caps each table (users, addresses, rate buckets).
	MaxKeys int
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Guard enforces the limits. Its methods are safe for concurrent use; a nil
// *Guard allows everything.
type Guard struct {
	cfg   Config
	now   func() time.Time
	users *table[*failures]
	addrs *table[*failures]
	rates *table[*rate.Limiter]
}

// New makes a Guard.
func New(cfg Config) *Guard {
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.Burst < 1 {
		cfg.Burst = 1
	}
	if cfg.Delay <= 0 {
		cfg.Delay = time.Minute
	}
	if cfg.MaxDelay < cfg.Delay {
		cfg.MaxDelay = cfg.Delay
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Guard{
		cfg: cfg, now: now,
		users: newTable[*failures](cfg.MaxKeys),
		addrs: newTable[*failures](cfg.MaxKeys),
		rates: newTable[*rate.Limiter](cfg.MaxKeys),
	}
}

// userKey folds a user name the way mail servers usually do, so that
// "Bob@x" and "bob@x" share one back-off.
func userKey(user string) string { return strings.ToLower(strings.TrimSpace(user)) }

// AllowCall takes one token from user's bucket, or returns a RateLimited
// error saying when to retry.
func (g *Guard) AllowCall(user string) error {
	if g == nil || g.cfg.RatePerMinute <= 0 {
		return nil
	}
	now := g.now()
	// A bucket refills completely in burst/rate; an entry idle that long is
	// the same as a new one, so it may expire then.
	full := time.Duration(float64(g.cfg.Burst) / g.cfg.RatePerMinute * float64(time.Minute))
	lim := g.rates.get(userKey(user), now, full, func() *rate.Limiter {
		return rate.NewLimiter(rate.Limit(g.cfg.RatePerMinute/60), g.cfg.Burst)
	})
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return mailerr.New(mailerr.RateLimited, "rate limit reached for this mailbox user; retry later")
	}
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return mailerr.Newf(mailerr.RateLimited, "rate limit reached for this mailbox user (%s calls per minute, bursts of %d); retry in %s",
			formatRate(g.cfg.RatePerMinute), g.cfg.Burst, roundUp(wait))
	}
	return nil
}

// Login is one login attempt admitted by BeginLogin. Exactly one of
// Refused, Succeeded or Abandoned should follow; later calls do nothing.
type Login struct {
	g          *Guard
	user, addr string
	inUser     bool // this attempt counts as in progress for the user name
	once       sync.Once
}

// BeginLogin reports whether a login for user from the client address in
// ctx may go to the mail server now. While either is in back-off it returns
// a RateLimited error saying when to retry, and the mail server must not be
// contacted. For the user name, logins in progress count against the
// threshold, so that many concurrent guesses at one account cannot slip past
// it before the first one fails; for the address only failures count.
func (g *Guard) BeginLogin(ctx context.Context, user string) (*Login, error) {
	if g == nil {
		return nil, nil
	}
	now := g.now()
	l := &Login{g: g, user: userKey(user), addr: ClientAddr(ctx)}
	var wait time.Duration
	admitted := true
	if g.cfg.FailuresPerUser > 0 {
		w, ok := g.users.admit(l.user, now, g.cfg.FailuresPerUser, g.cfg.MaxDelay*2, true)
		wait, admitted, l.inUser = max(wait, w), admitted && ok, ok
	}
	if g.cfg.FailuresPerAddress > 0 && l.addr != "" {
		w, ok := g.addrs.admit(l.addr, now, g.cfg.FailuresPerAddress, g.cfg.MaxDelay*2, false)
		wait, admitted = max(wait, w), admitted && ok
	}
	if admitted {
		return l, nil
	}
	l.end() // give back what one table granted
	if wait > 0 {
		return nil, mailerr.Newf(mailerr.RateLimited,
			"too many failed logins for this user or from this address: the gateway will not try the mail server again for %s; check the user name and password (an app password if the provider requires one)",
			roundUp(wait))
	}
	return nil, mailerr.New(mailerr.RateLimited,
		"too many logins for this user are being tried at once; retry in a few seconds")
}

// Refused records that the mail server refused the login (wrong user name
// or password).
func (l *Login) Refused() {
	if l == nil {
		return
	}
	g, now := l.g, l.g.now()
	l.end()
	if g.cfg.FailuresPerUser > 0 {
		g.users.update(l.user, now, g.cfg.MaxDelay*2, func() *failures { return &failures{} },
			func(f *failures) { f.fail(now, g.cfg.FailuresPerUser, g.cfg.Delay, g.cfg.MaxDelay) })
	}
	if g.cfg.FailuresPerAddress > 0 && l.addr != "" {
		g.addrs.update(l.addr, now, g.cfg.MaxDelay*2, func() *failures { return &failures{} },
			func(f *failures) { f.fail(now, g.cfg.FailuresPerAddress, g.cfg.Delay, g.cfg.MaxDelay) })
	}
}

// Succeeded forgets the user's failures. The client address's count is
// kept: one valid account must not let an address reset its guesses at
// others.
func (l *Login) Succeeded() {
	if l == nil {
		return
	}
	l.end()
	l.g.users.remove(l.user)
}

// Abandoned ends an attempt whose outcome says nothing about the password
// (network failure, timeout).
func (l *Login) Abandoned() {
	if l == nil {
		return
	}
	l.end()
}

// end releases the attempt's in-progress slots, once.
func (l *Login) end() {
	l.once.Do(func() {
		if l.inUser {
			l.g.users.release(l.user)
		}
	})
}

// Tracked reports how many keys each table holds (for tests and metrics).
func (g *Guard) Tracked() (users, addrs, rates int) {
	return g.users.len(), g.addrs.len(), g.rates.len()
}

// failures is the back-off state of one key.
type failures struct {
	count        int // failures in a row
	pending      int // attempts admitted and not yet ended
	blockedUntil time.Time
}

// admit is BeginLogin's check on one key: the wait while it is in back-off,
// and whether an attempt may start. With countPending (user names), failures
// plus attempts in progress must stay under the threshold, and an admitted
// attempt is counted as in progress: that stops a burst of parallel guesses
// at one account. Without it (client addresses), only the back-off period
// refuses: many users behind one address or proxy send mail concurrently
// (each send is an SMTP login), and that must not read as guessing.
func (t *table[V]) admit(key string, now time.Time, threshold int, ttl time.Duration, countPending bool) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.lookup(key, now)
	if e == nil {
		e = t.insert(key, any(&failures{}).(V), now)
		e.expires = now.Add(ttl)
	}
	f := any(e.v).(*failures)
	if now.Before(f.blockedUntil) {
		return f.blockedUntil.Sub(now), false
	}
	if !countPending {
		return 0, true
	}
	// Below the threshold, attempts in progress count as failures to come;
	// once past it (and the refusal period over), one attempt at a time.
	if f.count+f.pending >= threshold && (f.count < threshold || f.pending > 0) {
		return 0, false
	}
	f.pending++
	return 0, true
}

// release ends one in-progress attempt on key.
func (t *table[V]) release(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.items[key]; ok {
		if f, ok := any(e.v).(*failures); ok && f.pending > 0 {
			f.pending--
		}
	}
}

// fail counts one failure; from the threshold-th on, each blocks for delay,
// doubled per further failure, capped at maxDelay.
func (f *failures) fail(now time.Time, threshold int, delay, maxDelay time.Duration) {
	f.count++
	if f.count < threshold {
		return
	}
	d := delay
	for i := threshold; i < f.count && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	if until := now.Add(d); until.After(f.blockedUntil) {
		f.blockedUntil = until
	}
}

// table is a map with per-entry expiry and a cap on its size. When full it
// drops expired entries, then the least recently seen of a sample: old
// entries go first, and no input can make it grow without bound.
type table[V any] struct {
	mu    sync.Mutex
	max   int
	items map[string]*entry[V]
}

type entry[V any] struct {
	v       V
	expires time.Time
}

func newTable[V any](max int) *table[V] {
	return &table[V]{max: max, items: map[string]*entry[V]{}}
}

// get returns key's value, creating it if missing, and extends its life to
// now+ttl.
func (t *table[V]) get(key string, now time.Time, ttl time.Duration, create func() V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.lookup(key, now)
	if e == nil {
		e = t.insert(key, create(), now)
	}
	e.expires = now.Add(ttl)
	return e.v
}

// peek returns key's value without creating or extending it.
func (t *table[V]) peek(key string, now time.Time) (V, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.lookup(key, now); e != nil {
		return e.v, true
	}
	var zero V
	return zero, false
}

// update runs f on key's value (created if missing) under the table's lock.
func (t *table[V]) update(key string, now time.Time, ttl time.Duration, create func() V, f func(V)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.lookup(key, now)
	if e == nil {
		e = t.insert(key, create(), now)
	}
	f(e.v)
	e.expires = now.Add(ttl)
}

func (t *table[V]) remove(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.items, key)
}

func (t *table[V]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.items)
}

// lookup returns the live entry for key, dropping an expired one.
func (t *table[V]) lookup(key string, now time.Time) *entry[V] {
	e, ok := t.items[key]
	if !ok {
		return nil
	}
	if !now.Before(e.expires) {
		delete(t.items, key)
		return nil
	}
	return e
}

func (t *table[V]) insert(key string, v V, now time.Time) *entry[V] {
	if len(t.items) >= t.max {
		t.makeRoom(now)
	}
	e := &entry[V]{v: v}
	t.items[key] = e
	return e
}

// makeRoom sweeps expired entries (at most a few thousand per call, so one
// insert never stalls the others for long); if none was found, it evicts the
// entry that expires first among a random sample (Go's map order).
func (t *table[V]) makeRoom(now time.Time) {
	const sweep, sample = 4096, 32
	freed, seen := 0, 0
	var oldestKey string
	var oldest time.Time
	for k, e := range t.items {
		if !now.Before(e.expires) {
			delete(t.items, k)
			freed++
		} else if seen < sample && (oldestKey == "" || e.expires.Before(oldest)) {
			oldestKey, oldest = k, e.expires
		}
		seen++
		if seen >= sweep {
			break
		}
	}
	if freed == 0 && oldestKey != "" {
		delete(t.items, oldestKey)
	}
}

// roundUp formats d for people: whole seconds, rounded up.
func roundUp(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return (time.Duration(s) * time.Second).String()
}

func formatRate(r float64) string {
	if r == math.Trunc(r) {
		return fmt.Sprintf("%d", int64(r))
	}
	return fmt.Sprintf("%.2f", r)
}

type addrKey struct{}

// WithClientAddr returns ctx carrying the client's address (an IP, no
// port), for the per-address back-off.
func WithClientAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, addrKey{}, addr)
}

// ClientAddr returns the client address in ctx, or "".
func ClientAddr(ctx context.Context) string {
	s, _ := ctx.Value(addrKey{}).(string)
	return s
}
