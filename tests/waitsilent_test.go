package tests

import (
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// silentProxy forwards TCP to target until silence: from then on it
// passes nothing on, either way, and keeps every connection open (a
// server that went silent mid-answer, as far as the gateway can tell).
type silentProxy struct {
	ln     net.Listener
	target string
	quiet  atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func startSilentProxy(t *testing.T, target string) *silentProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silentProxy{ln: ln, target: target}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go p.pipe(c, s)
			go p.pipe(s, c)
		}
	}()
	return p
}

func (p *silentProxy) port() string { return strconv.Itoa(p.ln.Addr().(*net.TCPAddr).Port) }

// silence stops all forwarding.
func (p *silentProxy) silence() { p.quiet.Store(true) }

func (p *silentProxy) pipe(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if p.quiet.Load() {
			// Swallow everything from now on; the connection stays.
			io.Copy(io.Discard, from)
			return
		}
		if n > 0 {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			to.Close()
			return
		}
	}
}

// Waits end by their own deadline (issue 35). The server goes silent while
// a wait sits in IDLE: the DONE that ends it at its end, or at its
// re-check, is never answered, and the wait still ends with its timeout
// result within its timeout_s plus a second's grace, not at the call's
// limit (timeout_s plus 10 s). A wait whose server is silent before it
// could look at all ends then too, with an error that names the wait's own
// limit, not TOOL_TIMEOUT.
func TestWaitEndsByItsOwnDeadlineOnASilentServer(t *testing.T) {
	const user = "silent@example.test"
	s := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: "silent-pw"}})
	for _, tc := range []struct {
		name       string
		recheck    string
		timeoutS   int
		silenceAt  time.Duration // -1: before the call
		wantResult bool          // a timeout result; else an error
	}{
		{"silent in IDLE until the wait's end", "0", 8, 1500 * time.Millisecond, true},
		{"silent at the re-check", "4s", 6, 1500 * time.Millisecond, true},
		{"silent from the start", "0", 3, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startSilentProxy(t, s.IMAPSAddr())
			g := startGateway(t, s, "IMAP_HOST=127.0.0.1", "IMAP_PORT="+p.port(), "WAIT_RECHECK="+tc.recheck)
			c := mailtest.MCPClient(t, g.URL, userHeaders(s, user), "")
			if tc.silenceAt < 0 {
				p.silence()
			} else {
				time.AfterFunc(tc.silenceAt, p.silence)
			}
			start := time.Now()
			res, err := mailtest.CallErr(c, "imap_wait_for_email", map[string]any{"timeout_s": tc.timeoutS})
			took := time.Since(start)
			if err != nil {
				t.Fatalf("after %v: %v", took, err)
			}
			limit := time.Duration(tc.timeoutS) * time.Second
			if took > limit+2*time.Second {
				t.Errorf("the %v wait ended after %v, want within %v", limit, took.Round(time.Millisecond), limit+2*time.Second)
			}
			txt := mailtest.Text(res)
			if tc.wantResult {
				var out struct {
					TimedOut bool `json:"timed_out"`
				}
				if res.IsError {
					t.Fatalf("an error after %v: %s", took, txt)
				}
				mailtest.Decode(t, res, &out)
				if !out.TimedOut || took < limit-time.Second {
					t.Errorf("after %v: %s", took, txt)
				}
			} else if !res.IsError || !strings.Contains(txt, "timeout_s") || strings.Contains(txt, "TOOL_TIMEOUT") {
				t.Errorf("after %v: %q, want an error naming the wait's own limit (timeout_s)", took, txt)
			}
			t.Logf("%s: %v wait ended after %v: %.120s", tc.name, limit, took.Round(time.Millisecond), txt)
		})
	}
}
