package tests

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// imapConnections counts, from one `doveadm who -1` (one line per IMAP
// connection: user, service, PID, IP), the connections Dovecot holds now
// for each user (its lower-cased name: Dovecot's auth_username_format %Lu).
func imapConnections(t testing.TB, s *mailtest.Stack) map[string]int {
	t.Helper()
	out, err := s.Doveadm("who", "-1")
	if err != nil {
		t.Errorf("doveadm who: %v", err)
		return nil
	}
	n := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[1] == "imap" {
			n[f[0]]++
		}
	}
	return n
}

// percentile returns the p-th percentile (0..1) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// One account spelt 12 ways (the server folds case: %Lu) is one account
// for MAX_POOL_PER_USER: with 4 concurrent callers per spelling, Dovecot
// never holds more than 4 IMAP connections for it, and another user's calls
// meanwhile complete quickly.
func TestAccountSpellingsShareThePool(t *testing.T) {
	const (
		account     = "spell@example.test"
		other       = "other@example.test"
		perUser     = 4
		perSpelling = 4
		callsEach   = 8
	)
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{account: "spellpw", other: "otherpw"}})
	for _, u := range []string{account, other} {
		if err := s.Seed(u, 100, "INBOX"); err != nil {
			t.Fatal(err)
		}
	}
	g := startGateway(t, s, fmt.Sprintf("MAX_POOL_PER_USER=%d", perUser))
	spellings := []string{
		"spell@example.test", "SPELL@example.test", "Spell@Example.Test", "sPeLl@example.test",
		"SpElL@example.test", "spell@EXAMPLE.TEST", "SPELL@EXAMPLE.TEST", "spelL@example.test",
		"Spell@example.test", "spEll@example.test", "SPell@Example.test", "spell@Example.TEST",
	}
	if before := imapConnections(t, s); before[account] != 0 {
		t.Fatalf("Dovecot holds %d connections for %s before the test", before[account], account)
	}

	// Sample Dovecot's own view of the connections while the load runs.
	var peak, samples, busySamples atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			n := int64(imapConnections(t, s)[account])
			samples.Add(1)
			if n > 0 {
				busySamples.Add(1)
			}
			if n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()

	var failures atomic.Int64
	errs := make(chan string, len(spellings)*perSpelling*callsEach)
	var load sync.WaitGroup
	for _, sp := range spellings {
		for range perSpelling {
			c := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": sp, "x-imap-pass": "spellpw"}, "")
			load.Go(func() {
				for range callsEach {
					res, err := mailtest.CallErr(c, "imap_list_emails", map[string]any{"limit": 10})
					if err != nil || res.IsError {
						failures.Add(1)
						errs <- fmt.Sprintf("%s: %v %s", sp, err, mailtest.Text(res))
					}
				}
			})
		}
	}

	// Meanwhile the other user makes trivial calls, one after another.
	oc := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": other, "x-imap-pass": "otherpw"}, "")
	loadDone := make(chan struct{})
	go func() { load.Wait(); close(loadDone) }()
	var otherTimes []time.Duration
	for running := true; running; {
		select {
		case <-loadDone:
			running = false
		default:
		}
		start := time.Now()
		res := mailtest.Call(t, oc, "imap_list_folders", nil)
		otherTimes = append(otherTimes, time.Since(start))
		if res.IsError {
			t.Errorf("%s: %s", other, mailtest.Text(res))
		}
	}
	close(stop)
	<-sampled
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	st := g.App.PoolStats()
	t.Logf("%d spellings x %d callers x %d calls: %d failed; pool: opened %d reused %d evicted %d waited %d",
		len(spellings), perSpelling, callsEach, failures.Load(), st.Opened, st.Reused, st.Evicted, st.WaitedTotal)
	t.Logf("doveadm who: %d samples (%d with %s connected), at most %d IMAP connections for %s (MAX_POOL_PER_USER=%d)",
		samples.Load(), busySamples.Load(), account, peak.Load(), account, perUser)
	t.Logf("%s meanwhile: %d calls, p50 %v, max %v", other, len(otherTimes),
		percentile(otherTimes, 0.5).Round(time.Millisecond), percentile(otherTimes, 1).Round(time.Millisecond))
	if peak.Load() > perUser {
		t.Fatalf("Dovecot held %d connections for one account, MAX_POOL_PER_USER is %d", peak.Load(), perUser)
	}
	if busySamples.Load() < 3 || peak.Load() < 2 {
		t.Fatalf("only %d samples saw the account connected (at most %d at once): the load did not reach the server while sampling", busySamples.Load(), peak.Load())
	}
	// Before the fix such calls took 10-30 s. The bounds leave room for a
	// loaded machine (a run beside other tests saw p50 2 ms, max 2.9 s).
	if p50, max := percentile(otherTimes, 0.5), percentile(otherTimes, 1); p50 > 200*time.Millisecond || max > 5*time.Second {
		t.Fatalf("another user's calls took p50 %v, max %v while one account was spelt 12 ways", p50, max)
	}
}
