package main

// The latency bench over a simulated network (issue 27): with -rtt 0,20,40
// the gateway and a direct go-imap / go-smtp client reach Dovecot and
// Postfix through internal/rttproxy, which holds each chunk for half a round
// trip each way and counts the round trips of every call (TCP connections
// plus client flights). One proxy stands in front of IMAPS and one in front
// of submissions; the gateway and the direct client share them, and calls
// run one at a time, so the counts between Reset and Counts are the call's.
//
// Warm: the gateway has a pooled connection for the user with the folder
// open (the tool was called twice before the samples); the direct client
// keeps one logged-in connection with INBOX selected and sends the fewest
// commands that give the same result, pipelined where go-imap allows. Cold:
// a user's first call, on a gateway that has never seen the user (a fresh
// user per sample; the gateway is restarted for each round trip, so a user
// is new to each), next to a direct client that dials, does TLS, LOGIN and
// SELECT/EXAMINE the ordinary way, then the commands. Writes take a fresh
// target per sample.

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
	"github.com/mailbox-mcp/mailbox-mcp/internal/rttproxy"
)

const (
	toolThread     = "imap_get_thread"
	toolPeek       = "imap_peek_inbox"
	toolCheck      = "imap_check_inbox"
	toolAttachment = "imap_get_attachment"
	toolFlags      = "imap_set_flags"
	toolMove       = "imap_move_emails"

	rttBeginMarker = "<!-- BEGIN RTT (written by mailbox-bench -rtt) -->"
	rttEndMarker   = "<!-- END RTT -->"

	rttSeed       = 200 // messages seeded into each user's INBOX
	rttWarmUp     = 2   // untimed calls of a tool before its warm samples
	rttKeyword    = "$Bench"
	rttArchive    = "Archive"
	rttThreadFrom = "thread.sender@example.org"
)

// The samples of a -rtt run (flags of their own here, so that main.go
// only dispatches).
var (
	rttWarmN = flag.Int("rtt-warm", 15, "with -rtt: warm samples per tool, side and round trip")
	rttColdN = flag.Int("rtt-cold", 10, "with -rtt: cold samples per tool, side and round trip (each cold sample is a user of its own)")
	rttGuard = flag.Bool("rtt-guard", true, "with -smoke: also run a short pass at round trip 0 (3 warm, 3 cold samples per tool) and fail when a tool's gateway round trips, warm or cold, are above the committed ones in -guard-file's round trip 0 ms table")
)

// rttTools are the tools measured, in order.
var rttTools = []string{toolList, toolSearch, toolRead, toolFolders, toolThread, toolPeek,
	toolCheck, toolAttachment, toolFlags, toolMove, toolSend}

// rttSelect is what a cold direct call opens before its commands: "" no
// folder, "examine" INBOX read-only, "select" INBOX read-write.
var rttSelect = map[string]string{
	toolList: "examine", toolSearch: "examine", toolRead: "examine", toolThread: "examine",
	toolPeek: "examine", toolAttachment: "examine", toolCheck: "select", toolFlags: "select", toolMove: "select",
}

// rttOptions is the -rtt run's shape.
type rttOptions struct {
	rtts       []time.Duration
	warm, cold int      // samples per tool and round trip
	tools      []string // the tools measured, in rttTools' order (nil: all)
	// guardFile, when set, makes the run the smoke's round-trip guard:
	// the gateway's counts at round trip 0 are checked against the
	// committed ones there, and nothing is written.
	guardFile string
}

// parseRTTs reads -rtt's comma-separated milliseconds.
func parseRTTs(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 1000 {
			return nil, fmt.Errorf("-rtt: %q is not a round trip of 0 to 1000 ms", f)
		}
		out = append(out, time.Duration(n)*time.Millisecond)
	}
	return out, nil
}

// rttCell is one side of one tool at one round trip, warm or cold.
type rttCell struct {
	res *result
	rts []int // round trips of each successful call
}

func (c *rttCell) add(d time.Duration, rt int, err error) {
	if c.res == nil {
		c.res = &result{}
	}
	if c.res.addCall(d, err) {
		c.rts = append(c.rts, rt)
	}
}

// rttRow is one tool at one round trip.
type rttRow struct {
	tool               string
	warmGW, warmDirect rttCell
	// warmLean: the gateway called by viaJSON (the answer decoded once),
	// for the read tools (rttReads).
	warmLean               rttCell
	coldGW, coldDirect     rttCell
	warmNote, coldNote     string
	warmSkipped, coldSkipd bool
}

// rttReport is what the -rtt run prints and writes.
type rttReport struct {
	o        rttOptions
	args     string
	started  time.Time
	finished time.Time
	rows     map[time.Duration][]*rttRow
	notes    []string
}

// rtStats is the median round trips of a cell and their range.
func rtStats(rts []int) (med, lo, hi int) {
	if len(rts) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(rts)
	slices.Sort(s)
	return s[(len(s)-1)/2], s[0], s[len(s)-1]
}

// fmtRT renders a cell's round trips: the median, and the range when the
// samples differed.
func fmtRT(rts []int) string {
	if len(rts) == 0 {
		return "–"
	}
	med, lo, hi := rtStats(rts)
	if lo == hi {
		return strconv.Itoa(med)
	}
	return fmt.Sprintf("%d (%d–%d)", med, lo, hi)
}

func fmtMS(d time.Duration) string {
	v := float64(d) / 1e6
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// fmtLat renders p50 / p99 in ms.
func fmtLat(c rttCell) string {
	if c.res == nil || len(c.res.lat) == 0 {
		return "–"
	}
	return fmtMS(c.res.P50()) + " / " + fmtMS(c.res.P99())
}

func fmtRatio(g, d rttCell) string {
	if g.res == nil || d.res == nil || len(g.res.lat) == 0 || len(d.res.lat) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f ×", ratio(g.res.P50(), d.res.P50()))
}

// fmtLean is the lean client's p50 and its ratio to the direct client's.
func fmtLean(l, d rttCell) string {
	if l.res == nil || len(l.res.lat) == 0 {
		return "–"
	}
	return fmtMS(l.res.P50()) + ", " + fmtRatio(l, d)
}

func fmtRTPair(g, d rttCell) string { return fmtRT(g.rts) + " / " + fmtRT(d.rts) }

// rttTableHeader is the header of each round trip's table; the smoke
// guard reads the columns by these names.
const (
	colWarmRT = "warm round trips gateway / direct"
	colColdRT = "cold round trips gateway / direct"
)

// table renders one round trip's rows.
func rttTable(rtt time.Duration, rows []*rttRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Round trip %d ms\n\n", rtt.Milliseconds())
	fmt.Fprintf(&b, "| tool | warm gateway p50 / p99 (ms) | warm direct p50 / p99 (ms) | warm gateway / direct (p50) | warm gateway, answer decoded once: p50 (ms), / direct | %s | cold gateway p50 / p99 (ms) | cold direct p50 / p99 (ms) | cold gateway / direct (p50) | %s |\n", colWarmRT, colColdRT)
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.tool,
			fmtLat(r.warmGW), fmtLat(r.warmDirect), fmtRatio(r.warmGW, r.warmDirect), fmtLean(r.warmLean, r.warmDirect), fmtRTPair(r.warmGW, r.warmDirect),
			fmtLat(r.coldGW), fmtLat(r.coldDirect), fmtRatio(r.coldGW, r.coldDirect), fmtRTPair(r.coldGW, r.coldDirect))
	}
	return b.String()
}

// markdown is the report's text.
func (r *rttReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run of %s (%s, %.1f min): `mailbox-bench %s`. %s.\n\n", r.finished.UTC().Format("2006-01-02 15:04 UTC"),
		machine(), r.finished.Sub(r.started).Minutes(), r.args, loadNote())
	fmt.Fprintf(&b, "%d warm and %d cold samples per tool, side and round trip; mailboxes of %d messages. "+
		"Round trips are the median per call (range when samples differed), TCP connections plus client flights counted by the proxy, IMAP and SMTP together.\n\n",
		r.o.warm, r.o.cold, rttSeed+3)
	for _, rtt := range r.o.rtts {
		b.WriteString(rttTable(rtt, r.rows[rtt]))
		b.WriteString("\n")
	}
	if bad := r.failures(); bad != "" {
		fmt.Fprintf(&b, "Failed calls:\n\n```\n%s\n```\n\n", bad)
	}
	for _, n := range r.notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return strings.TrimRight(b.String(), "\n")
}

func loadNote() string { return "load average at the end " + loadavg() }

// failures lists every cell with a failed call.
func (r *rttReport) failures() string {
	var bad []string
	for _, rtt := range r.o.rtts {
		for _, row := range r.rows[rtt] {
			for _, c := range []struct {
				side string
				c    rttCell
			}{{sideGateway, row.warmGW}, {sideDirect, row.warmDirect}, {sideGatewayCold, row.coldGW}, {sideDirectCold, row.coldDirect}} {
				if c.c.res != nil && c.c.res.Errors > 0 {
					bad = append(bad, fmt.Sprintf("rtt %d ms %s %s: %d of %d calls failed, first: %v",
						rtt.Milliseconds(), c.side, row.tool, c.c.res.Errors, c.c.res.Calls, c.c.res.Err))
				}
			}
		}
	}
	return strings.Join(bad, "\n")
}

// rttFixture is what the bench puts into every user's mailbox besides the
// seeded messages, with the UIDs it got (the same for every user: the
// seed is the same).
type rttFixture struct {
	attachment uint32 // multipart/mixed: text, then a 20 KB PDF as part 2
	attSize    int    // the attachment's decoded size
	first      uint32 // a ~2 KB single-part text, the start of a thread of 2
	reply      uint32 // its reply
	unread     uint32 // unread messages in INBOX after the fixture
}

// rttTargets hands out fresh messages for the writes: each user's own
// counter, so that no two samples touch the same message.
type rttTargets struct {
	mu   sync.Mutex
	next map[string]uint32 // user+tool -> next UID
}

func (t *rttTargets) take(user, tool string) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := user + " " + tool
	uid, ok := t.next[k]
	if !ok {
		// set_flags from the oldest up, move from the newest seeded down.
		uid = 1
		if tool == toolMove {
			uid = rttSeed
		}
	}
	if tool == toolMove {
		t.next[k] = uid - 1
	} else {
		t.next[k] = uid + 1
	}
	return uid
}

// rttBench is one -rtt run.
type rttBench struct {
	*bench
	ro      rttOptions
	fx      rttFixture
	imapP   *rttproxy.Proxy
	smtpP   *rttproxy.Proxy
	targets *rttTargets
	send    map[string]any
	rep     *rttReport
	after   func() // run by sample after the counts (see there)
}

func rttWarmUser(i int) (string, string) {
	return fmt.Sprintf("rttwarm%d@example.test", i), fmt.Sprintf("rttwarmpw%d", i)
}

func rttColdUser(i int) (string, string) {
	return fmt.Sprintf("rttcold%03d@example.test", i), fmt.Sprintf("rttcoldpw%03d", i)
}

// rttToolsOf is rttTools narrowed to -tools (o.only), in rttTools' order.
func rttToolsOf(only map[string]bool) ([]string, error) {
	if only == nil {
		return rttTools, nil
	}
	var out []string
	for _, t := range rttTools {
		if only[t] {
			out = append(out, t)
		}
	}
	for t := range only {
		if !slices.Contains(rttTools, t) {
			return nil, fmt.Errorf("-tools: %s is not a tool the -rtt run measures (%s)", t, strings.Join(rttTools, ", "))
		}
	}
	return out, nil
}

// rttReads are the read tools, which can be called any number of times
// with the same result: -profile profiles their calls at each round trip
// (back to back after the warm samples), and they are also called warm
// through viaJSON (the writes take a fresh message per call from a budget
// sized for two sides).
var rttReads = []string{toolList, toolSearch, toolRead, toolFolders, toolThread, toolPeek, toolAttachment}

// rttProfileSecs is how long -profile calls a tool back to back.
const rttProfileSecs = 4

// runRTT is the -rtt run: set up, measure each round trip, report.
func runRTT(o options, ro rttOptions) error {
	if ro.tools == nil {
		ro.tools = rttTools
	}
	rb := &rttBench{
		bench:   &bench{o: o, sizeUser: map[int]string{}, typical: map[string]uint32{}, sender: map[string]string{}},
		ro:      ro,
		targets: &rttTargets{next: map[string]uint32{}},
		rep:     &rttReport{o: ro, args: o.args, started: time.Now(), rows: map[time.Duration][]*rttRow{}},
	}
	b := rb.bench
	var committed map[string]rtGuardFigures
	if ro.guardFile != "" {
		// Read first: a report that no longer parses fails at once.
		data, err := os.ReadFile(ro.guardFile)
		if err == nil {
			committed, err = parseRTTCommitted(string(data))
		}
		if err != nil {
			return fmt.Errorf("round-trip guard: %s: %w (-rtt-guard=false skips it)", ro.guardFile, err)
		}
		o.out = ""
	}
	cleanup, err := b.prepare("mbench-rtt-")
	if err != nil {
		return err
	}
	defer cleanup()
	users := map[string]string{}
	var all []string
	for i := range ro.rtts {
		u, pw := rttWarmUser(i)
		users[u] = pw
		all = append(all, u)
	}
	for i := range ro.cold * len(ro.tools) {
		u, pw := rttColdUser(i)
		users[u] = pw
		all = append(all, u)
	}
	logf("starting the mail stack")
	if b.stack, err = mailstack.Start(mailstack.Options{Users: users}); err != nil {
		return err
	}
	defer b.stack.Stop()
	t := time.Now()
	logf("seeding %d users with %d messages each", len(all), rttSeed)
	if err := rb.seed(all); err != nil {
		return err
	}
	logf("seeded in %.1f s", time.Since(t).Seconds())
	if rb.imapP, err = rttproxy.Start(b.stack.IMAPSAddr(), 0); err != nil {
		return err
	}
	defer rb.imapP.Close()
	if rb.smtpP, err = rttproxy.Start(b.stack.SubmissionsAddr(), 0); err != nil {
		return err
	}
	defer rb.smtpP.Close()

	for i, rtt := range ro.rtts {
		if err := rb.measureRTT(i, rtt); err != nil {
			return fmt.Errorf("rtt %d ms: %w", rtt.Milliseconds(), err)
		}
	}
	rb.rep.notes = append(rb.rep.notes, rttNotes...)
	rb.rep.finished = time.Now()
	text := rb.rep.markdown()
	fmt.Println(text)
	if o.out != "" {
		if err := writeResults(o.out, rttBeginMarker, rttEndMarker, text); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	var guardErr error
	if committed != nil {
		table, err := rtGuardVerdict(committed, rtGuardSmoke(rb.rep.rows[0]))
		fmt.Printf("\n### Round-trip guard: gateway round trips at 0 ms against %s (fewest of the samples; committed: the median)\n\n%s\n", ro.guardFile, table)
		guardErr = err
	}
	if bad := rb.rep.failures(); bad != "" {
		return errors.Join(errors.New(bad), guardErr)
	}
	return guardErr
}

// runRTTGuard is -smoke's round-trip pass: every tool at round trip 0,
// a few samples, checked against the committed counts in guardFile. At
// round trip 0 one call's count varies by a flight either way (a cold
// imap_set_flags took 4 to 6 in 10 samples; once all of 3 took 6, and
// the guard failed a tree whose count had not changed): 7 samples make
// the fewest the call's own.
func runRTTGuard(o options) error {
	logf("round-trip guard: a short pass at round trip 0")
	return runRTT(o, rttOptions{rtts: []time.Duration{0}, warm: 5, cold: 7, guardFile: o.guardFile, tools: rttTools})
}

// rtGuardFigures are one tool's gateway round trips, warm and cold.
type rtGuardFigures struct{ warm, cold int }

// parseRTTCommitted reads the gateway's round trips per tool from md's
// RTT section, table "Round trip 0 ms": the first figure of the warm and
// cold round-trip columns (the median).
func parseRTTCommitted(md string) (map[string]rtGuardFigures, error) {
	i := strings.Index(md, rttBeginMarker)
	if i < 0 {
		return nil, fmt.Errorf("no %q section", rttBeginMarker)
	}
	md = md[i:]
	if j := strings.Index(md, rttEndMarker); j >= 0 {
		md = md[:j]
	}
	const heading = "### Round trip 0 ms"
	lines := strings.Split(md, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == heading })
	if start < 0 {
		return nil, fmt.Errorf("no %q table", heading)
	}
	var table []string
	for _, l := range lines[start+1:] {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "|") {
			table = append(table, l)
		} else if len(table) > 0 || strings.HasPrefix(l, "#") {
			break
		}
	}
	if len(table) < 3 || !isRule(table[1]) {
		return nil, fmt.Errorf("no table with a header row and rows under %q", heading)
	}
	idx := map[string]int{}
	for i, h := range cells(table[0]) {
		idx[normHeader(h)] = i
	}
	for _, c := range []string{colTool, colWarmRT, colColdRT} {
		if _, ok := idx[normHeader(c)]; !ok {
			return nil, fmt.Errorf("the %q table has no column %q", heading, c)
		}
	}
	first := func(s string) (int, error) {
		f := strings.Fields(s)
		if len(f) == 0 {
			return 0, errors.New("empty figure")
		}
		return strconv.Atoi(f[0])
	}
	out := map[string]rtGuardFigures{}
	for _, l := range table[2:] {
		row := cells(l)
		at := func(c string) string {
			if i := idx[normHeader(c)]; i < len(row) {
				return row[i]
			}
			return ""
		}
		w, err := first(at(colWarmRT))
		if err != nil {
			return nil, fmt.Errorf("row %q: warm round trips: %w", l, err)
		}
		c, err := first(at(colColdRT))
		if err != nil {
			return nil, fmt.Errorf("row %q: cold round trips: %w", l, err)
		}
		out[strings.Trim(at(colTool), "`")] = rtGuardFigures{w, c}
	}
	return out, nil
}

// rtGuardSmoke is the smoke's figures: the fewest round trips of a tool's
// samples. At round trip 0 an answer can arrive between two writes the
// client meant as one flight, which adds a flight; nothing removes one, so
// the fewest is the call's count.
func rtGuardSmoke(rows []*rttRow) map[string]rtGuardFigures {
	out := map[string]rtGuardFigures{}
	for _, r := range rows {
		_, w, _ := rtStats(r.warmGW.rts)
		_, c, _ := rtStats(r.coldGW.rts)
		if len(r.warmGW.rts) > 0 && len(r.coldGW.rts) > 0 {
			out[r.tool] = rtGuardFigures{w, c}
		}
	}
	return out
}

// rtGuardVerdict compares the smoke's round trips with the committed ones
// and returns the table and an error naming every count that rose (or a
// tool missing on either side).
func rtGuardVerdict(committed, smoke map[string]rtGuardFigures) (string, error) {
	var b strings.Builder
	b.WriteString("| tool | warm committed | warm smoke | cold committed | cold smoke | |\n|---|---:|---:|---:|---:|---|\n")
	var bad []string
	for _, t := range rttTools {
		c, cok := committed[t]
		s, sok := smoke[t]
		switch {
		case !cok && !sok:
			continue
		case !cok:
			bad = append(bad, t+": no committed round trips (rerun -rtt)")
			continue
		case !sok:
			bad = append(bad, t+": not measured by the smoke")
			continue
		}
		v := "ok"
		if s.warm > c.warm || s.cold > c.cold {
			v = "FAIL"
			bad = append(bad, fmt.Sprintf("%s: warm %d (committed %d), cold %d (committed %d)", t, s.warm, c.warm, s.cold, c.cold))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s |\n", t, c.warm, s.warm, c.cold, s.cold, v)
	}
	if len(bad) > 0 {
		return b.String(), fmt.Errorf("round-trip guard: %d tool(s) above the committed round trips:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
	return b.String(), nil
}

// rttNotes explain what the tables can't.
var rttNotes = []string{
	"The direct client's commands per tool: list STATUS + FETCH (one flight); search STATUS + UID SEARCH, then FETCH; read one FETCH; folders one LIST-STATUS; thread UID THREAD, then the members' FETCH, then EXAMINE Sent + the SEARCH for the conversation's ids + SELECT INBOX (the gateway searches Sent too; the fixture's Sent holds none of the conversation); peek STATUS + UID SEARCH UNSEEN + FETCH, then FETCH of the unread senders; check (limit 1) UID SEARCH UNSEEN MODSEQ RETURN (MIN), then FETCH + UID STORE UNCHANGEDSINCE (exactly once, as the gateway); attachment one FETCH of structure and part; set_flags one UID STORE; move one UID MOVE; send a go-smtp session (greeting, EHLO, AUTH, MAIL, RCPT, DATA, QUIT; go-smtp does not pipeline) and APPEND to Sent.",
	"Cold direct: TCP, TLS, LOGIN, EXAMINE (SELECT for the writes; nothing for folders and send), each waited for, then the commands (go-imap writes LOGIN without waiting for the greeting, so it leaves with TLS's last flight: 5 round trips before a one-flight command); LOGOUT is not timed. Cold gateway: a user the gateway has not seen, its MCP client set up before the clock starts.",
	"The gateway is called through mcp-go's client (its columns but one) and, for the read tools warm, also by a lean client (the column \"answer decoded once\"): the same tools/call POST on a kept-alive connection, the answer (content blocks and structured result) decoded once with encoding/json. mcp-go's client decodes an answer about ten times over (ParseCallToolResult: about 2.2 ms for the attachment's answer, 1.0 ms for a list of 20; `go test -bench 'ResultEncoding|AttachmentAnswer' ./internal/tools`), which is the client's cost, not the gateway's; the TypeScript SDK parses an answer once.",
	"The gateway runs with MAILBOX_ACCESS=organize (set_flags and move need it), POOL_REVALIDATE=1h (a warm connection is not replaced by a fresh login in the middle of the samples) and MAX_POOL_SIZE=400.",
}

// seed fills each user's INBOX and adds the fixture, two users at a time.
func (rb *rttBench) seed(users []string) error {
	var (
		mu   sync.Mutex
		errs []error
		fxs  = map[string]rttFixture{}
		wg   sync.WaitGroup
		next = make(chan string)
	)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				err := rb.stack.Seed(u, rttSeed, "INBOX")
				var fx rttFixture
				if err == nil {
					fx, err = addFixture(rb.stack.IMAPSAddr(), rb.stack.TLSConfig(), u, rb.stack.Users[u])
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", u, err))
				}
				fxs[u] = fx
				mu.Unlock()
			}
		}()
	}
	for _, u := range users {
		next <- u
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	rb.fx = fxs[users[0]]
	for _, u := range users {
		if fxs[u] != rb.fx {
			return fmt.Errorf("%s's fixture %+v differs from %s's %+v", u, fxs[u], users[0], rb.fx)
		}
		rb.typical[u], rb.sender[u] = rb.fx.first, rttThreadFrom
	}
	// Each warm user takes up to warm+warm-up unread messages per side
	// for check_inbox, some of the newest go to Archive first.
	if need := uint32(2*(rb.ro.warm+rttWarmUp) + rb.ro.warm + rttWarmUp); slices.Contains(rb.ro.tools, toolCheck) && rb.fx.unread < need {
		return fmt.Errorf("%d unread messages per user, %d needed", rb.fx.unread, need)
	}
	return nil
}

// addFixture creates Archive and appends a message with an attachment and
// a thread of two to user's INBOX.
func addFixture(addr string, tc *tls.Config, user, pass string) (rttFixture, error) {
	var fx rttFixture
	c, err := dialDirect(addr, tc, user, pass)
	if err != nil {
		return fx, err
	}
	defer c.Close()
	if err := c.Create(rttArchive, nil).Wait(); err != nil {
		return fx, err
	}
	pdf := make([]byte, 20<<10)
	for i := range pdf {
		pdf[i] = byte(i * 7)
	}
	fx.attSize = len(pdf)
	date := time.Now().Format(time.RFC1123Z)
	att := "From: <reports@example.org>\r\nTo: <" + user + ">\r\nSubject: report attached\r\nDate: " + date +
		"\r\nMessage-ID: <att." + user + ">\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThe report is attached.\r\n" +
		"--b1\r\nContent-Type: application/pdf; name=\"report.pdf\"\r\nContent-Disposition: attachment; filename=\"report.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		wrap76(base64.StdEncoding.EncodeToString(pdf)) + "--b1--\r\n"
	first := "From: \"Thread Sender\" <" + rttThreadFrom + ">\r\nTo: <" + user + ">\r\nSubject: plans for the week\r\nDate: " + date +
		"\r\nMessage-ID: <t1." + user + ">\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		strings.Repeat("A paragraph of about one hundred characters about the plans for the week, to make two KB.\r\n", 22)
	reply := "From: \"Thread Sender\" <" + rttThreadFrom + ">\r\nTo: <" + user + ">\r\nSubject: Re: plans for the week\r\nDate: " + date +
		"\r\nMessage-ID: <t2." + user + ">\r\nIn-Reply-To: <t1." + user + ">\r\nReferences: <t1." + user +
		">\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nAgreed, see you on Monday.\r\n"
	var uids []uint32
	for _, m := range []string{att, first, reply} {
		cmd := c.Append("INBOX", int64(len(m)), &imap.AppendOptions{Flags: []imap.Flag{imap.FlagSeen}})
		if _, err := cmd.Write([]byte(m)); err != nil {
			return fx, err
		}
		if err := cmd.Close(); err != nil {
			return fx, err
		}
		data, err := cmd.Wait()
		if err != nil {
			return fx, err
		}
		uids = append(uids, uint32(data.UID))
	}
	fx.attachment, fx.first, fx.reply = uids[0], uids[1], uids[2]
	st, err := c.Status("INBOX", &imap.StatusOptions{NumUnseen: true}).Wait()
	if err != nil {
		return fx, err
	}
	if st.NumUnseen != nil {
		fx.unread = *st.NumUnseen
	}
	return fx, c.Logout().Wait()
}

func wrap76(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i += 76 {
		b.WriteString(s[i:min(i+76, len(s))])
		b.WriteString("\r\n")
	}
	return b.String()
}

// measureRTT runs every tool warm, then cold, at one round trip, on a
// gateway started for it (so no user is pooled from an earlier round trip).
func (rb *rttBench) measureRTT(i int, rtt time.Duration) error {
	b := rb.bench
	rb.imapP.SetRTT(rtt)
	rb.smtpP.SetRTT(rtt)
	env := append(slices.Clone(b.o.gwEnv), "IMAP_PORT="+strconv.Itoa(rb.imapP.Port()), "SMTP_PORT="+strconv.Itoa(rb.smtpP.Port()),
		"POOL_REVALIDATE=1h", "MAX_POOL_SIZE=400", "MAILBOX_ACCESS=organize")
	gw, err := startGateway(b.bin, b.dir, fmt.Sprintf("gateway-rtt%d", rtt.Milliseconds()), b.stack, b.key, b.o.profileDir != "", env...)
	if err != nil {
		return err
	}
	defer gw.stop()

	user, pass := rttWarmUser(i)
	c, err := mcpClient(gw.url, user, pass)
	if err != nil {
		return err
	}
	defer c.Close()
	if rb.send == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		tl, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		cancel()
		if err != nil {
			return err
		}
		for _, t := range tl.Tools {
			if t.Name == toolSend {
				rb.send = sendArgs(t)
			}
		}
		if rb.send == nil {
			return errors.New("the gateway does not list " + toolSend)
		}
	}
	lean := viaJSON(gw.url, user, pass)
	d, err := rb.openVia(user, "select")
	if err != nil {
		return fmt.Errorf("direct warm connection: %w", err)
	}
	defer d.close()

	var rows []*rttRow
	for _, tool := range rb.ro.tools {
		row := &rttRow{tool: tool}
		rows = append(rows, row)
		g, x := rb.gwCall(tool, viaMCP(c), user), rb.directCall(tool, d, user)
		sides := []func(){
			func() { rb.sample(&row.warmGW, g) },
			func() { rb.sample(&row.warmDirect, x) },
		}
		warmUps := []func() error{g, x}
		if slices.Contains(rttReads, tool) {
			l := rb.gwCall(tool, lean, user)
			sides = append(sides, func() { rb.sample(&row.warmLean, l) })
			warmUps = append(warmUps, l)
		}
		for range rttWarmUp {
			for _, w := range warmUps {
				if err := w(); err != nil {
					return fmt.Errorf("warm-up %s: %w", tool, err)
				}
			}
		}
		logf("rtt %d ms: warm %s", rtt.Milliseconds(), tool)
		for s := range rb.ro.warm {
			// Each side goes first in turn.
			for k := range sides {
				sides[(s+k)%len(sides)]()
			}
		}
		logf("  gateway %s RT %s; direct %s RT %s; lean %s", row.warmGW.res, fmtRT(row.warmGW.rts), row.warmDirect.res, fmtRT(row.warmDirect.rts), row.warmLean.res)
		if b.o.profileDir != "" && slices.Contains(rttReads, tool) {
			if err := rb.profileWarm(gw, tool, rtt, g); err != nil {
				return err
			}
		}
	}

	for ti, tool := range rb.ro.tools {
		row := rows[ti]
		logf("rtt %d ms: cold %s", rtt.Milliseconds(), tool)
		for s := range rb.ro.cold {
			u, pw := rttColdUser(ti*rb.ro.cold + s)
			cc, err := mcpClient(gw.url, u, pw)
			if err != nil {
				return err
			}
			sides := []func(){
				func() { rb.sample(&row.coldGW, rb.gwCall(tool, viaMCP(cc), u)) },
				func() { rb.sample(&row.coldDirect, func() error { return rb.coldCall(tool, u) }) },
			}
			if s%2 == 1 {
				sides[0], sides[1] = sides[1], sides[0]
			}
			sides[0]()
			sides[1]()
			cc.Close()
		}
		logf("  gateway %s RT %s; direct %s RT %s", row.coldGW.res, fmtRT(row.coldGW.rts), row.coldDirect.res, fmtRT(row.coldDirect.rts))
	}
	rb.rep.rows[rtt] = rows
	return nil
}

// profileWarm calls tool's warm gateway call g back to back for
// rttProfileSecs and saves the gateway's CPU and allocs profiles of the
// window as DIR/cpu-rttMS-TOOL.pprof and DIR/allocs-rttMS-TOOL.pprof
// (read them with -breakdown FILE -calls N, N as logged).
func (rb *rttBench) profileWarm(gw *gateway, tool string, rtt time.Duration, g func() error) error {
	name := fmt.Sprintf("rtt%d-%s.pprof", rtt.Milliseconds(), tool)
	prof := &profilePaths{cpu: filepath.Join(rb.o.profileDir, "cpu-"+name), allocs: filepath.Join(rb.o.profileDir, "allocs-"+name)}
	// The bench's own profile of the same window: the MCP client's
	// share of a call (and the proxies', which the direct side pays too).
	own, err := os.Create(filepath.Join(rb.o.profileDir, "bench-"+name))
	if err != nil {
		return err
	}
	defer own.Close()
	if err := pprof.StartCPUProfile(own); err != nil {
		return err
	}
	cpu0 := procCPU(os.Getpid())
	t, err := measureBackToBack(gw, g, prof, rttProfileSecs)
	benchCPU := procCPU(os.Getpid()) - cpu0
	pprof.StopCPUProfile()
	if err != nil {
		return fmt.Errorf("profile of %s: %w", tool, err)
	}
	logf("  profiled %s: %d calls back to back, %.3f ms CPU per call in the profile, %.3f from /proc, the bench's own %.3f; %s", tool, t.calls,
		float64(t.bd.total)/float64(t.calls)/1e6, float64(t.procCPU)/float64(t.calls)/1e6, float64(benchCPU)/float64(t.calls)/1e6, prof.cpu)
	return nil
}

// sample times one call and counts its round trips through both proxies.
// What the call left in rb.after (a cold direct call's LOGOUT) runs once
// the clock and the counts have stopped, so that it lands in no sample.
func (rb *rttBench) sample(cell *rttCell, op func() error) {
	rb.imapP.Reset()
	rb.smtpP.Reset()
	t := time.Now()
	err := op()
	d := time.Since(t)
	rt := rb.imapP.Counts().RoundTrips + rb.smtpP.Counts().RoundTrips
	cell.add(d, rt, err)
	if rb.after != nil {
		rb.after()
		rb.after = nil
	}
}

// gwCall is one call of tool through the gateway for user, checked.
func (rb *rttBench) gwCall(tool string, c caller, user string) func() error {
	fx := rb.fx
	switch tool {
	case toolList, toolSearch, toolRead, toolFolders:
		return rb.gwOp(tool, c, user, rttSeed, nil)
	case toolSend:
		return rb.gwOp(tool, c, user, rttSeed, rb.send)
	case toolThread:
		return func() error {
			m, err := c(tool, map[string]any{"uid": fx.reply})
			if err == nil && len(list(m, "messages")) != 2 {
				err = fmt.Errorf("thread: %d messages, want 2", len(list(m, "messages")))
			}
			return err
		}
	case toolPeek:
		return func() error {
			m, err := c(tool, map[string]any{})
			if err == nil && num(m, "total") < rttSeed/2 {
				err = fmt.Errorf("peek: total %d", num(m, "total"))
			}
			return err
		}
	case toolCheck:
		return func() error {
			m, err := c(tool, map[string]any{"limit": 1})
			if err == nil && len(list(m, "messages")) != 1 {
				err = fmt.Errorf("check: %d messages, want 1", len(list(m, "messages")))
			}
			return err
		}
	case toolAttachment:
		return func() error {
			m, err := c(tool, map[string]any{"uid": fx.attachment, "part_id": "2"})
			if err == nil && num(m, "size") < fx.attSize*9/10 {
				err = fmt.Errorf("attachment: size %d, want about %d", num(m, "size"), fx.attSize)
			}
			return err
		}
	case toolFlags:
		return func() error {
			uid := rb.targets.take(user, tool)
			m, err := c(tool, map[string]any{"uids": []uint32{uid}, "add": []string{rttKeyword}})
			if err == nil && len(list(m, "messages")) != 1 {
				err = fmt.Errorf("set_flags: %d messages, want 1", len(list(m, "messages")))
			}
			return err
		}
	case toolMove:
		return func() error {
			uid := rb.targets.take(user, tool)
			m, err := c(tool, map[string]any{"uids": []uint32{uid}, "to_folder": rttArchive})
			if err == nil && len(list(m, "messages")) != 1 {
				err = fmt.Errorf("move: %d messages, want 1", len(list(m, "messages")))
			}
			return err
		}
	}
	return func() error { return fmt.Errorf("the bench has no call for tool %s", tool) }
}

// openVia dials the IMAP proxy, logs in and opens INBOX as how says
// ("", "examine", "select"), each command waited for.
func (rb *rttBench) openVia(user, how string) (*direct, error) {
	c, err := dialDirect(rb.imapP.Addr(), rb.stack.TLSConfig(), user, rb.stack.Users[user])
	if err != nil {
		return nil, err
	}
	d := &direct{c: c}
	if how == "" {
		return d, nil
	}
	sd, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: how == "examine"}).Wait()
	if err != nil {
		c.Close()
		return nil, err
	}
	d.n = sd.NumMessages
	return d, nil
}

// coldCall is one direct call on a new connection. LOGOUT is left to
// sample, after the clock and the counts stop.
func (rb *rttBench) coldCall(tool, user string) error {
	d, err := rb.openVia(user, rttSelect[tool])
	if err != nil {
		return err
	}
	rb.after = d.close
	return rb.directCall(tool, d, user)()
}

// directCall is the fewest commands that give tool's result on d.
func (rb *rttBench) directCall(tool string, d *direct, user string) func() error {
	fx := rb.fx
	switch tool {
	case toolList:
		return func() error {
			// A warm connection's count goes down with the moves: take the
			// server's current one (the last untagged EXISTS).
			if mb := d.c.Mailbox(); mb != nil {
				d.n = mb.NumMessages
			}
			return d.list()
		}
	case toolSearch:
		return func() error { return d.search(rttThreadFrom) }
	case toolRead:
		return func() error { return d.read(imap.UID(fx.first)) }
	case toolFolders:
		return d.folders
	case toolThread:
		return func() error { return directThread(d.c, imap.UID(fx.reply)) }
	case toolPeek:
		return func() error { return directPeek(d.c) }
	case toolCheck:
		return func() error { return directCheck(d.c) }
	case toolAttachment:
		return func() error { return directAttachment(d.c, imap.UID(fx.attachment), fx.attSize) }
	case toolFlags:
		return func() error {
			uid := imap.UID(rb.targets.take(user, tool))
			bufs, err := d.c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{rttKeyword}}, nil).Collect()
			if err == nil && (len(bufs) != 1 || !slices.Contains(bufs[0].Flags, imap.Flag(rttKeyword))) {
				err = fmt.Errorf("direct set_flags: %d answers", len(bufs))
			}
			return err
		}
	case toolMove:
		return func() error {
			uid := imap.UID(rb.targets.take(user, tool))
			data, err := d.c.Move(imap.UIDSetNum(uid), rttArchive).Wait()
			if err == nil && data.DestUIDs == nil {
				err = errors.New("direct move: no COPYUID")
			}
			return err
		}
	case toolSend:
		return func() error {
			return directSendVia(rb.smtpP.Addr(), rb.stack.TLSConfig(), user, rb.stack.Users[user], d.c)
		}
	}
	return func() error { return fmt.Errorf("the bench has no direct call for tool %s", tool) }
}

// threadFetch is what a conversation lists of each message: the ids that
// link it, and the start of its text for a snippet.
var threadFetch = &imap.FetchOptions{
	UID: true, Flags: true, Envelope: true,
	BodySection: []*imap.FetchItemBodySection{
		{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"Message-ID", "In-Reply-To", "References"}, Peek: true},
		{Part: []int{1}, Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: 4096}},
	},
}

// directThread finds the conversation as the gateway does, in INBOX and
// Sent, in three flights: UID THREAD (REFS where offered); the members'
// FETCH; the SEARCH of Sent for the conversation's ids between an EXAMINE
// of Sent and a SELECT of INBOX (the fixture's Sent holds none of it, so
// nothing more is fetched, and the connection is back in INBOX).
func directThread(c *imapclient.Client, uid imap.UID) error {
	algo := imap.ThreadReferences
	if c.Caps().Has(imap.Cap("THREAD=REFS")) {
		algo = "REFS"
	}
	threads, err := c.UIDThread(&imapclient.ThreadOptions{Algorithm: algo, SearchCriteria: &imap.SearchCriteria{}}).Wait()
	if err != nil {
		return err
	}
	var uids []imap.UID
	for _, t := range threads {
		if m := threadMembers(t); slices.Contains(m, uid) {
			uids = m
		}
	}
	if uids == nil {
		return fmt.Errorf("direct thread: UID %d in no thread", uid)
	}
	bufs, err := c.Fetch(imap.UIDSetNum(uids...), threadFetch).Collect()
	if err != nil {
		return err
	}
	if len(bufs) != 2 {
		return fmt.Errorf("direct thread: %d messages, want 2", len(bufs))
	}
	var ids []string
	for _, b := range bufs {
		for _, sec := range b.BodySection {
			if sec.Section.Specifier != imap.PartSpecifierHeader {
				continue
			}
			for _, f := range strings.Fields(string(sec.Bytes)) {
				if strings.HasPrefix(f, "<") && strings.HasSuffix(f, ">") && !slices.Contains(ids, f) {
					ids = append(ids, f)
				}
			}
		}
	}
	sent := c.Select("Sent", &imap.SelectOptions{ReadOnly: true})
	search := c.UIDSearch(idsCriteria(ids), nil)
	inbox := c.Select("INBOX", nil) // read-write, as the warm connection was (check and the writes need it)
	if _, err := sent.Wait(); err != nil {
		return err
	}
	found, err := search.Wait()
	if err == nil && len(found.AllUIDs()) != 0 {
		err = fmt.Errorf("direct thread: %d copies in Sent, want none", len(found.AllUIDs()))
	}
	if _, ierr := inbox.Wait(); err == nil {
		err = ierr
	}
	return err
}

// idsCriteria matches a message whose Message-ID, In-Reply-To or
// References holds one of ids.
func idsCriteria(ids []string) *imap.SearchCriteria {
	var or *imap.SearchCriteria
	for _, id := range ids {
		for _, h := range []string{"Message-ID", "In-Reply-To", "References"} {
			c := imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: h, Value: id}}}
			if or == nil {
				or = &c
				continue
			}
			or = &imap.SearchCriteria{Or: [][2]imap.SearchCriteria{{*or, c}}}
		}
	}
	return or
}

func threadMembers(t imapclient.ThreadData) []imap.UID {
	var out []imap.UID
	for _, n := range t.Chain {
		out = append(out, imap.UID(n))
	}
	for _, s := range t.SubThreads {
		out = append(out, threadMembers(s)...)
	}
	return out
}

// directPeek: STATUS, the unread search and the newest message's date
// pipelined, then the unread messages' senders (the newest 500) and the
// oldest unread's date.
func directPeek(c *imapclient.Client) error {
	n := uint32(0)
	if mb := c.Mailbox(); mb != nil {
		n = mb.NumMessages
	}
	st := c.Status("INBOX", &imap.StatusOptions{NumMessages: true, NumUnseen: true, UIDNext: true, UIDValidity: true})
	unseen := c.UIDSearch(&imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}}, &imap.SearchOptions{ReturnAll: true})
	newest := c.Fetch(imap.SeqSetNum(n), &imap.FetchOptions{UID: true, InternalDate: true})
	_, serr := st.Wait()
	ud, uerr := unseen.Wait()
	_, nerr := newest.Collect()
	if err := errors.Join(serr, uerr, nerr); err != nil {
		return err
	}
	uids := ud.AllUIDs()
	if len(uids) == 0 {
		return errors.New("direct peek: no unread message")
	}
	slices.Sort(uids)
	set := imap.UIDSetNum(uids[max(0, len(uids)-500):]...)
	set.AddNum(uids[0])
	_, err := drainSummaries(c.Fetch(set, &imap.FetchOptions{UID: true, InternalDate: true, BodySection: []*imap.FetchItemBodySection{
		{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"From"}, Peek: true}}}))
	return err
}

// directCheck takes the oldest unread message exactly once: UID SEARCH
// UNSEEN MODSEQ 0 RETURN (MIN) gives it with its mod-sequence; then its
// text and a STORE of \Seen unless it changed since, pipelined.
func directCheck(c *imapclient.Client) error {
	sd, err := c.UIDSearch(&imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}, ModSeq: &imap.SearchCriteriaModSeq{}},
		&imap.SearchOptions{ReturnMin: true}).Wait()
	if err != nil {
		return err
	}
	if sd.Min == 0 {
		return errors.New("direct check: no unread message")
	}
	uid := imap.UID(sd.Min)
	part1 := &imap.FetchItemBodySection{Part: []int{1}, Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: 64 << 10}}
	fetch := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{
		UID: true, Flags: true, Envelope: true, RFC822Size: true, InternalDate: true,
		BodyStructure: &imap.FetchItemBodyStructure{Extended: true}, BodySection: []*imap.FetchItemBodySection{part1},
	})
	store := c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}},
		&imap.StoreOptions{UnchangedSince: sd.ModSeq})
	bufs, ferr := fetch.Collect()
	serr := store.Close()
	if err := errors.Join(ferr, serr); err != nil {
		return err
	}
	if len(bufs) != 1 || len(bufs[0].FindBodySection(part1)) == 0 {
		return fmt.Errorf("direct check: no text for UID %d", uid)
	}
	return nil
}

// directAttachment: the structure and the part in one FETCH, decoded and
// hashed as the gateway does for an attachment it returns inline.
func directAttachment(c *imapclient.Client, uid imap.UID, size int) error {
	sec := &imap.FetchItemBodySection{Part: []int{2}, Peek: true}
	bufs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true,
		BodyStructure: &imap.FetchItemBodyStructure{Extended: true}, BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
	if err != nil {
		return err
	}
	if len(bufs) != 1 || bufs[0].BodyStructure == nil {
		return errors.New("direct attachment: no structure")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.NewReplacer("\r", "", "\n", "").Replace(string(bufs[0].FindBodySection(sec))))
	if err != nil {
		return err
	}
	if len(raw) != size {
		return fmt.Errorf("direct attachment: %d bytes, want %d", len(raw), size)
	}
	sha256.Sum256(raw)
	return nil
}

// directSendVia submits one message with go-smtp through addr (implicit
// TLS, AUTH PLAIN, one recipient, QUIT: SMTP has no pool, every send is a
// new session) and appends a copy to Sent on imapc, as the gateway does.
func directSendVia(addr string, tc *tls.Config, user, pass string, imapc *imapclient.Client) error {
	c, err := smtp.DialTLS(addr, tc)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Auth(sasl.NewPlainClient("", user, pass)); err != nil {
		return err
	}
	msg := sendMessage(user)
	if err := c.SendMail(user, []string{sink}, strings.NewReader(msg)); err != nil {
		return err
	}
	if err := c.Quit(); err != nil {
		return err
	}
	app := imapc.Append("Sent", int64(len(msg)), &imap.AppendOptions{Flags: []imap.Flag{imap.FlagSeen}, Time: time.Now()})
	if _, err := io.WriteString(app, msg); err != nil {
		return err
	}
	if err := app.Close(); err != nil {
		return err
	}
	_, err = app.Wait()
	return err
}
