package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	if rr.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rr.Code)
	}
	return rr.Body.String()
}

// A nil *Metrics (METRICS_ADDR unset) records nothing and never panics.
func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	m.KnownTools("a_b")
	m.ToolCall("a_b", "ok", time.Second)
	m.ObserveConnect("imap", StepDial, time.Second, nil)
	m.OAuth("token", "ok")
	m.WatchPool(1, func() pool.Stats { return pool.Stats{} }, nil)
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	if got := m.HTTP(h); got == nil {
		t.Fatal("HTTP on nil returned nil")
	}
}

// Label values come from fixed sets: whatever a caller passes that is not
// in the set (a user name, a folder, a token) becomes "other".
func TestLabelsOnlyFromFixedSets(t *testing.T) {
	m := New("test")
	m.KnownTools("imap_list_folders")
	secret := "alice@example.org"
	m.ToolCall("imap_list_folders", "ok", 10*time.Millisecond)
	m.ToolCall(secret, secret, time.Millisecond)
	m.ObserveConnect(secret, StepLogin, time.Millisecond, errors.New(secret))
	m.ObserveConnect("imap", StepLogin, time.Millisecond, mailerr.New(mailerr.Auth, secret))
	m.ObserveConnect("smtp", StepDial, time.Millisecond, &mailerr.Error{Kind: mailerr.Unavailable, Msg: secret, Cause: secret})
	m.OAuth(secret, secret)
	out := scrape(t, m)
	if strings.Contains(out, secret) {
		t.Fatalf("a caller's value reached a label:\n%s", out)
	}
	for _, want := range []string{
		`mailbox_mcp_tool_calls_total{outcome="ok",tool="imap_list_folders"} 1`,
		`mailbox_mcp_tool_calls_total{outcome="other",tool="other"} 1`,
		`mailbox_mcp_mail_logins_total{protocol="other",result="internal"} 1`,
		`mailbox_mcp_mail_logins_total{protocol="imap",result="auth"} 1`,
		`mailbox_mcp_mail_dials_total{protocol="smtp",result="other"} 1`,
		`mailbox_mcp_oauth_events_total{event="other",outcome="other"} 1`,
		`mailbox_mcp_oauth_events_total{event="refresh",outcome="refused"} 0`,
		`mailbox_mcp_tool_call_duration_seconds_bucket{tool="imap_list_folders",le="0.01"} 1`,
		`mailbox_mcp_build_info{version="test"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
}

// The pool's figures are read at scrape time.
func TestPoolReadAtScrape(t *testing.T) {
	m := New("test")
	s := pool.Stats{Opened: 3, BusyErrors: 2, Idle: 1, InUse: 2, Waiting: 4}
	waiters := 0
	m.WatchPool(10, func() pool.Stats { return s }, func() int { return waiters })
	waiters = 5
	out := scrape(t, m)
	for _, want := range []string{
		`mailbox_mcp_pool_connections{state="idle"} 1`, `mailbox_mcp_pool_connections{state="in_use"} 2`,
		`mailbox_mcp_pool_max_connections 10`, `mailbox_mcp_pool_waiting 4`,
		`mailbox_mcp_pool_events_total{event="opened"} 3`, `mailbox_mcp_pool_events_total{event="busy"} 2`,
		`mailbox_mcp_waiters 5`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
}

// Responses are counted by the status the handler wrote, 200 when it
// wrote none.
func TestHTTPCountsStatus(t *testing.T) {
	m := New("test")
	h := m.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/401":
			w.WriteHeader(http.StatusUnauthorized)
		case "/body":
			io.WriteString(w, "x")
		}
	}))
	for _, p := range []string{"/401", "/401", "/body", "/none"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", p, nil))
	}
	out := scrape(t, m)
	for _, want := range []string{`mailbox_mcp_http_responses_total{code="401"} 2`, `mailbox_mcp_http_responses_total{code="200"} 2`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
}

// The metrics follow Prometheus' naming conventions (promlint).
func TestMetricsLint(t *testing.T) {
	m := New("test")
	m.WatchPool(1, func() pool.Stats { return pool.Stats{} }, func() int { return 0 })
	problems, err := testutil.GatherAndLint(m.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, namespace) {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

// The shared memory's series: operations by op and result (labels from
// the fixed sets WatchRedis was given), their latency, and redis_up read
// at scrape time. Without WatchRedis nothing is recorded.
func TestRedisSeries(t *testing.T) {
	m := New("test")
	m.ObserveMemory("once.use", "ok", time.Millisecond) // before WatchRedis: dropped
	if out := scrape(t, m); strings.Contains(out, "redis") {
		t.Fatalf("redis series without WatchRedis:\n%s", out)
	}
	up := true
	m.WatchRedis([]string{"once.use", "ping"}, []string{"timeout", "down"}, func() bool { return up })
	m.ObserveMemory("once.use", "ok", 300*time.Microsecond)
	m.ObserveMemory("once.use", "timeout", 200*time.Millisecond)
	m.ObserveMemory("once.use", "down", 0)
	m.ObserveMemory("alice@example.org", "alice@example.org", time.Millisecond)
	out := scrape(t, m)
	for _, want := range []string{
		`mailbox_mcp_redis_operations_total{op="once.use",result="ok"} 1`,
		`mailbox_mcp_redis_operations_total{op="once.use",result="timeout"} 1`,
		`mailbox_mcp_redis_operations_total{op="once.use",result="down"} 1`,
		`mailbox_mcp_redis_operations_total{op="other",result="other"} 1`,
		`mailbox_mcp_redis_operations_total{op="ping",result="ok"} 0`,
		`mailbox_mcp_redis_operation_duration_seconds_bucket{op="once.use",le="0.0005"} 1`,
		`mailbox_mcp_redis_operation_duration_seconds_count{op="once.use"} 2`,
		`mailbox_mcp_redis_up 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Contains(out, "alice") {
		t.Fatal("a caller's value reached a label")
	}
	up = false
	if out := scrape(t, m); !strings.Contains(out, "mailbox_mcp_redis_up 0") {
		t.Fatal("redis_up is not read at scrape time")
	}
	var nilM *Metrics
	nilM.WatchRedis(nil, nil, nil)
	nilM.ObserveMemory("once.use", "ok", time.Millisecond)
}
