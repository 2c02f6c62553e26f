package main

import (
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPickToolFollowsTheMix(t *testing.T) {
	got := map[string]int{}
	const n = 100000
	for i := range n {
		got[pickTool(float64(i)/n)]++
	}
	for _, m := range usersMix {
		if share := float64(got[m.tool]) / n; math.Abs(share-m.share) > 0.001 {
			t.Errorf("%s: share %.3f, want %.3f", m.tool, share, m.share)
		}
	}
	if tool := pickTool(0.999999); tool != usersMix[len(usersMix)-1].tool {
		t.Errorf("pickTool near 1 = %s", tool)
	}
}

// The distribution the run draws from: a few hot users, most cold.
func TestZipfShares(t *testing.T) {
	const n = 10000
	rng := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(rng, usersZipfS, 1, n-1)
	calls := make([]int, n)
	for range 200000 {
		calls[z.Uint64()]++
	}
	top1, top10, topPool, distinct := zipfShares(calls)
	// Σ k^-1.1 over 1..10,000 is about 6.6: the hottest gets 1/6.6.
	if top1 < 0.13 || top1 > 0.17 {
		t.Errorf("hottest user: %.3f of the calls, want about 0.15", top1)
	}
	if top10 < 0.4 || top10 > 0.55 || topPool < 0.65 || topPool > 0.8 || topPool <= top10 {
		t.Errorf("top 10: %.3f, top %d: %.3f", top10, usersPool, topPool)
	}
	if distinct < 3000 || distinct > n {
		t.Errorf("%d users called", distinct)
	}
	if a, b, c, d := zipfShares(make([]int, 5)); a != 0 || b != 0 || c != 0 || d != 0 {
		t.Errorf("no calls: %v %v %v %v", a, b, c, d)
	}
}

func TestUsersInboxMsgs(t *testing.T) {
	date := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	msgs := usersInboxMsgs("u00001@example.test", date)
	if len(msgs) != usersInbox {
		t.Fatalf("%d messages, want %d", len(msgs), usersInbox)
	}
	carol := 0
	for i, raw := range msgs {
		m, err := mail.ReadMessage(strings.NewReader(string(raw)))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		from, err := mail.ParseAddress(m.Header.Get("From"))
		if err != nil {
			t.Fatalf("message %d: From: %v", i, err)
		}
		if from.Address == usersSearchAt {
			carol++
		}
		if m.Header.Get("To") != "<u00001@example.test>" {
			t.Errorf("message %d: To %q", i, m.Header.Get("To"))
		}
	}
	if carol != 1 { // usersOp's search wants exactly one match
		t.Errorf("%d messages from %s, want 1", carol, usersSearchAt)
	}
	if usersReadUID < 1 || usersReadUID > usersInbox {
		t.Errorf("usersReadUID %d is not a UID of a %d-message INBOX", usersReadUID, usersInbox)
	}
}

func TestAsUserSetsTheCurrentUser(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("x-imap-user")+"/"+r.Header.Get("x-imap-pass")+"/"+r.Header.Get("X-Request-Id"))
	}))
	defer srv.Close()
	as := &asUser{base: http.DefaultTransport}
	c := &http.Client{Transport: as}
	for _, i := range []int{0, 42} {
		as.set(usersName(i), usersPass(i), map[int]string{42: "users-2-0-7"}[i])
		req, _ := http.NewRequest("POST", srv.URL, nil)
		req.Header.Set("x-imap-user", "someone-else")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if req.Header.Get("x-imap-user") != "someone-else" {
			t.Error("RoundTrip changed the caller's request")
		}
	}
	want := []string{"u00000@example.test/pw00000/", "u00042@example.test/pw00042/users-2-0-7"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("server saw %v, want %v", got, want)
	}
}

func TestSplitByLogin(t *testing.T) {
	log := `{"time":"2026-11-27T02:11:33Z","level":"DEBUG","msg":"evicted idle connection","component":"pool","key":"ab12cd34…","request_id":"users-2-0-1"}
{"time":"2026-11-27T02:11:33Z","level":"DEBUG","msg":"dialled","component":"pool","key":"ab12cd34…","before_ms":0.2,"dial_ms":12.5,"ok":true,"request_id":"users-2-0-1"}
{"time":"2026-11-27T02:11:33Z","level":"INFO","msg":"request","component":"http","duration_ms":14,"request_id":"users-2-0-1"}
{"time":"2026-11-27T02:11:33Z","level":"DEBUG","msg":"dialled","component":"pool","key":"ef56ab78…","before_ms":0.1,"dial_ms":30,"ok":true,"request_id":"users-1-3-9"}
`
	path := filepath.Join(t.TempDir(), "gateway.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := []idLatency{{"users-2-0-0", 3 * time.Millisecond}, {"users-2-0-1", 20 * time.Millisecond}, {"users-2-0-2", 5 * time.Millisecond}}
	in, pooled, dials, err := splitByLogin(path, ok)
	if err != nil {
		t.Fatal(err)
	}
	if in.Calls != 1 || in.P50() != 20*time.Millisecond {
		t.Errorf("logged in: %d calls, p50 %v; want 1, 20ms", in.Calls, in.P50())
	}
	if pooled.Calls != 2 || pooled.P99() != 5*time.Millisecond {
		t.Errorf("pooled: %d calls, p99 %v; want 2, 5ms", pooled.Calls, pooled.P99())
	}
	if dials.Calls != 1 || dials.P50() != 12500*time.Microsecond {
		t.Errorf("dials: %d, p50 %v; want 1, 12.5ms (the warm-up's dial not counted)", dials.Calls, dials.P50())
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP mailbox_mcp_pool_connections IMAP connections of the pool by state.
# TYPE mailbox_mcp_pool_connections gauge
mailbox_mcp_pool_connections{state="idle"} 250
mailbox_mcp_pool_connections{state="in_use"} 6
mailbox_mcp_pool_events_total{event="opened"} 1.234e+06
mailbox_mcp_pool_max_connections 256
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := poolConns(m); got != 256 {
		t.Errorf("poolConns = %d, want 256", got)
	}
	if got := m[`mailbox_mcp_pool_events_total{event="opened"}`]; got != 1234000 {
		t.Errorf("opened = %v", got)
	}
	if got := m["mailbox_mcp_pool_max_connections"]; got != 256 {
		t.Errorf("max = %v", got)
	}
}

func TestParseMemStats(t *testing.T) {
	text := `heap profile: 1: 2 [3: 4] @ heap/1048576
# runtime.MemStats
# Alloc = 9000000
# HeapInuse = 11000000
# HeapReleased = 500000
# Stack = 1048576 / 1048576
# MSpan = 200 / 300
# PauseNs = [1 2 3]
# NumGC = 12
`
	m, err := parseMemStats(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]int64{"HeapInuse": 11000000, "StackInuse": 1048576, "StackSys": 1048576, "HeapReleased": 500000, "NumGC": 12} {
		if m[k] != want {
			t.Errorf("%s = %d, want %d", k, m[k], want)
		}
	}
	if _, err := parseMemStats(strings.NewReader("no stats\n")); err == nil {
		t.Error("no MemStats: no error")
	}
}

func TestParseMachineCPU(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	got := parseMachineCPU("cpu  100 5 50 1000 30 2 3 0 40 0")
	if want := 160 * time.Second / 100; got != want {
		t.Errorf("busy = %v, want %v (idle, iowait and guest left out)", got, want)
	}
	if parseMachineCPU("cpu0 1 2 3 4 5") != 0 {
		t.Error("a per-CPU line counted")
	}
}

func TestIdlePerConn(t *testing.T) {
	m := idleMem{conns: 101, rss: [4]int64{1000, 2000, 1500, 2510}}
	// fresh held one connection: 100 more
	if got := m.perConn(m.rss, 1, 0, 1); got != 10 {
		t.Errorf("fresh → full: %v, want 10", got)
	}
	if got := m.perConn(m.rss, 3, 2, 1); got != 10 {
		t.Errorf("none → full: %v, want 10", got)
	}
	if got := (idleMem{}).perConn([4]int64{}, 3, 2, 1); got != 0 {
		t.Errorf("no connections: %v", got)
	}
}

// An imap process that exits moves its CPU from the live processes to its
// master's reaped children: both are "imap", so the delta holds only what
// was spent in between.
func TestCPUDelta(t *testing.T) {
	a := map[string]time.Duration{"imap": 10 * time.Second, "auth": time.Second}
	b := map[string]time.Duration{"imap": 12 * time.Second, "auth": 3 * time.Second, "imap-login": time.Second}
	d, total := cpuDelta(a, b)
	if d["imap"] != 2*time.Second || d["auth"] != 2*time.Second || d["imap-login"] != time.Second || total != 5*time.Second {
		t.Errorf("delta %v, total %v", d, total)
	}
}
