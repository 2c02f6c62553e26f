package memory_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

// What a round trip to the shared memory costs, per operation and for
// the steps the gateway's flows will make (issue 38, phase 2), on
// loopback against redis-server, beside the in-process store:
//
//	go test -run '^$' -bench RoundTrip -benchtime 5000x ./internal/memory
//
// p50 and p99 are of single operations, one at a time.
func BenchmarkRoundTrip(b *testing.B) {
	for _, st := range []struct {
		name string
		make func(b *testing.B) memory.Store
	}{
		{"local", func(*testing.B) memory.Store { return memory.NewLocal(nil) }},
		{"redis", func(b *testing.B) memory.Store {
			return newRedis(b, redisServer(b), memory.RedisOptions{Timeout: time.Second})
		}},
	} {
		b.Run(st.name, func(b *testing.B) {
			s := st.make(b)
			once := s.Once("bench.once", memory.Bounds{Max: 10_000_000})
			counter := s.Counter("bench.counter", memory.Bounds{})
			bucket := s.Bucket("bench.bucket", memory.Bounds{})
			slots := s.Slots("bench.slots", memory.Bounds{Max: 10_000_000})
			gens := s.Generations("bench.gen", memory.Bounds{Max: 10_000_000})
			exp := time.Now().Add(time.Hour)
			rate := memory.Rate{PerMinute: 1e9, Burst: 1 << 30}
			ops := []struct {
				name string
				op   func(ctx context.Context, i int) error
			}{
				{"once.use", func(ctx context.Context, i int) error {
					_, err := once.Use(ctx, "alice", strconv.Itoa(i), exp)
					return err
				}},
				{"counter.add", func(ctx context.Context, i int) error {
					_, err := counter.Add(ctx, "alice", 1, time.Minute)
					return err
				}},
				{"counter.get3", func(ctx context.Context, i int) error {
					_, err := counter.Get(ctx, "alice", "alice\x00203.0.113.7", "203.0.113.7")
					return err
				}},
				{"bucket.take", func(ctx context.Context, i int) error {
					_, err := bucket.Take(ctx, "alice", rate)
					return err
				}},
				{"slots.take+release", func(ctx context.Context, i int) error {
					if _, err := slots.Take(ctx, "alice", strconv.Itoa(i), exp, 1<<20); err != nil {
						return err
					}
					return slots.Release(ctx, "alice", strconv.Itoa(i))
				}},
				{"generations.advance", func(ctx context.Context, i int) error {
					_, err := gens.Advance(ctx, "alice", "fam", uint32(i), "", exp, 64)
					return err
				}},
				// The steps of the gateway's flows: a code exchanged at
				// /token (the sign-in limits by account and by address,
				// the code used once and the sign-in started in one
				// step); a refresh; an approval used (its nonce once, its
				// pending slot released); a login refused (the three
				// back-off counts and the proof read at once, two slots in
				// progress, the failures counted and the block raised).
				{"flow.token_exchange", func(ctx context.Context, i int) error {
					id := strconv.Itoa(i)
					if _, err := bucket.Take(ctx, "addr:203.0.113.7", rate); err != nil {
						return err
					}
					if _, err := bucket.Take(ctx, "acct:alice", rate); err != nil {
						return err
					}
					_, err := gens.Start(ctx, "acct"+id, "f"+id, time.Now().Add(time.Minute), exp, 64) // an account's codes fill its share
					return err
				}},
				{"flow.refresh", func(ctx context.Context, i int) error {
					if _, err := bucket.Take(ctx, "addr:203.0.113.7", rate); err != nil {
						return err
					}
					if _, err := bucket.Take(ctx, "acct:alice", rate); err != nil {
						return err
					}
					_, err := gens.Advance(ctx, "alice", "refresh-fam", uint32(i), "", exp, 64)
					return err
				}},
				{"flow.approval_used", func(ctx context.Context, i int) error {
					id := strconv.Itoa(i)
					if _, err := once.Use(ctx, "alice", "approval"+id, exp); err != nil {
						return err
					}
					return slots.Release(ctx, "alice", "approval"+id)
				}},
				{"flow.login_refused", func(ctx context.Context, i int) error {
					id := strconv.Itoa(i)
					if _, err := counter.Get(ctx, "proof", "f:pair", "b:pair", "f:acct", "b:acct", "f:addr", "b:addr"); err != nil {
						return err
					}
					for _, k := range []string{"pair", "acct"} {
						if _, err := slots.Take(ctx, k, id, exp, 1<<20); err != nil {
							return err
						}
					}
					for _, k := range []string{"pair", "acct", "addr"} {
						if _, err := counter.Add(ctx, "f:"+k, 1, time.Minute); err != nil {
							return err
						}
					}
					if _, err := counter.Raise(ctx, "b:pair", time.Now().UnixMilli(), time.Minute); err != nil {
						return err
					}
					for _, k := range []string{"pair", "acct"} {
						if err := slots.Release(ctx, k, id); err != nil {
							return err
						}
					}
					return nil
				}},
			}
			for _, op := range ops {
				b.Run(op.name, func(b *testing.B) {
					took := make([]time.Duration, 0, b.N)
					ctx := context.Background()
					b.ResetTimer()
					for i := range b.N {
						start := time.Now()
						if err := op.op(ctx, i); err != nil {
							b.Fatal(err)
						}
						took = append(took, time.Since(start))
					}
					b.StopTimer()
					slices.Sort(took)
					b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "p50-µs")
					b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds())/1e3, "p99-µs")
				})
			}
		})
	}
}

// How much Redis memory a sign-in and a pending approval take, measured on redis-server (INFO memory's used_memory
// before and after 10,000 of them, each for an account of its own: the
// worst case; and 10,000 more for one account) and MEMORY USAGE of each
// key:
//
//	go test -run '^$' -bench Footprint -benchtime 1x ./internal/memory
func BenchmarkFootprint(b *testing.B) {
	srv := redisServer(b)
	const n = 10_000
	measure := func(b *testing.B, db int, fill func(s memory.Store, i int) error) float64 {
		s := newRedis(b, srv, memory.RedisOptions{URL: srv.URL(db), Timeout: time.Second})
		raw := rawClientB(b, srv.URL(db))
		raw.FlushDB(ctx)
		before := usedMemory(b, raw)
		for i := range n {
			if err := fill(s, i); err != nil {
				b.Fatal(err)
			}
		}
		used := float64(usedMemory(b, raw)-before) / n
		var sizes []string
		seen := map[string]bool{}
		for _, k := range raw.Keys(ctx, "*").Val() {
			kind := k[:strings.LastIndex(k, ":")]
			if seen[kind] {
				continue
			}
			seen[kind] = true
			sizes = append(sizes, fmt.Sprintf("%s %d B", kind, raw.MemoryUsage(ctx, k).Val()))
		}
		slices.Sort(sizes)
		b.Logf("%.0f bytes each (used_memory); MEMORY USAGE of one key of each kind: %s", used, strings.Join(sizes, ", "))
		raw.FlushDB(ctx)
		return used
	}
	exp := time.Now().Add(30 * 24 * time.Hour)
	// A sign-in while its code counts (a minute after the exchange: the
	// code's start is remembered too), and for the rest of its life
	// (the start gone: what 30 days of sign-ins cost).
	signInOf := func(codeLife time.Duration) func(account func(i int) string) func(s memory.Store, i int) error {
		return func(account func(i int) string) func(s memory.Store, i int) error {
			return func(s memory.Store, i int) error {
				start := time.Time{}
				if codeLife > 0 {
					start = time.Now().Add(codeLife)
				}
				_, err := s.Generations("oauth.families", memory.Bounds{}).Start(ctx, account(i), "family-"+strconv.Itoa(i), start, exp, 1<<20)
				return err
			}
		}
	}
	signIn, signedIn := signInOf(10*time.Minute), signInOf(0)
	approval := func(account func(i int) string) func(s memory.Store, i int) error {
		return func(s memory.Store, i int) error {
			_, err := s.Slots("approval.pending", memory.Bounds{}).Take(ctx, account(i), "nonce-"+strconv.Itoa(i), time.Now().Add(30*time.Minute), 1<<20)
			return err
		}
	}
	own := func(i int) string { return fmt.Sprintf("user%d@example.test", i) }
	one := func(int) string { return "alice@example.test" }
	b.Run("signin_own_account", func(b *testing.B) { b.ReportMetric(measure(b, 11, signIn(own)), "bytes/signin") })
	b.Run("signin_same_account", func(b *testing.B) { b.ReportMetric(measure(b, 11, signIn(one)), "bytes/signin") })
	b.Run("signed_in_own_account", func(b *testing.B) { b.ReportMetric(measure(b, 11, signedIn(own)), "bytes/signin") })
	b.Run("signed_in_same_account", func(b *testing.B) { b.ReportMetric(measure(b, 11, signedIn(one)), "bytes/signin") })
	b.Run("pending_approval_own_account", func(b *testing.B) { b.ReportMetric(measure(b, 11, approval(own)), "bytes/approval") })
	b.Run("pending_approval_same_account", func(b *testing.B) { b.ReportMetric(measure(b, 11, approval(one)), "bytes/approval") })
	b.Run("approval_used", func(b *testing.B) {
		b.ReportMetric(measure(b, 11, func(s memory.Store, i int) error {
			_, err := s.Once("approval.used", memory.Bounds{}).Use(ctx, own(i), "nonce-"+strconv.Itoa(i), time.Now().Add(30*time.Minute))
			return err
		}), "bytes/approval")
	})
}
