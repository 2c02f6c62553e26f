package tests

// Waits wake on servers whose IDLE does not push: Cyrus without idled
// (Debian's cyrus.conf runs none) and Courier with its defaults
// (IMAP_ENHANCEDIDLE=0, IMAP_IDLE_TIMEOUT=60) report new mail in IDLE only
// on their own 60 s poll. With WAIT_RECHECK the gateway looks itself: 20
// deliveries each, p50 and max from the APPEND's answer to the wait's
// ≤ WAIT_RECHECK + 1 s.
//
// CI runs it with WAIT_RECHECK=2s (TEST_WAKE_RECHECK sets another, e.g.
// the default 10s for docs/benchmarks.md).

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

func TestWakeUpWithoutPushingIdle(t *testing.T) {
	recheck := 2 * time.Second
	if v := os.Getenv("TEST_WAKE_RECHECK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		recheck = d
	}
	const deliveries = 20
	for _, kind := range []mailtest.Kind{mailtest.Cyrus, mailtest.Courier} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			s := mailtest.StartIMAP(t, kind, nil)
			srv := plainServer(string(kind), s.Addr(), mailstack.ServerAlice, mailstack.ServerAlicePassword)
			g := startGatewayEnv(t, append(srv.env, "WAIT_RECHECK="+recheck.String())...)
			c := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": srv.user, "x-imap-pass": srv.pass}, "")
			since := uint32(0)
			if uids := searchUIDs(t, srv.dial(t), "INBOX", &imap.SearchCriteria{}); len(uids) > 0 {
				since = uint32(uids[len(uids)-1])
			}
			d := srv.dial(t) // delivers: a connection with no folder open (Courier refuses APPEND to one it has EXAMINEd)
			var lat []time.Duration
			for i := range deliveries {
				type result struct {
					out map[string]any
					err error
					at  time.Time
				}
				done := make(chan result, 1)
				go func() {
					res, err := mailtest.CallErr(c, "imap_wait_for_email", map[string]any{"since_uid": since, "timeout_s": int(recheck.Seconds()) + 30})
					r := result{err: err, at: time.Now()}
					if err == nil {
						r.err = mailtest.DecodeErr(res, &r.out)
					}
					done <- r
				}()
				// Somewhere in the re-check's cycle: the wait is in IDLE by
				// then (a message that came before it would be returned at
				// once, and count as fast).
				time.Sleep(300*time.Millisecond + time.Duration(i)*recheck/deliveries)
				raw := fmt.Sprintf("From: wake@example.org\r\nSubject: wake %d\r\nMessage-ID: <wake%d.%d@example.org>\r\n\r\nwake\r\n", i, i, time.Now().UnixNano())
				uid := appendUID(t, d, "INBOX", []byte(raw), nil, time.Time{})
				sent := time.Now()
				r := <-done
				if r.err != nil {
					t.Fatal(r.err)
				}
				if got := uidsOf(r.out["messages"]); !slices.Equal(got, []imap.UID{uid}) {
					t.Fatalf("delivery %d: the wait returned %v (timed_out %v), want [%d]", i, got, r.out["timed_out"], uid)
				}
				lat = append(lat, r.at.Sub(sent))
				since = uint32(uid)
			}
			slices.Sort(lat)
			p50, worst := lat[len(lat)/2], lat[len(lat)-1]
			limit := recheck + time.Second
			t.Run(fmt.Sprintf("WAIT_RECHECK_%v_p50_%.2fs_max_%.2fs_over_%d_deliveries", recheck, p50.Seconds(), worst.Seconds(), deliveries), func(t *testing.T) {
				if p50 > limit || worst > limit {
					t.Errorf("p50 %v, max %v; want both ≤ %v", p50, worst, limit)
				}
			})
		})
	}
}
