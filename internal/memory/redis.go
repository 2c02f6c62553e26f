package memory

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DefaultTimeout bounds one operation of the Redis store when
// RedisOptions.Timeout is 0: a loopback or LAN round trip is well under a
// millisecond, so 200 ms means the server is in trouble.
const DefaultTimeout = 200 * time.Millisecond

// grace is added to the lifetime of single-use entries, so that a replica
// whose clock is a little behind another's still finds the entry while
// it judges the thing it guards unexpired. Replicas' clocks must agree
// within it (NTP does far better).
const grace = time.Minute

// RedisOptions configure NewRedis.
type RedisOptions struct {
	// URL is redis://[user:password@]host[:port][/db] or rediss:// for
	// TLS (Redis 7, Valkey 7 and 8). Query options are refused: the
	// store sets its own timeouts.
	URL string
	// RootCAs verify a rediss:// server (nil: the system's).
	RootCAs *x509.CertPool
	// Timeout bounds each operation, waiting for a connection included
	// (0: DefaultTimeout).
	Timeout time.Duration
	// Key is the secret key names are derived from (ENCRYPTION_KEY);
	// Previous the key it replaced during a rotation, whose names the
	// single-use memories still consult.
	Key, Previous []byte
	// Fail is what limits do when the server cannot answer.
	Fail FailPolicy
	// Observer learns every operation's outcome (metrics); may be nil.
	Observer Observer
	// Logger reports the server going away and coming back; may be nil.
	Logger *slog.Logger
	// Now is the clock turning expiries into lifetimes (nil: time.Now).
	Now func() time.Time
}

// Redis is the shared store: one memory for every replica that uses the
// same server and ENCRYPTION_KEY.
//
// When the server does not answer within the timeout, an operation
// returns an error wrapping ErrUnavailable; after three such failures in
// a row (or one failed check of its own) the store stops asking and
// fails at once, checking the server four times a second until it
// answers again. No restart is ever needed.
type Redis struct {
	client  *redis.Client
	addr    string // host:port, for logs (never the password)
	timeout time.Duration
	fail    FailPolicy
	obs     Observer
	log     *slog.Logger
	now     func() time.Time
	cur     *namer
	prev    *namer // nil outside a key rotation
	local   *Local // stands in for limits under FailOpen
	grace   time.Duration

	down      atomic.Bool
	failures  atomic.Int32 // failed operations in a row
	mu        sync.Mutex
	since     time.Time
	cause     string
	wake      chan struct{} // a failure asks the monitor to check now
	stop      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
}

// quietRedis is go-redis's logger: silent. Its lines (a dial that failed,
// per attempt) go to stderr around slog; the store logs the server going
// away and coming back once each, with the cause.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

// NewRedis makes the Redis store. It does not wait for the server: one
// that is not there yet makes the store start down, and it comes up when
// the server answers.
func NewRedis(o RedisOptions) (*Redis, error) {
	opts, err := ParseURL(o.URL)
	if err != nil {
		return nil, err
	}
	quietOnce.Do(func() { redis.SetLogger(quietRedis{}) })
	if opts.TLSConfig != nil {
		opts.TLSConfig.RootCAs = o.RootCAs
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// No retries: a retried SET NX or INCR whose first answer was lost
	// would count twice, or call a first use a second one.
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = o.Timeout, o.Timeout, o.Timeout, o.Timeout
	opts.ContextTimeoutEnabled = true
	opts.Protocol = 2
	opts.DisableIdentity = true // CLIENT SETINFO: Redis 7.2+, and a round trip per dial
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	cur, err := newNamer(o.Key)
	if err != nil {
		return nil, err
	}
	r := &Redis{
		client: redis.NewClient(opts), addr: opts.Addr, timeout: o.Timeout, fail: o.Fail, obs: o.Observer,
		log: o.Logger.With("component", "redis", "addr", opts.Addr), now: o.Now, cur: cur, local: NewLocal(o.Now), grace: grace,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	if len(o.Previous) > 0 {
		if r.prev, err = newNamer(o.Previous); err != nil {
			return nil, err
		}
	}
	go r.monitor()
	return r, nil
}

// ParseURL reads a REDIS_URL: redis:// or rediss://, an optional user and
// password, host, port (6379) and database number, nothing else. Its
// errors never repeat the password.
func ParseURL(raw string) (*redis.Options, error) {
	s, rest, ok := strings.Cut(raw, "://")
	if !ok || (s != "redis" && s != "rediss") {
		return nil, errors.New("expected a redis:// or rediss:// URL")
	}
	if strings.ContainsAny(rest, "?#") {
		return nil, errors.New("expected no query or fragment (?...): timeouts and retries are the gateway's own (REDIS_TIMEOUT)")
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		// go-redis's message names the part that is wrong; strip any
		// user information it might quote.
		msg := err.Error()
		if i := strings.LastIndex(rest, "@"); i >= 0 {
			msg = strings.ReplaceAll(msg, rest[:i], "…")
		}
		return nil, errors.New(strings.TrimPrefix(msg, "redis: "))
	}
	if host, _, err := net.SplitHostPort(opts.Addr); err != nil || host == "" {
		return nil, errors.New("expected a host name, as in redis://redis.internal:6379/0")
	}
	if opts.DB < 0 {
		return nil, errors.New("expected a database number of 0 or more")
	}
	return opts, nil
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return r.addr }

// Status reports whether the server answers.
func (r *Redis) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Status{Shared: true, Up: !r.down.Load(), Since: r.since, Cause: r.cause}
}

// Close stops the monitor and closes the connections.
func (r *Redis) Close() error {
	var err error
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.stopped
		err = r.client.Close()
	})
	return err
}

// monitor checks the server: four times a second while it is down (the
// first answer brings the store back), every two seconds while it is up
// (so that /health sees an outage even when nothing else asks).
func (r *Redis) monitor() {
	defer close(r.stopped)
	r.check()
	for {
		wait := 2 * time.Second
		if r.down.Load() {
			wait = 250 * time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-r.stop:
			t.Stop()
			return
		case <-r.wake:
			t.Stop()
		case <-t.C:
		}
		r.check()
	}
}

// check pings the server and sets the store up or down by the answer.
func (r *Redis) check() {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	start := time.Now()
	err := r.client.Ping(ctx).Err()
	class := classify(err)
	r.observe("ping", class, time.Since(start))
	if err != nil {
		r.setDown(class, err)
		return
	}
	r.failures.Store(0)
	if r.setUp() {
		r.checkPolicy()
	}
}

// checkPolicy warns when the server may evict keys under memory pressure:
// every key the store writes expires, so any volatile-* or allkeys-*
// policy may drop a used code or refresh token early, and it would then
// be accepted again. noeviction refuses writes instead (the store then
// fails closed).
func (r *Redis) checkPolicy() {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	info, err := r.client.Info(ctx, "memory").Result()
	if err != nil {
		return // INFO may be forbidden to this user: nothing to say
	}
	for _, line := range strings.Split(info, "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); ok && p != "noeviction" {
			r.log.Warn("redis may evict keys when full (maxmemory-policy "+p+"): a used code or refresh token could be forgotten and accepted again; set maxmemory-policy noeviction", "policy", p)
		}
	}
}

func (r *Redis) setDown(class string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down.Load() {
		return
	}
	r.down.Store(true)
	r.since, r.cause = time.Now(), class
	// The error names an address or a server message, never a password:
	// go-redis does not put credentials in its errors.
	r.log.Error("redis unavailable: single-use decisions refuse (503) until it answers; limits fail "+r.failName(), "cause", class, "err", err.Error())
}

// setUp marks the store up; it reports whether that is a change.
func (r *Redis) setUp() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.down.Load() && !r.since.IsZero() {
		return false
	}
	first := r.since.IsZero()
	was := r.since
	r.down.Store(false)
	r.since, r.cause = time.Now(), ""
	if first {
		r.log.Info("redis reachable: replicas share single-use memories, limits and back-off")
	} else {
		r.log.Warn("redis answers again", "down_for", time.Since(was).Round(time.Millisecond).String())
	}
	return true
}

func (r *Redis) failName() string {
	if r.fail == FailOpen {
		return "open (each replica counts on its own)"
	}
	return "closed (refused)"
}

func (r *Redis) observe(op, result string, took time.Duration) {
	if r.obs != nil {
		r.obs.ObserveMemory(op, result, took)
	}
}

// UnavailableError is an operation the shared store could not do; it
// wraps ErrUnavailable.
type UnavailableError struct {
	Op    string
	Class string // timeout, unreachable, refused (the server said no), down (not tried)
	Err   error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%v (%s: %s)", ErrUnavailable, e.Op, e.Class)
}

func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }
func (e *UnavailableError) Unwrap() error        { return e.Err }

// Operation results an Observer is told besides "ok".
const (
	ResultTimeout     = "timeout"
	ResultUnreachable = "unreachable"
	ResultRefused     = "refused"
	ResultDown        = "down"
)

// classify names the way an operation failed.
func classify(err error) string {
	var rerr redis.Error
	var nerr net.Error
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		return "ok"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return ResultTimeout
	case errors.As(err, &rerr):
		return ResultRefused // OOM, READONLY, LOADING, NOAUTH, WRONGPASS, NOPERM...
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return ResultUnreachable
	}
	return ResultUnreachable
}

// do runs one operation under the store's timeout and turns its failure
// into an UnavailableError. While the store is down it fails at once.
func (r *Redis) do(ctx context.Context, op string, f func(context.Context) error) error {
	if r.down.Load() {
		r.observe(op, ResultDown, 0)
		return &UnavailableError{Op: op, Class: ResultDown}
	}
	octx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	start := time.Now()
	err := f(octx)
	took := time.Since(start)
	if err == nil || errors.Is(err, redis.Nil) {
		r.observe(op, "ok", took)
		r.failures.Store(0)
		return nil
	}
	if ctx.Err() != nil {
		// The caller gave up (its request ended): not the server's fault.
		return ctx.Err()
	}
	class := classify(err)
	r.observe(op, class, took)
	if r.failures.Add(1) >= 3 {
		r.setDown(class, err)
	}
	select { // have the monitor look now
	case r.wake <- struct{}{}:
	default:
	}
	return &UnavailableError{Op: op, Class: class, Err: err}
}

// ttlMS is the lifetime until exp in milliseconds, at least 1.
func (r *Redis) ttlMS(exp time.Time, extra time.Duration) int64 {
	return max((exp.Sub(r.now()) + extra).Milliseconds(), 1)
}

func durMS(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

// names returns key's name under the current key, and under the previous
// one during a rotation (else the same name).
func (r *Redis) names(name, kind string, parts ...string) (cur, prev string) {
	cur = r.cur.key(name, kind, parts...)
	if r.prev == nil {
		return cur, cur
	}
	return cur, r.prev.key(name, kind, parts...)
}

// fallback is a limit's answer when the store could not give one: under
// FailOpen, this replica's own memory's.
func fallback[T any](r *Redis, err error, local func() (T, error)) (T, error) {
	if r.fail == FailOpen && errors.Is(err, ErrUnavailable) {
		return local()
	}
	var zero T
	return zero, err
}

// --- Once -----------------------------------------------------------------------

func (r *Redis) Once(name string, _ Bounds) Once {
	mustName(name)
	return &redisOnce{r: r, name: name}
}

type redisOnce struct {
	r    *Redis
	name string
}

func (o *redisOnce) Use(ctx context.Context, scope, id string, exp time.Time) (bool, error) {
	cur, prev := o.r.names(o.name, "o", scope, id)
	ttl := o.r.ttlMS(exp, o.r.grace)
	var first bool
	err := o.r.do(ctx, "once.use", func(ctx context.Context) error {
		if cur == prev {
			ok, err := o.r.client.SetNX(ctx, cur, "1", time.Duration(ttl)*time.Millisecond).Result()
			first = ok
			return err
		}
		n, err := onceUseScript.Run(ctx, o.r.client, []string{cur, prev}, ttl).Int()
		first = n == 1
		return err
	})
	return first, err
}

func (o *redisOnce) Seen(ctx context.Context, scope, id string) (bool, error) {
	cur, prev := o.r.names(o.name, "o", scope, id)
	var n int64
	err := o.r.do(ctx, "once.seen", func(ctx context.Context) error {
		var err error
		n, err = o.r.client.Exists(ctx, cur, prev).Result()
		return err
	})
	return n > 0, err
}

// --- Counter -------------------------------------------------------------------------

func (r *Redis) Counter(name string, b Bounds) Counter {
	mustName(name)
	return &redisCounter{r: r, name: name, local: func() Counter { return r.local.Counter(name, b) }}
}

type redisCounter struct {
	r     *Redis
	name  string
	local func() Counter
}

func (c *redisCounter) key(k string) string { return c.r.cur.key(c.name, "c", k) }

func (c *redisCounter) Add(ctx context.Context, key string, delta int64, ttl time.Duration) (int64, error) {
	if ttl <= 0 {
		return 0, errTTL
	}
	var v int64
	err := c.r.do(ctx, "counter.add", func(ctx context.Context) error {
		var err error
		v, err = counterAddScript.Run(ctx, c.r.client, []string{c.key(key)}, delta, durMS(ttl)).Int64()
		return err
	})
	if err != nil {
		return fallback(c.r, err, func() (int64, error) { return c.local().Add(ctx, key, delta, ttl) })
	}
	return v, nil
}

func (c *redisCounter) Raise(ctx context.Context, key string, v int64, ttl time.Duration) (int64, error) {
	if ttl <= 0 {
		return 0, errTTL
	}
	var out int64
	err := c.r.do(ctx, "counter.raise", func(ctx context.Context) error {
		var err error
		out, err = counterRaiseScript.Run(ctx, c.r.client, []string{c.key(key)}, v, durMS(ttl)).Int64()
		return err
	})
	if err != nil {
		return fallback(c.r, err, func() (int64, error) { return c.local().Raise(ctx, key, v, ttl) })
	}
	return out, nil
}

func (c *redisCounter) Get(ctx context.Context, keys ...string) ([]int64, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = c.key(k)
	}
	out := make([]int64, len(keys))
	err := c.r.do(ctx, "counter.get", func(ctx context.Context) error {
		vals, err := c.r.client.MGet(ctx, names...).Result()
		if err != nil {
			return err
		}
		for i, v := range vals {
			if s, ok := v.(string); ok {
				out[i], _ = strconv.ParseInt(s, 10, 64)
			}
		}
		return nil
	})
	if err != nil {
		return fallback(c.r, err, func() ([]int64, error) { return c.local().Get(ctx, keys...) })
	}
	return out, nil
}

func (c *redisCounter) Delete(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = c.key(k)
	}
	err := c.r.do(ctx, "counter.delete", func(ctx context.Context) error {
		return c.r.client.Del(ctx, names...).Err()
	})
	if err != nil {
		_, err = fallback(c.r, err, func() (struct{}, error) { return struct{}{}, c.local().Delete(ctx, keys...) })
	}
	return err
}

// --- Bucket ---------------------------------------------------------------------------

func (r *Redis) Bucket(name string, b Bounds) Bucket {
	mustName(name)
	return &redisBucket{r: r, name: name, local: func() Bucket { return r.local.Bucket(name, b) }}
}

type redisBucket struct {
	r     *Redis
	name  string
	local func() Bucket
}

func (b *redisBucket) Take(ctx context.Context, key string, rt Rate) (time.Duration, error) {
	if rt.PerMinute <= 0 {
		return 0, nil
	}
	burst := max(rt.Burst, 1)
	perMicro := rt.PerMinute / 60e6
	var wait int64
	err := b.r.do(ctx, "bucket.take", func(ctx context.Context) error {
		var err error
		wait, err = bucketTakeScript.Run(ctx, b.r.client, []string{b.r.cur.key(b.name, "b", key)},
			strconv.FormatFloat(perMicro, 'g', -1, 64), burst).Int64()
		return err
	})
	if err != nil {
		return fallback(b.r, err, func() (time.Duration, error) { return b.local().Take(ctx, key, rt) })
	}
	return time.Duration(wait) * time.Microsecond, nil
}

// --- Slots --------------------------------------------------------------------------------

func (r *Redis) Slots(name string, b Bounds) Slots {
	mustName(name)
	return &redisSlots{r: r, name: name, local: func() Slots { return r.local.Slots(name, b) }}
}

type redisSlots struct {
	r     *Redis
	name  string
	local func() Slots
}

func (s *redisSlots) Take(ctx context.Context, scope, member string, exp time.Time, limit int) (Taken, error) {
	if limit < 1 {
		return Taken{Retry: time.Hour}, nil
	}
	if !s.r.now().Before(exp) {
		return Taken{}, nil // a slot that would already be free
	}
	var t Taken
	err := s.r.do(ctx, "slots.take", func(ctx context.Context) error {
		vals, err := slotsTakeScript.Run(ctx, s.r.client, []string{s.r.cur.key(s.name, "s", scope)},
			s.r.cur.hash(s.name, "m", scope, member), s.r.ttlMS(exp, 0), limit).Int64Slice()
		if err != nil {
			return err
		}
		if len(vals) != 3 {
			return fmt.Errorf("slots.take: unexpected answer %v", vals)
		}
		t = Taken{OK: vals[0] == 1, Count: int(vals[1])}
		if !t.OK {
			t.Retry = min(max(time.Duration(vals[2])*time.Millisecond, time.Second), time.Hour)
		}
		return nil
	})
	if err != nil {
		return fallback(s.r, err, func() (Taken, error) { return s.local().Take(ctx, scope, member, exp, limit) })
	}
	return t, nil
}

func (s *redisSlots) Release(ctx context.Context, scope, member string) error {
	err := s.r.do(ctx, "slots.release", func(ctx context.Context) error {
		return s.r.client.ZRem(ctx, s.r.cur.key(s.name, "s", scope), s.r.cur.hash(s.name, "m", scope, member)).Err()
	})
	if err != nil {
		_, err = fallback(s.r, err, func() (struct{}, error) { return struct{}{}, s.local().Release(ctx, scope, member) })
	}
	return err
}

func (s *redisSlots) Count(ctx context.Context, scope string) (int, error) {
	var n int
	err := s.r.do(ctx, "slots.count", func(ctx context.Context) error {
		var err error
		n, err = slotsCountScript.Run(ctx, s.r.client, []string{s.r.cur.key(s.name, "s", scope)}).Int()
		return err
	})
	if err != nil {
		return fallback(s.r, err, func() (int, error) { return s.local().Count(ctx, scope) })
	}
	return n, nil
}

// --- Generations ----------------------------------------------------------------------------

func (r *Redis) Generations(name string, _ Bounds) Generations {
	mustName(name)
	return &redisGenerations{r: r, name: name}
}

type redisGenerations struct {
	r    *Redis
	name string
}

// args are the keys and the arguments every generation script takes.
func (g *redisGenerations) args(group, fam string, exp time.Time, limit int) ([]string, []any) {
	member := g.r.cur.hash(g.name, "f", fam)
	f := keyPrefix + g.name + ":f:" + member
	prev := f
	if g.r.prev != nil {
		prev = g.r.prev.key(g.name, "f", fam)
	}
	ts, tsPrev := g.r.names(g.name, "t", fam)
	id, idPrev := g.r.names(g.name, "i")
	keys := []string{g.r.cur.key(g.name, "g", group), g.r.cur.key(g.name, "s", group), f, prev, ts, tsPrev, id, idPrev}
	return keys, []any{member, g.r.ttlMS(exp, g.r.grace), limit, keyPrefix + g.name + ":f:", newID()}
}

// answer reads a generation script's {code, id, number}.
func answer(op string, v any) (code int64, id string, n int64, err error) {
	vals, ok := v.([]any)
	if ok && len(vals) == 3 {
		code, ok1 := vals[0].(int64)
		id, ok2 := vals[1].(string)
		n, ok3 := vals[2].(int64)
		if ok1 && ok2 && ok3 {
			return code, id, n, nil
		}
	}
	return 0, "", 0, fmt.Errorf("%s: unexpected answer %v", op, v)
}

func (g *redisGenerations) Start(ctx context.Context, group, fam string, startExp, exp time.Time, limit int) (Started, error) {
	keys, args := g.args(group, fam, exp, limit)
	var counts, remember int64
	if d := startExp.Sub(g.r.now()); d > 0 {
		counts, remember = durMS(d), durMS(d+g.r.grace)
	}
	var out Started
	var full time.Duration
	err := g.r.do(ctx, "generations.start", func(ctx context.Context) error {
		v, err := generationsStartScript.Run(ctx, g.r.client, keys, append(args, counts, remember)...).Result()
		if err != nil {
			return err
		}
		code, id, n, err := answer("generations.start", v)
		out = Started{ID: id}
		switch code {
		case 0:
			out.Ended = int(n)
		case 1:
			out.Replayed = true
		case 2:
			full = max(time.Duration(n)*time.Millisecond, time.Millisecond)
		}
		return err
	})
	if err == nil && full != 0 {
		err = &FullError{RetryAfter: min(max(full, time.Second), time.Hour), Scope: true}
	}
	return out, err
}

func (g *redisGenerations) Advance(ctx context.Context, group, fam string, gen uint32, id string, exp time.Time, limit int) (Step, error) {
	keys, args := g.args(group, fam, exp, limit)
	var out Step
	var full time.Duration
	err := g.r.do(ctx, "generations.advance", func(ctx context.Context) error {
		v, err := generationsAdvanceScript.Run(ctx, g.r.client, keys, append(args, gen, id)...).Result()
		if err != nil {
			return err
		}
		code, cur, n, err := answer("generations.advance", v)
		if err != nil {
			return err
		}
		out.ID = cur
		switch {
		case code == -1:
			full = max(time.Duration(n)*time.Millisecond, time.Millisecond)
		case code >= int64(Advanced) && code <= int64(Ahead):
			out.Outcome = Outcome(code)
		default:
			return fmt.Errorf("generations.advance: unexpected outcome %d", code)
		}
		return nil
	})
	if err == nil && full != 0 {
		err = &FullError{RetryAfter: min(max(full, time.Second), time.Hour), Scope: true}
	}
	return out, err
}
