package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

const (
	sideGateway     = "gateway"
	sideDirect      = "direct"
	sideGatewayCold = "gateway-cold"
	sideDirectCold  = "direct-cold"
)

type cellKey struct {
	tool string
	size int
	conc int
	side string
}

type report struct {
	o          options
	started    time.Time
	finished   time.Time
	cells      map[cellKey]*result
	tools      []string
	notes      []string
	seedTimes  []string
	loadBefore string
	loadAfter  string

	rssStart  int64 // kB, right after start
	rssPool   int64 // kB, after the concurrency-64 run
	hwmPool   int64 // kB, peak up to then
	poolConns int   // established IMAP connections after the concurrency-64 run
	big       [2]int64

	callCPU []toolCPU // per-tool CPU profiles (-profile), in the order taken
}

func newReport(o options) *report {
	return &report{o: o, started: time.Now(), cells: map[cellKey]*result{}}
}

func (r *report) add(tool string, size, conc int, side string, res *result) {
	r.cells[cellKey{tool, size, conc, side}] = res
	logf("  %-13s %s", side, res)
}

func (r *report) get(tool string, size, conc int, side string) *result {
	return r.cells[cellKey{tool, size, conc, side}]
}

// errors lists every cell that had a failed call.
func (r *report) errors() string {
	var bad []string
	for k, v := range r.cells {
		if v.Errors > 0 || len(v.lat) == 0 {
			bad = append(bad, fmt.Sprintf("%s %s c=%d on %d: %d of %d calls failed, first: %v", k.side, k.tool, k.conc, k.size, v.Errors, v.Calls, v.Err))
		}
	}
	return strings.Join(bad, "\n")
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func machine() string {
	cpu := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
		f.Close()
	}
	mem := ""
	if v, err := procStatusFile("/proc/meminfo", "MemTotal"); err == nil {
		mem = fmt.Sprintf(", %.1f GB RAM", float64(v)/1024/1024)
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	dv, _ := exec.Command("dovecot", "--version").Output()
	pf, _ := exec.Command("postconf", "-d", "-h", "mail_version").Output()
	return fmt.Sprintf("%s, %d cores%s; Linux %s; %s; Dovecot %s (Maildir, implicit TLS on loopback); Postfix %s",
		cpu, runtime.NumCPU(), mem, strings.TrimSpace(string(kernel)), runtime.Version(),
		strings.Fields(string(dv) + " ?")[0], strings.TrimSpace(string(pf)))
}

func procStatusFile(path, field string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			var n int64
			_, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &n)
			return n, err
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, path)
}

func mb(kb int64) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }

func msf(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }

// verdict says whether got meets "≤ limit", and by how much it misses.
func verdict(got, limit float64) string {
	if got == 0 {
		return "not measured"
	}
	if got <= limit {
		return "met"
	}
	return fmt.Sprintf("**missed by %.0f%%**", (got/limit-1)*100)
}

func (r *report) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	o := r.o
	cmd := "go run ./cmd/mailbox-bench"
	if o.args != "" {
		cmd += " " + o.args
	}
	p("Run of %s (%s, %.0f s).\n\n", r.started.UTC().Format("2006-01-02 15:04 MST"), map[bool]string{true: "smoke", false: "full"}[o.smoke], r.finished.Sub(r.started).Seconds())
	p("- Command (as root, from the repository root): `%s`\n", cmd)
	p("- Machine: %s\n", machine())
	p("- Load average (1/5/15 min) before the measurements: %s; after: %s. Other work may have shared the machine: compare ratios, which are measured side by side in one run.\n", r.loadBefore, r.loadAfter)
	if len(r.seedTimes) > 0 {
		p("- Seeding (scripts/mailstack.sh seed, straight into the Maildir, then indexed by Dovecot): %s\n", strings.Join(r.seedTimes, "; "))
	}
	p("- Calls at concurrency 1: up to %d per cell (send: %d), gateway and direct alternating; concurrency 8: %d; 64: %d; no new call started after %s in a cell. Latency is the client's (mcp-go over HTTP on loopback), milliseconds. Gateway CPU per call is the gateway process's time on the CPU during the cell (the sum over its threads of /proc/PID/task/TID/schedstat, in nanoseconds) divided by its calls.\n",
		o.n1, max(10, o.n1/3), o.n8, o.n64, o.cellMax)
	if len(o.gwEnv) > 0 {
		p("- Extra gateway settings: `%s`\n", strings.Join(o.gwEnv, " "))
	}
	for _, n := range r.notes {
		p("- %s\n", n)
	}

	p("\n### Concurrency 1: gateway against the same IMAP commands on a warm connection\n\n")
	p("| tool | messages | gateway p50 / p95 / p99 | gateway calls/s | gateway CPU per call | direct p50 / p95 / p99 | gateway / direct (p50) |\n|---|---:|---|---:|---:|---|---:|\n")
	for _, tool := range append([]string{toolFloor}, r.tools...) {
		for _, n := range o.sizes {
			g, d := r.get(tool, n, 1, sideGateway), r.get(tool, n, 1, sideDirect)
			if g == nil || d == nil {
				continue
			}
			p("| %s | %d | %s / %s / %s | %.0f | %s | %s / %s / %s | %.2f |\n", tool, n, msf(g.P50()), msf(g.P95()), msf(g.P99()), g.Rate(),
				msf(g.CPUPerCall()), msf(d.P50()), msf(d.P95()), msf(d.P99()), ratio(g.P50(), d.P50()))
		}
	}

	p("\nThe floor row is an MCP call that does no mail work (an unknown tool, answered by mcp-go with an error) against an IMAP NOOP: the cost of HTTP + JSON-RPC alone.\n")
	b.WriteString(r.callCPUMarkdown())

	p("\n### Through the official TypeScript SDK (concurrency 1)\n\n")
	p("One Node process (tests/clients/bench-sdk.mjs) with one @modelcontextprotocol/sdk `Client` over streamable HTTP, connected once and tools listed once (so `callTool` checks each structured result against the tool's output schema, as it does for users), makes one call at a time, alternating call by call with a bare command on the warm go-imap connection. Its latency is measured in Node around `client.callTool` only; sequential calls/s is its calls ÷ the sum of their latencies, what a client calling in a loop gets. ")
	p("The bare command is the least IMAP work behind the answer, read to the end: for imap_list_emails `FETCH n-19:* (UID FLAGS ENVELOPE RFC822.SIZE INTERNALDATE)` (the 20 newest envelopes, without STATUS, body or structure), for imap_read_email `UID FETCH uid (BODY.PEEK[])` of the same message.\n\n")
	p("| tool | messages | SDK p50 / p95 / p99 | sequential calls/s | bare command p50 | SDK / bare (p50) |\n|---|---:|---|---:|---:|---:|\n")
	for _, tool := range []string{toolList, toolRead} {
		for _, n := range o.sizes {
			g, d := r.get(sdkTool(tool), n, 1, sideGateway), r.get(sdkTool(tool), n, 1, sideDirect)
			if g == nil || d == nil {
				continue
			}
			p("| %s | %d | %s / %s / %s | %.0f | %s | %.2f |\n", tool, n, msf(g.P50()), msf(g.P95()), msf(g.P99()), g.Rate(),
				msf(d.P50()), ratio(g.P50(), d.P50()))
		}
	}
	p("\n### Warm against cold (new TLS + LOGIN + EXAMINE per call)\n\n")
	p("Cold gateway: a second gateway process whose pool drops a connection after 1 ms idle, so every call dials and logs in. Cold direct: go-imap dials, logs in, examines INBOX, runs the commands, logs out.\n\n")
	p("| tool | messages | gateway warm p50 | gateway cold p50 / p99 | direct cold p50 | warm / cold (gateway p50) |\n|---|---:|---:|---|---:|---:|\n")
	for _, tool := range readTools {
		for _, n := range o.sizes {
			w, gc, dc := r.get(tool, n, 1, sideGateway), r.get(tool, n, 1, sideGatewayCold), r.get(tool, n, 1, sideDirectCold)
			if w == nil || gc == nil || dc == nil {
				continue
			}
			p("| %s | %d | %s | %s / %s | %s | %.3f |\n", tool, n, msf(w.P50()), msf(gc.P50()), msf(gc.P99()), msf(dc.P50()), ratio(w.P50(), gc.P50()))
		}
	}

	size := o.sizes[0]
	p("\n### Concurrency (gateway, %d-message mailboxes; 8 callers on 8 users, 64 on 16 users)\n\n", size)
	p("| tool | callers | p50 | p95 | p99 | calls/s | gateway CPU per call | errors | p99 / p50 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, tool := range r.tools {
		for _, c := range []int{1, 8, 64} {
			g := r.get(tool, size, c, sideGateway)
			if g == nil {
				continue
			}
			p("| %s | %d | %s | %s | %s | %.0f | %s | %d of %d | %.2f |\n", tool, c, msf(g.P50()), msf(g.P95()), msf(g.P99()), g.Rate(), msf(g.CPUPerCall()), g.Errors, g.Calls, ratio(g.P99(), g.P50()))
		}
	}

	p("\n### Memory (the gateway process's own, from /proc/PID/status)\n\n")
	p("| figure | value |\n|---|---:|\n")
	p("| RSS after start | %s |\n", mb(r.rssStart))
	p("| RSS after the 64-caller run, with %d pooled IMAP connections open | %s |\n", r.poolConns, mb(r.rssPool))
	p("| peak RSS (VmHWM) up to then | %s |\n", mb(r.hwmPool))
	p("| peak RSS increase reading a message with a 25 MB attachment (3 reads) | %s |\n", mb(r.big[0]))
	p("| peak RSS increase reading a message with a 25 MB text body (3 reads) | %s |\n", mb(r.big[1]))

	p("\n### Targets\n\n| target | measured | verdict |\n|---|---|---|\n")
	// Gateway CPU per call (issue 17): the floor, and each tool at every size.
	if f := r.get(toolFloor, size, 1, sideGateway); f != nil {
		x := float64(f.CPUPerCall()) / 1e6
		p("| gateway CPU per call, floor (no mail work) ≤ 0.2 ms | %.2f ms | %s |\n", x, verdict(x, 0.2))
	}
	for _, t := range []struct {
		tool  string
		limit float64
	}{{toolList, 1.0}, {toolRead, 0.4}, {toolFolders, 0.3}} {
		for _, n := range o.sizes {
			if g := r.get(t.tool, n, 1, sideGateway); g != nil {
				x := float64(g.CPUPerCall()) / 1e6
				p("| gateway CPU per call, %s ≤ %.1f ms, %d messages | %.2f ms | %s |\n", t.tool, t.limit, n, x, verdict(x, t.limit))
			}
		}
	}
	for _, tool := range []string{toolList, toolRead, toolFolders} {
		for _, n := range o.sizes {
			g, d := r.get(tool, n, 1, sideGateway), r.get(tool, n, 1, sideDirect)
			if g == nil || d == nil {
				continue
			}
			x := ratio(g.P50(), d.P50())
			p("| %s p50 ≤ 1.3 × the same IMAP direct, %d messages | %.2f × | %s |\n", tool, n, x, verdict(x, 1.3))
		}
	}
	// Cold calls against the cold p50 of the run before issue 17 (docs/benchmarks.md
	// of 2026-11-22), where one exists for the size.
	for _, tool := range readTools {
		for _, n := range o.sizes {
			gc := r.get(tool, n, 1, sideGatewayCold)
			before, ok := coldBefore[coldKey{tool, n}]
			if gc == nil || !ok {
				continue
			}
			x := float64(gc.P50()) / 1e6 / before
			p("| cold %s p50 ≤ 0.7 × before (%.2f ms), %d messages | %.2f ms = %.2f × | %s |\n", tool, before, n, float64(gc.P50())/1e6, x, verdict(x, 0.7))
		}
	}
	if len(o.sizes) > 1 {
		big := o.sizes[len(o.sizes)-1]
		for _, tool := range readTools {
			a, z := r.get(tool, size, 1, sideGateway), r.get(tool, big, 1, sideGateway)
			if a == nil || z == nil {
				continue
			}
			x := ratio(z.P50(), a.P50())
			target := ""
			v := "(no target: for comparison)"
			if tool == toolList {
				target, v = " ≤ 1.3", verdict(x, 1.3)
			}
			p("| %s p50 on %d / on %d%s | %.2f | %s |\n", tool, big, size, target, x, v)
		}
	}
	for _, tool := range r.tools {
		g := r.get(tool, size, 64, sideGateway)
		if g == nil {
			continue
		}
		x := ratio(g.P99(), g.P50())
		v := verdict(x, 3)
		if g.Errors > 0 {
			v = fmt.Sprintf("**%d errors**", g.Errors)
		}
		p("| %s, 64 callers on 16 users: no errors, p99 ≤ 3 × p50 | %d errors, p99 = %.2f × p50 | %s |\n", tool, g.Errors, x, v)
	}
	p("| RSS ≤ 64 MB with 50 pooled connections | peak %s with %d connections | %s |\n", mb(r.hwmPool), r.poolConns, verdict(float64(r.hwmPool)/1024, 64))
	p("| reading a 25 MB message raises peak RSS ≤ 8 MB | attachment: %s; text body: %s | %s; %s |\n", mb(r.big[0]), mb(r.big[1]),
		verdict(float64(max(r.big[0], 1))/1024, 8), verdict(float64(max(r.big[1], 1))/1024, 8))
	for _, t := range []struct {
		tool, bare string
		limit      float64
	}{{toolList, "bare FETCH of 20 envelopes", 3.0}, {toolRead, "bare fetch of the message", 2.0}} {
		for _, n := range o.sizes {
			g, d := r.get(sdkTool(t.tool), n, 1, sideGateway), r.get(sdkTool(t.tool), n, 1, sideDirect)
			if g == nil || d == nil {
				continue
			}
			x, split := ratio(g.P50(), d.P50()), ""
			if g.Calls > 0 && g.ClientCPU > 0 {
				// Where the call's time goes: both processes' CPU per call.
				per := func(d time.Duration) float64 { return float64(d) / float64(g.Calls) / 1e6 }
				split = fmt.Sprintf(" (p50 %s, bare %s; CPU per call: gateway %.2f ms, Node + SDK %.2f ms)", ms(g.P50()), ms(d.P50()), per(g.CPU), per(g.ClientCPU))
			}
			p("| TS SDK %s p50 ≤ %.1f × %s, %d messages | %.2f ×%s | %s |\n", t.tool, t.limit, t.bare, n, x, split, verdict(x, t.limit))
		}
		if t.tool != toolList {
			continue
		}
		for _, n := range o.sizes {
			g := r.get(sdkTool(toolList), n, 1, sideGateway)
			if g == nil {
				continue
			}
			rate, v := g.Rate(), "not measured"
			if rate > 0 {
				v = verdict(400/rate, 1) // as time per call: 2.5 ms at most
			}
			p("| TS SDK %s ≥ 400 sequential calls/s, %d messages | %.0f calls/s (%.2f ms a call; 400/s is 2.50) | %s |\n", toolList, n, rate, 1000/max(rate, 1e-9), v)
		}
	}
	return b.String()
}

// callCPUMarkdown is the section on whose a call's CPU is, from the
// per-tool profiles; "" when none were taken.
func (r *report) callCPUMarkdown() string {
	if len(r.callCPU) == 0 {
		return ""
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	o := r.o
	first := r.callCPU[0]
	p("\n%s (%d-message mailbox)\n\n", backToBackHeading, o.sizes[0])
	p("The gateway's CPU per call from /proc over a window of %.0f s in which the bench called one tool alone, one call at a time, back to back (no direct call in between, so the gateway's background work, the runtime's sysmon and timers, is not charged to its calls in proportion to idle time as in the concurrency-1 cells). The smoke run's regression guard compares these ratios to the floor's.\n\n", first.windowSecs)
	p("| tool | messages | calls | CPU per call | ÷ floor's |\n|---|---:|---:|---:|---:|\n")
	var floor float64
	for _, t := range r.callCPU {
		if t.tool == toolFloor {
			floor = t.perCall()
		}
	}
	for _, t := range r.callCPU {
		x := "–"
		if floor > 0 {
			x = fmt.Sprintf("%.2f", t.perCall()/floor)
		}
		p("| %s | %d | %d | %.3f | %s |\n", t.tool, o.sizes[0], t.calls, t.perCall(), x)
	}
	if first.bd == nil {
		return b.String()
	}
	p("\n### Where a call's CPU goes (profile, concurrency 1)\n\n")
	p("For each tool, the gateway's CPU profile (`-profile DIR`: `DIR/cpu-TOOL.pprof`, `cpu-floor.pprof`) over %.0f s while the bench called that tool alone, one call at a time, on the %d-message mailbox. ", first.bd.duration.Seconds(), o.sizes[0])
	p("Every sample (10 ms of CPU) is charged to an owner by walking its stack from the leaf up (cmd/mailbox-bench/breakdown.go): the Go runtime and standard-library helpers are charged to the code that called them, an allocation included; GC, the scheduler and socket syscalls are their own. ")
	p("Milliseconds of gateway CPU per call: the profile's CPU ÷ the calls made in the window; the last column is the gateway's CPU per call over the same window from /proc. The profile misses part of that: chiefly the runtime's sysmon thread, which runs no goroutine and so gets no profiling timer (about an eighth of the gateway's CPU in a list run, read per thread from /proc). ")
	p("`go run ./cmd/mailbox-bench -breakdown DIR/cpu-TOOL.pprof -calls N` prints one profile owner by owner.\n\n")
	p("| tool | calls |")
	for _, g := range ownerGroups {
		p(" %s |", g.name)
	}
	p(" total (profile) | /proc CPU per call |\n|---|---:|%s---:|---:|\n", strings.Repeat("---:|", len(ownerGroups)))
	for _, t := range r.callCPU {
		per := func(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/float64(t.calls)/1e6) }
		p("| %s | %d |", t.tool, t.calls)
		for _, g := range ownerGroups {
			p(" %s |", per(t.bd.sum(g.owners...)))
		}
		p(" %s | %s |\n", per(t.bd.total), per(int64(t.procCPU)))
	}
	r.allocsMarkdown(p)
	p("\nThe biggest owners other than our code, ms per call, with their top functions (for a library: its function nearest the leaf, with the helpers and allocations below it; for the runtime: the leaf; for syscalls: who made them):\n\n")
	for _, t := range r.callCPU {
		shown := 0
		for _, oc := range t.bd.owners {
			if oc.owner == ownGateway || shown == 3 {
				continue
			}
			shown++
			var fns []string
			for _, f := range oc.funcs[:min(5, len(oc.funcs))] {
				fns = append(fns, fmt.Sprintf("`%s` %.3f", shortFunc(f.fn), float64(f.value)/float64(t.calls)/1e6))
			}
			p("- %s, %s %.3f: %s\n", t.tool, oc.owner, float64(oc.value)/float64(t.calls)/1e6, strings.Join(fns, ", "))
		}
	}
	return b.String()
}

// allocsMarkdown is the table of who allocates what in a call, from the
// delta allocs profiles taken with the CPU profiles, and the collector's
// CPU (the "runtime: GC" owner) shared out in proportion: whoever
// allocates makes the collector run.
func (r *report) allocsMarkdown(p func(string, ...any)) {
	var rows []toolCPU
	for _, t := range r.callCPU {
		if t.allocs != nil && t.allocs.total > 0 {
			rows = append(rows, t)
		}
	}
	if len(rows) == 0 {
		return
	}
	p("\nWho allocates: KB allocated per call by each owner, from the allocs profile of the same window (`DIR/allocs-TOOL.pprof`, sampled by the runtime, attributed by the same rules), and in brackets the GC's CPU per call (ms) charged to that owner in proportion to what it allocates. ")
	p("This is how the \"Go runtime\" column above divides among the libraries: the collector runs because someone allocates.\n\n")
	p("| tool |")
	for _, g := range ownerGroups[:len(ownerGroups)-2] { // the runtime allocates next to nothing
		p(" %s |", g.name)
	}
	p(" other | total KB | GC ms |\n|---|%s---:|---:|---:|\n", strings.Repeat("---:|", len(ownerGroups)-2))
	for _, t := range rows {
		gc := float64(t.bd.sum(ownGC)) / float64(t.calls) / 1e6
		cell := func(bytes int64) string {
			kb := float64(bytes) / float64(t.calls) / 1024
			return fmt.Sprintf("%.1f (%.3f)", kb, gc*float64(bytes)/float64(t.allocs.total))
		}
		p("| %s |", t.tool)
		var shown int64
		for _, g := range ownerGroups[:len(ownerGroups)-2] {
			v := t.allocs.sum(g.owners...)
			shown += v
			p(" %s |", cell(v))
		}
		p(" %s | %.1f | %.3f |\n", cell(t.allocs.total-shown), float64(t.allocs.total)/float64(t.calls)/1024, gc)
	}
}

const (
	beginMarker      = "<!-- BEGIN RESULTS (written by cmd/mailbox-bench) -->"
	endMarker        = "<!-- END RESULTS -->"
	coordBeginMarker = "<!-- BEGIN COORD RESULTS (written by cmd/mailbox-bench -coord) -->"
	coordEndMarker   = "<!-- END COORD RESULTS -->"
)

// writeResults replaces the text between the markers begin and end of path
// (or appends the markers and the text when the file has none).
func writeResults(path, beginMarker, endMarker, text string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	block := beginMarker + "\n" + text + "\n" + endMarker
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i >= 0 && j > i {
		s = s[:i] + block + s[j+len(endMarker):]
	} else {
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		s += "\n" + block + "\n"
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

type coldKey struct {
	tool string
	size int
}

// coldBefore is the gateway's cold p50 (ms) per tool and mailbox size in the
// full run of 2026-11-22, before TLS session resumption and LOGIN sent ahead
// of EXAMINE: the reference of the cold-call target.
var coldBefore = map[coldKey]float64{
	{toolList, 1000}: 16.56, {toolList, 10000}: 38.79, {toolList, 100000}: 305.38,
	{toolSearch, 1000}: 17.20, {toolSearch, 10000}: 62.58, {toolSearch, 100000}: 583.44,
	{toolRead, 1000}: 13.88, {toolRead, 10000}: 32.85, {toolRead, 100000}: 304.29,
	{toolFolders, 1000}: 10.43, {toolFolders, 10000}: 13.03, {toolFolders, 100000}: 103.33,
}
