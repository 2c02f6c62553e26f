package main

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// committedSample is the head of docs/benchmarks.md's results as the full
// run writes them (2026-11-22, with the back-to-back table added), with
// the table after them, which the parser must not read.
const committedSample = `## Results

<!-- BEGIN RESULTS (written by cmd/mailbox-bench) -->
Run of 2026-11-22 22:31 UTC (full, 279 s).

### Concurrency 1: gateway against the same IMAP commands on a warm connection

| tool | messages | gateway p50 / p95 / p99 | gateway calls/s | gateway CPU per call | direct p50 / p95 / p99 | gateway / direct (p50) |
|---|---:|---|---:|---:|---|---:|
| floor: no mail work | 1000 | 0.43 / 0.66 / 1.01 | 2267 | 0.30 | 0.27 / 0.37 / 0.59 | 1.57 |
| imap_list_emails | 1000 | 4.41 / 6.81 / 7.89 | 213 | 3.10 | 1.86 / 2.92 / 3.52 | 2.38 |
| imap_list_emails | 10000 | 3.60 / 5.47 / 6.33 | 264 | 2.50 | 1.53 / 2.55 / 2.96 | 2.35 |
| imap_search_emails | 1000 | 6.01 / 7.72 / 8.67 | 163 | 1.93 | 4.05 / 5.82 / 6.78 | 1.48 |
| imap_read_email | 1000 | 1.65 / 2.39 / 2.77 | 581 | 0.90 | 0.71 / 0.95 / 1.15 | 2.31 |
| imap_read_email | 10000 | 1.64 / 2.47 / 2.92 | 577 | 0.97 | 0.70 / 0.98 / 1.16 | 2.36 |
| imap_list_folders | 1000 | 1.18 / 1.69 / 2.04 | 807 | 0.63 | 0.60 / 0.83 / 1.03 | 1.95 |
| smtp_send_email | 1000 | 48.76 / 53.16 / 77.60 | 20 | 3.30 | 48.24 / 55.85 / 62.47 | 1.01 |

The floor row is an MCP call that does no mail work.

### Gateway CPU per call, calls back to back (1000-message mailbox)

| tool | messages | calls | CPU per call | ÷ floor's |
|---|---:|---:|---:|---:|
| floor: no mail work | 1000 | 16060 | 0.300 | 1.00 |
| imap_list_emails | 1000 | 1494 | 3.100 | 10.33 |
| imap_list_emails | 10000 | 1494 | 2.500 | 8.33 |
| imap_search_emails | 1000 | 1134 | 1.930 | 6.43 |
| imap_read_email | 1000 | 4623 | 0.900 | 3.00 |
| imap_list_folders | 1000 | 4364 | 0.630 | 2.10 |

### Warm against cold (new TLS + LOGIN + EXAMINE per call)

| tool | messages | gateway warm p50 | gateway cold p50 / p99 | direct cold p50 | warm / cold (gateway p50) |
|---|---:|---:|---|---:|---:|
| imap_list_emails | 1000 | 4.41 | 16.56 / 20.60 | 13.56 | 0.267 |
<!-- END RESULTS -->
`

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestParseCommittedReadsTheConcurrency1Table(t *testing.T) {
	figs, err := parseCommitted(committedSample, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]c1Figures{
		toolFloor:   {0.30, 1.57},
		toolList:    {3.10, 2.38},
		toolSearch:  {1.93, 1.48},
		toolRead:    {0.90, 2.31},
		toolFolders: {0.63, 1.95},
		toolSend:    {0, 1.01}, // no back-to-back row: not guarded
	}
	if len(figs) != len(want) {
		t.Errorf("got %d tools, want %d: %v", len(figs), len(want), figs)
	}
	for tool, w := range want {
		if g, ok := figs[tool]; !ok || !near(g.cpu, w.cpu) || !near(g.p50, w.p50) {
			t.Errorf("%s: got %+v (found %v), want %+v", tool, g, ok, w)
		}
	}
	// Another size picks the other rows.
	figs, err = parseCommitted(committedSample, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if g := figs[toolList]; len(figs) != 2 || !near(g.cpu, 2.50) || !near(g.p50, 2.35) {
		t.Errorf("10000 messages: got %v", figs)
	}
}

// The smoke run reads the committed file the same way: a reformatted
// report fails here before it fails CI.
func TestCommittedResultsHaveEveryGuardedTool(t *testing.T) {
	figs, err := loadCommitted("../../docs/benchmarks.md", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range append([]string{toolFloor}, readTools...) {
		if f, ok := figs[tool]; !ok {
			t.Errorf("docs/benchmarks.md has no concurrency-1 row for %s at 1000 messages", tool)
		} else if f.cpu <= 0 && guardSkip[tool] == "" {
			t.Errorf("docs/benchmarks.md has no back-to-back CPU for %s at 1000 messages", tool)
		}
	}
}

// swapColumns exchanges columns i and j of every table row in md.
func swapColumns(md string, i, j int) string {
	lines := strings.Split(md, "\n")
	for k, l := range lines {
		if !strings.HasPrefix(l, "|") {
			continue
		}
		c := cells(l)
		if len(c) > max(i, j) {
			c[i], c[j] = c[j], c[i]
			lines[k] = "| " + strings.Join(c, " | ") + " |"
		}
	}
	return strings.Join(lines, "\n")
}

func TestParseCommittedFollowsTheHeader(t *testing.T) {
	// tool and ratio swapped, messages and CPU swapped.
	md := swapColumns(swapColumns(committedSample, 0, 6), 1, 4)
	figs, err := parseCommitted(md, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if g := figs[toolList]; !near(g.cpu, 3.10) || !near(g.p50, 2.38) {
		t.Errorf("list: got %+v, want cpu 3.10 and p50 ratio 2.38", g)
	}
}

func TestParseCommittedRefusesWhatItCannotRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   string
		want string // in the error
	}{
		{"no heading", strings.Replace(committedSample, "### Concurrency 1", "### Latency", 1), `no "### Concurrency 1" heading`},
		{"column renamed", strings.Replace(committedSample, "| CPU per call |", "| CPU |", 1), `no column "CPU per call"`},
		{"ratio column renamed", strings.Replace(committedSample, "| gateway / direct (p50) |", "| ratio |", 1), `no column "gateway / direct (p50)"`},
		{"no back-to-back table", strings.Replace(committedSample, backToBackHeading, "### CPU", 1), "rerun the full benchmark"},
		{"no table", strings.Replace(committedSample, "| tool | messages | gateway p50", "tool messages gateway p50", 1), "no table with a header row"},
		{"no row of the size", strings.ReplaceAll(committedSample, "| 1000 |", "| 2000 |"), "no row for 1000 messages"},
		{"figure not a number", strings.Replace(committedSample, "| 3.100 |", "| n/a |", 1), `"n/a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCommitted(tc.md, 1000)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestGuardFailsOnlyOnARegressionBeyondHalf(t *testing.T) {
	committed, err := parseCommitted(committedSample, 1000)
	if err != nil {
		t.Fatal(err)
	}
	tools := []string{toolFloor, toolList, toolSearch, toolRead, toolFolders, toolSend}
	// The committed figures with the floor's CPU halved: every CPU ratio
	// in the smoke is then twice the committed one.
	slowCPU := func(m map[string]c1Figures) {
		m[toolFloor] = c1Figures{0.15, m[toolFloor].p50}
	}
	for _, tc := range []struct {
		name   string
		change func(map[string]c1Figures)
		fail   []string // in the error; nil: passes
	}{
		{"same figures", func(map[string]c1Figures) {}, nil},
		{"49% slower list", func(m map[string]c1Figures) { m[toolList] = c1Figures{3.10 * 1.49, 2.38 * 1.49} }, nil},
		{"twice as fast", func(m map[string]c1Figures) {
			for k, v := range m {
				if k != toolFloor {
					m[k] = c1Figures{v.cpu / 2, v.p50 / 2}
				}
			}
		}, nil},
		{"read p50 ratio up 60%", func(m map[string]c1Figures) { m[toolRead] = c1Figures{0.90, 2.31 * 1.6} },
			[]string{"imap_read_email p50 ÷ direct: 3.70, committed 2.31", "(+60%)"}},
		{"list CPU up 80%", func(m map[string]c1Figures) { m[toolList] = c1Figures{3.10 * 1.8, 2.38} },
			[]string{"imap_list_emails CPU per call ÷ floor's: 18.60, committed 10.33, limit 15.50 (+80%)"}},
		{"floor p50 ratio up 70% (not guarded)", func(m map[string]c1Figures) { m[toolFloor] = c1Figures{0.30, 1.57 * 1.7} }, nil},
		{"every CPU ratio doubled", slowCPU, []string{"4 figure(s)", "imap_list_emails CPU", "imap_search_emails CPU", "imap_read_email CPU", "imap_list_folders CPU"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			smoke := map[string]c1Figures{}
			for k, v := range committed {
				smoke[k] = v
			}
			tc.change(smoke)
			rows, err := guardCompare(committed, smoke, tools)
			if err != nil {
				t.Fatal(err)
			}
			table, err := guardVerdict(rows)
			if !strings.Contains(table, "| imap_list_emails | p50 ÷ direct | 2.38 |") {
				t.Errorf("table lacks the list row:\n%s", table)
			}
			if tc.fail == nil {
				if err != nil {
					t.Errorf("failed: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("passed, want a failure naming %q\n%s", tc.fail, table)
			}
			for _, f := range tc.fail {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q lacks %q", err, f)
				}
			}
			if !strings.Contains(table, "FAIL") {
				t.Errorf("table has no FAIL:\n%s", table)
			}
		})
	}
}

func TestGuardLeavesOutSend(t *testing.T) {
	committed, _ := parseCommitted(committedSample, 1000)
	smoke := map[string]c1Figures{toolFloor: committed[toolFloor], toolSend: {100, 100}}
	rows, err := guardCompare(committed, smoke, []string{toolFloor, toolSend})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.tool == toolSend {
			t.Errorf("%s is guarded: %+v", toolSend, r)
		}
	}
}

func TestGuardRefusesAToolTheCommittedTableLacks(t *testing.T) {
	committed, _ := parseCommitted(committedSample, 1000)
	smoke := map[string]c1Figures{toolFloor: {0.3, 1.5}, toolList: {3, 2}, "imap_new_tool": {1, 1}}
	_, err := guardCompare(committed, smoke, []string{toolFloor, toolList, "imap_new_tool"})
	if err == nil || !strings.Contains(err.Error(), "no row for imap_new_tool") {
		t.Errorf("got %v, want an error naming imap_new_tool", err)
	}
	delete(committed, toolFloor)
	_, err = guardCompare(committed, smoke, []string{toolFloor, toolList})
	if err == nil || !strings.Contains(err.Error(), toolFloor) {
		t.Errorf("without a committed floor: got %v", err)
	}
}

// The gateway's CPU is read from schedstat in nanoseconds; /proc/PID/stat
// counts the same time in 10 ms ticks, so over some CPU they must agree.
func TestProcCPUAgreesWithStat(t *testing.T) {
	pid := os.Getpid()
	s0, err := schedCPU(pid)
	if err != nil {
		t.Skipf("no schedstat here: %v", err)
	}
	t0 := statCPU(pid)
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for d, _ := schedCPU(pid); d-s0 < 500*time.Millisecond && time.Now().Before(deadline); d, _ = schedCPU(pid) {
		for i := range 1_000_000 {
			x += i
		}
	}
	s1, _ := schedCPU(pid)
	ds, dt := s1-s0, statCPU(pid)-t0
	t.Logf("schedstat %v, stat %v (%d)", ds, dt, x%2)
	if diff := (ds - dt).Abs(); diff > 20*time.Millisecond+ds/10 {
		t.Errorf("schedstat %v and stat %v differ by %v", ds, dt, diff)
	}
	if got := procCPU(pid); got < s1 {
		t.Errorf("procCPU %v, below schedstat's %v read before", got, s1)
	}
}
