package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// The flood of issue 12.1: without limits, ~380 clients each holding an
// unfinished 1 MiB body got the gateway OOM-killed in the 256 MiB memory
// limit of deploy/kubernetes/deployment.yaml. Here 1,500 such clients hold
// their connections while a real MCP call is made: it must succeed within
// a few seconds, and the gateway, a separate process in a 256 MiB memory
// cgroup, must survive.
const (
	floodConns     = 1500
	floodBodyBytes = 1 << 20
	floodMemLimit  = 256 << 20
)

func TestFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a gateway process with 1.5 GB of request bodies")
	}
	s := mailtest.Shared(t)
	cg := newMemoryCgroup(t, floodMemLimit)
	raiseNofile(t, floodConns+1024)
	bin := buildGateway(t)
	gw := startGatewayProcess(t, bin, cg, s)
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	state := func() string {
		mem := cg.stats()
		alive := "alive"
		if err := gw.alive(); err != nil {
			alive = err.Error()
		}
		return fmt.Sprintf("gateway %s; cgroup peak %.1f MiB, OOM kills %d", alive, mib(mem.peak), mem.oomKills)
	}

	// The flood: every connection declares 1 MiB and sends all of it but
	// the last 16 bytes, then holds.
	body := make([]byte, floodBodyBytes-16)
	for i := range body {
		body[i] = ' '
	}
	head := []byte(fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", floodBodyBytes))
	var (
		conns                        = make(chan net.Conn, floodConns)
		dialed, dialFailed, sent     atomic.Int64
		got503, got408, closedByPeer atomic.Int64
		otherStatus                  atomic.Int64
		wg                           sync.WaitGroup
	)
	floodStart := time.Now()
	for range floodConns {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", gw.addr, 5*time.Second)
			if err != nil {
				dialFailed.Add(1)
				return
			}
			dialed.Add(1)
			conns <- c
			c.SetWriteDeadline(time.Now().Add(40 * time.Second))
			if _, err := c.Write(head); err == nil {
				if _, err := c.Write(body); err == nil {
					sent.Add(1)
				}
			}
			// Hold, and note how the gateway ended the connection.
			c.SetReadDeadline(time.Now().Add(40 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			switch {
			case strings.HasPrefix(line, "HTTP/1.1 503"):
				got503.Add(1)
			case strings.HasPrefix(line, "HTTP/1.1 408"):
				got408.Add(1)
			case line != "":
				otherStatus.Add(1)
			case err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, net.ErrClosed):
				closedByPeer.Add(1)
			}
		})
	}
	t.Cleanup(func() {
		close(conns)
		for c := range conns {
			c.Close()
		}
		wg.Wait()
	})
	// Every client has connected (or been refused) before the real call.
	for deadline := time.Now().Add(20 * time.Second); dialed.Load()+dialFailed.Load() < floodConns; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d flood connections made", dialed.Load()+dialFailed.Load(), floodConns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("flood: %d connections in %v (%d dials failed)", dialed.Load(), time.Since(floodStart).Round(time.Millisecond), dialFailed.Load())

	// The real calls, while the flood holds: /health, then tools/list and
	// imap_list_folders over MCP. A client that honours Retry-After may
	// retry; the whole must succeed within a few seconds.
	const within = 5 * time.Second
	callStart := time.Now()
	healthLatency, healthTries := retryFor(within, func() error { return health(gw.base) })
	if healthLatency < 0 {
		t.Fatalf("/health did not answer within %v of the flood (%d tries): %s", within, healthTries, state())
	}
	var folders tools.FoldersResult
	headers := map[string]string{"x-imap-user": mailtest.Alice, "x-imap-pass": s.Users[mailtest.Alice]}
	callLatency, callTries := retryFor(within, func() error { return realCall(gw.base+"/mcp", headers, &folders) })
	total := time.Since(callStart)
	if callLatency < 0 {
		t.Fatalf("the real MCP call did not succeed within %v of the flood (%d tries): %s", within, callTries, state())
	}
	stillHeld := int64(floodConns) - got503.Load() - got408.Load() - closedByPeer.Load() - otherStatus.Load() - dialFailed.Load()
	t.Logf("during the flood: /health in %v (%d tries); initialize + tools/list + imap_list_folders in %v (%d tries, %v in all); %d flood connections still held at that moment",
		healthLatency.Round(time.Millisecond), healthTries, callLatency.Round(time.Millisecond), callTries, total.Round(time.Millisecond), stillHeld)
	if len(folders.Folders) == 0 {
		t.Fatal("imap_list_folders returned no folders")
	}
	if stillHeld == 0 {
		t.Fatal("no flood connection was held during the call: the test did not flood")
	}

	if err := gw.alive(); err != nil {
		t.Fatalf("gateway died under the flood: %v", err)
	}
	mem := cg.stats()
	t.Logf("gateway memory (cgroup %s, limit %d MiB): peak %.1f MiB; now %.1f MiB (anonymous %.1f, page cache %.1f, kernel %.1f); limit hit %d times, OOM kills %d",
		cg.version, floodMemLimit>>20, mib(mem.peak), mib(mem.usage), mib(mem.anon), mib(mem.file), mib(mem.kernel), mem.failcnt, mem.oomKills)
	if mem.oomKills > 0 {
		t.Fatalf("%d OOM kills in the gateway's cgroup", mem.oomKills)
	}

	// The held bodies are dropped at BODY_READ_TIMEOUT (10 s); the gateway
	// goes on serving.
	for deadline := time.Now().Add(20 * time.Second); got408.Load()+got503.Load()+closedByPeer.Load()+otherStatus.Load() < dialed.Load(); {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("flood connections ended: %d with 503, %d with 408 (body deadline), %d closed without an answer, %d other, %d sent their whole body",
		got503.Load(), got408.Load(), closedByPeer.Load(), otherStatus.Load(), sent.Load())
	if got408.Load() == 0 {
		t.Error("no held body was dropped at the body deadline")
	}
	if got503.Load() == 0 {
		t.Error("no flood connection was refused with 503")
	}
	if err := realCall(gw.base+"/mcp", headers, &folders); err != nil {
		t.Fatalf("after the flood: %v", err)
	}
	if err := gw.alive(); err != nil {
		t.Fatalf("gateway died after the flood: %v", err)
	}
}

// retryFor calls f until it succeeds or d has passed, waiting as a 503's
// Retry-After asks (a little less: the test has a deadline). It returns
// how long the successful try took (-1 if none did) and the tries.
func retryFor(d time.Duration, f func() error) (time.Duration, int) {
	deadline := time.Now().Add(d)
	for tries := 1; ; tries++ {
		start := time.Now()
		if f() == nil {
			return time.Since(start), tries
		}
		if time.Now().After(deadline) {
			return -1, tries
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func health(base string) error {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(base + "/health")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/health: %s", resp.Status)
	}
	return nil
}

// realCall is an MCP client's session: initialize, tools/list and one
// imap_list_folders call, decoded into out.
func realCall(url string, headers map[string]string, out *tools.FoldersResult) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers), transport.WithHTTPTimeout(10*time.Second))
	if err != nil {
		return err
	}
	c := client.NewClient(tr)
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "flood-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return err
	}
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return err
	}
	if len(list.Tools) == 0 {
		return errors.New("tools/list: no tools")
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "imap_list_folders"
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("imap_list_folders: %s", mailtest.Text(res))
	}
	return mailtest.DecodeErr(res, out)
}

// gatewayProcess is the gateway binary running in its own memory cgroup.
type gatewayProcess struct {
	addr, base string
	cmd        *exec.Cmd
	exited     chan struct{}
	waitErr    error
	log        *mailtest.LogBuffer
}

func (g *gatewayProcess) alive() error {
	select {
	case <-g.exited:
		return fmt.Errorf("exited: %v (%s)", g.waitErr, g.cmd.ProcessState)
	default:
		return nil
	}
}

// startGatewayProcess runs bin against the stack inside cg, with the flood
// limits at their defaults (env may change them), and waits until /health
// answers.
func startGatewayProcess(t *testing.T, bin string, cg *memoryCgroup, s *mailtest.Stack, env ...string) *gatewayProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	key, _ := credentials.NewKey()
	// The shell joins the cgroup and then becomes the gateway, so that
	// everything the gateway ever allocates is counted.
	cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$1" && exec "$2" serve`, "sh", cg.procsFile, bin)
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"IMAP_HOST=127.0.0.1", "IMAP_PORT=" + strconv.Itoa(s.IMAPSPort), "MAIL_CA_FILE=" + s.CAFile,
		"ENCRYPTION_KEY=" + key, "BIND_ADDRESS=127.0.0.1", "PORT=" + strconv.Itoa(port),
		"LOG_LEVEL=warn",
	}, env...)
	logs := &mailtest.LogBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gatewayProcess{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, exited: make(chan struct{}), log: logs}
	g.base = "http://" + g.addr
	go func() { g.waitErr = cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-g.exited
		if t.Failed() {
			l := logs.String()
			t.Logf("gateway log (last 4 KB):\n%s", l[max(0, len(l)-4000):])
		}
	})
	for deadline := time.Now().Add(15 * time.Second); health(g.base) != nil; {
		if err := g.alive(); err != nil {
			t.Fatalf("gateway %v\n%s", err, logs.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway not ready\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return g
}

// memoryCgroup is a memory cgroup made for one test, v1 or v2.
type memoryCgroup struct {
	version   string // "v1" or "v2"
	dir       string
	procsFile string
}

type memoryStats struct {
	peak, usage, failcnt, oomKills int64
	anon, file, kernel             int64 // what usage is made of now
}

// newMemoryCgroup makes a memory cgroup limited to limit bytes, under this
// process's own cgroup, and removes it when the test ends. It skips the
// test, saying why, only when neither cgroup version can be used.
func newMemoryCgroup(t *testing.T, limit int64) *memoryCgroup {
	t.Helper()
	name := fmt.Sprintf("mmcp-flood-%d", os.Getpid())
	var reasons []string
	try := func(version, root, own, limitFile string) *memoryCgroup {
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			reasons = append(reasons, fmt.Sprintf("%s: no %s", version, root))
			return nil
		}
		dir := filepath.Join(root, own, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			reasons = append(reasons, fmt.Sprintf("%s: %v", version, err))
			return nil
		}
		cg := &memoryCgroup{version: version, dir: dir, procsFile: filepath.Join(dir, "cgroup.procs")}
		if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
			os.Remove(dir)
			reasons = append(reasons, fmt.Sprintf("%s: setting %s: %v", version, limitFile, err))
			return nil
		}
		t.Cleanup(func() {
			// the gateway has been killed by then (cleanups run last
			// first); its exit may take a moment to leave the cgroup
			for deadline := time.Now().Add(5 * time.Second); ; {
				err := os.Remove(dir)
				if err == nil || time.Now().After(deadline) {
					if err != nil {
						t.Logf("removing cgroup %s: %v", dir, err)
					}
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
		return cg
	}
	ownV1, ownV2 := ownCgroups()
	// v2 with the memory controller (a unified hierarchy)
	if ctrl, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(ctrl), "memory") {
		parent := filepath.Join("/sys/fs/cgroup", ownV2)
		sub, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
		if !strings.Contains(string(sub), "memory") {
			os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory"), 0)
		}
		if cg := try("v2", "/sys/fs/cgroup", ownV2, "memory.max"); cg != nil {
			return cg
		}
	} else {
		reasons = append(reasons, "v2: no memory controller in /sys/fs/cgroup/cgroup.controllers")
	}
	if cg := try("v1", "/sys/fs/cgroup/memory", ownV1, "memory.limit_in_bytes"); cg != nil {
		return cg
	}
	t.Skipf("no memory cgroup can be made here (%s): the flood test needs one to bound the gateway like deploy/kubernetes does", strings.Join(reasons, "; "))
	return nil
}

// ownCgroups reads this process's memory cgroup (v1) and unified cgroup
// (v2) paths from /proc/self/cgroup.
func ownCgroups() (v1, v2 string) {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				v1 = parts[2]
			}
		}
	}
	return v1, v2
}

func (cg *memoryCgroup) stats() memoryStats {
	num := func(file string) int64 {
		b, _ := os.ReadFile(filepath.Join(cg.dir, file))
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	field := func(file, key string) int64 {
		b, _ := os.ReadFile(filepath.Join(cg.dir, file))
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, key+" "); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return n
			}
		}
		return 0
	}
	if cg.version == "v1" {
		return memoryStats{peak: num("memory.max_usage_in_bytes"), usage: num("memory.usage_in_bytes"),
			failcnt: num("memory.failcnt"), oomKills: field("memory.oom_control", "oom_kill"),
			anon: field("memory.stat", "rss"), file: field("memory.stat", "cache"), kernel: num("memory.kmem.usage_in_bytes")}
	}
	return memoryStats{peak: num("memory.peak"), usage: num("memory.current"),
		failcnt: field("memory.events", "max"), oomKills: field("memory.events", "oom_kill"),
		anon: field("memory.stat", "anon"), file: field("memory.stat", "file"), kernel: field("memory.stat", "kernel")}
}

// raiseNofile lifts this process's open-file limit to at least n (the
// gateway, started from it, inherits the limit).
func raiseNofile(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	lim.Cur = min(max(n, lim.Cur), lim.Max)
	if lim.Cur < n && lim.Max < n {
		lim.Max, lim.Cur = n, n // root may raise the hard limit too
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < n {
		t.Fatalf("cannot raise the open-file limit to %d: %v", n, err)
	}
}
