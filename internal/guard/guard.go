// Package guard owns the gateway's abuse limits: a per-account token-bucket
// rate limit on tool calls, sign-in rate limits per account and per client
// address, and a login-failure back-off keyed by account and client address
// together, by account alone (a much higher ceiling) and by client address
// alone, so that the gateway cannot be used to guess passwords against the
// mail server, and so that someone else's guesses cannot lock an account's
// owner out. It also carries the client's address in the request context
// (set by httpapi). Its counts live in a memory.Store: this process's own
// (bounded; the default for one replica) or Redis, where every replica
// counts in one memory. It never stores a password (only a keyed hash of a
// credential that logged in), and it does no I/O but through the store.
package guard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

// DefaultMaxKeys bounds what this process's memory tracks of each kind
// (accounts, pairs, addresses, proofs, buckets) when Config.MaxKeys is 0.
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

	// Memory keeps the counts (nil: a memory of this process's own, on
	// Now's clock).
	Memory memory.Store
	// Secret keys the proof of a credential that logged in (an HMAC of
	// its user name and password): give every replica that shares Memory
	// the same one (derived from ENCRYPTION_KEY), so that a credential
	// proven at one is proven at all. Nil: a random one of this process.
	Secret []byte
	// Queue is how long a login waits, when as many attempts for its
	// account are in progress as the back-off admits at once, for one of
	// them to end (0: it is refused at once). The first that succeeds
	// proves the password for the rest, so a client's burst of first
	// calls (many at once, over several replicas) queues for a moment
	// instead of failing; concurrent guesses still wait for the failures
	// they come after, and then meet the back-off.
	Queue time.Duration
	// MaxKeys caps what this process's memory tracks of each kind (pairs,
	// accounts, addresses, proofs, rate buckets); Redis is bounded by its
	// maxmemory.
	MaxKeys int
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Guard enforces the limits. Its methods are safe for concurrent use; a nil
// *Guard allows everything.
type Guard struct {
	cfg    Config
	now    func() time.Time
	secret []byte
	shared bool           // the memory is a server's: independent steps go at once
	calls  memory.Bucket  // tool calls, by account
	signIn memory.Bucket  // sign-in server requests, by account ("a:") and by address ("i:")
	counts memory.Counter // failures ("F"), back-off deadlines in unix ms ("B"), proofs ("P:")
	trying memory.Slots   // logins in progress, by pair ("p:") and by account ("a:")
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
	if cfg.Memory == nil {
		cfg.Memory = memory.NewLocal(now)
	}
	secret := cfg.Secret
	if len(secret) == 0 {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			panic("guard: no randomness: " + err.Error())
		}
	}
	k := cfg.MaxKeys
	return &Guard{
		cfg: cfg, now: now, secret: secret, shared: cfg.Memory.Status().Shared,
		calls:  cfg.Memory.Bucket("guard.calls", memory.Bounds{Max: k}),
		signIn: cfg.Memory.Bucket("guard.signin", memory.Bounds{Max: 2 * k}),
		counts: cfg.Memory.Counter("guard.backoff", memory.Bounds{Max: 4 * k}),
		trying: cfg.Memory.Slots("guard.pending", memory.Bounds{Max: 2 * k}),
	}
}

// unavailable is a limit that could not be checked: the store did not
// answer (or is full). Nothing was done.
func unavailable(err error) error {
	var full *memory.FullError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return mailerr.Wrap(mailerr.Timeout, err, "the call ended while the gateway's limits were checked")
	case errors.As(err, &full):
		return mailerr.Wrap(mailerr.Busy, err, "the gateway is tracking as many logins in progress as it can, so nothing was done")
	}
	return mailerr.Wrap(mailerr.Busy, err, "the gateway's limits cannot be checked just now (the memory it shares with its other replicas does not answer), so nothing was done")
}

// AllowCall takes one token from the bucket of an account (a user name,
// or credentials' AccountKey: host and name), or returns a RateLimited
// error saying when to retry (a Busy one when the limit cannot be
// checked).
func (g *Guard) AllowCall(ctx context.Context, user string) error {
	if g == nil || g.cfg.RatePerMinute <= 0 {
		return nil
	}
	wait, err := g.calls.Take(ctx, credentials.Account(user), memory.Rate{PerMinute: g.cfg.RatePerMinute, Burst: g.cfg.Burst})
	if err != nil {
		return unavailable(err)
	}
	if wait > 0 {
		return mailerr.Newf(mailerr.RateLimited, "rate limit reached for this mailbox user (%s calls per minute, bursts of %d); retry in %s",
			formatRate(g.cfg.RatePerMinute), g.cfg.Burst, roundUp(wait))
	}
	return nil
}

// AllowSignInFrom takes one request from the sign-in bucket of the client
// address in ctx. It returns 0 when the request may go on, else how long
// to wait; an error when the limit cannot be checked.
func (g *Guard) AllowSignInFrom(ctx context.Context) (time.Duration, error) {
	if g == nil {
		return 0, nil
	}
	return g.take(ctx, "i:", ClientAddr(ctx), g.cfg.SignInPerAddress)
}

// AllowSignInAs takes one request from the sign-in bucket of account (any
// spelling: it is made canonical). It returns 0 when the request may go
// on, else how long to wait; an error when the limit cannot be checked.
func (g *Guard) AllowSignInAs(ctx context.Context, account string) (time.Duration, error) {
	if g == nil {
		return 0, nil
	}
	return g.take(ctx, "a:", credentials.Account(account), g.cfg.SignInPerAccount)
}

// take takes one token from key's sign-in bucket, with bursts of a
// minute's worth; a refused request takes nothing.
func (g *Guard) take(ctx context.Context, kind, key string, perMinute float64) (time.Duration, error) {
	if perMinute <= 0 || key == "" {
		return 0, nil
	}
	wait, err := g.signIn.Take(ctx, kind+key, memory.Rate{PerMinute: perMinute, Burst: max(1, int(math.Ceil(perMinute)))})
	if err != nil {
		return 0, unavailable(err)
	}
	return wait, nil
}

// Login is one login attempt admitted by BeginLogin. Exactly one of
// Refused, Succeeded or Abandoned should follow; later calls do nothing.
type Login struct {
	g       *Guard
	account string // canonical
	addr    string // client address, "" if unknown
	pair    string // account and addr
	proof   string // hash of the whole credential
	proven  bool   // admitted as a proven credential: no slot taken
	// the pair's failures when it began: what a success forgives
	pairFailures int64
	attempt      string // its name among the logins in progress
	// where it holds a slot as a login in progress
	inPair, inAccount bool
	once              sync.Once
}

// The counts' keys: failures ("F") and back-off deadlines ("B") of a pair,
// an account and an address, and proofs.
func failuresOf(kind, key string) string { return "F" + kind + key }
func blockOf(kind, key string) string    { return "B" + kind + key }
func proofOf(proof string) string        { return "P:" + proof }

// proofKey is the keyed hash of the whole credential (user name as given,
// mechanism and password) that a success records. It names no server: a
// credential proven by an IMAP login also admits its SMTP AUTH, and the
// reverse.
func (g *Guard) proofKey(creds credentials.Credentials) string {
	m := hmac.New(sha256.New, g.secret)
	for _, s := range []string{creds.User, creds.Mechanism().String(), creds.Password()} {
		fmt.Fprintf(m, "%d:%s", len(s), s)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// attemptTTL bounds a login in progress whose request has no deadline: a
// replica that dies mid-login frees its slot when it expires.
const attemptTTL = 2 * time.Minute

// BeginLogin reports whether a login with creds from the client address in
// ctx may go to the mail server now. While the account from that address,
// the account as a whole, or the address is in back-off, it returns a
// RateLimited error saying when to retry, and the mail server must not be
// contacted (a Busy error when the back-off cannot be checked).
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
	start := time.Now()
	pause := 20 * time.Millisecond
	for {
		l, err := g.beginLogin(ctx, creds)
		if !errors.Is(err, errTooMany) {
			return l, err
		}
		left := g.cfg.Queue - time.Since(start)
		if left <= 0 {
			return nil, mailerr.New(mailerr.RateLimited,
				"too many logins for this user are being tried at once; retry in a few seconds")
		}
		select {
		case <-ctx.Done():
			return nil, unavailable(ctx.Err())
		case <-time.After(min(pause, left)):
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// errTooMany is a login that finds as many attempts for its account in
// progress as the back-off admits at once.
var errTooMany = errors.New("too many logins in progress")

// beginLogin is one try of BeginLogin.
func (g *Guard) beginLogin(ctx context.Context, creds credentials.Credentials) (*Login, error) {
	now := g.now()
	l := &Login{g: g, account: creds.AccountKey(), addr: ClientAddr(ctx), proof: g.proofKey(creds)}
	l.pair = l.account + "\x00" + l.addr
	byAddr := g.cfg.FailuresPerAddress > 0 && l.addr != ""
	keys := []string{proofOf(l.proof), failuresOf("p:", l.pair), blockOf("p:", l.pair), failuresOf("a:", l.account), blockOf("a:", l.account)}
	if byAddr {
		keys = append(keys, blockOf("i:", l.addr))
	}
	v, err := g.counts.Get(ctx, keys...)
	if err != nil {
		return nil, unavailable(err)
	}
	l.pairFailures = v[1]
	if v[0] > 0 {
		l.proven = true
		return l, nil
	}
	var wait time.Duration
	blocked := func(on bool, until int64) {
		if d := time.UnixMilli(until).Sub(now); on && d > 0 {
			wait = max(wait, d)
		}
	}
	blocked(g.cfg.FailuresPerUser > 0, v[2])
	blocked(g.cfg.FailuresPerAccount > 0, v[4])
	if byAddr {
		blocked(true, v[5])
	}
	if wait > 0 {
		return nil, mailerr.Newf(mailerr.RateLimited,
			"too many failed logins for this user or from this address: the gateway will not try the mail server again for %s; check the user name and password (an app password if the provider requires one)",
			roundUp(wait))
	}
	// Below the threshold, attempts in progress count as failures to
	// come; once past it (and the refusal period over), one attempt at a
	// time.
	l.attempt = newAttempt()
	exp := now.Add(attemptTTL)
	if d, ok := ctx.Deadline(); ok {
		exp = now.Add(min(time.Until(d)+time.Second, 10*time.Minute))
	}
	slot := func(on bool, kind, key string, threshold int, failures int64, taken *bool, failed *error) func() {
		return func() {
			if on {
				t, err := g.trying.Take(ctx, kind+key, l.attempt, exp, int(max(int64(threshold)-failures, 1)))
				*taken, *failed = t.OK, err
			}
		}
	}
	var pairErr, accountErr error
	g.together(slot(g.cfg.FailuresPerUser > 0, "p:", l.pair, g.cfg.FailuresPerUser, v[1], &l.inPair, &pairErr),
		slot(g.cfg.FailuresPerAccount > 0, "a:", l.account, g.cfg.FailuresPerAccount, v[3], &l.inAccount, &accountErr))
	err = errors.Join(pairErr, accountErr)
	admitted := (l.inPair || g.cfg.FailuresPerUser <= 0) && (l.inAccount || g.cfg.FailuresPerAccount <= 0)
	if err != nil || !admitted {
		l.end(ctx) // give back what was taken
		if err != nil {
			return nil, unavailable(err)
		}
		return nil, errTooMany
	}
	return l, nil
}

// Refused records that the mail server refused the login (wrong user name
// or password). A proven credential is proven no more: the password has
// changed.
func (l *Login) Refused(ctx context.Context) {
	if l == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	g, now := l.g, l.g.now()
	count := func(on bool, kind, key string, threshold int) func() {
		return func() {
			if !on {
				return
			}
			n, err := g.counts.Add(ctx, failuresOf(kind, key), 1, g.ttl())
			if err == nil && threshold > 0 && n >= int64(threshold) {
				g.counts.Raise(ctx, blockOf(kind, key), now.Add(g.delay(n, threshold)).UnixMilli(), g.ttl())
			}
		}
	}
	l.g.together(func() { l.end(ctx) },
		func() {
			if l.proven {
				g.counts.Delete(ctx, proofOf(l.proof))
			}
		},
		// The pair's count is also what a later success of the account
		// takes back from the address's (Succeeded), so it is kept
		// whenever either limit is on.
		count(g.cfg.FailuresPerUser > 0 || g.cfg.FailuresPerAddress > 0 && l.addr != "", "p:", l.pair, g.cfg.FailuresPerUser),
		count(g.cfg.FailuresPerAccount > 0, "a:", l.account, g.cfg.FailuresPerAccount),
		count(g.cfg.FailuresPerAddress > 0 && l.addr != "", "i:", l.addr, g.cfg.FailuresPerAddress))
}

// Succeeded records the credential as proven and forgets the failures of
// the account from this address, in the pair's count and in the address's:
// a login that failed and then succeeded (a mistyped password, a mail
// server that refused for a moment) was no guess, and must not lock out the
// other users behind the same address. The account's count over all
// addresses is kept, and so are the address's failures of other accounts:
// the owner logging in must not reset someone else's guesses at the
// account, nor one valid account an address's guesses at others.
func (l *Login) Succeeded(ctx context.Context) {
	if l == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	g, n := l.g, l.pairFailures
	l.g.together(func() { l.end(ctx) },
		func() { g.counts.Raise(ctx, proofOf(l.proof), 1, g.ttl()) },
		func() {
			if n > 0 {
				g.counts.Delete(ctx, failuresOf("p:", l.pair), blockOf("p:", l.pair))
			}
		},
		func() {
			if n > 0 && g.cfg.FailuresPerAddress > 0 && l.addr != "" {
				left, err := g.counts.Add(ctx, failuresOf("i:", l.addr), -n, g.ttl())
				if err == nil && left < int64(g.cfg.FailuresPerAddress) {
					g.counts.Delete(ctx, blockOf("i:", l.addr))
				}
			}
		})
}

// Abandoned ends an attempt whose outcome says nothing about the password
// (network failure, timeout, the server's connection limit).
func (l *Login) Abandoned(ctx context.Context) {
	if l == nil {
		return
	}
	l.end(context.WithoutCancel(ctx))
}

// end releases the attempt's in-progress slots, once.
func (l *Login) end(ctx context.Context) {
	l.once.Do(func() {
		l.g.together(func() {
			if l.inPair {
				l.g.trying.Release(ctx, "p:"+l.pair, l.attempt)
			}
		}, func() {
			if l.inAccount {
				l.g.trying.Release(ctx, "a:"+l.account, l.attempt)
			}
		})
	})
}

// together runs fs and waits for them all: at once when the memory is a
// server's (independent steps then cost one round trip instead of one
// each), else one after the other. Each does nothing when its limit is
// off.
func (g *Guard) together(fs ...func()) {
	if !g.shared {
		for _, f := range fs {
			f()
		}
		return
	}
	var wg sync.WaitGroup
	for _, f := range fs[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	fs[0]()
	wg.Wait()
}

// ttl is how long failures and proofs are remembered after the last one.
func (g *Guard) ttl() time.Duration { return 2 * g.cfg.MaxDelay }

// delay is the refusal period after the n-th failure, from the
// threshold-th on: Delay, doubled per further failure, up to MaxDelay.
func (g *Guard) delay(n int64, threshold int) time.Duration {
	d := g.cfg.Delay
	for i := int64(threshold); i < n && d < g.cfg.MaxDelay; i++ {
		d *= 2
	}
	return min(d, g.cfg.MaxDelay)
}

// newAttempt names one login attempt among those in progress.
func newAttempt() string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		panic("guard: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
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
