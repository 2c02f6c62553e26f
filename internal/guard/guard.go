// Package guard owns the gateway's abuse limits: a per-account token-bucket
// rate limit on tool calls, and a login-failure back-off keyed by account and
// client address together, by account alone (a much higher ceiling) and by
// client address alone, so that the gateway cannot be used to guess passwords
// against the mail server, and so that someone else's guesses cannot lock an
// account's owner out. It also carries the client's address in the request
// context (set by httpapi). Its memory is bounded: entries expire and the
// number of tracked keys is capped. It never stores a password (only a keyed
// hash of a credential that logged in), and it does no I/O.
package guard

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// DefaultMaxKeys bounds the keys tracked by each table when Config.MaxKeys is 0.
const DefaultMaxKeys = 100_000

// Config sets the limits. Zero values switch a limit off.
//
// Every per-user limit is keyed on the canonical account
// (credentials.Account: the user name trimmed and lower-cased), the way
// mail servers such as Dovecot fold it, so that spelling a name differently
// does not buy another share.
type Config struct {
	// RatePerMinute is the sustained number of tool calls one account may
	// make per minute; 0 switches the rate limit off.
	RatePerMinute float64
	// Burst is how many calls an account may make at once above the
	// sustained rate (at least 1 when the rate limit is on).
	Burst int

	// FailuresPerUser is how many failed logins for one account from one
	// client address start the back-off for that account from that address;
	// 0 switches it off.
	FailuresPerUser int
	// FailuresPerAccount is how many failed logins for one account, from
	// all client addresses together, start the back-off for that account
	// (guessing spread over many addresses); 0 switches it off. Keep it well
	// above FailuresPerUser: it is the one limit someone else's guesses can
	// make the owner hit (unless the owner's credential is proven).
	FailuresPerAccount int
	// FailuresPerAddress is how many failed logins from one client address
	// (all accounts together) start the back-off for that address; 0
	// switches it off. A success of an account from the address takes that
	// account's failures from there back: only guesses at other accounts,
	// and failures no success followed, build it up.
	FailuresPerAddress int
	// Delay is the first refusal period; each further failure doubles it, up
	// to MaxDelay. Failures and proven credentials are remembered for
	// 2×MaxDelay after the last one.
	Delay    time.Duration
	MaxDelay time.Duration

	// SignInPerAccount and SignInPerAddress are the sustained number of
	// requests to the sign-in server (a sign-in form posted, a code
	// exchanged or a token refreshed at /token, a client registered) per
	// minute for one account and from one client address; 0 switches that
	// limit off. Each allows a burst of a minute's worth.
	SignInPerAccount, SignInPerAddress float64

	// MaxKeys caps each table (pairs, accounts, addresses, proofs, rate
	// buckets).
	MaxKeys int
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Guard enforces the limits. Its methods are safe for concurrent use; a nil
// *Guard allows everything.
type Guard struct {
	cfg      Config
	now      func() time.Time
	pairs    *table[*failures] // account + client address
	accounts *table[*failures]
	addrs    *table[*failures]
	proofs   *table[struct{}] // credentials that logged in
	rates    *table[*rate.Limiter]
	// sign-in server requests, by account and by client address
	signAccounts, signAddrs *table[*rate.Limiter]
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
		pairs:    newTable[*failures](cfg.MaxKeys),
		accounts: newTable[*failures](cfg.MaxKeys),
		addrs:    newTable[*failures](cfg.MaxKeys),
		proofs:   newTable[struct{}](cfg.MaxKeys),
		rates:    newTable[*rate.Limiter](cfg.MaxKeys),

		signAccounts: newTable[*rate.Limiter](cfg.MaxKeys),
		signAddrs:    newTable[*rate.Limiter](cfg.MaxKeys),
	}
}

// AllowCall takes one token from the bucket of an account (a user name,
// or credentials' AccountKey: host and name), or returns a RateLimited
// error saying when to retry.
func (g *Guard) AllowCall(user string) error {
	if g == nil || g.cfg.RatePerMinute <= 0 {
		return nil
	}
	now := g.now()
	r := reserve(g.rates, credentials.Account(user), g.cfg.RatePerMinute, g.cfg.Burst, now)
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

// AllowSignInFrom takes one request from the sign-in bucket of the client
// address in ctx. It returns 0 when the request may go on, else how long
// to wait.
func (g *Guard) AllowSignInFrom(ctx context.Context) time.Duration {
	if g == nil {
		return 0
	}
	return g.take(g.signAddrs, ClientAddr(ctx), g.cfg.SignInPerAddress)
}

// AllowSignInAs takes one request from the sign-in bucket of account (any
// spelling: it is made canonical). It returns 0 when the request may go
// on, else how long to wait.
func (g *Guard) AllowSignInAs(account string) time.Duration {
	if g == nil {
		return 0
	}
	return g.take(g.signAccounts, credentials.Account(account), g.cfg.SignInPerAccount)
}

// take takes one token from key's bucket in t, with bursts of a minute's
// worth; a refused request takes nothing.
func (g *Guard) take(t *table[*rate.Limiter], key string, perMinute float64) time.Duration {
	if perMinute <= 0 || key == "" {
		return 0
	}
	now := g.now()
	r := reserve(t, key, perMinute, max(1, int(math.Ceil(perMinute))), now)
	if !r.OK() {
		return time.Minute
	}
	wait := r.DelayFrom(now)
	if wait > 0 {
		r.CancelAt(now)
	}
	return wait
}

// reserve takes one token from key's bucket in t (perMinute sustained,
// bursts of burst).
func reserve(t *table[*rate.Limiter], key string, perMinute float64, burst int, now time.Time) *rate.Reservation {
	// A bucket refills completely in burst/rate; an entry idle that long is
	// the same as a new one, so it may expire then.
	full := time.Duration(float64(burst) / perMinute * float64(time.Minute))
	lim := t.get(key, now, full, func() *rate.Limiter {
		return rate.NewLimiter(rate.Limit(perMinute/60), burst)
	})
	return lim.ReserveN(now, 1)
}

// Login is one login attempt admitted by BeginLogin. Exactly one of
// Refused, Succeeded or Abandoned should follow; later calls do nothing.
type Login struct {
	g       *Guard
	account string // canonical
	addr    string // client address, "" if unknown
	pair    string // account and addr
	proof   string // hash of the whole credential
	proven  bool   // admitted as a proven credential: no table counts it
	// the tables where this attempt counts as in progress
	inPair, inAccount bool
	once              sync.Once
}

// proofKey is the hash of the whole credential (user name as given, and
// password) that a success records. It names no server: a credential proven
// by an IMAP login also admits its SMTP AUTH, and the reverse.
func proofKey(creds credentials.Credentials) string { return creds.Key("") }

// BeginLogin reports whether a login with creds from the client address in
// ctx may go to the mail server now. While the account from that address,
// the account as a whole, or the address is in back-off, it returns a
// RateLimited error saying when to retry, and the mail server must not be
// contacted.
//
// Credentials that logged in successfully within the last 2×MaxDelay
// (exactly these, password included) are admitted whatever the counts:
// other people's guesses must not lock the owner out, and a proven password
// is not a guess.
//
// For the account from one address and for the account as a whole, logins
// in progress count against the threshold, so that many concurrent guesses
// at one account cannot slip past it before the first one fails; for the
// address only failures count.
func (g *Guard) BeginLogin(ctx context.Context, creds credentials.Credentials) (*Login, error) {
	if g == nil {
		return nil, nil
	}
	now := g.now()
	l := &Login{g: g, account: creds.AccountKey(), addr: ClientAddr(ctx), proof: proofKey(creds)}
	l.pair = l.account + "\x00" + l.addr
	if _, ok := g.proofs.peek(l.proof, now); ok {
		l.proven = true
		return l, nil
	}
	ttl := g.cfg.MaxDelay * 2
	var wait time.Duration
	admitted := true
	if g.cfg.FailuresPerUser > 0 {
		w, ok := g.pairs.admit(l.pair, now, g.cfg.FailuresPerUser, ttl, true)
		wait, admitted, l.inPair = max(wait, w), admitted && ok, ok
	}
	if g.cfg.FailuresPerAccount > 0 && admitted {
		w, ok := g.accounts.admit(l.account, now, g.cfg.FailuresPerAccount, ttl, true)
		wait, admitted, l.inAccount = max(wait, w), admitted && ok, ok
	}
	if g.cfg.FailuresPerAddress > 0 && l.addr != "" && admitted {
		w, ok := g.addrs.admit(l.addr, now, g.cfg.FailuresPerAddress, ttl, false)
		wait, admitted = max(wait, w), admitted && ok
	}
	if admitted {
		return l, nil
	}
	l.end() // give back what the tables granted
	if wait > 0 {
		return nil, mailerr.Newf(mailerr.RateLimited,
			"too many failed logins for this user or from this address: the gateway will not try the mail server again for %s; check the user name and password (an app password if the provider requires one)",
			roundUp(wait))
	}
	return nil, mailerr.New(mailerr.RateLimited,
		"too many logins for this user are being tried at once; retry in a few seconds")
}

// Refused records that the mail server refused the login (wrong user name
// or password). A proven credential is proven no more: the password has
// changed.
func (l *Login) Refused() {
	if l == nil {
		return
	}
	g, now := l.g, l.g.now()
	l.end()
	g.proofs.remove(l.proof)
	ttl := g.cfg.MaxDelay * 2
	count := func(t *table[*failures], key string, threshold int) {
		if threshold > 0 {
			t.update(key, now, ttl, func() *failures { return &failures{} },
				func(f *failures) { f.fail(now, threshold, g.cfg.Delay, g.cfg.MaxDelay) })
		}
	}
	// The pair's count is also what a later success of the account takes
	// back from the address's (Succeeded), so it is kept whenever either
	// limit is on.
	if g.cfg.FailuresPerUser > 0 || g.cfg.FailuresPerAddress > 0 && l.addr != "" {
		g.pairs.update(l.pair, now, ttl, func() *failures { return &failures{} },
			func(f *failures) { f.fail(now, g.cfg.FailuresPerUser, g.cfg.Delay, g.cfg.MaxDelay) })
	}
	count(g.accounts, l.account, g.cfg.FailuresPerAccount)
	if l.addr != "" {
		count(g.addrs, l.addr, g.cfg.FailuresPerAddress)
	}
}

// Succeeded records the credential as proven and forgets the failures of
// the account from this address, in the pair's count and in the address's:
// a login that failed and then succeeded (a mistyped password, a mail
// server that refused for a moment) was no guess, and must not lock out the
// other users behind the same address. The account's count over all
// addresses is kept, and so are the address's failures of other accounts:
// the owner logging in must not reset someone else's guesses at the
// account, nor one valid account an address's guesses at others.
func (l *Login) Succeeded() {
	if l == nil {
		return
	}
	g, now := l.g, l.g.now()
	l.end()
	if n := g.pairs.take(l.pair, now); n > 0 && l.addr != "" && g.cfg.FailuresPerAddress > 0 {
		g.addrs.forgive(l.addr, now, n, g.cfg.FailuresPerAddress)
	}
	g.proofs.get(l.proof, now, g.cfg.MaxDelay*2, func() struct{} { return struct{}{} })
}

// Abandoned ends an attempt whose outcome says nothing about the password
// (network failure, timeout, the server's connection limit).
func (l *Login) Abandoned() {
	if l == nil {
		return
	}
	l.end()
}

// end releases the attempt's in-progress slots, once.
func (l *Login) end() {
	l.once.Do(func() {
		if l.inPair {
			l.g.pairs.release(l.pair)
		}
		if l.inAccount {
			l.g.accounts.release(l.account)
		}
	})
}

// Sizes is how many keys each table holds.
type Sizes struct{ Pairs, Accounts, Addresses, Proofs, Rates int }

// Tracked reports the tables' sizes (for tests and metrics).
func (g *Guard) Tracked() Sizes {
	return Sizes{g.pairs.len(), g.accounts.len(), g.addrs.len(), g.proofs.len(), g.rates.len()}
}

// failures is the back-off state of one key.
type failures struct {
	count        int // failures in a row
	pending      int // attempts admitted and not yet ended
	blockedUntil time.Time
}

// admit is BeginLogin's check on one key: the wait while it is in back-off,
// and whether an attempt may start. With countPending (accounts, from one
// address or all), failures plus attempts in progress must stay under the
// threshold, and an admitted attempt is counted as in progress: that stops
// a burst of parallel guesses at one account. Without it (client
// addresses), only the back-off period refuses: many users behind one
// address or proxy send mail concurrently (each send is an SMTP login), and
// that must not read as guessing.
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
// doubled per further failure, capped at maxDelay. A threshold of 0 only
// counts.
func (f *failures) fail(now time.Time, threshold int, delay, maxDelay time.Duration) {
	f.count++
	if threshold <= 0 || f.count < threshold {
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

// take removes key's failures and returns how many there were.
func (t *table[V]) take(key string, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.lookup(key, now)
	if e == nil {
		return 0
	}
	delete(t.items, key)
	return any(e.v).(*failures).count
}

// forgive takes n failures back from key's count (a success of the account
// that failed them); below the threshold again, the key is no longer
// refused.
func (t *table[V]) forgive(key string, now time.Time, n, threshold int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.lookup(key, now)
	if e == nil || n <= 0 {
		return
	}
	f := any(e.v).(*failures)
	f.count = max(0, f.count-n)
	if f.count < threshold {
		f.blockedUntil = time.Time{}
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
