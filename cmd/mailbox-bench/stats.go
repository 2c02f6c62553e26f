package main

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// result is one cell of the table: a tool (or IMAP command set) measured at
// one concurrency on one mailbox.
type result struct {
	Calls  int
	Errors int
	Err    error // the first error, for the report
	Wall   time.Duration
	CPU    time.Duration // the gateway process's CPU time during the cell (0: not taken)
	// ClientCPU is the client process's CPU time during the cell, where
	// the client is a process of its own (the TypeScript SDK's Node).
	ClientCPU time.Duration
	lat       []time.Duration
}

func (r *result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	s := slices.Clone(r.lat)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// addCall adds one call that took d to r and says whether it succeeded.
func (r *result) addCall(d time.Duration, err error) bool {
	r.Wall += d
	r.Calls++
	if err != nil {
		r.Errors++
		if r.Err == nil {
			r.Err = err
		}
		return false
	}
	r.lat = append(r.lat, d)
	return true
}

func (r *result) P50() time.Duration { return r.pct(50) }
func (r *result) P95() time.Duration { return r.pct(95) }
func (r *result) P99() time.Duration { return r.pct(99) }

// Rate is completed calls per second of wall time.
func (r *result) Rate() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(len(r.lat)) / r.Wall.Seconds()
}

func (r *result) String() string {
	if r == nil {
		return "not measured"
	}
	s := fmt.Sprintf("n=%d p50=%s p95=%s p99=%s %.0f/s", len(r.lat), ms(r.P50()), ms(r.P95()), ms(r.P99()), r.Rate())
	if r.CPU > 0 {
		s += fmt.Sprintf(" gateway-cpu/call=%s", ms(r.CPUPerCall()))
	}
	if r.Errors > 0 {
		s += fmt.Sprintf(" ERRORS=%d (%v)", r.Errors, r.Err)
	}
	return s
}

// CPUPerCall is the gateway's CPU time per call of the cell.
func (r *result) CPUPerCall() time.Duration {
	if r.Calls == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Calls)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

// budget bounds a cell: at most n calls, and no more started after max.
type budget struct {
	n   int
	max time.Duration
}

// run calls fn from c workers until b is spent and records each call's
// latency. fn gets the worker number and must return nil only for a correct
// answer: a wrong answer counts as an error.
func run(c int, b budget, fn func(worker int) error) *result {
	var (
		mu      sync.Mutex
		res     = &result{}
		started atomic.Int64
		wg      sync.WaitGroup
	)
	deadline := time.Now().Add(b.max)
	t0 := time.Now()
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for started.Add(1) <= int64(b.n) && time.Now().Before(deadline) {
				t := time.Now()
				err := fn(w)
				d := time.Since(t)
				mu.Lock()
				res.Calls++
				if err != nil {
					res.Errors++
					if res.Err == nil {
						res.Err = err
					}
				} else {
					res.lat = append(res.lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Wall = time.Since(t0)
	return res
}

// runPair alternates a and b on one goroutine, so that both see the same
// machine load: the ratio of the two is what matters.
func runPair(b budget, fa, fb func() error) (*result, *result) {
	return runPairLat(b, timed(fa), timed(fb))
}

// timed makes fn report its own latency, for runPairLat.
func timed(fn func() error) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		t := time.Now()
		err := fn()
		return time.Since(t), err
	}
}

// runPairLat is runPair for sides that report each call's latency
// themselves (the SDK's is measured in Node): it alternates a and b on one
// goroutine, and a side's Wall is the sum of its calls' latencies, so its
// Rate is what a client calling in a loop gets.
func runPairLat(b budget, fa, fb func() (time.Duration, error)) (*result, *result) {
	ra, rb := &result{}, &result{}
	deadline := time.Now().Add(b.max)
	one := func(r *result, fn func() (time.Duration, error)) {
		d, err := fn()
		r.addCall(d, err)
	}
	for i := 0; i < b.n && time.Now().Before(deadline); i++ {
		if i%2 == 0 {
			one(ra, fa)
			one(rb, fb)
		} else {
			one(rb, fb)
			one(ra, fa)
		}
	}
	return ra, rb
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
