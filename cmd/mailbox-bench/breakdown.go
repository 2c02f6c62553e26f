package main

// Whose is a call's CPU: a CPU profile of the gateway, taken while the bench
// calls one tool in a loop (measure.go, profileTools), is read with
// github.com/google/pprof/profile and every sample is charged to one owner.
//
// The rules, walking a sample's stack from the leaf up:
//   - The Go runtime and the standard library's helpers (strings, bytes,
//     strconv, reflect, fmt, bufio, time, sync, net/mail, mime, crypto
//     ciphers, ...; also golang.org/x/text and x/time) are skipped: their
//     time is charged to the first caller that is an owner. So an
//     allocation (runtime.mallocgc) is the cost of the code that allocates,
//     and net/mail.ParseDate under go-imap is go-imap's.
//   - Except work the runtime does for itself, found among the runtime
//     frames below that caller: GC (background mark workers, bgsweep,
//     bgscavenge, and the assists and sweeping an allocation is made to do)
//     is "runtime: GC"; parking, waking and finding goroutines (schedule,
//     findRunnable, park_m, wakep, futex, netpoll, sysmon) is "runtime:
//     scheduler / goroutine hand-offs". A stack of runtime frames only,
//     with neither, is "runtime: other".
//   - syscall, internal/poll and net (the socket reads and writes, whoever
//     asked for them: net/http, crypto/tls) are "syscalls / network I/O".
//   - Owners: our module (and the binary's package main), mcp-go with the
//     modules only it uses (jsonschema, uuid, cast, uritemplate), go-imap,
//     go-message, encoding/json, net/http (with net/textproto and the
//     vendored x/net/http packages), crypto/tls; any other module is
//     "other", and so is a stack with only standard-library helpers (the
//     profiler writing its own profile, for one).
//   - encoding/json is split by its caller, the next owner up the stack:
//     "encoding/json (called by mcp-go)", "(called by our code)", or
//     "(called by other code)".

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// The owners a sample is charged to.
const (
	ownGateway   = "gateway (our code)"
	ownMCP       = "mcp-go"
	ownJSONMCP   = "encoding/json (called by mcp-go)"
	ownJSONOurs  = "encoding/json (called by our code)"
	ownJSONOther = "encoding/json (called by other code)"
	ownIMAP      = "go-imap"
	ownMessage   = "go-message"
	ownHTTP      = "net/http"
	ownTLS       = "crypto/tls"
	ownIO        = "syscalls / network I/O"
	ownGC        = "runtime: GC"
	ownSched     = "runtime: scheduler / goroutine hand-offs"
	ownRuntime   = "runtime: other"
	ownOther     = "other"

	ownJSON = "encoding/json" // split by caller before it is reported
)

// ownerGroups are the report's columns: owners added up, so that the
// table stays readable (the -breakdown command prints them one by one).
var ownerGroups = []struct {
	name   string
	owners []string
}{
	{"gateway code (+ its JSON)", []string{ownGateway, ownJSONOurs}},
	{"mcp-go (+ its JSON)", []string{ownMCP, ownJSONMCP}},
	{"go-imap + go-message", []string{ownIMAP, ownMessage}},
	{"net/http + TLS + syscalls", []string{ownHTTP, ownTLS, ownIO}},
	{"Go runtime (GC, scheduler, other)", []string{ownGC, ownSched, ownRuntime}},
	{"other", []string{ownOther, ownJSONOther}},
}

// modules maps a function-name prefix (module path) to its owner; the
// first match wins.
var modules = []struct{ prefix, owner string }{
	{"github.com/mailbox-mcp/mailbox-mcp/", ownGateway},
	{"main.", ownGateway}, // the gateway binary's own package
	{"github.com/mark3labs/mcp-go/", ownMCP},
	{"github.com/santhosh-tekuri/jsonschema/", ownMCP}, // the modules only mcp-go uses
	{"github.com/google/jsonschema-go/", ownMCP},
	{"github.com/google/uuid.", ownMCP},
	{"github.com/spf13/cast.", ownMCP},
	{"github.com/yosida95/uritemplate/", ownMCP},
	{"github.com/emersion/go-imap/", ownIMAP},
	{"github.com/emersion/go-message", ownMessage},
	{"golang.org/x/sys/unix.", ownIO},
}

// frameKind is how the walk up a stack treats one frame.
type frameKind int

const (
	kindRuntime frameKind = iota // charged to its caller, unless GC or scheduler work
	kindHelper                   // a library's helper: charged to its caller
	kindIO                       // syscalls and sockets
	kindOwner
)

// classify says how fn (a function name as pprof has it) is treated, and
// for kindOwner whose it is.
func classify(fn string) (frameKind, string) {
	for _, m := range modules {
		if strings.HasPrefix(fn, m.prefix) {
			if m.owner == ownIO {
				return kindIO, ""
			}
			return kindOwner, m.owner
		}
	}
	if strings.HasPrefix(fn, "type:") {
		return kindHelper, "" // compiler-made equality and hash functions
	}
	name, _, _ := strings.Cut(fn, "[") // generic arguments may hold dots and slashes
	first, _, _ := strings.Cut(name, "/")
	if strings.Contains(first, ".") && strings.Contains(name, "/") {
		// A module outside the standard library.
		if strings.HasPrefix(name, "golang.org/x/text/") || strings.HasPrefix(name, "golang.org/x/time/") {
			return kindHelper, ""
		}
		return kindOwner, ownOther
	}
	pkg := name
	if i := strings.LastIndex(name, "/"); i >= 0 {
		if j := strings.Index(name[i:], "."); j >= 0 {
			pkg = name[:i+j]
		}
	} else if j := strings.Index(name, "."); j >= 0 {
		pkg = name[:j]
	}
	switch {
	case pkg == "runtime" || strings.HasPrefix(pkg, "internal/runtime/") || strings.HasPrefix(pkg, "runtime/internal/"):
		return kindRuntime, ""
	case pkg == "syscall" || pkg == "internal/poll" || pkg == "internal/syscall/unix" || pkg == "net":
		return kindIO, ""
	case pkg == "encoding/json":
		return kindOwner, ownJSON
	case pkg == "net/http" || pkg == "net/textproto" || strings.HasPrefix(pkg, "net/http/internal") ||
		strings.HasPrefix(pkg, "vendor/golang.org/x/net/http"):
		return kindOwner, ownHTTP
	case pkg == "crypto/tls":
		return kindOwner, ownTLS
	}
	return kindHelper, ""
}

// schedWork are runtime functions that park, wake or look for goroutines.
var schedWork = map[string]bool{
	"schedule": true, "findRunnable": true, "park_m": true, "gopark": true, "goparkunlock": true,
	"goschedImpl": true, "gosched_m": true, "goschedguarded_m": true, "gopreempt_m": true, "preemptPark": true,
	"goexit0": true, "execute": true, "mPark": true, "stopm": true, "startm": true, "wakep": true,
	"handoffp": true, "stoplockedm": true, "startlockedm": true, "notesleep": true, "notetsleep": true,
	"notetsleepg": true, "notewakeup": true, "futexsleep": true, "futexwakeup": true, "futex": true,
	"semasleep": true, "semawakeup": true, "ready": true, "goready": true, "netpoll": true,
	"netpollBreak": true, "wakeNetPoller": true, "netpollgoready": true, "sysmon": true, "retake": true,
	"exitsyscall0": true, "entersyscallblock": true, "entersyscallWakeSysmon": true, "injectglist": true,
	"resetspinning": true, "stealWork": true, "runqsteal": true, "runqgrab": true,
}

// gcWorkNames are runtime functions of the collector that no prefix rule
// in isGCWork catches.
var gcWorkNames = map[string]bool{
	"markroot": true, "scanstack": true, "scanobject": true, "greyobject": true, "forcegchelper": true,
	"GC": true, "_GC": true, "bulkBarrierPreWrite": true, "reclaim": true,
}

// runtimeWork says whether a runtime frame is GC or scheduler work
// (ownGC, ownSched) or neither ("").
func runtimeWork(fn string) string {
	local, ok := strings.CutPrefix(fn, "runtime.")
	if !ok {
		return ""
	}
	// Closures and inlined callers show up as parts of the name:
	// runtime.send.goready.func1, runtime.gcBgMarkWorker.func2.
	for _, part := range strings.Split(local, ".") {
		low := strings.ToLower(part)
		if strings.HasPrefix(part, "gc") || strings.HasPrefix(part, "(*gc") || gcWorkNames[part] ||
			strings.Contains(low, "sweep") || strings.Contains(low, "scaveng") ||
			strings.Contains(low, "wbuf") || strings.Contains(low, "assist") {
			return ownGC
		}
	}
	for _, part := range strings.Split(local, ".") {
		if schedWork[part] {
			return ownSched
		}
	}
	return ""
}

// attribute charges one stack (function names, leaf first) to its owner.
// fn is the function the top lists name: for a library, its function
// nearest the leaf (what it did itself and through helpers); for the
// runtime, the leaf; for syscalls, the owner that made them.
func attribute(frames []string) (owner, fn string) {
	if len(frames) == 0 {
		return ownRuntime, "(no stack)"
	}
	onlyRuntime := true
	for i, f := range frames {
		kind, own := classify(f)
		switch kind {
		case kindRuntime:
			if w := runtimeWork(f); w != "" {
				return w, frames[0]
			}
			continue
		case kindHelper:
			onlyRuntime = false
			continue
		case kindIO:
			_, by := nextOwner(frames[i+1:])
			return ownIO, "from " + by
		}
		if own == ownJSON {
			switch by, _ := nextOwner(frames[i+1:]); by {
			case ownMCP:
				return ownJSONMCP, f
			case ownGateway:
				return ownJSONOurs, f
			default:
				return ownJSONOther, f
			}
		}
		return own, f
	}
	if onlyRuntime {
		return ownRuntime, frames[0]
	}
	// Standard-library helpers only: name the goroutine's entry point.
	for i := len(frames) - 1; i >= 0; i-- {
		if k, _ := classify(frames[i]); k != kindRuntime {
			return ownOther, frames[i]
		}
	}
	return ownOther, frames[0]
}

// nextOwner is the first owner in frames other than encoding/json, and its
// function ("", the top frame when there is none).
func nextOwner(frames []string) (string, string) {
	for _, f := range frames {
		if k, own := classify(f); k == kindOwner && own != ownJSON {
			return own, f
		}
	}
	if len(frames) == 0 {
		return "", "(top of stack)"
	}
	return "", frames[len(frames)-1]
}

// funcShare is one function's share of an owner's CPU (ns) or allocations
// (bytes).
type funcShare struct {
	fn    string
	value int64
}

// ownerShare is one owner's CPU or allocations in a profile, with its
// functions, largest first.
type ownerShare struct {
	owner string
	value int64
	funcs []funcShare
}

// breakdown is a profile's samples shared out among owners: CPU in
// nanoseconds, or bytes allocated.
type breakdown struct {
	total    int64
	samples  int64
	duration time.Duration // the profile's window
	owners   []ownerShare  // largest first
}

// sum is the owners' value (0 for one that has none).
func (b *breakdown) sum(owners ...string) int64 {
	var sum int64
	for _, o := range b.owners {
		if slices.Contains(owners, o.owner) {
			sum += o.value
		}
	}
	return sum
}

// The sample types breakdownOf shares out.
const (
	sampleCPU   = "cpu"         // a CPU profile: nanoseconds
	sampleAlloc = "alloc_space" // an allocs profile: bytes allocated
)

// breakdownOf attributes every sample of a profile: its CPU (sampleCPU) or
// the bytes its stacks allocated (sampleAlloc).
func breakdownOf(p *profile.Profile, typ string) (*breakdown, error) {
	vi, ci := -1, -1
	for i, st := range p.SampleType {
		switch {
		case typ == sampleCPU && st.Type == "cpu" && st.Unit == "nanoseconds",
			typ == sampleAlloc && st.Type == "alloc_space" && st.Unit == "bytes":
			vi = i
		case typ == sampleCPU && st.Type == "samples", typ == sampleAlloc && st.Type == "alloc_objects":
			ci = i
		}
	}
	if vi < 0 && (typ != sampleCPU || ci < 0 || p.Period <= 0) {
		if typ == sampleCPU {
			return nil, errors.New("not a CPU profile (no cpu/nanoseconds sample type)")
		}
		return nil, errors.New("not an allocs profile (no alloc_space/bytes sample type)")
	}
	b := &breakdown{duration: time.Duration(p.DurationNanos)}
	byOwner := map[string]map[string]int64{}
	var frames []string
	for _, s := range p.Sample {
		var v int64
		if vi >= 0 {
			v = s.Value[vi]
		} else {
			v = s.Value[ci] * p.Period
		}
		if ci >= 0 {
			b.samples += s.Value[ci]
		}
		frames = frames[:0]
		for _, loc := range s.Location {
			for _, l := range loc.Line { // inlined functions first, their caller last
				if l.Function != nil {
					frames = append(frames, l.Function.Name)
				}
			}
		}
		owner, fn := attribute(frames)
		if byOwner[owner] == nil {
			byOwner[owner] = map[string]int64{}
		}
		byOwner[owner][fn] += v
		b.total += v
	}
	for owner, fns := range byOwner {
		os := ownerShare{owner: owner}
		for fn, v := range fns {
			os.value += v
			os.funcs = append(os.funcs, funcShare{fn, v})
		}
		slices.SortFunc(os.funcs, func(a, b funcShare) int { return cmp.Or(cmp.Compare(b.value, a.value), strings.Compare(a.fn, b.fn)) })
		b.owners = append(b.owners, os)
	}
	slices.SortFunc(b.owners, func(a, b ownerShare) int {
		return cmp.Or(cmp.Compare(b.value, a.value), strings.Compare(a.owner, b.owner))
	})
	return b, nil
}

// toolCPU is one tool's window from the bench's back-to-back pass.
type toolCPU struct {
	tool    string
	calls   int           // calls made in the window
	procCPU time.Duration // the gateway's CPU over the window, from /proc
	bd      *breakdown    // the CPU profile's breakdown, ns; nil without -profile
	allocs  *breakdown    // bytes allocated over the same window; nil without -profile
	// windowSecs is how long the bench called the tool (the profile, when
	// taken, covers the same window).
	windowSecs float64
}

// perCall is the gateway's CPU per call over the window, in ms.
func (t toolCPU) perCall() float64 { return float64(t.procCPU) / float64(t.calls) / 1e6 }

// readBreakdown reads and attributes a profile file (typ: sampleCPU or
// sampleAlloc).
func readBreakdown(path, typ string) (*breakdown, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b, err := breakdownOf(p, typ)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// shortFunc drops a function name's import path and generic arguments:
// github.com/emersion/go-imap/v2/internal/imapwire.(*Decoder).Atom is
// imapwire.(*Decoder).Atom.
func shortFunc(fn string) string {
	if rest, ok := strings.CutPrefix(fn, "from "); ok { // a syscall's caller
		return "from " + shortFunc(rest)
	}
	name, generic, _ := strings.Cut(fn, "[")
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	if generic != "" {
		if j := strings.LastIndex(generic, "]"); j >= 0 {
			name += "[…]" + generic[j+1:]
		}
	}
	return name
}

// printBreakdown prints a saved profile's breakdown (a CPU profile in ms,
// an allocs profile in KB): per call when calls is above 0, else in total.
func printBreakdown(w io.Writer, path string, calls int) error {
	b, err := readBreakdown(path, sampleCPU)
	scale, unit, what := 1e6, "ms", "CPU"
	if err != nil {
		var aerr error
		if b, aerr = readBreakdown(path, sampleAlloc); aerr != nil {
			return err
		}
		scale, unit, what = 1024, "KB", "allocations"
	}
	per, over := 1.0, "in the profile"
	if calls > 0 {
		per, over = float64(calls), fmt.Sprintf("per call (%d calls)", calls)
	}
	of := func(v int64) string { return fmt.Sprintf("%8.3f", float64(v)/per/scale) }
	fmt.Fprintf(w, "%s: %.1f s window, %d samples; %s %s of %s %s\n\n", path, b.duration.Seconds(), b.samples, strings.TrimSpace(of(b.total)), unit, what, over)
	fmt.Fprintf(w, "%-42s %8s %6s\n", "owner", unit, "share")
	for _, o := range b.owners {
		fmt.Fprintf(w, "%-42s %s %5.1f%%\n", o.owner, of(o.value), 100*float64(o.value)/float64(b.total))
	}
	for _, o := range b.owners {
		fmt.Fprintf(w, "\n%s (%s %s):\n", o.owner, strings.TrimSpace(of(o.value)), unit)
		for _, f := range o.funcs[:min(5, len(o.funcs))] {
			fmt.Fprintf(w, "  %s  %s\n", of(f.value), f.fn)
		}
	}
	return nil
}
