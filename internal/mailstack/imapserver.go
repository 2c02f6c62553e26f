package mailstack

// Other IMAP servers beside Dovecot, for the interop tests: Cyrus IMAP 3.6
// and Courier IMAP 5.0 from Debian's packages in their default
// configuration, run by scripts/imapservers.sh (which says how they are
// installed next to Dovecot). They speak plain IMAP on 127.0.0.1 (log in
// with ALLOW_PLAINTEXT_AUTH); mail arrives by APPEND, as a delivery agent's
// would.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Kind is an IMAP server scripts/imapservers.sh can run.
type Kind string

// The servers of scripts/imapservers.sh.
const (
	Cyrus   Kind = "cyrus"
	Courier Kind = "courier"
)

// Default users of an IMAPServer: Cyrus's default namespace has "." as its
// delimiter, so its user names have no domain.
const (
	ServerAlice         = "alice"
	ServerAlicePassword = "alicepw"
	ServerBob           = "bob"
	ServerBobPassword   = "bobpw"
)

// IMAPServer is a running Cyrus or Courier.
type IMAPServer struct {
	Kind  Kind
	Dir   string
	Host  string
	Port  int
	Users map[string]string // user -> password

	script string
	lock   *os.File
	guard  *os.File
	watch  *exec.Cmd
	mu     sync.Mutex
	done   bool
}

// Addr is host:port of the server's IMAP.
func (s *IMAPServer) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// imapServersRoot is where scripts/imapservers.sh install unpacks the
// servers (IMAPSERVERS_ROOT there).
const imapServersRoot = "/var/cache/mailbox-mcp/imapservers"

// InstallIMAPServers runs scripts/imapservers.sh install: the dependencies
// from apt and the two servers unpacked (nothing when they are there).
func InstallIMAPServers() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: scripts/imapservers.sh must run as root", ErrUnavailable)
	}
	script, err := findScriptNamed("imapservers.sh")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, script, "install").CombinedOutput()
	if err != nil {
		return fmt.Errorf("mailstack: imapservers.sh install: %w\n%s", err, out)
	}
	return nil
}

// StartIMAP starts a server of kind in a fresh temp directory with the
// default users plus users (user -> password; names of a-z, 0-9, _ and -).
// It needs root and scripts/imapservers.sh install done (an error wrapping
// ErrUnavailable says so). A watchdog stops it if this process dies
// without calling Stop.
func StartIMAP(kind Kind, users map[string]string) (*IMAPServer, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: scripts/imapservers.sh must run as root", ErrUnavailable)
	}
	for _, bin := range []string{"usr/lib/cyrus/bin/imapd", "usr/bin/imapd"} {
		if _, err := os.Stat(filepath.Join(imapServersRoot, "root", bin)); err != nil {
			return nil, fmt.Errorf("%w: Cyrus and Courier are not unpacked (%v); run scripts/imapservers.sh install as root", ErrUnavailable, err)
		}
	}
	script, err := findScriptNamed("imapservers.sh")
	if err != nil {
		return nil, err
	}
	all := map[string]string{ServerAlice: ServerAlicePassword, ServerBob: ServerBobPassword}
	for u, p := range users {
		all[u] = p
	}
	var errs []error
	tried := map[int]bool{}
	for attempt := 0; attempt < 5; attempt++ {
		port, lock, err := reserveOnePort(tried)
		if err != nil {
			return nil, errors.Join(append(errs, err)...)
		}
		s := &IMAPServer{Kind: kind, Host: "127.0.0.1", Port: port, Users: all, script: script, lock: lock}
		if err := s.start(); err != nil {
			lock.Close()
			errs = append(errs, err)
			if strings.Contains(err.Error(), "already in use") {
				continue
			}
			return nil, errors.Join(errs...)
		}
		return s, nil
	}
	return nil, errors.Join(errs...)
}

func (s *IMAPServer) start() (err error) {
	dir, err := os.MkdirTemp(tempRoot(), "mmcp-"+string(s.Kind)+"-")
	if err != nil {
		return fmt.Errorf("mailstack: %w", err)
	}
	s.Dir = dir
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	// As for the Dovecot stack: a watchdog that stops the server and
	// removes DIR once every write end of its stdin is closed.
	pw, watch, err := startWatchdog("imapserver-watchdog", dir, s.script, nil)
	if err != nil {
		return err
	}
	s.guard, s.watch = pw, watch
	defer func() {
		if err != nil {
			s.guard.Close()
			s.watch.Wait()
		}
	}()
	names := make([]string, 0, len(s.Users))
	for u := range s.Users {
		names = append(names, u)
	}
	sort.Strings(names)
	args := []string{"start", string(s.Kind), dir, strconv.Itoa(s.Port)}
	for _, u := range names {
		args = append(args, u+":"+s.Users[u])
	}
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.script, args...)
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mailstack: imapservers.sh start %s: %w\n%s", s.Kind, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Stop stops the server and removes its directory; again does nothing.
func (s *IMAPServer) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.script, "stop", s.Dir).CombinedOutput()
	if err != nil {
		err = fmt.Errorf("mailstack: imapservers.sh stop: %w\n%s", err, out)
	}
	if rerr := os.RemoveAll(s.Dir); rerr != nil && err == nil {
		err = fmt.Errorf("mailstack: %w", rerr)
	}
	s.guard.Close()
	s.watch.Wait()
	s.lock.Close()
	return err
}

// Log returns the server's own logs (for a failing test), at most the
// last n bytes of each.
func (s *IMAPServer) Log(n int) string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(s.Dir, "log", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(f), data[max(0, len(data)-n):])
	}
	return b.String()
}

// reserveOnePort picks a free port ≡ 10 (mod 20) below 32768: none of the
// Dovecot stacks' ports (whose offsets are multiples of 20 on bases ending
// in 3, 4, 5 and 7) is such a port, and the same lock directory keeps
// processes apart.
func reserveOnePort(tried map[int]bool) (int, *os.File, error) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return 0, nil, fmt.Errorf("mailstack: %w", err)
	}
	const lo, hi = 12010, 32750
	n := (hi-lo)/20 + 1
	start := int(time.Now().UnixNano()/1000) % n
	for i := 0; i < n; i++ {
		port := lo + ((start+i)%n)*20
		if tried[port] {
			continue
		}
		tried[port] = true
		f, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(port)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		l, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			f.Close()
			continue
		}
		l.Close()
		return port, f, nil
	}
	return 0, nil, errors.New("mailstack: no free port for an IMAP server")
}
