package main

// -users N (issue 27): many accounts, few of them hot. The mail stack gets
// N accounts with a small INBOX each (written straight into the Maildirs),
// one gateway child per round trip (0 ms: straight to Dovecot; 20 ms:
// through rttproxy) with MAX_POOL_SIZE=256, and 32 callers make read calls
// for users drawn from a Zipf distribution. Then a gateway with 256 idle
// pooled connections against one with none says what an idle connection
// costs.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mcpcall"
	"github.com/mailbox-mcp/mailbox-mcp/internal/rttproxy"
)

const (
	usersBeginMarker = "<!-- BEGIN USERS (written by mailbox-bench -users) -->"
	usersEndMarker   = "<!-- END USERS -->"

	usersCallers  = 32   // concurrent callers
	usersPool     = 256  // MAX_POOL_SIZE of the gateway under test
	usersBigPool  = 1024 // a bigger pool, at 0 ms: what it buys
	usersZipfS    = 1.1  // P(rank k) ∝ (1+k)^-s: about 15% of calls for the hottest user at 10,000
	usersInbox    = 3    // messages in each INBOX
	usersReadUID  = 2    // the message imap_read_email reads
	usersSearchAt = "carol@example.org"
	usersIdleWait = 15 * time.Second // POOL_IDLE_TIMEOUT of the idle-memory gateway
	usersWarmUp   = 10 * time.Second
)

// usersMix is the share of each tool among the calls, in order; the rest
// of 1 after the last share goes to the last tool.
var usersMix = []struct {
	tool  string
	share float64
}{{toolList, 0.7}, {toolSearch, 0.15}, {toolRead, 0.15}}

// pickTool maps a uniform x in [0, 1) onto usersMix.
func pickTool(x float64) string {
	for _, m := range usersMix {
		if x < m.share {
			return m.tool
		}
		x -= m.share
	}
	return usersMix[len(usersMix)-1].tool
}

// usersName and usersPass are account i's (0-based: rank i in the Zipf
// distribution, 0 the hottest).
func usersName(i int) string { return fmt.Sprintf("u%05d@example.test", i) }
func usersPass(i int) string { return fmt.Sprintf("pw%05d", i) }

// usersInboxMsgs are the messages of every INBOX: UID 1 from Carol (the
// search finds it), UID 2 a short text to read.
func usersInboxMsgs(user string, date time.Time) [][]byte {
	froms := []string{"Carol Example <" + usersSearchAt + ">", "Dave Example <dave@example.org>", "Erin Example <erin@example.org>"}
	var msgs [][]byte
	for i := range usersInbox {
		msgs = append(msgs, fmt.Appendf(nil, "From: %s\r\nTo: <%s>\r\nSubject: Message %d for %s\r\nDate: %s\r\nMessage-ID: <users.%d.%s>\r\n"+
			"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s",
			froms[i%len(froms)], user, i+1, user, date.Add(time.Duration(i)*time.Minute).Format(time.RFC1123Z), i, user, sendBody))
	}
	return msgs
}

// usersOp is one checked call of tool for the user the client's headers
// name now.
func usersOp(c *client.Client, tool string) error {
	switch tool {
	case toolList:
		p, err := call(c, tool, map[string]any{})
		if err != nil {
			return err
		}
		if got, total := len(list(p, "messages")), num(p, "total"); got != usersInbox || total != usersInbox {
			return fmt.Errorf("list: %d messages of %d, want %d of %d", got, total, usersInbox, usersInbox)
		}
	case toolSearch:
		p, err := call(c, tool, map[string]any{"from": usersSearchAt})
		if err != nil {
			return err
		}
		if num(p, "matched") != 1 || len(list(p, "messages")) != 1 {
			return fmt.Errorf("search from %s: %d matched, want 1", usersSearchAt, num(p, "matched"))
		}
	case toolRead:
		m, err := call(c, tool, map[string]any{"uid": usersReadUID})
		if err != nil {
			return err
		}
		if text, _ := m["text"].(string); num(m, "uid") != usersReadUID || text == "" {
			return fmt.Errorf("read: uid %d, %d chars of text", num(m, "uid"), len(text))
		}
	default:
		return fmt.Errorf("the users run has no call for tool %s", tool)
	}
	return nil
}

// asUser is an HTTP transport that sends the credentials of the user set
// last: one MCP client (one HTTP connection) serves a caller whose every
// call is for another user, as a gateway behind a shared front end sees it.
// It also sends the request id set last (X-Request-Id), which the
// gateway's log lines of the call carry.
type asUser struct {
	base http.RoundTripper
	cred atomic.Pointer[[3]string]
}

func (a *asUser) set(user, pass, id string) { a.cred.Store(&[3]string{user, pass, id}) }

func (a *asUser) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	c := a.cred.Load()
	r.Header.Set("x-imap-user", c[0])
	r.Header.Set("x-imap-pass", c[1])
	if c[2] != "" {
		r.Header.Set("X-Request-Id", c[2])
	}
	return a.base.RoundTrip(r)
}

// usersCaller is one of the concurrent callers.
type usersCaller struct {
	c  *client.Client
	as *asUser
}

func newUsersCaller(url string) (*usersCaller, error) {
	as := &asUser{base: &http.Transport{MaxIdleConnsPerHost: 4}}
	as.set(usersName(0), usersPass(0), "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpcall.Connect(ctx, url, mcpcall.Options{
		HTTPClient: &http.Client{Transport: as, Timeout: 120 * time.Second},
		ClientName: "mailbox-bench-users",
	})
	if err != nil {
		return nil, err
	}
	return &usersCaller{c: c, as: as}, nil
}

// newUsersCallers connects usersCallers callers; the caller closes those
// made (closeCallers), also on an error.
func newUsersCallers(url string) ([]*usersCaller, error) {
	var callers []*usersCaller
	for range usersCallers {
		c, err := newUsersCaller(url)
		if err != nil {
			return callers, err
		}
		callers = append(callers, c)
	}
	return callers, nil
}

func closeCallers(callers []*usersCaller) {
	for _, c := range callers {
		c.c.Close()
	}
}

// call makes one call of tool for user i, under request id id.
func (u *usersCaller) call(i int, tool, id string) error {
	u.as.set(usersName(i), usersPass(i), id)
	return usersOp(u.c, tool)
}

// usersRun is one round trip's measured window.
type usersRun struct {
	rtt     time.Duration
	pool    int // MAX_POOL_SIZE
	window  time.Duration
	all     *result
	byTool  map[string]*result
	errs    map[string]int // first line of each error -> count
	calls   []int          // calls per user rank
	poolEv  map[string]float64
	rss     int64 // kB at the end of the window
	hwm     int64 // kB, the window's peak (reset at its start)
	poolMax int   // most pooled connections seen (sampled each second)
	poolEnd int
	imapMax int // most Dovecot imap processes seen
	imapEnd int
	imapRSS int64 // kB, mean VmRSS of an imap process at the end
	imapPss int64 // kB, mean proportional set size (shared pages divided among their users)
	gwCPU   time.Duration
	dcCPU   time.Duration            // Dovecot's processes (children reaped by its master included)
	dcProcs map[string]time.Duration // dcCPU by dovecotProcs
	selfCPU time.Duration            // this process (the callers, and rttproxy at 20 ms)
	busy    time.Duration            // the machine's CPU time, all processes
	// The successful calls split by whether the pool dialled for them
	// (logged in) or handed them a pooled connection, and the pool's
	// dials for the former (TCP, TLS, LOGIN), from the gateway's log.
	loggedIn, pooled, dials *result
}

// idleMem is what idle pooled connections cost the gateway.
type idleMem struct {
	conns     int // idle pooled connections in the full states
	imapProcs int // Dovecot imap processes then
	// imapSessions are the IMAP sessions doveadm who lists then: with
	// service_count > 1 a process that served a connection stays, idle,
	// for the next one until Dovecot's idle_kill ends it.
	imapSessions int
	// The gateway's RSS (kB) and Go heap and stacks in use (bytes), after a
	// GC: fresh (one connection), full (conns), empty again once the pool
	// closed them all, full again.
	rss, heap [4]int64
}

// perConn is (full - empty) / conns for a pair of states, in KB.
func (m idleMem) perConn(v [4]int64, full, empty int, unit float64) float64 {
	n := m.conns
	if empty == 0 {
		n-- // the fresh state holds one
	}
	if n <= 0 {
		return 0
	}
	return float64(v[full]-v[empty]) / unit / float64(n)
}

type usersReport struct {
	n          int
	args       string
	stackStart time.Duration
	seed       time.Duration
	index      time.Duration
	limits     []string // Dovecot's limits as doveconf reports them
	runs       []*usersRun
	idle       idleMem
	dcLog      map[string]int // Dovecot log lines about limits, warnings and errors
	started    time.Time
	finished   time.Time
}

func runUsers(o options) error {
	rep := &usersReport{n: o.users, args: o.args, started: time.Now(), dcLog: map[string]int{}}
	b := &bench{o: o}
	cleanup, err := b.prepare("mbench-users-")
	if err != nil {
		return err
	}
	defer cleanup()
	dir, key, bin := b.dir, b.key, b.bin
	users := make(map[string]string, o.users)
	for i := range o.users {
		users[usersName(i)] = usersPass(i)
	}
	logf("starting the mail stack with %d accounts", o.users)
	t := time.Now()
	st, err := mailstack.Start(mailstack.Options{Users: users})
	if err != nil {
		return err
	}
	defer st.Stop()
	rep.stackStart = time.Since(t)
	logf("  %.1f s", rep.stackStart.Seconds())

	logf("seeding %d INBOXes of %d messages", o.users, usersInbox)
	t = time.Now()
	if err := seedUsers(st, o.users); err != nil {
		return err
	}
	rep.seed = time.Since(t)
	logf("  %.1f s", rep.seed.Seconds())
	logf("indexing them (doveadm mailbox status, two at a time)")
	t = time.Now()
	if err := indexUsers(st, dir, o.users); err != nil {
		return err
	}
	rep.index = time.Since(t)
	logf("  %.1f s", rep.index.Seconds())
	rep.limits = dovecotLimits(st)

	for _, c := range []struct {
		rtt  time.Duration
		pool int
	}{{0, usersPool}, {20 * time.Millisecond, usersPool}, {0, usersBigPool}} {
		r, err := usersWindow(bin, dir, st, key, o, c.rtt, c.pool)
		if err != nil {
			return err
		}
		rep.runs = append(rep.runs, r)
		logf("  %s", r.all)
	}
	logf("idle pooled connections: %d against none", usersPool)
	if rep.idle, err = usersIdleMemory(bin, dir, st, key, o); err != nil {
		return err
	}
	rep.dcLog = dovecotLogLines(filepath.Join(st.Dir, "log", "dovecot.log"))
	rep.finished = time.Now()

	text := rep.markdown()
	fmt.Println(text)
	if o.out != "" {
		if err := writeResults(o.out, usersBeginMarker, usersEndMarker, text); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	var bad []string
	for _, r := range rep.runs {
		if r.all.Errors > 0 {
			bad = append(bad, fmt.Sprintf("%d of %d calls failed at %s round trip, pool %d", r.all.Errors, r.all.Calls, rttName(r.rtt), r.pool))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// seedUsers writes every INBOX, four users at a time.
func seedUsers(st *mailstack.Stack, n int) error {
	date := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	var next atomic.Int64
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					errs <- nil
					return
				}
				u := usersName(i)
				if err := st.WriteInbox(u, date, usersInboxMsgs(u, date)...); err != nil {
					next.Store(int64(n)) // the others stop too
					errs <- err
					return
				}
			}
		}()
	}
	var err error
	for range 4 {
		err = errors.Join(err, <-errs)
	}
	return err
}

// indexUsers has Dovecot index every INBOX now (as a mailbox in use would
// be), so that the runs measure logins and calls rather than first
// indexing: doveadm mailbox status over half the users each, two at once.
func indexUsers(st *mailstack.Stack, dir string, n int) error {
	errs := make(chan error, 2)
	for h := range 2 {
		var names strings.Builder
		for i := h; i < n; i += 2 {
			names.WriteString(usersName(i) + "\n")
		}
		file := filepath.Join(dir, fmt.Sprintf("index-users-%d", h))
		if err := os.WriteFile(file, []byte(names.String()), 0o644); err != nil {
			return err
		}
		go func() {
			_, err := st.Doveadm("mailbox", "status", "-F", file, "messages", "INBOX")
			errs <- err
		}()
	}
	return errors.Join(<-errs, <-errs)
}

func rttName(rtt time.Duration) string { return fmt.Sprintf("%d ms", rtt.Milliseconds()) }

// startUsersGateway starts a gateway with the pool of the users run and a
// metrics listener; rtt > 0 puts an rttproxy between it and Dovecot.
func startUsersGateway(bin, dir, name string, st *mailstack.Stack, key string, o options, rtt time.Duration, pool int, env ...string) (*gateway, string, *rttproxy.Proxy, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", nil, err
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", port)
	vars := append([]string{"MAX_POOL_SIZE=" + strconv.Itoa(pool), "METRICS_ADDR=" + metrics}, o.gwEnv...)
	var proxy *rttproxy.Proxy
	if rtt > 0 {
		if proxy, err = rttproxy.Start(st.IMAPSAddr(), rtt); err != nil {
			return nil, "", nil, err
		}
		vars = append(vars, "IMAP_PORT="+strconv.Itoa(proxy.Port())) // the last value wins
	}
	gw, err := startGateway(bin, dir, name, st, key, true, append(vars, env...)...)
	if err != nil {
		if proxy != nil {
			proxy.Close()
		}
		return nil, "", nil, err
	}
	return gw, "http://" + metrics + "/metrics", proxy, nil
}

// usersWindow measures one round trip: a warm-up that fills the pool, then
// the window, with the pool, the gateway's memory and Dovecot's processes
// sampled every second.
func usersWindow(bin, dir string, st *mailstack.Stack, key string, o options, rtt time.Duration, pool int) (*usersRun, error) {
	logf("%d callers, Zipf over %d users, %s round trip, MAX_POOL_SIZE=%d", usersCallers, o.users, rttName(rtt), pool)
	// At debug level the pool logs each dial under the call's request id:
	// two more lines for a call that logs in.
	gw, metricsURL, proxy, err := startUsersGateway(bin, dir, fmt.Sprintf("gateway-users-%dms-%d", rtt.Milliseconds(), pool), st, key, o, rtt, pool, "LOG_LEVEL=debug")
	if err != nil {
		return nil, err
	}
	defer func() {
		gw.stop()
		if proxy != nil {
			proxy.Close()
		}
	}()
	callers, err := newUsersCallers(gw.url)
	defer closeCallers(callers)
	if err != nil {
		return nil, err
	}
	dcPid, _ := strconv.Atoi(st.Env["MAILSTACK_DOVECOT_PID"])

	logf("  warm-up, %s", usersWarmUp)
	usersLoad(callers, o.users, usersWarmUp, 1)

	r := &usersRun{rtt: rtt, pool: pool, window: o.usersFor, calls: make([]int, o.users)}
	ev0, err := scrape(metricsURL)
	if err != nil {
		return nil, err
	}
	if err := gw.resetPeak(); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if m, err := scrape(metricsURL); err == nil {
				r.poolMax = max(r.poolMax, poolConns(m))
			}
			r.imapMax = max(r.imapMax, countProcs(dcPid, "imap"))
		}
	}()
	gw0, dc0, self0, busy0 := gw.cpu(), dovecotCPU(dcPid), procCPU(os.Getpid()), machineCPU()
	logf("  measuring, %s", o.usersFor)
	load := usersLoad(callers, o.users, o.usersFor, 2)
	r.gwCPU, r.selfCPU, r.busy = gw.cpu()-gw0, procCPU(os.Getpid())-self0, machineCPU()-busy0
	r.dcProcs, r.dcCPU = cpuDelta(dc0, dovecotCPU(dcPid))
	close(stop)
	<-sampled

	r.all, r.byTool, r.errs, r.calls = load.all, load.byTool, load.errs, load.calls
	if r.loggedIn, r.pooled, r.dials, err = splitByLogin(gw.logf.Name(), load.ok); err != nil {
		return nil, err
	}
	r.rss, _ = gw.status("VmRSS")
	r.hwm, _ = gw.status("VmHWM")
	ev1, err := scrape(metricsURL)
	if err != nil {
		return nil, err
	}
	r.poolEv = map[string]float64{}
	for _, e := range []string{"opened", "reused", "evicted", "expired", "revalidated", "waited", "busy", "discarded"} {
		k := `mailbox_mcp_pool_events_total{event="` + e + `"}`
		r.poolEv[e] = ev1[k] - ev0[k]
	}
	r.poolEnd = poolConns(ev1)
	r.imapEnd = countProcs(dcPid, "imap")
	r.imapRSS, r.imapPss = procsMem(dcPid, "imap")
	return r, nil
}

// usersLoadResult is what usersLoad measured.
type usersLoadResult struct {
	all    *result
	byTool map[string]*result
	errs   map[string]int
	calls  []int
	ok     []idLatency // the calls that succeeded
}

// idLatency is one call's request id and latency.
type idLatency struct {
	id  string
	lat time.Duration
}

// usersLoad runs the callers for d: each call is for a user drawn from the
// Zipf distribution and a tool drawn from usersMix. seed makes the draws
// repeatable.
func usersLoad(callers []*usersCaller, n int, d time.Duration, seed uint64) usersLoadResult {
	res := usersLoadResult{all: &result{}, byTool: map[string]*result{}, errs: map[string]int{}, calls: make([]int, n)}
	for _, m := range usersMix {
		res.byTool[m.tool] = &result{}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	t0 := time.Now()
	deadline := t0.Add(d)
	for w, c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			z := rand.NewZipf(rng, usersZipfS, 1, uint64(n-1))
			for k := 0; time.Now().Before(deadline); k++ {
				i, tool := int(z.Uint64()), pickTool(rng.Float64())
				id := fmt.Sprintf("users-%d-%d-%d", seed, w, k)
				t := time.Now()
				err := c.call(i, tool, id)
				lat := time.Since(t)
				mu.Lock()
				res.calls[i]++
				if err == nil {
					res.ok = append(res.ok, idLatency{id, lat})
				}
				for _, r := range []*result{res.all, res.byTool[tool]} {
					r.Calls++
					if err != nil {
						r.Errors++
						if r.Err == nil {
							r.Err = err
						}
					} else {
						r.lat = append(r.lat, lat)
					}
				}
				if err != nil {
					msg, _, _ := strings.Cut(err.Error(), "\n")
					res.errs[msg]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.all.Wall = time.Since(t0)
	for _, r := range res.byTool {
		r.Wall = res.all.Wall
	}
	return res
}

// splitByLogin splits the calls ok by whether the gateway's log at path
// has the pool's "dialled" line under their request id, and collects the
// time those dials took.
func splitByLogin(path string, ok []idLatency) (loggedIn, pooled, dials *result, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	dialled := map[string]time.Duration{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `"msg":"dialled"`) {
			continue
		}
		var l struct {
			ID     string  `json:"request_id"`
			DialMS float64 `json:"dial_ms"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.ID != "" {
			dialled[l.ID] = time.Duration(l.DialMS * float64(time.Millisecond))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, nil, err
	}
	loggedIn, pooled, dials = &result{}, &result{}, &result{}
	for _, c := range ok {
		r := pooled
		if d, ok := dialled[c.id]; ok {
			r = loggedIn
			dials.Calls++
			dials.lat = append(dials.lat, d)
		}
		r.Calls++
		r.lat = append(r.lat, c.lat)
	}
	return loggedIn, pooled, dials, nil
}

// usersIdleMemory measures what an idle pooled connection costs the
// gateway: a gateway whose pool forgets idle connections after
// usersIdleWait serves one call for each of usersPool cold users (so that
// everything a burst of calls leaves in the heap is there), waits until
// the pool is empty and takes its RSS after a GC; then the same users
// call again, and with their usersPool connections idle in the pool it
// takes the RSS after a GC again. The same callers (HTTP connections) are
// open both times.
func usersIdleMemory(bin, dir string, st *mailstack.Stack, key string, o options) (idleMem, error) {
	var m idleMem
	gw, metricsURL, _, err := startUsersGateway(bin, dir, "gateway-users-idle", st, key, o, 0, usersPool,
		"POOL_IDLE_TIMEOUT="+usersIdleWait.String(), "POOL_REVALIDATE=1h")
	if err != nil {
		return m, err
	}
	defer gw.stop()
	callers, err := newUsersCallers(gw.url)
	defer closeCallers(callers)
	if err != nil {
		return m, err
	}
	dcPid, _ := strconv.Atoi(st.Env["MAILSTACK_DOVECOT_PID"])
	// Users far down the distribution: no other run left them warm.
	first := max(0, o.users-usersPool)
	burst := func() error {
		var next atomic.Int64
		errs := make(chan error, len(callers))
		for _, c := range callers {
			go func() {
				var err error
				for {
					i := int(next.Add(1)) - 1
					if i >= usersPool || i+first >= o.users {
						break
					}
					if err = c.call(first+i, toolList, ""); err != nil {
						break
					}
				}
				errs <- err
			}()
		}
		var err error
		for range callers {
			err = errors.Join(err, <-errs)
		}
		return err
	}
	waitPool := func(want int, within time.Duration) (int, error) {
		deadline := time.Now().Add(within)
		for {
			mt, err := scrape(metricsURL)
			if err != nil {
				return 0, err
			}
			got := poolConns(mt)
			if got == want || (want > 0 && got >= want) {
				return got, nil
			}
			if time.Now().After(deadline) {
				return got, fmt.Errorf("the pool holds %d connections after %s, want %d", got, within, want)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	measure := func() (rss, heap int64, err error) {
		// Two GCs 5 s apart: the runtime hands freed pages back to the
		// system in the background, paced, after a GC.
		if _, err := gcMemStats(gw); err != nil {
			return 0, 0, err
		}
		time.Sleep(5 * time.Second)
		ms, err := gcMemStats(gw)
		if err != nil {
			return 0, 0, err
		}
		time.Sleep(time.Second)
		rss, err = gw.status("VmRSS")
		return rss, ms["HeapInuse"] + ms["StackInuse"], err
	}
	// Fresh: one call (code paths, TLS, the first login) by a user of the
	// burst, whose connection the burst then reuses.
	if err := callers[0].call(first, toolList, ""); err != nil {
		return m, err
	}
	if m.rss[0], m.heap[0], err = measure(); err != nil {
		return m, err
	}
	want := min(usersPool, o.users)
	for round := range 2 {
		if err := burst(); err != nil {
			return m, err
		}
		if m.conns, err = waitPool(want, 10*time.Second); err != nil {
			return m, err
		}
		if m.rss[2*round+1], m.heap[2*round+1], err = measure(); err != nil {
			return m, err
		}
		m.imapProcs = countProcs(dcPid, "imap")
		m.imapSessions = imapSessions(st)
		if round == 1 {
			break
		}
		logf("  waiting for the pool to close its idle connections")
		if _, err := waitPool(0, usersIdleWait+30*time.Second); err != nil {
			return m, err
		}
		if m.rss[2], m.heap[2], err = measure(); err != nil {
			return m, err
		}
	}
	return m, nil
}

// gcMemStats makes the gateway collect its garbage (the pprof heap
// endpoint with gc=1) and returns the runtime.MemStats lines of the
// profile's text form ("# HeapInuse = 123" -> HeapInuse: 123; "# Stack =
// a / b" -> StackInuse: a, StackSys: b).
func gcMemStats(g *gateway) (map[string]int64, error) {
	if g.pprof == "" {
		return nil, errors.New("profiling is off")
	}
	resp, err := http.Get("http://" + g.pprof + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("pprof heap: %s", resp.Status)
	}
	return parseMemStats(resp.Body)
}

func parseMemStats(r io.Reader) (map[string]int64, error) {
	out := map[string]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), " = ")
		if !ok || strings.ContainsAny(k, " \t") {
			continue
		}
		if k == "Stack" {
			in, sys, _ := strings.Cut(v, " / ")
			a, err1 := strconv.ParseInt(in, 10, 64)
			b, err2 := strconv.ParseInt(sys, 10, 64)
			if err1 == nil && err2 == nil {
				out["StackInuse"], out["StackSys"] = a, b
			}
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if _, ok := out["HeapInuse"]; !ok {
		return nil, errors.New("no runtime.MemStats in the heap profile")
	}
	return out, nil
}

// scrape reads a Prometheus text exposition into series -> value, the
// series named as written (name{labels}).
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// poolConns is the pool's connections, idle and in use, in a scrape.
func poolConns(m map[string]float64) int {
	return int(m[`mailbox_mcp_pool_connections{state="idle"}`] + m[`mailbox_mcp_pool_connections{state="in_use"}`])
}

// countProcs counts the live processes named comm in the session of the
// Dovecot master sid (its children: the Dovecot of this stack, not another
// stack's on the same machine).
func countProcs(sid int, comm string) int {
	n := 0
	for _, pid := range sessionPids(sid) {
		if c, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(c)) == comm {
			n++
		}
	}
	return n
}

// sessionPids lists the live processes whose session id is sid.
func sessionPids(sid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, ok := statFields(pid)
		// after the command: state(0) ppid(1) pgrp(2) session(3)
		if ok && len(f) > 3 && f[0] != "Z" && f[3] == strconv.Itoa(sid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// statFields are /proc/PID/stat's fields after the command name.
func statFields(pid int) ([]string, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return nil, false
	}
	return strings.Fields(s[i+2:]), true
}

// procsMem is the mean VmRSS and Pss (kB) of the live processes named comm
// in session sid.
func procsMem(sid int, comm string) (rss, pss int64) {
	n := int64(0)
	for _, pid := range sessionPids(sid) {
		if c, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		r, err1 := procStatus(pid, "VmRSS")
		p, err2 := procStatusFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss")
		if err1 == nil && err2 == nil {
			rss, pss, n = rss+r, pss+p, n+1
		}
	}
	if n == 0 {
		return 0, 0
	}
	return rss / n, pss / n
}

// imapSessions counts the IMAP sessions Dovecot has now (doveadm who -1:
// one line per connection); -1 if doveadm failed.
func imapSessions(st *mailstack.Stack) int {
	out, err := st.Doveadm("who", "-1")
	if err != nil {
		return -1
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == "imap" {
			n++
		}
	}
	return n
}

// dovecotProcs are the groups Dovecot's CPU is shown in; an imap process
// that exited (an evicted connection) is counted by its master, which
// reaped it, under "imap" too.
var dovecotProcs = []string{"imap", "imap-login", "auth", "config", "other"}

// dovecotCPU is the CPU time of a Dovecot master's session so far, by
// dovecotProcs: the live processes' own by name, and the master's reaped
// children's (cutime + cstime: imap processes, the only ones that come
// and go here) under imap.
func dovecotCPU(master int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, pid := range sessionPids(master) {
		f, ok := statFields(pid)
		if !ok || len(f) < 15 {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		name := strings.TrimSpace(string(comm))
		if !slices.Contains(dovecotProcs, name) {
			name = "other"
		}
		out[name] += ticksField(f, 11) + ticksField(f, 12) // utime, stime
		if pid == master {
			out["imap"] += ticksField(f, 13) + ticksField(f, 14) // cutime, cstime
		}
	}
	return out
}

func ticksField(f []string, k int) time.Duration {
	v, _ := strconv.ParseInt(f[k], 10, 64)
	return time.Duration(v) * time.Second / 100
}

// cpuDelta is b - a by group, and the total.
func cpuDelta(a, b map[string]time.Duration) (map[string]time.Duration, time.Duration) {
	d := map[string]time.Duration{}
	var total time.Duration
	for _, k := range dovecotProcs {
		d[k] = b[k] - a[k]
		total += d[k]
	}
	return d, total
}

// machineCPU is the CPU time all processes of the machine used so far
// (/proc/stat: everything but idle and iowait).
func machineCPU() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return parseMachineCPU(line)
}

func parseMachineCPU(line string) time.Duration {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, s := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is in user already
			continue
		}
		v, _ := strconv.ParseInt(s, 10, 64)
		busy += v
	}
	return time.Duration(busy) * time.Second / 100
}

// dovecotLimits are the limits that bound many connections, as the stack's
// Dovecot has them.
func dovecotLimits(st *mailstack.Stack) []string {
	conf := filepath.Join(st.Dir, "etc", "dovecot.conf")
	var out []string
	for _, k := range []string{"default_process_limit", "default_client_limit", "default_vsz_limit", "mail_max_userip_connections",
		"service/imap/process_limit", "service/imap/client_limit", "service/imap/service_count", "service/imap/process_min_avail",
		"service/imap-login/process_limit", "service/imap-login/client_limit", "service/imap-login/service_count", "service/imap-login/process_min_avail",
		"service/auth/client_limit", "service/anvil/client_limit"} {
		v, err := exec.Command("doveconf", "-c", conf, "-h", k).Output()
		val := strings.TrimSpace(string(v))
		if err != nil || val == "" {
			val = "?"
		}
		out = append(out, strings.ReplaceAll(k, "/", " ")+" = "+val)
	}
	return out
}

// dovecotLogLines counts the Dovecot log's warnings, errors and fatal
// lines (the date and the process prefix cut off).
func dovecotLogLines(path string) map[string]int {
	out := map[string]int{}
	f, err := os.Open(path)
	if err != nil {
		out[err.Error()]++
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		for _, kind := range []string{"Warning: ", "Error: ", "Fatal: ", "Panic: "} {
			if i := strings.Index(l, kind); i >= 0 {
				msg := l[i:]
				if len(msg) > 160 {
					msg = msg[:160] + "…"
				}
				out[msg]++
				break
			}
		}
	}
	return out
}

// zipfShares are the shares of the calls that went to the top 1, 10 and
// usersPool users, and how many users were called at all.
func zipfShares(calls []int) (top1, top10, topPool float64, distinct int) {
	total := 0
	for _, c := range calls {
		total += c
		if c > 0 {
			distinct++
		}
	}
	if total == 0 {
		return 0, 0, 0, 0
	}
	s := slices.Clone(calls)
	sort.Sort(sort.Reverse(sort.IntSlice(s)))
	sum := func(k int) float64 {
		n := 0
		for _, c := range s[:min(k, len(s))] {
			n += c
		}
		return float64(n) / float64(total)
	}
	return sum(1), sum(10), sum(usersPool), distinct
}

func (rep *usersReport) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("Run of %s (%.1f min in all), `mailbox-bench %s`.\n\n", rep.finished.UTC().Format("2006-01-02 15:04 MST"), rep.finished.Sub(rep.started).Minutes(), rep.args)
	p("Machine: %s.\n\n", machine())
	p("%d accounts; the stack started in %.1f s (the user list through MAILSTACK_USERS_FILE); %d INBOXes of %d messages written straight into the Maildirs in %.1f s, "+
		"indexed by Dovecot (doveadm mailbox status, two processes) in %.1f s. The gateway's pool settings are the defaults (MAX_POOL_PER_USER=4, POOL_IDLE_TIMEOUT=5m, POOL_REVALIDATE=60s) but for MAX_POOL_SIZE. "+
		"%d callers, each call for a user drawn from a Zipf distribution (P(rank k) ∝ (1+k)^-%.1f) and a tool drawn from %s; %s warm-up, then %s measured; "+
		"20 ms is a round trip through rttproxy between gateway and Dovecot. Each row is a new gateway (an empty pool).\n\n",
		rep.n, rep.stackStart.Seconds(), rep.n, usersInbox, rep.seed.Seconds(), rep.index.Seconds(), usersCallers, usersZipfS, mixText(), usersWarmUp, rep.runs[0].window)

	p("| round trip | MAX_POOL_SIZE | calls/s | p50 | p99 | p99/p50 | errors | logins (pool opened) | calls that logged in | pool: most / at end | evicted | waited for a slot | gateway RSS at end / peak |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.runs {
		a := r.all
		p("| %s | %d | %.0f | %s | %s | %.1f | %d | %.0f (%.0f/s) | %.0f%% | %d / %d | %.0f | %.0f | %s / %s |\n",
			rttName(r.rtt), r.pool, a.Rate(), ms(a.P50()), ms(a.P99()), ratio(a.P99(), a.P50()), a.Errors,
			r.poolEv["opened"], r.poolEv["opened"]/a.Wall.Seconds(), pct(r.poolEv["opened"], float64(a.Calls)),
			r.poolMax, r.poolEnd, r.poolEv["evicted"], r.poolEv["waited"], mb(r.rss), mb(r.hwm))
	}
	p("\nCalls that logged in and calls on a pooled connection (latency as the callers measured it; a call logged in when the gateway's pool logged a dial under its request id, the gateway running at LOG_LEVEL=debug for this; the dial is the pool's: TCP, TLS and LOGIN, the first EXAMINE sent behind it):\n\n")
	p("| round trip | MAX_POOL_SIZE | calls that logged in | their p50 | their p99 | calls on a pooled connection: p50 | p99 | the dial: p50 | p99 |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.runs {
		p("| %s | %d | %.0f%% | %s | %s | %s | %s | %s | %s |\n", rttName(r.rtt), r.pool, pct(float64(r.loggedIn.Calls), float64(r.loggedIn.Calls+r.pooled.Calls)),
			ms(r.loggedIn.P50()), ms(r.loggedIn.P99()), ms(r.pooled.P50()), ms(r.pooled.P99()), ms(r.dials.P50()), ms(r.dials.P99()))
	}
	p("\nPer tool:\n\n| round trip | MAX_POOL_SIZE | tool | share | p50 | p99 | errors |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rep.runs {
		for _, m := range usersMix {
			t := r.byTool[m.tool]
			p("| %s | %d | %s | %.0f%% | %s | %s | %d |\n", rttName(r.rtt), r.pool, m.tool, pct(float64(t.Calls), float64(r.all.Calls)), ms(t.P50()), ms(t.P99()), t.Errors)
		}
	}
	p("\nWhere the CPU went, in cores (CPU time over the window; the machine has %d):\n\n"+
		"| round trip | MAX_POOL_SIZE | gateway | Dovecot (all its processes) | the bench (callers; rttproxy at 20 ms) | anything else (other work on the machine) | whole machine | gateway CPU per call | Dovecot CPU per call |\n|---|---|---|---|---|---|---|---|---|\n",
		runtime.NumCPU())
	for _, r := range rep.runs {
		w := r.all.Wall.Seconds()
		calls := time.Duration(max(r.all.Calls, 1))
		p("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", rttName(r.rtt), r.pool, r.gwCPU.Seconds()/w, r.dcCPU.Seconds()/w, r.selfCPU.Seconds()/w,
			max(0, (r.busy-r.gwCPU-r.dcCPU-r.selfCPU).Seconds()/w), r.busy.Seconds()/w,
			ms(r.gwCPU/calls), ms(r.dcCPU/calls))
	}
	p("\nDovecot's CPU by process, ms per call (imap: the processes serving the connections, one connection at a time each, those that exited included; imap-login: the TLS of every connection, in Dovecot's high-performance mode; auth: the logins' password checks; config: settings for each new imap process):\n\n| round trip | MAX_POOL_SIZE |")
	for _, k := range dovecotProcs {
		p(" %s |", k)
	}
	p(" all |\n|---|---|%s---|\n", strings.Repeat("---|", len(dovecotProcs)))
	for _, r := range rep.runs {
		calls := time.Duration(max(r.all.Calls, 1))
		p("| %s | %d |", rttName(r.rtt), r.pool)
		for _, k := range dovecotProcs {
			p(" %s |", msf(r.dcProcs[k]/calls))
		}
		p(" %s |\n", msf(r.dcCPU/calls))
	}
	p("\nDovecot's processes and the users:\n\n| round trip | MAX_POOL_SIZE | imap processes (serving a connection or idle for the next): most / at end | one imap process: RSS / Pss | users called | calls to the hottest | to the top 10 | to the top %d | pool events: reused / revalidated / busy |\n|---|---|---|---|---|---|---|---|---|\n", usersPool)
	for _, r := range rep.runs {
		t1, t10, tp, distinct := zipfShares(r.calls)
		p("| %s | %d | %d / %d | %s / %s | %d of %d | %.1f%% | %.1f%% | %.1f%% | %.0f / %.0f / %.0f |\n", rttName(r.rtt), r.pool, r.imapMax, r.imapEnd, mb(r.imapRSS), mb(r.imapPss),
			distinct, rep.n, t1*100, t10*100, tp*100, r.poolEv["reused"], r.poolEv["revalidated"], r.poolEv["busy"])
	}

	m := rep.idle
	p("\nIdle pooled connections: a gateway at 0 ms (MAX_POOL_SIZE=%d, POOL_IDLE_TIMEOUT=%s); %d cold users call once each; the pool closes their connections; they call again. "+
		"Each figure after two GCs 5 s apart (the pprof heap endpoint with gc=1) and a second's pause:\n\n", usersPool, usersIdleWait, m.conns)
	p("| | fresh (1 connection) | %d idle | none (after they closed) | %d idle again | per idle connection, fresh → %d | per idle connection, none → %d again |\n|---|---|---|---|---|---|---|\n",
		m.conns, m.conns, m.conns, m.conns)
	p("| gateway RSS | %s | %s | %s | %s | %.1f KB | %.1f KB |\n", mb(m.rss[0]), mb(m.rss[1]), mb(m.rss[2]), mb(m.rss[3]),
		m.perConn(m.rss, 1, 0, 1), m.perConn(m.rss, 3, 2, 1))
	p("| Go heap + stacks in use | %s | %s | %s | %s | %.1f KB | **%.1f KB** |\n", mb(m.heap[0]/1024), mb(m.heap[1]/1024), mb(m.heap[2]/1024), mb(m.heap[3]/1024),
		m.perConn(m.heap, 1, 0, 1024), m.perConn(m.heap, 3, 2, 1024))
	p("\nDovecot had %d IMAP sessions (doveadm who) and %d imap processes with the %d connections idle (the other processes, idle, wait to serve another connection until Dovecot's idle_kill ends them). Target ≤ 64 KB per idle connection: %s (Go heap + stacks, none → %d again).\n",
		m.imapSessions, m.imapProcs, m.conns, verdict(m.perConn(m.heap, 3, 2, 1024), 64), m.conns)

	p("\nDovecot's limits in the stack (doveconf; 0 means the default_ value): %s.\n", strings.Join(rep.limits, ", "))
	if len(rep.dcLog) == 0 {
		p("\nDovecot's log: no warning or error.\n")
	} else {
		p("\nDovecot's log, warnings and errors (count):\n\n")
		keys := make([]string, 0, len(rep.dcLog))
		for k := range rep.dcLog {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys[:min(len(keys), 12)] {
			p("- %d × `%s`\n", rep.dcLog[k], k)
		}
	}
	for _, r := range rep.runs {
		if len(r.errs) == 0 {
			continue
		}
		p("\nErrors at %s round trip, MAX_POOL_SIZE=%d:\n\n", rttName(r.rtt), r.pool)
		for msg, n := range r.errs {
			p("- %d × %s\n", n, msg)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func mixText() string {
	var parts []string
	for _, m := range usersMix {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", m.tool, m.share*100))
	}
	return strings.Join(parts, ", ")
}

func pct(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b * 100
}
