package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The smoke run's regression guard. Absolute figures of a CI machine say
// little (it is shared, and not the machine of the committed run), so the
// guard compares ratios measured side by side in one run, against the same
// ratios committed in docs/benchmarks.md by the last full run:
//
//   - a tool's gateway CPU per call ÷ the floor's (an MCP call that does no
//     mail work): the gateway's own work, in units of its fixed cost. It is
//     read from the back-to-back pass (cpuPass), not from the
//     concurrency-1 cells: there the gateway idles while each direct call
//     runs, its background CPU is charged to its calls in proportion, and
//     imap_list_folders ÷ floor moved between 1.4 and 2.9 across runs of
//     the same code; back to back it stayed within 1.94–2.14;
//   - gateway p50 ÷ direct p50 of each tool, from the concurrency-1
//     cells: the latency it adds (the floor's is too small a number to
//     guard: see guardCompare).
//
// A figure fails when the smoke's exceeds the committed one by more than
// guardSlack; being faster never fails.

const guardSlack = 1.5

// guardSkip lists tools left out of the guard, and why.
var guardSkip = map[string]string{
	// Both of its figures follow Postfix: a send's latency is mostly
	// Postfix's submission (about 50 ms on the direct side), and the cell
	// has a third of the calls. Across smoke runs of the same code its p50
	// ratio moved by up to 70 % and its CPU ratio by up to 47 %.
	toolSend: "its figures follow Postfix's timing",
}

// c1Figures are one tool's guarded figures at one mailbox size.
type c1Figures struct {
	cpu float64 // gateway CPU per call back to back, ms (0: not measured)
	p50 float64 // gateway p50 ÷ direct p50 at concurrency 1
}

// The headings of the tables the guard reads.
const (
	c1Heading         = "### Concurrency 1"
	backToBackHeading = "### Gateway CPU per call, calls back to back"
)

// The columns the guard reads, found by their header: tool, size and the
// p50 ratio in the concurrency-1 table; tool, size and CPU per call in the
// back-to-back one.
const (
	colTool  = "tool"
	colSize  = "messages"
	colCPU   = "CPU per call"
	colRatio = "gateway / direct (p50)"
)

// loadCommitted reads path's committed concurrency-1 figures for mailboxes
// of size messages.
func loadCommitted(path string, size int) (map[string]c1Figures, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	figs, err := parseCommitted(string(data), size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return figs, nil
}

// parseCommitted reads md's RESULTS section (all of md if it has no
// markers): the p50 ratios of the concurrency-1 table and the CPU per call
// of the back-to-back table, by tool, for size messages.
func parseCommitted(md string, size int) (map[string]c1Figures, error) {
	if i := strings.Index(md, beginMarker); i >= 0 {
		md = md[i+len(beginMarker):]
		if j := strings.Index(md, endMarker); j >= 0 {
			md = md[:j]
		}
	}
	figs := map[string]c1Figures{}
	err := readTable(md, c1Heading, size, colRatio, func(tool string, v float64) {
		f := figs[tool]
		f.p50 = v
		figs[tool] = f
	})
	if err != nil {
		return nil, err
	}
	err = readTable(md, backToBackHeading, size, colCPU, func(tool string, v float64) {
		if f, ok := figs[tool]; ok {
			f.cpu = v
			figs[tool] = f
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%w (written by the full run since the guard reads CPU back to back: rerun the full benchmark)", err)
	}
	return figs, nil
}

// readTable finds the first table after the heading that starts with
// heading and calls set with each of its rows for size messages: the tool
// and the figure in column col.
func readTable(md, heading string, size int, col string, set func(tool string, v float64)) error {
	lines := strings.Split(md, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), heading) {
			start = i + 1
			break
		}
	}
	name := strings.TrimPrefix(heading, "### ")
	if start < 0 {
		return fmt.Errorf("no %q heading in the results", heading)
	}
	var table []string
	for _, l := range lines[start:] {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "|") {
			table = append(table, l)
			continue
		}
		if len(table) > 0 || strings.HasPrefix(l, "#") {
			break // the end of the table, or of the section without one
		}
	}
	if len(table) < 3 || isRule(table[0]) || !isRule(table[1]) {
		return fmt.Errorf("no table with a header row and rows under %q", heading)
	}
	idx := map[string]int{}
	for i, h := range cells(table[0]) {
		idx[normHeader(h)] = i
	}
	var missing []string
	for _, c := range []string{colTool, colSize, col} {
		if _, ok := idx[normHeader(c)]; !ok {
			missing = append(missing, fmt.Sprintf("%q", c))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the %s table has no column %s (header: %s)", name, strings.Join(missing, ", "), table[0])
	}
	at := func(row []string, c string) string {
		if i := idx[normHeader(c)]; i < len(row) {
			return row[i]
		}
		return ""
	}
	found := 0
	for _, l := range table[2:] { // [1] is the |---| line
		row := cells(l)
		n, err := strconv.Atoi(strings.NewReplacer(",", "", " ", "").Replace(at(row, colSize)))
		if err != nil {
			return fmt.Errorf("%s row %q: messages: %w", name, l, err)
		}
		if n != size {
			continue
		}
		v, err := number(at(row, col))
		if err != nil {
			return fmt.Errorf("%s row %q: %w", name, l, err)
		}
		set(strings.Trim(at(row, colTool), "`"), v)
		found++
	}
	if found == 0 {
		return fmt.Errorf("the %s table has no row for %d messages", name, size)
	}
	return nil
}

// cells splits a markdown table row.
func cells(row string) []string {
	row = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(row), "|"), "|")
	c := strings.Split(row, "|")
	for i := range c {
		c[i] = strings.TrimSpace(c[i])
	}
	return c
}

// isRule says whether row is a table's |---|:--:| line.
func isRule(row string) bool {
	return strings.Trim(row, "|-: ") == "" && strings.Contains(row, "-")
}

func normHeader(h string) string { return strings.ToLower(strings.Join(strings.Fields(h), " ")) }

// number reads a figure such as "0.30", "2.38 ×" or "3.10 ms".
func number(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, errors.New("empty figure")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("figure %q: %w", s, err)
	}
	return v, nil
}

// guardRow is one compared figure.
type guardRow struct {
	tool, figure     string
	committed, smoke float64
}

func (r guardRow) limit() float64 { return r.committed * guardSlack }
func (r guardRow) ok() bool       { return r.smoke <= r.limit() }

const (
	figCPU = "CPU per call ÷ floor's"
	figP50 = "p50 ÷ direct"
)

// guardCompare pairs the smoke's figures with the committed ones for the
// floor and tools (in that order). An error means the comparison cannot be
// made: a tool or the floor missing from either side, or a figure of 0.
func guardCompare(committed, smoke map[string]c1Figures, tools []string) ([]guardRow, error) {
	cf, ok := committed[toolFloor]
	if !ok {
		return nil, fmt.Errorf("the committed concurrency-1 table has no %q row", toolFloor)
	}
	sf, ok := smoke[toolFloor]
	if !ok {
		return nil, errors.New("the smoke run measured no floor")
	}
	if cf.cpu <= 0 || sf.cpu <= 0 {
		return nil, fmt.Errorf("the floor's CPU per call back to back is %.2f ms committed, %.3f ms in the smoke: no ratio to compare", cf.cpu, sf.cpu)
	}
	// The floor's own p50 ratio is reported but not guarded: its direct
	// side is a NOOP of 0.14-0.26 ms, and on the same machine the code
	// before issue 29 measured 2.20-2.47 against a committed 1.45 while
	// the code after it measured 2.10-2.50: noise of the denominator, not
	// the gateway. The tools' p50 ratios (ms-scale on both sides) and CPU
	// ratios stay guarded.
	var rows []guardRow
	var missing []string
	for _, t := range tools {
		if t == toolFloor || guardSkip[t] != "" {
			continue
		}
		c, ok := committed[t]
		if !ok {
			missing = append(missing, t)
			continue
		}
		s, ok := smoke[t]
		if !ok {
			return nil, fmt.Errorf("the smoke run has no concurrency-1 figures for %s", t)
		}
		rows = append(rows,
			guardRow{t, figCPU, c.cpu / cf.cpu, s.cpu / sf.cpu},
			guardRow{t, figP50, c.p50, s.p50})
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the committed concurrency-1 table has no row for %s, which the smoke measured: rerun the full benchmark", strings.Join(missing, ", "))
	}
	for _, r := range rows {
		if r.committed <= 0 {
			return nil, fmt.Errorf("committed %s of %s is %.2f: no limit to compare with", r.figure, r.tool, r.committed)
		}
	}
	return rows, nil
}

// guardVerdict renders rows as a table and returns an error naming every
// figure over its limit.
func guardVerdict(rows []guardRow) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "| tool | figure | committed | smoke | limit (%.1f ×) | |\n|---|---|---:|---:|---:|---|\n", guardSlack)
	var bad []string
	for _, r := range rows {
		v := "ok"
		if !r.ok() {
			v = "FAIL"
			bad = append(bad, fmt.Sprintf("%s %s: %.2f, committed %.2f, limit %.2f (+%.0f%%)",
				r.tool, r.figure, r.smoke, r.committed, r.limit(), (r.smoke/r.committed-1)*100))
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f | %.2f | %s |\n", r.tool, r.figure, r.committed, r.smoke, r.limit(), v)
	}
	if len(bad) > 0 {
		return b.String(), fmt.Errorf("regression guard: %d figure(s) more than %.0f%% above the committed ones:\n  %s",
			len(bad), (guardSlack-1)*100, strings.Join(bad, "\n  "))
	}
	return b.String(), nil
}

// guard checks the smoke's concurrency-1 figures against committed (read
// from path) and prints the comparison.
func (b *bench) guard(path string, committed map[string]c1Figures) error {
	size := b.o.sizes[0]
	smoke := map[string]c1Figures{}
	tools := append([]string{toolFloor}, b.rep.tools...)
	for _, t := range tools {
		g, d := b.rep.get(t, size, 1, sideGateway), b.rep.get(t, size, 1, sideDirect)
		if g == nil || d == nil {
			continue
		}
		smoke[t] = c1Figures{p50: ratio(g.P50(), d.P50())}
	}
	for _, t := range b.rep.callCPU {
		if f, ok := smoke[t.tool]; ok {
			f.cpu = t.perCall()
			smoke[t.tool] = f
		}
	}
	rows, err := guardCompare(committed, smoke, tools)
	if err != nil {
		return fmt.Errorf("regression guard: %w", err)
	}
	table, err := guardVerdict(rows)
	fmt.Printf("\n### Regression guard: this smoke run against %s (%d messages, concurrency 1)\n\n", path, size)
	fmt.Print(table)
	for t, why := range guardSkip {
		if smoke[t] != (c1Figures{}) {
			fmt.Printf("\nNot guarded: %s (%s).\n", t, why)
		}
	}
	fmt.Println()
	return err
}
