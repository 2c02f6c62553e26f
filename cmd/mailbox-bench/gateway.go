package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mcpcall"
)

// gateway is the gateway binary running as a child process, so that its
// memory figures are its own.
type gateway struct {
	cmd    *exec.Cmd
	url    string
	pprof  string // host:port of the profiling listener, "" if off
	logf   *os.File
	exited chan error
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// prepare makes the run's temporary directory (named with prefix), a key,
// and the gateway binary in it; cleanup removes the directory unless -keep.
func (b *bench) prepare(prefix string) (cleanup func(), err error) {
	if b.dir, err = os.MkdirTemp("", prefix); err != nil {
		return nil, err
	}
	cleanup = func() {
		if b.o.keep {
			logf("kept %s (gateway logs)", b.dir)
			return
		}
		os.RemoveAll(b.dir)
	}
	if b.key, err = credentials.NewKey(); err == nil {
		logf("building the gateway")
		b.bin, err = buildGateway(b.dir)
	}
	if err != nil {
		cleanup()
		return nil, err
	}
	return cleanup, nil
}

// buildGateway compiles cmd/mailbox-mcp into dir (no race detector: the
// figures are for the binary users run).
func buildGateway(dir string) (string, error) {
	bin := filepath.Join(dir, "gateway-under-bench") // a name no one else kills by
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mailbox-mcp")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/mailbox-mcp: %w", err)
	}
	return bin, nil
}

func startGateway(bin, dir, name string, s *mailstack.Stack, key string, pprof bool, env ...string) (*gateway, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	vars := []string{
		"PATH=" + os.Getenv("PATH"),
		"IMAP_HOST=127.0.0.1", "IMAP_PORT=" + strconv.Itoa(s.IMAPSPort), "MAIL_CA_FILE=" + s.CAFile,
		"SMTP_HOST=127.0.0.1", "SMTP_PORT=" + strconv.Itoa(s.SubmissionsPort), "SMTP_SECURITY=tls",
		"ENCRYPTION_KEY=" + key, "BIND_ADDRESS=127.0.0.1", "PORT=" + strconv.Itoa(port),
	}
	g := &gateway{url: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), exited: make(chan error, 1)}
	if pprof {
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		g.pprof = fmt.Sprintf("127.0.0.1:%d", pp)
		vars = append(vars, "PPROF_ADDR="+g.pprof)
	}
	vars = append(vars, env...)
	if g.logf, err = os.Create(filepath.Join(dir, name+".log")); err != nil {
		return nil, err
	}
	g.cmd = exec.Command(bin, "serve")
	g.cmd.Env = vars
	g.cmd.Stdout, g.cmd.Stderr = g.logf, g.logf
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { g.exited <- g.cmd.Wait() }()
	health := strings.TrimSuffix(g.url, "/mcp") + "/health"
	for i := 0; ; i++ {
		resp, err := http.Get(health)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return g, nil
			}
		}
		select {
		case err := <-g.exited:
			return nil, fmt.Errorf("gateway exited at start (%v); see %s", err, g.logf.Name())
		case <-time.After(50 * time.Millisecond):
		}
		if i > 200 {
			g.stop()
			return nil, fmt.Errorf("gateway did not answer %s; see %s", health, g.logf.Name())
		}
	}
}

func (g *gateway) stop() {
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(20 * time.Second):
		g.cmd.Process.Kill()
		<-g.exited
	}
	g.logf.Close()
}

// status reads a field of /proc/PID/status in kB.
func (g *gateway) status(field string) (int64, error) {
	return procStatus(g.cmd.Process.Pid, field)
}

func procStatus(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// cpu is the gateway's CPU time so far (see procCPU).
func (g *gateway) cpu() time.Duration {
	return procCPU(g.cmd.Process.Pid)
}

// procCPU is a process's CPU time so far, to the nanosecond: the sum over
// its threads of the scheduler's time on the CPU (first field of
// /proc/PID/task/TID/schedstat). /proc/PID/stat counts in 10 ms ticks, too
// coarse for a cell of a few hundred short calls; it is the fallback when
// the kernel has no schedstat (it then prints zeros). A thread that has
// exited drops out of the sum, which is fine for a Go process: the runtime
// keeps its threads.
func procCPU(pid int) time.Duration {
	if d, err := schedCPU(pid); err == nil {
		return d
	}
	return statCPU(pid)
}

func schedCPU(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, t := range tasks {
		data, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited since ReadDir
		}
		f := strings.Fields(string(data))
		if len(f) == 0 {
			return 0, fmt.Errorf("%s/%s/schedstat: empty", dir, t.Name())
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/schedstat: %w", dir, t.Name(), err)
		}
		sum += ns
	}
	if sum == 0 {
		return 0, errors.New("no schedstat figures (kernel without schedstats)")
	}
	return time.Duration(sum), nil
}

// statCPU is utime + stime of /proc/PID/stat.
func statCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * time.Second / 100 // USER_HZ is 100 on Linux
}

// resetPeak makes VmHWM equal to the current RSS (Linux clear_refs 5).
func (g *gateway) resetPeak() error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", g.cmd.Process.Pid), []byte("5"), 0)
}

// imapConns counts the gateway's established TCP connections to port.
func (g *gateway) imapConns(port int) (int, error) {
	pid := g.cmd.Process.Pid
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return 0, err
	}
	want := fmt.Sprintf(":%04X", port)
	n := 0
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		// sl local rem st ... inode(9)
		if len(f) > 9 && strings.HasSuffix(f[2], want) && f[3] == "01" && inodes[f[9]] {
			n++
		}
	}
	return n, nil
}

// fetchProfile saves /debug/pprof/<what> to path.
func (g *gateway) fetchProfile(what, path string) error {
	if g.pprof == "" {
		return errors.New("profiling is off")
	}
	resp, err := http.Get("http://" + g.pprof + "/debug/pprof/" + what)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof %s: %s", what, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// mcpClient is an initialised mcp-go client over HTTP for one user.
func mcpClient(url, user, pass string) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return mcpcall.Connect(ctx, url, mcpcall.Options{
		Headers:     map[string]string{"x-imap-user": user, "x-imap-pass": pass},
		HTTPTimeout: 120 * time.Second,
		ClientName:  "mailbox-bench",
	})
}

// call calls a tool and returns its structured result as mcp-go's client
// decoded it (checked in place: decoding it a second time would charge the
// bench's own work to the gateway); a tool error is an error.
func call(c *client.Client, name string, args map[string]any) (map[string]any, error) {
	res, err := mcpcall.CallErr(c, name, args)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: tool error: %s", name, mcpcall.Text(res))
	}
	m, _ := res.StructuredContent.(map[string]any)
	if m == nil {
		return nil, fmt.Errorf("%s: no structured content", name)
	}
	return m, nil
}

func num(m map[string]any, k string) int {
	f, _ := m[k].(float64)
	return int(f)
}

func list(m map[string]any, k string) []any {
	l, _ := m[k].([]any)
	return l
}
