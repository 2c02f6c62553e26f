package guard

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

// What the back-off adds to a login, in this process's memory and in
// Redis on loopback (the mail server's own login, 10 ms and more, comes
// on top):
//
//	go test -run '^$' -bench Login -benchtime 2000x ./internal/guard
//
// first: a credential never proven (the counts read, two logins in
// progress taken and given back, the proof recorded); proven: one that
// logged in before (the counts read, the proof renewed); refused: a wrong
// password (the three failure counts too).
func BenchmarkLogin(b *testing.B) {
	srv := mailtest.StartRedis(b, mailtest.RedisOptions{})
	for _, st := range []struct {
		name string
		make func(b *testing.B) memory.Store
	}{
		{"local", func(*testing.B) memory.Store { return memory.NewLocal(nil) }},
		{"redis", func(b *testing.B) memory.Store {
			r, err := memory.NewRedis(memory.RedisOptions{URL: srv.URL(0), Key: []byte(b.Name()), Timeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { r.Close() })
			return r
		}},
	} {
		b.Run(st.name, func(b *testing.B) {
			g := New(Config{FailuresPerUser: 5, FailuresPerAccount: 50, FailuresPerAddress: 1 << 30, Memory: st.make(b)})
			ctx := WithClientAddr(bg, "192.0.2.1")
			proven := credentials.New("proven@x", "right")
			if l, err := g.BeginLogin(ctx, proven); err == nil {
				l.Succeeded(ctx)
			}
			for _, flow := range []struct {
				name string
				run  func(i int) error
			}{
				{"first", func(i int) error {
					l, err := g.BeginLogin(ctx, credentials.New(fmt.Sprintf("user%d@x", i), "right"))
					l.Succeeded(ctx)
					return err
				}},
				{"proven", func(i int) error {
					l, err := g.BeginLogin(ctx, proven)
					l.Succeeded(ctx)
					return err
				}},
				{"refused", func(i int) error {
					l, err := g.BeginLogin(ctx, credentials.New(fmt.Sprintf("guessed%d@x", i), "wrong"))
					l.Refused(ctx)
					return err
				}},
			} {
				b.Run(flow.name, func(b *testing.B) {
					took := make([]time.Duration, 0, b.N)
					for i := range b.N {
						start := time.Now()
						if err := flow.run(i); err != nil {
							b.Fatal(err)
						}
						took = append(took, time.Since(start))
					}
					slices.Sort(took)
					b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "p50-µs")
					b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds())/1e3, "p99-µs")
				})
			}
		})
	}
}
