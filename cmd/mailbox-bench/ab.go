package main

// The A/B mode (-ab REV): the gateway of another revision (or another
// binary) against this tree's, both in one run, on the same mail stack, so
// that a change in a call's CPU shows as a ratio whose sides saw the same
// machine load. Both gateways serve the same user of one mailbox (10,000
// messages unless -sizes says otherwise); each has its own official
// TypeScript SDK client (sdk.go) calling imap_list_emails, one call at a
// time. The run is a series of rounds: a round is -ab-calls calls through
// one gateway, then as many through the other, the order swapped every
// round, so that neither side always follows the other. A side's CPU is
// read from /proc (procCPU) at the start and end of each of its own
// rounds only, so the time it idles while the other side runs is not
// charged to its calls. -ab-repeat repeats the rounds, each repeat a row
// of the table: the spread between repeats is the noise. With -profile
// DIR, each gateway then takes a CPU and a delta allocs profile of a 6 s
// window of calls back to back (measureBackToBack), shared out among
// owners as the per-tool pass does, side by side.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
)

// The A/B mode's flags; -ab turns it on, the rest only shape it.
var (
	abRev    = flag.String("ab", "", "A/B mode: the gateway built from this git revision (or this gateway binary) against this tree's, alternating rounds of imap_list_emails through the TypeScript SDK on one 10,000-message mailbox; with -out, writes its own section (AB markers)")
	abRounds = flag.Int("ab-rounds", 30, "with -ab: rounds per repeat (each side gets one round of -ab-calls calls per round)")
	abCalls  = flag.Int("ab-calls", 40, "with -ab: calls per side per round")
	abRepeat = flag.Int("ab-repeat", 3, "with -ab: repeats of the rounds, each a row of the table")
	abProf   = flag.Duration("ab-profile-time", 6*time.Second, "with -ab and -profile: each gateway's profile window of calls back to back")
)

const (
	abBeginMarker = "<!-- BEGIN AB (written by mailbox-bench -ab) -->"
	abEndMarker   = "<!-- END AB -->"
	abDefaultSize = 10000
)

// abSide is one gateway of the A/B run and what was measured of it.
type abSide struct {
	label string // for the report: "base (1d2ded4)", "this tree (94b9c7d+)"
	file  string // profile file name part
	bin   string
	gw    *gateway
	sdk   *sdkDriver
	reps  []*result   // per repeat: latencies, gateway CPU, Node CPU
	round [][]float64 // per repeat: the gateway's CPU per call in each round, ms
	prof  *toolCPU    // the profile window (-profile), nil without
}

// runAB is the whole A/B run: build, stack, rounds, report.
func runAB(o options) error {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	size := abDefaultSize
	if set["sizes"] {
		size = o.sizes[0]
	}
	if *abRounds < 1 || *abCalls < 1 || *abRepeat < 1 {
		return fmt.Errorf("-ab-rounds, -ab-calls and -ab-repeat must be at least 1")
	}
	if err := sdkReady(); err != nil {
		return err
	}
	b := &bench{o: o}
	cleanup, err := b.prepare("mbench-ab-") // builds this tree's gateway
	if err != nil {
		return err
	}
	defer cleanup()
	dir, key := b.dir, b.key
	head := &abSide{file: "head", label: "this tree (" + treeName() + ")", bin: b.bin}
	base := &abSide{file: "base"}
	if base.bin, base.label, err = buildRevision(dir, *abRev); err != nil {
		return err
	}
	sides := []*abSide{base, head}

	user, pass := "ab@example.test", "abpw"
	logf("starting the mail stack")
	stack, err := mailstack.Start(mailstack.Options{Users: map[string]string{user: pass}})
	if err != nil {
		return err
	}
	defer stack.Stop()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := time.Now()
	logf("seeding %d messages", size)
	if err := stack.Seed(user, size, "INBOX"); err != nil {
		return err
	}
	seeded := time.Since(t)

	for _, s := range sides {
		if s.gw, err = startGateway(s.bin, dir, "gateway-"+s.file, stack, key, o.profileDir != "", o.gwEnv...); err != nil {
			return fmt.Errorf("%s: %w", s.label, err)
		}
		defer s.gw.stop()
		if s.sdk, err = startSDK(dir, "sdk-"+s.file, s.gw.url, user, pass); err != nil {
			return fmt.Errorf("%s: %w", s.label, err)
		}
		defer s.sdk.close()
	}
	args := map[string]any{"folder": "INBOX", "limit": 20}
	check := map[string]any{"messages": min(20, size), "min_total": size}
	callOf := func(s *abSide) func() (time.Duration, error) {
		return func() (time.Duration, error) { return s.sdk.call(toolList, args, check) }
	}
	for _, s := range sides { // warm up: EXAMINE, the pool, Node's JIT
		for range 30 {
			if _, err := callOf(s)(); err != nil {
				return fmt.Errorf("%s: warm-up: %w", s.label, err)
			}
		}
	}

	loadBefore := loadavg()
	started := time.Now()
	for rep := range *abRepeat {
		logf("A/B repeat %d of %d: %d rounds of %d calls a side", rep+1, *abRepeat, *abRounds, *abCalls)
		for _, s := range sides {
			s.reps = append(s.reps, &result{})
			s.round = append(s.round, nil)
		}
		for r := range *abRounds {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			order := sides
			if r%2 == 1 {
				order = []*abSide{head, base}
			}
			for _, s := range order {
				res := s.reps[rep]
				cpu0, node0 := s.gw.cpu(), procCPU(s.sdk.cmd.Process.Pid)
				ra := runLat(*abCalls, callOf(s))
				cpu, node := s.gw.cpu()-cpu0, procCPU(s.sdk.cmd.Process.Pid)-node0
				if ra.Errors > 0 {
					return fmt.Errorf("%s: %d of %d calls failed, first: %v", s.label, ra.Errors, ra.Calls, ra.Err)
				}
				res.Calls += ra.Calls
				res.Wall += ra.Wall
				res.lat = append(res.lat, ra.lat...)
				res.CPU += cpu
				res.ClientCPU += node
				s.round[rep] = append(s.round[rep], float64(cpu)/float64(ra.Calls)/1e6)
			}
		}
		for _, s := range sides {
			logf("  %-26s %s", s.label, s.reps[rep])
		}
	}
	elapsed := time.Since(started)
	loadAfter := loadavg()

	if o.profileDir != "" {
		for _, s := range sides {
			secs := max(1, int(abProf.Seconds()))
			logf("%s: profile of %d s of calls back to back", s.label, secs)
			prof := &profilePaths{cpu: filepath.Join(o.profileDir, "cpu-ab-"+s.file+".pprof"), allocs: filepath.Join(o.profileDir, "allocs-ab-"+s.file+".pprof")}
			op := func() error { _, err := callOf(s)(); return err }
			tc, err := measureBackToBack(s.gw, op, prof, secs)
			if err != nil {
				return fmt.Errorf("%s: profile: %w", s.label, err)
			}
			s.prof = &tc
			logf("  %d calls, %.3f ms CPU per call in the profile, %.3f from /proc", tc.calls, float64(tc.bd.total)/float64(tc.calls)/1e6, tc.perCall())
		}
	}

	text := abMarkdown(o, size, seeded, loadBefore, loadAfter, elapsed, base, head)
	fmt.Println(text)
	if o.out != "" {
		if err := writeResults(o.out, abBeginMarker, abEndMarker, text); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	return nil
}

// runLat makes n calls of fn one after the other; a result as runPairLat
// keeps it (latency as the side reports it).
func runLat(n int, fn func() (time.Duration, error)) *result {
	r := &result{}
	for range n {
		r.addCall(fn())
	}
	return r
}

// buildRevision builds the gateway of rev into dir: rev is a gateway
// binary (a path to an executable file) or a git revision, whose tree is
// exported with git archive into a directory of its own and built there
// (its go.mod and go.sum, so its own dependencies). It returns the binary
// and the report's name for it.
func buildRevision(dir, rev string) (bin, label string, err error) {
	if st, err := os.Stat(rev); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return rev, "base (" + filepath.Base(rev) + ")", nil
	}
	out, err := exec.Command("git", "rev-parse", "--short", rev+"^{commit}").Output()
	if err != nil {
		return "", "", fmt.Errorf("-ab %s: neither an executable file nor a git revision", rev)
	}
	short := strings.TrimSpace(string(out))
	src := filepath.Join(dir, "src-"+short)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", "", err
	}
	logf("building the gateway of %s (git archive into %s)", short, src)
	archive := exec.Command("sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", short, src)
	archive.Stderr = os.Stderr
	if err := archive.Run(); err != nil {
		return "", "", fmt.Errorf("git archive %s: %w", short, err)
	}
	bin = filepath.Join(dir, "gateway-under-bench-"+short) // a name no one else kills by
	build := exec.Command("go", "build", "-o", bin, "./cmd/mailbox-mcp")
	build.Dir, build.Stderr = src, os.Stderr
	if err := build.Run(); err != nil {
		return "", "", fmt.Errorf("go build ./cmd/mailbox-mcp of %s: %w", short, err)
	}
	return bin, "base (" + short + ")", nil
}

// treeName is this tree's commit, with "+" when it has changes git has not
// committed.
func treeName() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "?"
	}
	name := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		name += "+"
	}
	return name
}

// median of xs (which it sorts).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

func abMarkdown(o options, size int, seeded time.Duration, loadBefore, loadAfter string, elapsed time.Duration, base, head *abSide) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("Run of %s (%.0f s of rounds).\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), elapsed.Seconds())
	p("- Command (as root, from the repository root): `go run ./cmd/mailbox-bench %s`\n", o.args)
	p("- Machine: %s\n", machine())
	p("- Load average (1/5/15 min) before the rounds: %s; after: %s. Other work may have shared the machine: compare the ratios, whose sides alternated round by round.\n", loadBefore, loadAfter)
	p("- One user, %d messages in INBOX (seeded in %.1f s); both gateways serve it, each to its own TypeScript SDK client (Node, `tests/clients/bench-sdk.mjs`) calling `imap_list_emails` (INBOX, 20) one call at a time. Per repeat: %d rounds of %d calls a side, the order swapped every round. Latency is Node's around `client.callTool`, ms. CPU per call is the gateway process's CPU (from /proc, schedstat) over its own rounds only, divided by its calls; Node's likewise.\n\n",
		size, seeded.Seconds(), *abRounds, *abCalls)
	p("| repeat | gateway | calls | p50 / p95 / p99 | gateway CPU per call | per round: median (min–max) | Node + SDK CPU per call |\n")
	p("|---:|---|---:|---|---:|---|---:|\n")
	for rep := range base.reps {
		for _, s := range []*abSide{base, head} {
			r := s.reps[rep]
			rounds := slices.Clone(s.round[rep])
			p("| %d | %s | %d | %s / %s / %s | %s | %.2f (%.2f–%.2f) | %s |\n", rep+1, s.label, len(r.lat),
				msf(r.P50()), msf(r.P95()), msf(r.P99()), msf(r.CPUPerCall()),
				median(rounds), slices.Min(rounds), slices.Max(rounds), msf(r.ClientCPU/time.Duration(r.Calls)))
		}
	}
	p("\n| repeat | CPU per call, this tree ÷ base | p50, this tree ÷ base |\n|---:|---:|---:|\n")
	var cpuRatios, p50Ratios []float64
	for rep := range base.reps {
		rb, rh := base.reps[rep], head.reps[rep]
		c, l := ratio(rh.CPUPerCall(), rb.CPUPerCall()), ratio(rh.P50(), rb.P50())
		cpuRatios, p50Ratios = append(cpuRatios, c), append(p50Ratios, l)
		p("| %d | %.3f | %.3f |\n", rep+1, c, l)
	}
	if len(cpuRatios) > 1 {
		p("| all | %.3f–%.3f | %.3f–%.3f |\n", slices.Min(cpuRatios), slices.Max(cpuRatios), slices.Min(p50Ratios), slices.Max(p50Ratios))
	}
	if base.prof == nil || head.prof == nil {
		return strings.TrimRight(b.String(), "\n")
	}
	p("\nProfiles (`-profile %s`: `cpu-ab-base.pprof`, `cpu-ab-head.pprof` and their `allocs-ab-*`), each a %d s window of calls back to back through the same SDK client, ms of CPU per call by owner (breakdown.go's rules) and KB allocated per call:\n\n", o.profileDir, max(1, int(abProf.Seconds())))
	p("| owner | %s | %s |\n|---|---:|---:|\n", base.label, head.label)
	owners := []string{}
	for _, s := range []*abSide{base, head} {
		for _, sh := range s.prof.bd.owners {
			if !slices.Contains(owners, sh.owner) {
				owners = append(owners, sh.owner)
			}
		}
	}
	per := func(t *toolCPU, owner string) float64 { return float64(t.bd.sum(owner)) / float64(t.calls) / 1e6 }
	slices.SortFunc(owners, func(a, b string) int {
		da, db := per(head.prof, a)+per(base.prof, a), per(head.prof, b)+per(base.prof, b)
		switch {
		case da > db:
			return -1
		case da < db:
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, ow := range owners {
		p("| %s | %.3f | %.3f |\n", ow, per(base.prof, ow), per(head.prof, ow))
	}
	p("| all, in the profile | %.3f | %.3f |\n", float64(base.prof.bd.total)/float64(base.prof.calls)/1e6, float64(head.prof.bd.total)/float64(head.prof.calls)/1e6)
	p("| all, from /proc over the window | %.3f | %.3f |\n", base.prof.perCall(), head.prof.perCall())
	p("| KB allocated per call | %.1f | %.1f |\n", float64(base.prof.allocs.total)/float64(base.prof.calls)/1024, float64(head.prof.allocs.total)/float64(head.prof.calls)/1024)
	return strings.TrimRight(b.String(), "\n")
}
