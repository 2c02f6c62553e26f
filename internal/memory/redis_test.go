package memory_test

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

// ownRedis starts a redis-server for one test (one it may kill).
func ownRedis(t *testing.T, opts mailstack.RedisOptions) *mailstack.RedisServer {
	t.Helper()
	redisServer(t) // skips where redis-server cannot run
	s, err := mailstack.StartRedis(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("redis-server log:\n%s", s.Log(3000))
		}
		s.Stop()
	})
	return s
}

// rawClient is a plain go-redis client on srv's database db, to look at
// what the store wrote.
func rawClient(t *testing.T, srv *mailstack.RedisServer, db int) *redis.Client {
	t.Helper()
	return rawClientB(t, srv.URL(db))
}

func rawClientB(t testing.TB, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// usedMemory is INFO memory's used_memory.
func usedMemory(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no used_memory in INFO memory:\n%s", info)
	return 0
}

// observed counts what an Observer was told, by op and result.
type observed struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *observed) ObserveMemory(op, result string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[op+" "+result]++
}

func (o *observed) count(s string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[s]
}

// Two stores with the same ENCRYPTION_KEY on one server are one memory:
// what one replica used, counted or advanced, the other sees.
func TestRedisReplicasShareOneMemory(t *testing.T) {
	srv := redisServer(t)
	key := newKey(t)
	a := newRedis(t, srv, memory.RedisOptions{Key: key})
	b := newRedis(t, srv, memory.RedisOptions{Key: key})
	exp := time.Now().Add(time.Hour)

	if first, err := a.Once("approval.used", memory.Bounds{}).Use(ctx, "alice", "n1", exp); !first || err != nil {
		t.Fatal(first, err)
	}
	if first, err := b.Once("approval.used", memory.Bounds{}).Use(ctx, "alice", "n1", exp); first || err != nil {
		t.Fatalf("a nonce used at replica A was a first use at B (%v, %v)", first, err)
	}

	ga, gb := a.Generations("oauth.families", memory.Bounds{}), b.Generations("oauth.families", memory.Bounds{})
	st, err := ga.Start(ctx, "alice", "fam", time.Now().Add(time.Minute), exp, 10)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ga.Advance(ctx, "alice", "fam", 0, st.ID, exp, 10); o.Outcome != memory.Advanced {
		t.Fatal(o)
	}
	if o, _ := gb.Advance(ctx, "alice", "fam", 0, st.ID, exp, 10); o.Outcome != memory.Reused || o.ID != st.ID {
		t.Fatalf("a refresh token replayed at B after rotation at A: %+v, want reused (one memory, one id)", o)
	}
	if o, _ := ga.Advance(ctx, "alice", "fam", 1, st.ID, exp, 10); o.Outcome != memory.Revoked {
		t.Fatalf("the newest token at A after the replay at B: %s, want revoked", o.Outcome)
	}
	if st, _ := gb.Start(ctx, "alice", "fam", time.Now().Add(time.Minute), exp, 10); !st.Replayed {
		t.Fatal("a start at A replayed at B started again")
	}

	r := memory.Rate{PerMinute: 1, Burst: 2}
	for i := range 2 {
		if w, _ := []memory.Bucket{a.Bucket("guard.calls", memory.Bounds{}), b.Bucket("guard.calls", memory.Bounds{})}[i].Take(ctx, "alice", r); w != 0 {
			t.Fatal(w)
		}
	}
	if w, _ := a.Bucket("guard.calls", memory.Bounds{}).Take(ctx, "alice", r); w == 0 {
		t.Fatal("a burst of 2 spread over two replicas allowed a third call")
	}

	ca, cb := a.Counter("guard.failures", memory.Bounds{}), b.Counter("guard.failures", memory.Bounds{})
	for range 10 {
		ca.Add(ctx, "alice", 1, time.Minute)
		cb.Add(ctx, "alice", 1, time.Minute)
	}
	if v, _ := ca.Get(ctx, "alice"); v[0] != 20 {
		t.Fatalf("20 failures over two replicas counted %d", v[0])
	}

	sa, sb := a.Slots("approval.pending", memory.Bounds{}), b.Slots("approval.pending", memory.Bounds{})
	sa.Take(ctx, "alice", "p1", exp, 2)
	sb.Take(ctx, "alice", "p2", exp, 2)
	if got, _ := sa.Take(ctx, "alice", "p3", exp, 2); got.OK {
		t.Fatal("a third slot over two replicas with a limit of 2")
	}

	// Another ENCRYPTION_KEY is another memory (another deployment
	// sharing the server).
	other := newRedis(t, srv, memory.RedisOptions{})
	if first, _ := other.Once("approval.used", memory.Bounds{}).Use(ctx, "alice", "n1", exp); !first {
		t.Fatal("a store under another key shares the entries")
	}
}

// A dump of Redis holds no identifier the gateway was given: keys are
// HMACs, values are counts, times and flags.
func TestRedisDumpRevealsNothing(t *testing.T) {
	srv := redisServer(t)
	const db = 7
	s := newRedis(t, srv, memory.RedisOptions{URL: srv.URL(db)})
	tag := func(s string) string { return s + "-" + fmt.Sprintf("%x", newKey(t)[:5]) }
	secrets := []string{tag("alice") + "@example.test", "203.0.113.77", tag("nonce"), tag("code"), tag("family"), tag("attempt")}
	exp := time.Now().Add(time.Hour)
	s.Once("approval.used", memory.Bounds{}).Use(ctx, secrets[0], secrets[2], exp)
	s.Once("oauth.states", memory.Bounds{}).Use(ctx, secrets[0], secrets[3], exp)
	g := s.Generations("oauth.families", memory.Bounds{})
	st, _ := g.Start(ctx, secrets[0], secrets[4], exp, exp, 5)
	g.Advance(ctx, secrets[0], secrets[4], 0, st.ID, exp, 5)
	g.Advance(ctx, secrets[0], secrets[4], 0, st.ID, exp, 5) // revoked
	s.Counter("guard.failures", memory.Bounds{}).Add(ctx, secrets[0]+"\x00"+secrets[1], 3, time.Hour)
	s.Counter("guard.blocked", memory.Bounds{}).Raise(ctx, secrets[1], time.Now().UnixMilli(), time.Hour)
	s.Bucket("guard.signin", memory.Bounds{}).Take(ctx, secrets[1], memory.Rate{PerMinute: 5, Burst: 5})
	s.Slots("guard.pending", memory.Bounds{}).Take(ctx, secrets[0], secrets[5], exp, 5)

	c := rawClient(t, srv, db)
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 9 {
		t.Fatalf("only %d keys: %v", len(keys), keys)
	}
	shape := regexp.MustCompile(`^mmcp:[a-z.]+:[a-z]:[A-Za-z0-9_-]{22}$`)
	var dump strings.Builder
	for _, k := range keys {
		if !shape.MatchString(k) {
			t.Errorf("key %q is not mmcp:NAME:KIND:HMAC", k)
		}
		ttl, _ := c.PTTL(ctx, k).Result()
		if ttl <= 0 {
			t.Errorf("key %s never expires (PTTL %s)", k, ttl)
		}
		fmt.Fprintf(&dump, "%s ", k)
		switch typ, _ := c.Type(ctx, k).Result(); typ {
		case "string":
			fmt.Fprintln(&dump, c.Get(ctx, k).Val())
		case "hash":
			fmt.Fprintln(&dump, c.HGetAll(ctx, k).Val())
		case "zset":
			fmt.Fprintln(&dump, c.ZRangeWithScores(ctx, k, 0, -1).Val())
		default:
			t.Errorf("key %s of type %s", k, typ)
		}
	}
	for _, sec := range secrets {
		for _, part := range []string{sec, strings.Split(sec, "@")[0], sec[strings.LastIndex(sec, "-")+1:]} {
			if strings.Contains(dump.String(), part) {
				t.Errorf("the dump holds %q:\n%s", part, dump.String())
			}
		}
	}
	t.Logf("dump:\n%s", dump.String())
}

// During a key rotation (ENCRYPTION_KEY_PREVIOUS set) the single-use
// memories still find what was recorded under the previous key: a
// rotation must not let a used code or refresh token through.
func TestRedisKeyRotationKeepsSingleUse(t *testing.T) {
	srv := redisServer(t)
	oldKey, newKeyBytes := newKey(t), newKey(t)
	before := newRedis(t, srv, memory.RedisOptions{Key: oldKey})
	after := newRedis(t, srv, memory.RedisOptions{Key: newKeyBytes, Previous: oldKey})
	exp := time.Now().Add(time.Hour)

	before.Once("oauth.states", memory.Bounds{}).Use(ctx, "alice", "code1", exp)
	if seen, _ := after.Once("oauth.states", memory.Bounds{}).Seen(ctx, "alice", "code1"); !seen {
		t.Fatal("a code used before the rotation is not seen after it")
	}
	if first, _ := after.Once("oauth.states", memory.Bounds{}).Use(ctx, "alice", "code1", exp); first {
		t.Fatal("a code used before the rotation was a first use after it")
	}
	gb, ga := before.Generations("oauth.families", memory.Bounds{}), after.Generations("oauth.families", memory.Bounds{})
	code := time.Now().Add(time.Minute)
	st, _ := gb.Start(ctx, "alice", "fam", code, exp, 5)
	gb.Advance(ctx, "alice", "fam", 0, st.ID, exp, 5)
	gb.Advance(ctx, "alice", "fam", 1, st.ID, exp, 5)
	if o, _ := ga.Advance(ctx, "alice", "fam", 0, st.ID, exp, 5); o.Outcome != memory.Reused || o.ID != st.ID {
		t.Fatalf("a used refresh token after the rotation: %+v, want reused, the memory's id carried over", o)
	}
	gb.Start(ctx, "alice", "fam2", code, exp, 5)
	if o, _ := ga.Advance(ctx, "alice", "fam2", 0, st.ID, exp, 5); o.Outcome != memory.Advanced {
		t.Fatalf("the current token after the rotation: %s, want advanced", o.Outcome)
	}
	gb.Start(ctx, "alice", "fam3", code, exp, 5)
	if s, _ := ga.Start(ctx, "alice", "fam3", code, exp, 5); !s.Replayed {
		t.Fatal("a start made before the rotation, replayed after it, started again")
	}
	// A family ended before the rotation stays ended after it.
	gb.Start(ctx, "bob", "b1", time.Time{}, exp, 2)
	tick()
	gb.Start(ctx, "bob", "b2", time.Time{}, exp, 2)
	tick()
	gb.Start(ctx, "bob", "b3", time.Time{}, exp, 2) // b1 ends
	if o, _ := ga.Advance(ctx, "bob", "b1", 0, st.ID, exp, 2); o.Outcome != memory.Evicted {
		t.Fatalf("a family ended before the rotation: %s after it, want evicted", o.Outcome)
	}
	// Once rotated, the new key's memory stands alone.
	done := newRedis(t, srv, memory.RedisOptions{Key: newKeyBytes})
	if o, _ := done.Generations("oauth.families", memory.Bounds{}).Advance(ctx, "alice", "fam2", 1, st.ID, exp, 5); o.Outcome != memory.Advanced || o.ID != st.ID {
		t.Fatalf("after the rotation ended: %+v, want advanced (the state and the id carried over)", o)
	}
}

// Redis killed mid-run: every operation fails at once with
// ErrUnavailable, single-use memories fail closed, limits as the
// operator chose; when it is back the same store works again, with no
// restart.
func TestRedisDownAndBack(t *testing.T) {
	srv := ownRedis(t, mailstack.RedisOptions{})
	obs := &observed{}
	closed := newRedis(t, srv, memory.RedisOptions{Timeout: 200 * time.Millisecond, Observer: obs})
	open := newRedis(t, srv, memory.RedisOptions{Timeout: 200 * time.Millisecond, Fail: memory.FailOpen})
	exp := time.Now().Add(time.Hour)
	once := closed.Once("approval.used", memory.Bounds{})
	if first, err := once.Use(ctx, "alice", "before", exp); !first || err != nil {
		t.Fatal(first, err)
	}
	if !closed.Status().Up || !closed.Status().Shared {
		t.Fatalf("status before: %+v", closed.Status())
	}
	gens := closed.Generations("oauth.families", memory.Bounds{})
	signedIn, err := gens.Start(ctx, "alice", "fam", time.Time{}, exp, 5)
	if err != nil {
		t.Fatal(err)
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	_, err = once.Use(ctx, "alice", "during", exp)
	if !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("once.use with Redis killed: %v, want ErrUnavailable", err)
	}
	if d, ok := memory.RetryAfter(err); !ok || d <= 0 {
		t.Fatalf("RetryAfter: %s %v", d, ok)
	}
	if took := time.Since(begin); took > time.Second {
		t.Fatalf("the failure took %s", took)
	}
	for _, f := range []func() error{
		func() error {
			_, err := closed.Generations("oauth.families", memory.Bounds{}).Advance(ctx, "a", "f", 0, "", exp, 5)
			return err
		},
		func() error {
			_, err := closed.Generations("oauth.families", memory.Bounds{}).Start(ctx, "a", "f", exp, exp, 5)
			return err
		},
		func() error {
			_, err := closed.Counter("guard.failures", memory.Bounds{}).Add(ctx, "a", 1, time.Minute)
			return err
		},
		func() error {
			_, err := closed.Bucket("guard.calls", memory.Bounds{}).Take(ctx, "a", memory.Rate{PerMinute: 1, Burst: 1})
			return err
		},
		func() error {
			_, err := closed.Slots("guard.pending", memory.Bounds{}).Take(ctx, "a", "m", exp, 1)
			return err
		},
	} {
		if err := f(); !errors.Is(err, memory.ErrUnavailable) {
			t.Fatalf("REDIS_FAIL=closed: %v, want ErrUnavailable", err)
		}
	}
	// Fail open: limits answer from this replica's own memory.
	oc := open.Counter("guard.failures", memory.Bounds{})
	for i := range 3 {
		if n, err := oc.Add(ctx, "alice", 1, time.Minute); err != nil || n != int64(i+1) {
			t.Fatalf("REDIS_FAIL=open counter: %d, %v", n, err)
		}
	}
	ob := open.Bucket("guard.calls", memory.Bounds{})
	if w, err := ob.Take(ctx, "alice", memory.Rate{PerMinute: 1, Burst: 1}); w != 0 || err != nil {
		t.Fatalf("REDIS_FAIL=open bucket: %s, %v", w, err)
	}
	if w, _ := ob.Take(ctx, "alice", memory.Rate{PerMinute: 1, Burst: 1}); w == 0 {
		t.Fatal("REDIS_FAIL=open: the local stand-in does not limit")
	}
	if _, err := open.Once("approval.used", memory.Bounds{}).Use(ctx, "alice", "x", exp); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("REDIS_FAIL=open must not open single use: %v", err)
	}
	waitFor(t, 2*time.Second, "status down", func() bool { return !closed.Status().Up })
	if st := closed.Status(); st.Cause == "" || strings.Contains(st.Cause, "127.0.0.1") {
		t.Fatalf("status cause %q: want a class, no address", st.Cause)
	}
	// Down: operations fail at once, without waiting for a timeout.
	begin = time.Now()
	once.Use(ctx, "alice", "fast", exp)
	if took := time.Since(begin); took > 50*time.Millisecond {
		t.Fatalf("an operation while down took %s", took)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "the store answers again", func() bool {
		first, err := once.Use(ctx, "alice", "after", exp)
		return err == nil && first
	})
	if !closed.Status().Up {
		t.Fatalf("status after: %+v", closed.Status())
	}
	// A server without persistence forgot everything: documented. Its
	// memory has a new id, so a sign-in's token, which names the old one,
	// is adopted rather than taken for one ended here.
	if first, _ := once.Use(ctx, "alice", "before", exp); !first {
		t.Fatal("a restarted server without persistence remembered")
	}
	if st, err := gens.Advance(ctx, "alice", "fam", 0, signedIn.ID, exp, 5); err != nil || st.Outcome != memory.Adopted || st.ID == signedIn.ID {
		t.Fatalf("a sign-in after Redis lost its data: %+v %v, want adopted under a new id", st, err)
	}
	if obs.count("once.use ok") < 2 || obs.count("once.use unreachable")+obs.count("once.use timeout")+obs.count("once.use down") < 2 ||
		obs.count("ping unreachable")+obs.count("once.use unreachable") < 1 {
		t.Fatalf("observer saw %v", obs.n)
	}
}

// A server that hangs (SIGSTOP) fails each operation within the timeout.
func TestRedisSlowFailsWithinTimeout(t *testing.T) {
	srv := ownRedis(t, mailstack.RedisOptions{})
	obs := &observed{}
	s := newRedis(t, srv, memory.RedisOptions{Timeout: 200 * time.Millisecond, Observer: obs})
	c := s.Counter("guard.failures", memory.Bounds{})
	if _, err := c.Add(ctx, "a", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	begin := time.Now()
	_, err := c.Add(ctx, "a", 1, time.Minute)
	took := time.Since(begin)
	var ue *memory.UnavailableError
	if !errors.As(err, &ue) || ue.Class != memory.ResultTimeout {
		t.Fatalf("a hung server: %v, want a timeout", err)
	}
	if took < 180*time.Millisecond || took > time.Second {
		t.Fatalf("the timeout took %s, want about 200ms", took)
	}
	srv.Resume()
	waitFor(t, 3*time.Second, "the store answers again", func() bool {
		n, err := c.Add(ctx, "a", 1, time.Minute)
		return err == nil && n >= 2
	})
	if obs.count("counter.add timeout") < 1 {
		t.Fatalf("observer saw %v", obs.n)
	}
}

// rediss:// with the server's CA, an ACL user and a database number.
func TestRedisTLSAndACL(t *testing.T) {
	t.Run("tls", func(t *testing.T) {
		srv := ownRedis(t, mailstack.RedisOptions{TLS: true})
		pem, err := os.ReadFile(srv.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		// -race makes a TLS handshake slow: a generous timeout, so that
		// the failure below is the certificate's
		s := newRedis(t, srv, memory.RedisOptions{RootCAs: roots, Timeout: 3 * time.Second})
		if !strings.HasPrefix(srv.URL(0), "rediss://") {
			t.Fatal(srv.URL(0))
		}
		if first, err := s.Once("t.o", memory.Bounds{}).Use(ctx, "", "x", time.Now().Add(time.Minute)); !first || err != nil {
			t.Fatalf("over TLS: %v, %v", first, err)
		}
		// Without the CA the server is not trusted.
		untrusted := newRedis(t, srv, memory.RedisOptions{Timeout: 3 * time.Second})
		_, err = untrusted.Once("t.o", memory.Bounds{}).Use(ctx, "", "y", time.Now().Add(time.Minute))
		if !errors.Is(err, memory.ErrUnavailable) || !strings.Contains(err.(*memory.UnavailableError).Err.Error(), "certificate") {
			t.Fatalf("an untrusted server: %v", err)
		}
	})
	t.Run("acl_user_and_database", func(t *testing.T) {
		srv := ownRedis(t, mailstack.RedisOptions{User: "gateway", Password: "s3cret-pw"})
		s := newRedis(t, srv, memory.RedisOptions{URL: srv.URL(3)})
		if n, err := s.Counter("t.c", memory.Bounds{}).Add(ctx, "k", 5, time.Minute); n != 5 || err != nil {
			t.Fatalf("as the ACL user on db 3: %d, %v", n, err)
		}
		if n := rawClient(t, srv, 3).DBSize(ctx).Val(); n != 1 {
			t.Fatalf("db 3 holds %d keys, want 1", n)
		}
		if n := rawClient(t, srv, 0).DBSize(ctx).Val(); n != 0 {
			t.Fatalf("db 0 holds %d keys, want 0", n)
		}
		bad := newRedis(t, srv, memory.RedisOptions{URL: strings.Replace(srv.URL(3), "s3cret-pw", "wrong", 1)})
		_, err := bad.Counter("t.c", memory.Bounds{}).Add(ctx, "k", 1, time.Minute)
		if !errors.Is(err, memory.ErrUnavailable) {
			t.Fatalf("a wrong password: %v, want ErrUnavailable", err)
		}
		waitFor(t, 2*time.Second, "status down", func() bool { return !bad.Status().Up })
		if c := bad.Status().Cause; c != memory.ResultRefused {
			t.Fatalf("status cause %q, want %q (the server said no)", c, memory.ResultRefused)
		}
		if strings.Contains(err.Error(), "wrong") || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("the error shows the password: %v", err)
		}
	})
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"http://redis:6379", "expected a redis:// or rediss:// URL"},
		{"redis.internal:6379", "expected a redis:// or rediss:// URL"},
		{"redis://:supersecret@redis:6379/0?dial_timeout=1s", "expected no query"},
		{"redis://redis:6379/zero", "invalid database number"},
		{"redis://redis:6379/0/1", "invalid URL path"},
		{"redis://u:supersecret@redis:notaport/0", "invalid port"},
	} {
		_, err := memory.ParseURL(c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "supersecret") {
			t.Errorf("%s: the error shows the password: %v", c.url, err)
		}
	}
	o, err := memory.ParseURL("rediss://gw:pw@redis.internal:6380/2")
	if err != nil || o.Addr != "redis.internal:6380" || o.DB != 2 || o.Username != "gw" || o.Password != "pw" || o.TLSConfig == nil || o.TLSConfig.ServerName != "redis.internal" {
		t.Fatalf("%+v, %v", o, err)
	}
	o, err = memory.ParseURL("redis://redis")
	if err != nil || o.Addr != "redis:6379" || o.DB != 0 || o.TLSConfig != nil {
		t.Fatalf("%+v, %v", o, err)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A server that may evict keys when full is named in the log at once.
func TestRedisWarnsOfEviction(t *testing.T) {
	srv := ownRedis(t, mailstack.RedisOptions{})
	var logs strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	read := func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
	newRedis(t, srv, memory.RedisOptions{Logger: logger})
	waitFor(t, 2*time.Second, "reachable", func() bool { return strings.Contains(read(), "redis reachable") })
	if strings.Contains(read(), "may evict") {
		t.Fatalf("a warning with noeviction (the default):\n%s", read())
	}
	if err := rawClient(t, srv, 0).ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	newRedis(t, srv, memory.RedisOptions{Logger: logger})
	waitFor(t, 2*time.Second, "the warning", func() bool { return strings.Contains(read(), "maxmemory-policy volatile-lru") })
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// The least-privilege ACL user of docs/scaling.md can do everything the
// store does, on a database of its choice, and nothing else: no other
// key, no FLUSHALL.
func TestRedisLeastPrivilege(t *testing.T) {
	doc, err := os.ReadFile("../../docs/scaling.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(doc), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "user mailbox-mcp on >PASSWORD ") {
			line = l
		}
	}
	if line == "" {
		t.Fatal("no 'user mailbox-mcp on >PASSWORD ...' line in docs/scaling.md")
	}
	rules := strings.Fields(strings.TrimPrefix(line, "user mailbox-mcp on >PASSWORD "))
	srv := ownRedis(t, mailstack.RedisOptions{User: "mailbox-mcp", Password: "acl-pw", Rules: rules})
	s := newRedis(t, srv, memory.RedisOptions{URL: srv.URL(2)})
	exp := time.Now().Add(time.Hour)
	steps := []struct {
		name string
		f    func() error
	}{
		{"once.use", func() error { _, err := s.Once("t.o", memory.Bounds{}).Use(ctx, "a", "n", exp); return err }},
		{"once.seen", func() error { _, err := s.Once("t.o", memory.Bounds{}).Seen(ctx, "a", "n"); return err }},
		{"counter.add", func() error { _, err := s.Counter("t.c", memory.Bounds{}).Add(ctx, "a", 2, time.Minute); return err }},
		{"counter.raise", func() error { _, err := s.Counter("t.c", memory.Bounds{}).Raise(ctx, "b", 9, time.Minute); return err }},
		{"counter.get", func() error { _, err := s.Counter("t.c", memory.Bounds{}).Get(ctx, "a", "b"); return err }},
		{"counter.delete", func() error { return s.Counter("t.c", memory.Bounds{}).Delete(ctx, "a") }},
		{"bucket.take", func() error {
			_, err := s.Bucket("t.b", memory.Bounds{}).Take(ctx, "a", memory.Rate{PerMinute: 1, Burst: 1})
			return err
		}},
		{"slots.take", func() error { _, err := s.Slots("t.s", memory.Bounds{}).Take(ctx, "a", "m", exp, 1); return err }},
		{"slots.count", func() error { _, err := s.Slots("t.s", memory.Bounds{}).Count(ctx, "a"); return err }},
		{"slots.release", func() error { return s.Slots("t.s", memory.Bounds{}).Release(ctx, "a", "m") }},
		{"generations.start", func() error {
			_, err := s.Generations("t.g", memory.Bounds{}).Start(ctx, "a", "f", exp, exp, 3)
			return err
		}},
		{"generations.start (ends one)", func() error {
			_, err := s.Generations("t.g", memory.Bounds{}).Start(ctx, "a", "f1", time.Time{}, exp, 2)
			return err
		}},
		{"generations.advance", func() error {
			_, err := s.Generations("t.g", memory.Bounds{}).Advance(ctx, "a", "f2", 3, "", exp, 2)
			return err
		}},
		{"generations.advance (reused)", func() error {
			_, err := s.Generations("t.g", memory.Bounds{}).Advance(ctx, "a", "f2", 3, "", exp, 2)
			return err
		}},
	}
	for _, st := range steps {
		if err := st.f(); err != nil {
			t.Errorf("%s as the least-privilege user: %v", st.name, err)
		}
	}
	if !s.Status().Up {
		t.Fatalf("status %+v", s.Status())
	}
	opts, _ := redis.ParseURL(srv.URL(2))
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.FlushAll(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("FLUSHALL as the gateway's user: %v, want NOPERM", err)
	}
	if err := c.Set(ctx, "other:key", "1", time.Minute).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("a key outside mmcp:*: %v, want NOPERM", err)
	}
}
