// Command mailbox-bench measures the gateway against the physical limit. In
// one run it starts a real mail stack (Dovecot + Postfix from
// scripts/mailstack.sh), seeds mailboxes of 1,000, 10,000 and 100,000
// messages, runs the gateway binary as a child process (so its memory
// figures are its own), and measures every tool through mcp-go's client over
// HTTP at concurrency 1, 8 and 64, next to the same IMAP commands sent by a
// bare go-imap client on a warm connection, and cold calls (new TLS and
// login each time). It prints the table and the ratios the targets are
// stated in, and with -out writes them into docs/benchmarks.md. With
// -coord it runs only the coordination benchmark instead (coord.go): how
// soon imap_wait_for_email wakes after Dovecot has a message, and what 200
// waits held open cost; -smoke runs a reduced version of both. With -ab REV
// it compares the list's CPU of another revision's gateway with this
// tree's, both in one run (ab.go).
//
// Run it as root from the repository root (the stack's daemons need both):
//
//	go run ./cmd/mailbox-bench -out docs/benchmarks.md         # full run, ~5 min
//	go run ./cmd/mailbox-bench -coord -out docs/benchmarks.md  # coordination, ~2 min
//	go run ./cmd/mailbox-bench -smoke                          # CI: 1,000 messages
//	go run ./cmd/mailbox-bench -rtt 0,20,40 -out docs/benchmarks.md  # over a simulated network (rtt.go), ~4 min
//	go run ./cmd/mailbox-bench -ab 1d2ded4 -out docs/benchmarks.md  # A/B of a list's CPU, ~2 min
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
)

// smokeN1 is -smoke's calls per cell at concurrency 1.
const smokeN1 = 150

type options struct {
	smoke      bool
	sizes      []int
	out        string
	profileDir string
	n1, n8     int
	n64        int
	cellMax    time.Duration
	args       string
	keep       bool
	c1Only     bool
	gwEnv      []string
	only       map[string]bool // -tools: measure only these (nil: all)

	coord        bool // only the coordination benchmark
	coordTrials  int
	coordWaiters int
	// inotifyInstances, when above the kernel's fs.inotify.max_user_instances,
	// raises it for the coordination run (and sets it back after).
	inotifyInstances int
	// recheckWaits, when above 0, runs only the re-check cost: that many
	// waits held in IDLE with WAIT_RECHECK=0 and with its default.
	recheckWaits int

	// guardFile holds the committed figures the smoke run is checked
	// against (guard.go); "" skips the check.
	guardFile string

	// users, when above 0, runs only the many-users benchmark (users.go)
	// with that many accounts, each round trip measured for usersFor.
	users    int
	usersFor time.Duration
}

func main() {
	o := options{}
	var sizes string
	flag.BoolVar(&o.smoke, "smoke", false, "small run for CI: 1,000 messages, few iterations; fails on any error")
	flag.StringVar(&sizes, "sizes", "1000,10000,100000", "mailbox sizes to seed and measure (the first is also the size of the 16 load users)")
	flag.StringVar(&o.out, "out", "", "write the results into this markdown file (between the RESULTS markers), e.g. docs/benchmarks.md")
	flag.StringVar(&o.profileDir, "profile", "", "turn on PPROF_ADDR and save CPU and heap profiles of the gateway into this directory (with -rtt: each read tool's warm calls back to back, cpu-rttMS-TOOL.pprof)")
	flag.IntVar(&o.n1, "n", 300, "calls per tool at concurrency 1 (per mailbox size)")
	flag.DurationVar(&o.cellMax, "cell-max", 30*time.Second, "start no more calls in one cell after this long")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (the gateway's logs)")
	flag.BoolVar(&o.c1Only, "c1-only", false, "stop after the concurrency-1 runs (for profiling a change; the report is partial)")
	flag.BoolVar(&o.coord, "coord", false, "run only the coordination benchmark (wake-up latency of imap_wait_for_email, many waiters held open); with -smoke, its reduced version")
	flag.IntVar(&o.coordTrials, "coord-trials", 60, "timed wake-ups in the coordination benchmark")
	flag.IntVar(&o.coordWaiters, "coord-waiters", 200, "waits held open at once in the coordination benchmark, on 50 accounts")
	flag.IntVar(&o.recheckWaits, "recheck-waits", 0, "run only the re-check cost: this many waits (4 per account) held in IDLE on a gateway with WAIT_RECHECK=0 and on one with the default, CPU of Dovecot and the gateway over 60 s each")
	flag.IntVar(&o.inotifyInstances, "inotify-instances", 0, "raise the kernel's fs.inotify.max_user_instances to this for the coordination run, and set it back after (0: leave it; every Dovecot IDLE takes one, all as one uid)")
	flag.IntVar(&o.users, "users", 0, "run only the many-users benchmark (users.go): this many accounts, 32 callers for Zipf-drawn users, at 0 and 20 ms to Dovecot, and the memory of idle pooled connections")
	flag.DurationVar(&o.usersFor, "users-for", 60*time.Second, "with -users: how long calls are measured at each round trip")
	var gwEnv, only string
	flag.StringVar(&only, "tools", "", "measure only these tools, comma-separated (with -c1-only: profile one tool's calls; with -rtt: a shorter latency run)")
	flag.StringVar(&gwEnv, "gateway-env", "", "extra KEY=VALUE settings for the gateway, separated by spaces (experiments, e.g. GOGC=200)")
	guard := flag.Bool("guard", true, "with -smoke: fail when a concurrency-1 ratio (CPU per call ÷ the floor's, p50 ÷ direct) is more than 50% above the committed one in -guard-file")
	flag.StringVar(&o.guardFile, "guard-file", "docs/benchmarks.md", "the committed results the smoke run's regression guard reads")
	breakdown := flag.String("breakdown", "", "print whose CPU a saved gateway CPU profile is, owner by owner (breakdown.go), and exit; no mail stack")
	calls := flag.Int("calls", 0, "with -breakdown: the calls the profile covers, to print ms per call")
	rtt := flag.String("rtt", "", "run only the latency bench over a simulated network (rtt.go): round trips in ms, e.g. 0,20,40; gateway and direct client, warm and cold, with the round trips of each call")
	flag.Parse()
	if *breakdown != "" {
		if err := printBreakdown(os.Stdout, *breakdown, *calls); err != nil {
			fmt.Fprintf(os.Stderr, "mailbox-bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if !*guard || !o.smoke || o.coord {
		o.guardFile = ""
	}
	o.gwEnv = strings.Fields(gwEnv)
	if only != "" {
		o.only = map[string]bool{}
		for _, t := range strings.Split(only, ",") {
			o.only[strings.TrimSpace(t)] = true
		}
	}
	if o.smoke {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		sizes = "1000"
		if !set["n"] {
			// Enough calls at concurrency 1 for stable ratios (the
			// regression guard reads them); the concurrent cells keep
			// the 80 and 320 calls of 30 × 8/3 and × 32/3.
			o.n1 = smokeN1
			o.n8, o.n64 = 80, 320
		}
		if !set["cell-max"] {
			o.cellMax = 10 * time.Second
		}
	}
	if o.n8 == 0 {
		o.n8, o.n64 = o.n1*8/3, o.n1*32/3
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 100 {
			fmt.Fprintf(os.Stderr, "mailbox-bench: -sizes: %q is not a size of at least 100\n", s)
			os.Exit(2)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.coord {
		o.sizes = o.sizes[:1] // one account of the first size takes the other calls
	}
	o.args = strings.Join(os.Args[1:], " ")
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "mailbox-bench: -profile: %v\n", err)
			os.Exit(2)
		}
	}
	if o.users > 0 {
		if err := runUsers(o); err != nil {
			fmt.Fprintf(os.Stderr, "mailbox-bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *rtt != "" {
		rtts, err := parseRTTs(*rtt)
		var tools []string
		if err == nil {
			tools, err = rttToolsOf(o.only)
		}
		if err == nil {
			err = runRTT(o, rttOptions{rtts: rtts, warm: *rttWarmN, cold: *rttColdN, tools: tools})
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "mailbox-bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *abRev != "" {
		if err := runAB(o); err != nil { // ab.go
			fmt.Fprintf(os.Stderr, "mailbox-bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	err := runBench(o)
	if o.smoke && !o.coord && o.recheckWaits == 0 && o.guardFile != "" && *rttGuard {
		err = errors.Join(err, runRTTGuard(o))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mailbox-bench: %v\n", err)
		os.Exit(1)
	}
}

// bench holds what one run sets up.
type bench struct {
	o        options
	stack    *mailstack.Stack
	dir, bin string
	key      string
	load     []string // the 16 users of the concurrency runs, seeded with sizes[0]
	sizeUser map[int]string
	typical  map[string]uint32 // user -> UID of a typical ~2 KB message
	sender   map[string]string // user -> an address to search for
	rep      *report
}

func runBench(o options) error {
	b := &bench{o: o, sizeUser: map[int]string{}, typical: map[string]uint32{}, sender: map[string]string{}}
	b.rep = newReport(o)
	var committed map[string]c1Figures
	if o.guardFile != "" {
		// Read first: a report that no longer parses fails in a second,
		// and -out cannot overwrite the figures before they are read.
		var err error
		if committed, err = loadCommitted(o.guardFile, o.sizes[0]); err != nil {
			return fmt.Errorf("regression guard: %w (-guard=false skips it)", err)
		}
	}
	cleanup, err := b.prepare("mbench-")
	if err != nil {
		return err
	}
	defer cleanup()

	users := map[string]string{}
	loadUsers := 16
	if o.coord || o.recheckWaits > 0 {
		loadUsers = 1
	}
	if o.recheckWaits > 0 {
		o.sizes = o.sizes[:1]
		for i := range recheckUsers(o.recheckWaits) {
			u, pw := coordUser(i)
			users[u] = pw
		}
		users[waker] = "wakerpw"
	}
	if o.coord || o.smoke {
		users[waker] = "wakerpw"
		for i := range coordScaleFor(o).users {
			u, pw := coordUser(i)
			users[u] = pw
		}
	}
	for i := 1; i <= loadUsers; i++ {
		u := fmt.Sprintf("load%02d@example.test", i)
		users[u] = fmt.Sprintf("loadpw%02d", i)
		b.load = append(b.load, u)
	}
	b.sizeUser[o.sizes[0]] = b.load[0]
	for _, n := range o.sizes[1:] {
		u := fmt.Sprintf("size%d@example.test", n)
		users[u] = fmt.Sprintf("sizepw%d", n)
		b.sizeUser[n] = u
	}
	logf("starting the mail stack")
	if b.stack, err = mailstack.Start(mailstack.Options{Users: users}); err != nil {
		return err
	}
	defer b.stack.Stop()
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	for _, u := range b.load {
		if err := b.stack.Seed(u, o.sizes[0], "INBOX"); err != nil {
			return err
		}
	}
	for _, n := range o.sizes[1:] {
		t := time.Now()
		logf("seeding %d messages", n)
		if err := b.stack.Seed(b.sizeUser[n], n, "INBOX"); err != nil {
			return err
		}
		b.rep.seedTimes = append(b.rep.seedTimes, fmt.Sprintf("%d messages in %.1f s", n, time.Since(t).Seconds()))
	}
	for _, n := range o.sizes {
		if err := b.pickTargets(b.sizeUser[n]); err != nil {
			return err
		}
	}
	for _, u := range b.load[1:] {
		b.typical[u], b.sender[u] = b.typical[b.load[0]], b.sender[b.load[0]]
	}
	if o.recheckWaits > 0 {
		text, err := b.recheckCost(ctx)
		if err != nil {
			return err
		}
		fmt.Println(text)
		return nil
	}
	var guardErr error
	if !o.coord {
		b.rep.loadBefore = loadavg()
		if err := b.measure(ctx); err != nil {
			return err
		}
		b.rep.loadAfter = loadavg()
		b.rep.finished = time.Now()
		text := b.rep.markdown()
		fmt.Println(text)
		if o.out != "" {
			if err := writeResults(o.out, beginMarker, endMarker, text); err != nil {
				return err
			}
			logf("wrote %s", o.out)
		}
		if o.guardFile != "" {
			// Its table is printed now, its error returned at the end, so
			// that the coordination part runs too.
			guardErr = b.guard(o.guardFile, committed)
		}
		if bad := b.rep.errors(); bad != "" {
			return errors.Join(errors.New(bad), guardErr)
		}
	}
	if o.coord || o.smoke {
		cr, err := b.coord(ctx)
		if err != nil {
			return errors.Join(guardErr, fmt.Errorf("coordination: %w", err))
		}
		text := cr.markdown()
		fmt.Println(text)
		if o.out != "" {
			if err := writeResults(o.out, coordBeginMarker, coordEndMarker, text); err != nil {
				return err
			}
			logf("wrote %s", o.out)
		}
	}
	return guardErr
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
