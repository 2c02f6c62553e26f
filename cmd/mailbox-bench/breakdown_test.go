package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

const (
	fnTool     = "github.com/mailbox-mcp/mailbox-mcp/internal/tools.Def[go.shape.struct { Folder string \"json:\\\"folder\\\"\" }].handle"
	fnMailbox  = "github.com/mailbox-mcp/mailbox-mcp/internal/mailbox.(*Client).List"
	fnMCP      = "github.com/mark3labs/mcp-go/server.(*MCPServer).handleToolCall"
	fnMCPPost  = "github.com/mark3labs/mcp-go/server.(*StreamableHTTPServer).handlePost"
	fnEnvelope = "github.com/emersion/go-imap/v2/imapclient.readEnvelope"
	fnServe    = "net/http.(*conn).serve"
	fnGoexit   = "runtime.goexit"
)

// A call's stack as the gateway has it, from the HTTP server down to the
// tool, leaf last (the stacks below are written leaf first).
var callStack = []string{fnTool, fnMCP, fnMCPPost, "net/http.HandlerFunc.ServeHTTP", fnServe, fnGoexit}

func under(leaf ...string) []string { return append(leaf, callStack...) }

// The rules of breakdown.go, one stack each: who is charged, and the
// function the top lists name.
var attributionCases = []struct {
	name      string
	stack     []string // leaf first; "a|b" is one location: a inlined into b
	wantOwner string
	wantFn    string
}{
	{"an allocation is charged to the library that allocates",
		under("runtime.mallocgc", "runtime.newobject", "github.com/emersion/go-imap/v2/internal/imapwire.(*Decoder).Atom", fnEnvelope, fnMailbox),
		ownIMAP, "github.com/emersion/go-imap/v2/internal/imapwire.(*Decoder).Atom"},
	{"a standard-library helper is charged to its caller",
		under("time.parse", "net/mail.ParseDate", fnEnvelope, fnMailbox),
		ownIMAP, fnEnvelope},
	{"inlined frames count like the others",
		under("strings.ToLower|"+fnEnvelope, fnMailbox),
		ownIMAP, fnEnvelope},
	{"our code", under("strings.(*Builder).WriteRune", "github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg.SanitizeLine", fnMailbox),
		ownGateway, "github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg.SanitizeLine"},
	{"our code, generic", under("runtime.memmove", fnTool), ownGateway, fnTool},
	{"the gateway binary's package main", []string{"main.main", "runtime.main", fnGoexit}, ownGateway, "main.main"},
	{"an assist an allocation is made to do is GC",
		under("runtime.scanObject", "runtime.gcDrainN", "runtime.gcAssistAlloc1", "runtime.gcAssistAlloc", "runtime.mallocgc", fnMailbox),
		ownGC, "runtime.scanObject"},
	{"a background mark worker is GC",
		[]string{"runtime.scanObject", "runtime.gcDrain", "runtime.gcBgMarkWorker.func2", "runtime.systemstack", "runtime.gcBgMarkWorker", fnGoexit},
		ownGC, "runtime.scanObject"},
	{"the background sweeper is GC", []string{"runtime.(*sweepLocked).sweep", "runtime.sweepone", "runtime.bgsweep", fnGoexit}, ownGC, "runtime.(*sweepLocked).sweep"},
	{"an idle P looking for work is the scheduler",
		[]string{"runtime.futex", "runtime.futexsleep", "runtime.notesleep", "runtime.mPark", "runtime.stopm", "runtime.findRunnable", "runtime.schedule", "runtime.park_m", "runtime.mcall"},
		ownSched, "runtime.futex"},
	{"waking the reader of a channel is a hand-off",
		under("runtime.futex", "runtime.futexwakeup", "runtime.notewakeup", "runtime.startm", "runtime.wakep", "runtime.ready", "runtime.send.goready.func1", "runtime.systemstack", "runtime.send", "runtime.chansend1", fnMailbox),
		ownSched, "runtime.futex"},
	{"a socket write from go-imap's TLS connection is a syscall",
		under("internal/runtime/syscall/linux.Syscall6", "syscall.RawSyscall6", "syscall.Syscall", "syscall.write", "internal/poll.(*FD).Write",
			"net.(*conn).Write", "crypto/tls.(*Conn).write", "crypto/tls.(*Conn).writeRecordLocked", "crypto/tls.(*Conn).Write", "bufio.(*Writer).Flush",
			"github.com/emersion/go-imap/v2/imapclient.(*Command).Wait", fnMailbox),
		ownIO, "from crypto/tls.(*Conn).write"},
	{"a socket read of the HTTP server is a syscall",
		under("runtime.exitsyscall", "syscall.Syscall", "syscall.read", "internal/poll.(*FD).Read", "net.(*conn).Read", "net/http.(*connReader).Read", "bufio.(*Reader).fill"),
		ownIO, "from net/http.(*connReader).Read"},
	{"TLS encryption is crypto/tls",
		under("crypto/internal/fips140/aes/gcm.gcmAesEnc", "crypto/internal/fips140/aes/gcm.seal", "crypto/tls.(*xorNonceAEAD).Seal", "crypto/tls.(*Conn).writeRecordLocked", fnMailbox),
		ownTLS, "crypto/tls.(*xorNonceAEAD).Seal"},
	{"net/http's own work", under("net/textproto.readMIMEHeader", "net/http.readRequest"), ownHTTP, "net/textproto.readMIMEHeader"},
	{"mcp-go", under("runtime.makechan", "github.com/mark3labs/mcp-go/server.newStreamableHttpSession"), ownMCP, "github.com/mark3labs/mcp-go/server.newStreamableHttpSession"},
	{"a module only mcp-go uses is mcp-go's", under("github.com/santhosh-tekuri/jsonschema/v6.(*Schema).validate"), ownMCP, "github.com/santhosh-tekuri/jsonschema/v6.(*Schema).validate"},
	{"encoding/json called by mcp-go",
		under("reflect.(*rtype).Kind", "encoding/json.(*decodeState).object", "encoding/json.Unmarshal", "github.com/mark3labs/mcp-go/mcp.(*Meta).UnmarshalJSON",
			"encoding/json.(*decodeState).object", "encoding/json.Unmarshal", "github.com/mark3labs/mcp-go/server.(*MCPServer).HandleMessage"),
		ownJSONMCP, "encoding/json.(*decodeState).object"},
	{"encoding/json called by our code, inside an mcp-go call",
		under("runtime.mallocgc", "encoding/json.appendString[go.shape.string]", "encoding/json.Marshal", "github.com/mailbox-mcp/mailbox-mcp/internal/tools.render"),
		ownJSONOurs, "encoding/json.appendString[go.shape.string]"},
	{"encoding/json called by another module", []string{"encoding/json.Marshal", "github.com/prometheus/client_golang/prometheus.x", fnGoexit}, ownJSONOther, "encoding/json.Marshal"},
	{"go-message", under("github.com/emersion/go-message/textproto.(*Header).Add", fnMailbox), ownMessage, "github.com/emersion/go-message/textproto.(*Header).Add"},
	{"x/text is a helper of its caller",
		under("golang.org/x/text/encoding/charmap.(*Charmap).NewDecoder", "github.com/emersion/go-message/charset.Reader", fnMailbox),
		ownMessage, "github.com/emersion/go-message/charset.Reader"},
	{"another module", []string{"github.com/prometheus/client_golang/prometheus.(*counter).Inc", fnServe, fnGoexit}, ownOther, "github.com/prometheus/client_golang/prometheus.(*counter).Inc"},
	{"standard-library helpers alone are other, named by the goroutine's entry",
		[]string{"runtime.mallocgc", "compress/flate.(*compressor).init", "runtime/pprof.(*profileBuilder).build", "runtime/pprof.profileWriter", fnGoexit},
		ownOther, "runtime/pprof.profileWriter"},
	{"runtime frames alone, neither GC nor scheduler", []string{"runtime.sigtramp"}, ownRuntime, "runtime.sigtramp"},
	{"no stack", nil, ownRuntime, "(no stack)"},
}

func framesOf(stack []string) []string {
	var frames []string
	for _, loc := range stack {
		frames = append(frames, strings.Split(loc, "|")...)
	}
	return frames
}

func TestAttribute(t *testing.T) {
	for _, tc := range attributionCases {
		t.Run(tc.name, func(t *testing.T) {
			owner, fn := attribute(framesOf(tc.stack))
			if owner != tc.wantOwner || fn != tc.wantFn {
				t.Errorf("charged to %q (%s), want %q (%s)", owner, fn, tc.wantOwner, tc.wantFn)
			}
		})
	}
}

// buildProfile makes a CPU profile as the Go runtime writes it: one sample
// of 10 ms per stack, a location per entry ("a|b": a inlined into b).
func buildProfile(stacks [][]string) *profile.Profile {
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        int64(10 * time.Millisecond),
		DurationNanos: int64(time.Second),
	}
	funcs := map[string]*profile.Function{}
	locs := map[string]*profile.Location{}
	for _, stack := range stacks {
		s := &profile.Sample{Value: []int64{1, int64(10 * time.Millisecond)}}
		for _, entry := range stack {
			loc := locs[entry]
			if loc == nil {
				loc = &profile.Location{ID: uint64(len(p.Location) + 1), Address: uint64(0x1000 + len(p.Location))}
				for _, name := range strings.Split(entry, "|") {
					f := funcs[name]
					if f == nil {
						f = &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name}
						funcs[name] = f
						p.Function = append(p.Function, f)
					}
					loc.Line = append(loc.Line, profile.Line{Function: f})
				}
				locs[entry] = loc
				p.Location = append(p.Location, loc)
			}
			s.Location = append(s.Location, loc)
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

func TestBreakdownOfProfile(t *testing.T) {
	gcStack := []string{"runtime.scanObject", "runtime.gcDrain", "runtime.gcBgMarkWorker", fnGoexit}
	imapStack := under("runtime.mallocgc", "github.com/emersion/go-imap/v2/internal/imapwire.(*Decoder).Atom", fnEnvelope, fnMailbox)
	ourStack := under("strings.ToLower|github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg.SanitizeLine", fnMailbox)
	p := buildProfile([][]string{imapStack, imapStack, imapStack, ourStack, gcStack})
	// Through the encoded form, as the bench reads it from a file.
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	parsed, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	b, err := breakdownOf(parsed, sampleCPU)
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	if b.total != int64(50*ms) || b.samples != 5 {
		t.Errorf("total %v in %d samples, want 50ms in 5", b.total, b.samples)
	}
	if b.owners[0].owner != ownIMAP || b.owners[0].value != int64(30*ms) {
		t.Errorf("largest owner %s %v, want go-imap 30ms", b.owners[0].owner, b.owners[0].value)
	}
	if got := b.sum(ownGateway, ownJSONOurs); got != int64(10*ms) {
		t.Errorf("our code %v, want 10ms", got)
	}
	if got := b.sum(ownGC); got != int64(10*ms) {
		t.Errorf("GC %v, want 10ms", got)
	}
	if f := b.owners[0].funcs[0]; f.fn != "github.com/emersion/go-imap/v2/internal/imapwire.(*Decoder).Atom" || f.value != int64(30*ms) {
		t.Errorf("go-imap's top function %s %v", f.fn, f.value)
	}
	// Every owner is in one of the report's columns.
	grouped := map[string]bool{}
	for _, g := range ownerGroups {
		for _, o := range g.owners {
			grouped[o] = true
		}
	}
	for _, tc := range attributionCases {
		if !grouped[tc.wantOwner] {
			t.Errorf("owner %q is in no column of the report", tc.wantOwner)
		}
	}
}

func TestBreakdownRefusesOtherProfiles(t *testing.T) {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}}
	if _, err := breakdownOf(p, sampleCPU); err == nil {
		t.Error("an allocation profile was read as a CPU profile")
	}
}

func TestShortFunc(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/emersion/go-imap/v2/internal/imapwire.(*Decoder).Atom": "imapwire.(*Decoder).Atom",
		"encoding/json.appendString[go.shape.string]":                      "json.appendString[…]",
		fnTool:                                "tools.Def[…].handle",
		"from crypto/tls.(*Conn).write":       "from tls.(*Conn).write",
		"runtime.futex":                       "runtime.futex",
		"main.main":                           "main.main",
		"runtime.gcBgMarkWorker.func2":        "runtime.gcBgMarkWorker.func2",
		"net/http.checkConnErrorWriter.Write": "http.checkConnErrorWriter.Write",
	} {
		if got := shortFunc(in); got != want {
			t.Errorf("shortFunc(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBreakdownOfAllocs shares an allocs profile out by the same rules:
// bytes, not CPU, and neither profile is read as the other.
func TestBreakdownOfAllocs(t *testing.T) {
	imapStack := under("runtime.mallocgc", "time.newParseError", "net/mail.ParseDate", fnEnvelope, fnMailbox)
	ourStack := under("runtime.mallocgc", "strings.(*Builder).grow", "github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg.SanitizeLine", fnMailbox)
	p := buildProfile([][]string{imapStack, imapStack, ourStack})
	cpu := buildProfile([][]string{ourStack})
	p.SampleType = []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
		{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"}}
	p.PeriodType, p.Period = &profile.ValueType{Type: "space", Unit: "bytes"}, 512*1024
	for i, s := range p.Sample {
		s.Value = []int64{2, int64(1000 * (i + 1)), 0, 0}
	}
	b, err := breakdownOf(p, sampleAlloc)
	if err != nil {
		t.Fatal(err)
	}
	if b.total != 6000 || b.samples != 6 {
		t.Errorf("total %d bytes in %d objects, want 6000 in 6", b.total, b.samples)
	}
	if got := b.sum(ownIMAP); got != 3000 {
		t.Errorf("go-imap allocated %d bytes, want 3000 (net/mail's under it)", got)
	}
	if got := b.sum(ownGateway); got != 3000 {
		t.Errorf("our code allocated %d bytes, want 3000", got)
	}
	if _, err := breakdownOf(p, sampleCPU); err == nil {
		t.Error("an allocs profile was read as a CPU profile")
	}
	if _, err := breakdownOf(cpu, sampleAlloc); err == nil {
		t.Error("a CPU profile was read as an allocs profile")
	}
}

// TestAllocsMarkdown checks the table's arithmetic: KB per call per owner
// and the GC's CPU shared out by bytes allocated.
func TestAllocsMarkdown(t *testing.T) {
	r := &report{callCPU: []toolCPU{{
		tool: toolList, calls: 10,
		bd: &breakdown{total: 40e6, owners: []ownerShare{{owner: ownGC, value: 20e6}, {owner: ownIMAP, value: 20e6}}},
		allocs: &breakdown{total: 40960, owners: []ownerShare{
			{owner: ownIMAP, value: 30720}, {owner: ownGateway, value: 10240}}},
	}}}
	var b strings.Builder
	r.allocsMarkdown(func(format string, args ...any) { fmt.Fprintf(&b, format, args...) })
	// 2 ms of GC per call: 3/4 to go-imap (3 KB a call), 1/4 to us (1 KB).
	for _, want := range []string{"| imap_list_emails | 1.0 (0.500) | 0.0 (0.000) | 3.0 (1.500) |", "| 4.0 | 2.000 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
