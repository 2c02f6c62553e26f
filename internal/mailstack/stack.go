// Package mailstack runs a real Dovecot/Postfix stack from
// scripts/mailstack.sh for tests and the benchmark; it is never used by the
// gateway. It does not import testing, so that cmd/mailbox-bench can use it:
// tests reach it through internal/mailtest (Shared, StartT, Main).
//
// A stack is Dovecot 2.3 (IMAP, IMAPS, LMTP) and Postfix 3.7 (submission,
// submissions, an MX port without AUTH that delivers into Dovecot) on
// 127.0.0.1, with all config, mail and logs in one short temp directory. It
// needs root and the Debian packages dovecot-core, dovecot-imapd,
// dovecot-lmtpd and postfix (scripts/test.sh installs them when run as root).
//
// Every stack gets its own ports (MAILSTACK_PORT_OFFSET), so several
// processes (the test binaries of `go test ./...`, the benchmark) can run
// stacks side by side. A watchdog process stops a stack whose process died
// without calling Stop (test timeout, panic, SIGKILL).
package mailstack

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/emersion/go-smtp"
)

// Default users of every stack (Options.Users adds to these).
const (
	Alice         = "alice@example.test"
	AlicePassword = "alicepw"
	Bob           = "bob@example.test"
	BobPassword   = "bobpw"
)

// ErrUnavailable is wrapped by the error of Start when this machine cannot
// run a stack at all (not root, packages missing), as opposed to a stack that
// failed to start.
var ErrUnavailable = errors.New("mail stack unavailable")

// Stack is a running Dovecot/Postfix stack.
type Stack struct {
	Dir  string // the stack's directory (config, mail, logs under log/)
	Host string // 127.0.0.1

	IMAPPort        int // IMAP, plain + STARTTLS (LOGIN allowed without TLS)
	IMAPSPort       int // IMAP, implicit TLS
	SubmissionPort  int // SMTP submission, STARTTLS required before AUTH
	SubmissionsPort int // SMTP submission, implicit TLS
	MXPort          int // SMTP without AUTH, for the local domains
	LMTPPort        int // LMTP straight into Dovecot

	CAFile string            // PEM of the stack's self-signed cert (localhost, 127.0.0.1)
	Users  map[string]string // user -> password

	// Offset is the MAILSTACK_PORT_OFFSET of this stack; Env holds the
	// KEY=VALUE lines of DIR/mailstack.env.
	Offset int
	Env    map[string]string

	script  string
	doveadm string
	path    string // PATH for the script and doveadm
	roots   *x509.CertPool
	opts    Options
	locks   []*os.File
	guard   *os.File  // write end of the watchdog's stdin
	watch   *exec.Cmd // the watchdog
	mu      sync.Mutex
	stopped bool

	// usersFile is DIR/users, the user list handed to the script when it
	// is too long for MAILSTACK_USERS ("": the variable carries it).
	usersFile string
}

// Options configure Start.
type Options struct {
	// Users are added to the default users (alice@example.test:alicepw,
	// bob@example.test:bobpw); a default user listed here gets the password
	// given here. Names are user@domain; neither names nor passwords may
	// contain whitespace or ':'. nil means the defaults only.
	Users map[string]string
	// Metadata turns on IMAP METADATA (RFC 5464) in Dovecot
	// (MAILSTACK_METADATA=1): it then advertises METADATA. Off by default.
	Metadata bool
	// OAuthIntrospectionURL turns on OAuth logins (SASL OAUTHBEARER and
	// XOAUTH2, for IMAP and submission) when set
	// (MAILSTACK_OAUTH2_URL): Dovecot's oauth2 passdb POSTs each token to
	// this RFC 7662 introspection endpoint, which must answer 200
	// {"active":true,"username":USER} or 200 {"active":false}. Passwords
	// keep working. Empty by default.
	OAuthIntrospectionURL string
	// OAuthUsernameAttribute is the field of the introspection answer that
	// must equal the SASL user, lower-cased
	// (MAILSTACK_OAUTH2_USERNAME_ATTRIBUTE): "username" when empty; Ory
	// Hydra answers it in "sub". Dovecot 2.3 sees only top-level fields.
	OAuthUsernameAttribute string
	// OAuthScope, when set, is the scope (or space-separated scopes) an
	// access token must carry in the introspection answer's "scope", or
	// Dovecot refuses it (MAILSTACK_OAUTH2_SCOPE), as real mail providers
	// require their mail scope.
	OAuthScope string
}

// The base ports of scripts/mailstack.sh (Dovecot's own submission server,
// 2587/2465, is not enabled by this package).
var basePorts = []int{1024, 1025, 1143, 1465, 1587, 1993}

const (
	offsetMin  = 10000 // highest port is then 1993+30000 < 32768, where
	offsetMax  = 30000 // Linux starts handing out ephemeral ports
	offsetStep = 20
)

var (
	scriptTimeout = 2 * time.Minute
	lockDir       = "/tmp/mmcp-port-locks" // the same for every process, whatever its TMPDIR
)

// Start starts a stack in a fresh temp directory, with ports chosen so that
// they are all free. The caller must call Stop.
func Start(opts Options) (*Stack, error) {
	paths, err := preflight()
	if err != nil {
		return nil, err
	}
	script, err := findScript()
	if err != nil {
		return nil, err
	}
	users, err := mergeUsers(opts.Users)
	if err != nil {
		return nil, err
	}

	var errs []error
	tried := map[int]bool{}
	for attempt := 0; attempt < 5; attempt++ {
		offset, locks, err := reservePorts(tried)
		if err != nil {
			return nil, errors.Join(append(errs, err)...)
		}
		s := &Stack{
			Host:    "127.0.0.1",
			Users:   users,
			Offset:  offset,
			script:  script,
			doveadm: paths.doveadm,
			path:    paths.path,
			locks:   locks,
			opts:    opts,
		}
		err = s.start()
		if err == nil {
			return s, nil
		}
		s.releasePorts()
		errs = append(errs, err)
		// Another process may have taken a port between our check and the
		// daemons' bind: try other ports. Anything else is a real failure.
		msg := err.Error()
		if !strings.Contains(msg, "already in use") && !strings.Contains(msg, "did not answer") {
			break
		}
	}
	return nil, errors.Join(errs...)
}

type toolPaths struct {
	doveadm string
	path    string
}

// preflight checks that this machine can run a stack; its errors wrap
// ErrUnavailable.
func preflight() (toolPaths, error) {
	var tp toolPaths
	if os.Geteuid() != 0 {
		return tp, fmt.Errorf("%w: scripts/mailstack.sh must run as root (uid is %d)", ErrUnavailable, os.Geteuid())
	}
	// dovecot, postfix and doveadm live in /usr/sbin, which is not on every PATH.
	path := os.Getenv("PATH")
	for _, d := range []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		if !slices.Contains(filepath.SplitList(path), d) {
			path += string(filepath.ListSeparator) + d
		}
	}
	tp.path = path
	var missing []string
	for _, bin := range []string{"dovecot", "doveadm", "postfix", "postconf", "openssl", "python3"} {
		p, err := lookPath(bin, path)
		if err != nil {
			missing = append(missing, bin)
		}
		if bin == "doveadm" {
			tp.doveadm = p
		}
	}
	for _, f := range []string{"/usr/lib/dovecot/imap", "/usr/lib/dovecot/lmtp"} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return tp, fmt.Errorf("%w: missing %s; install with: apt-get install -y --no-install-recommends dovecot-core dovecot-imapd dovecot-lmtpd postfix openssl python3 (or run scripts/test.sh as root)",
			ErrUnavailable, strings.Join(missing, ", "))
	}
	for _, u := range []string{"dovecot", "dovenull", "postfix"} {
		if _, err := osuser.Lookup(u); err != nil {
			return tp, fmt.Errorf("%w: system user %s missing (created by the dovecot-core/postfix packages): %v", ErrUnavailable, u, err)
		}
	}
	return tp, nil
}

func lookPath(bin, path string) (string, error) {
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			continue
		}
		p := filepath.Join(d, bin)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s", bin, path)
}

// findScript walks up from the working directory to the module root (the
// directory holding go.mod) and returns its scripts/mailstack.sh.
func findScript() (string, error) { return findScriptNamed("mailstack.sh") }

// findScriptNamed is findScript for the module's scripts/NAME.
func findScriptNamed(name string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("mailstack: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			script := filepath.Join(d, "scripts", name)
			if _, err := os.Stat(script); err != nil {
				return "", fmt.Errorf("mailstack: %w", err)
			}
			return script, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("mailstack: no go.mod above %s", wd)
		}
	}
}

func mergeUsers(extra map[string]string) (map[string]string, error) {
	users := map[string]string{Alice: AlicePassword, Bob: BobPassword}
	for u, pw := range extra {
		local, dom, ok := strings.Cut(u, "@")
		if !ok || local == "" || dom == "" || strings.ContainsAny(u, ": \t\r\n") {
			return nil, fmt.Errorf("mailstack: bad user name %q (want user@domain, no whitespace or ':')", u)
		}
		if pw == "" || strings.ContainsAny(pw, ": \t\r\n") {
			return nil, fmt.Errorf("mailstack: bad password for %s (must be non-empty, no whitespace or ':')", u)
		}
		users[strings.ToLower(u)] = pw
	}
	return users, nil
}

// reservePorts picks a port offset none of whose ports is reserved by
// another process using this package (a flock on a file per port, held until Stop or
// process exit) or bound by anyone on 127.0.0.1.
func reservePorts(tried map[int]bool) (int, []*os.File, error) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return 0, nil, fmt.Errorf("mailstack: %w", err)
	}
	n := (offsetMax-offsetMin)/offsetStep + 1
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		offset := offsetMin + ((start+i)%n)*offsetStep
		if tried[offset] {
			continue
		}
		tried[offset] = true
		if locks, ok := tryPorts(offset); ok {
			return offset, locks, nil
		}
	}
	return 0, nil, errors.New("mailstack: no free port offset in 10000..30000")
}

func tryPorts(offset int) ([]*os.File, bool) {
	var locks []*os.File
	release := func() {
		for _, f := range locks {
			f.Close() // drops the flock
		}
	}
	for _, base := range basePorts {
		port := base + offset
		f, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(port)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			release()
			return nil, false
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			release()
			return nil, false
		}
		locks = append(locks, f)
		l, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			release()
			return nil, false
		}
		l.Close()
	}
	return locks, true
}

func (s *Stack) releasePorts() {
	for _, f := range s.locks {
		f.Close()
	}
	s.locks = nil
}

// tempRoot is where stack directories go: os.TempDir() unless its path is
// too long for the unix sockets under DIR/run.
func tempRoot() string {
	if d := os.TempDir(); len(d) <= 40 {
		return d
	}
	return "/tmp"
}

func (s *Stack) start() (err error) {
	dir, err := os.MkdirTemp(tempRoot(), "mmcp-")
	if err != nil {
		return fmt.Errorf("mailstack: %w", err)
	}
	// the daemons (dovecot, dovenull, postfix, mail uid 5000) must traverse it
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("mailstack: %w", err)
	}
	s.Dir = dir
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if len(dir) > 70 {
		return fmt.Errorf("mailstack: stack dir %s longer than 70 characters (unix socket paths); set TMPDIR=/tmp", dir)
	}
	if list := userList(s.Users); len(list) > maxUsersEnv {
		s.usersFile = filepath.Join(dir, "users")
		if err := os.WriteFile(s.usersFile, []byte(strings.Join(list, "\n")+"\n"), 0o600); err != nil {
			return fmt.Errorf("mailstack: %w", err)
		}
	}

	// The watchdog is started before the stack, so that nothing is left
	// running however this process ends: it waits for EOF on its stdin (all
	// write ends closed: Stop, or this process exited), then stops the stack
	// and removes DIR. Its own process group keeps it alive through a Ctrl-C
	// sent to go test's group; stdout/stderr go to /dev/null so it never
	// holds go test's pipes.
	pw, watch, err := startWatchdog("mailstack-watchdog", dir, s.script, s.env())
	if err != nil {
		return err
	}
	s.guard, s.watch = pw, watch
	defer func() {
		if err != nil {
			// make the watchdog stop whatever the failed start left behind
			s.guard.Close()
			s.watch.Wait()
		}
	}()

	if _, err := s.run("start", dir); err != nil {
		return err
	}
	if err := s.loadEnv(); err != nil {
		return err
	}
	return nil
}

// startWatchdog starts a process that, once every write end of its stdin
// (the returned file) is closed, runs `script stop dir` and removes dir:
// whatever ends this process, nothing it started is left running. Its own
// process group keeps it alive through a Ctrl-C sent to go test's group;
// its output goes nowhere, so it never holds go test's pipes. env nil: this
// process's environment.
func startWatchdog(name, dir, script string, env []string) (*os.File, *exec.Cmd, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("mailstack: %w", err)
	}
	watch := exec.Command("/bin/sh", "-c",
		`read -r _ || true; if [ -d "$1" ]; then "$2" stop "$1" >/dev/null 2>&1; rm -rf "$1"; fi`,
		name, dir, script)
	watch.Stdin = pr
	watch.Env = env
	watch.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := watch.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, nil, fmt.Errorf("mailstack: watchdog: %w", err)
	}
	pr.Close()
	return pw, watch, nil
}

// env is the environment of the script and doveadm.
func (s *Stack) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "MAILSTACK_PORT_OFFSET", "MAILSTACK_USERS", "MAILSTACK_USERS_FILE", "MAILSTACK_UID", "MAILSTACK_DOVECOT_SUBMISSION", "MAILSTACK_METADATA", "MAILSTACK_OAUTH2_URL",
			"MAILSTACK_OAUTH2_USERNAME_ATTRIBUTE", "MAILSTACK_OAUTH2_SCOPE":
			continue
		}
		env = append(env, kv)
	}
	users := "MAILSTACK_USERS=" + strings.Join(userList(s.Users), " ")
	if s.usersFile != "" {
		users = "MAILSTACK_USERS_FILE=" + s.usersFile
	}
	return append(env,
		"PATH="+s.path,
		"MAILSTACK_PORT_OFFSET="+strconv.Itoa(s.Offset),
		users,
		"MAILSTACK_DOVECOT_SUBMISSION=0",
		"MAILSTACK_METADATA="+boolEnv(s.opts.Metadata),
		"MAILSTACK_OAUTH2_URL="+s.opts.OAuthIntrospectionURL,
		"MAILSTACK_OAUTH2_USERNAME_ATTRIBUTE="+s.opts.OAuthUsernameAttribute,
		"MAILSTACK_OAUTH2_SCOPE="+s.opts.OAuthScope,
	)
}

// maxUsersEnv is the longest user list passed in MAILSTACK_USERS (in
// user:password entries); a longer one goes through a file
// (MAILSTACK_USERS_FILE). Linux refuses to exec with one environment string
// over 128 KiB (MAX_ARG_STRLEN), and the script, doveadm and the watchdog
// all get this environment: 10,000 users are about 280 KB.
const maxUsersEnv = 500

// userList is users as user:password entries, sorted.
func userList(users map[string]string) []string {
	list := make([]string, 0, len(users))
	for u, pw := range users {
		list = append(list, u+":"+pw)
	}
	sort.Strings(list)
	return list
}

func boolEnv(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// run runs scripts/mailstack.sh with args and returns its combined output.
func (s *Stack) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.script, args...)
	cmd.Env = s.env()
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("mailstack: mailstack.sh %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (s *Stack) loadEnv() error {
	data, err := os.ReadFile(filepath.Join(s.Dir, "mailstack.env"))
	if err != nil {
		return fmt.Errorf("mailstack: %w", err)
	}
	s.Env = map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok {
			s.Env[k] = strings.Trim(v, `"`)
		}
	}
	ports := []struct {
		key string
		dst *int
	}{
		{"MAILSTACK_IMAP_PORT", &s.IMAPPort},
		{"MAILSTACK_IMAPS_PORT", &s.IMAPSPort},
		{"MAILSTACK_SUBMISSION_PORT", &s.SubmissionPort},
		{"MAILSTACK_SUBMISSIONS_PORT", &s.SubmissionsPort},
		{"MAILSTACK_MX_PORT", &s.MXPort},
		{"MAILSTACK_LMTP_PORT", &s.LMTPPort},
	}
	for _, p := range ports {
		n, err := strconv.Atoi(s.Env[p.key])
		if err != nil {
			return fmt.Errorf("mailstack: %s in mailstack.env: %w", p.key, err)
		}
		*p.dst = n
	}
	if h := s.Env["MAILSTACK_HOST"]; h != "" {
		s.Host = h
	}
	s.CAFile = s.Env["MAILSTACK_CA_FILE"]
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		return fmt.Errorf("mailstack: CA file: %w", err)
	}
	s.roots = x509.NewCertPool()
	if !s.roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("mailstack: no certificate in %s", s.CAFile)
	}
	return nil
}

// Stop stops both daemons and removes the stack's directory. Calling it
// again does nothing.
func (s *Stack) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	_, err := s.run("stop", s.Dir)
	if rerr := os.RemoveAll(s.Dir); rerr != nil && err == nil {
		err = fmt.Errorf("mailstack: %w", rerr)
	}
	s.guard.Close()
	s.watch.Wait()
	s.releasePorts()
	return err
}

// Seed bulk-loads n synthetic messages (varied senders, dates, flags, a few
// attachments and non-UTF-8 charsets) into user's mailbox, written straight
// into the Maildir and indexed by Dovecot before Seed returns. mailbox is an
// IMAP name with "/" as separator, in modified UTF-7 ("Entw&APw-rfe") or
// UTF-8; "" means INBOX. The same user and mailbox seeded twice gets the
// same messages twice (the generator is seeded with MAILSTACK_SEED, default 1).
func (s *Stack) Seed(user string, n int, mailbox string) error {
	if n < 0 {
		return fmt.Errorf("mailstack: Seed: negative count %d", n)
	}
	if mailbox == "" {
		mailbox = "INBOX"
	}
	_, err := s.run("seed", s.Dir, user, strconv.Itoa(n), mailbox)
	return err
}

// RestartDovecot stops Dovecot (every IMAP connection is dropped) and starts
// it again with the same config and ports; it returns when IMAP answers.
// Postfix keeps running.
func (s *Stack) RestartDovecot() error {
	if _, err := s.run("restart-dovecot", s.Dir); err != nil {
		return err
	}
	return s.loadEnv() // new Dovecot PID
}

// Kick drops all of user's IMAP connections (doveadm kick) and returns when
// Dovecot no longer lists them. A user without connections is not an error.
func (s *Stack) Kick(user string) error {
	_, err := s.run("kick", s.Dir, user)
	return err
}

// SetPassword changes user's password in Dovecot's passwd-file (IMAP and
// SMTP AUTH both check it; Dovecot re-reads the file when it changes, and
// the stack keeps no auth cache). It returns once every login sees the new
// password, about a second later. A test can make the server refuse a
// password it accepted a moment ago, as a flapping authentication backend
// does. The user must exist.
func (s *Stack) SetPassword(user, password string) error {
	if strings.ContainsAny(password, ":\r\n") || password == "" {
		return fmt.Errorf("mailstack: SetPassword: a password must be non-empty, without ':' or line breaks")
	}
	path := filepath.Join(s.Dir, "etc", "passwd")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("mailstack: SetPassword: %w", err)
	}
	lines, found := strings.Split(string(b), "\n"), false
	for i, l := range lines {
		if name, rest, ok := strings.Cut(l, ":"); ok && name == user {
			_, tail, _ := strings.Cut(rest, ":")
			lines[i], found = name+":{PLAIN}"+password+":"+tail, true
		}
	}
	if !found {
		return fmt.Errorf("mailstack: SetPassword: no user %s", user)
	}
	// A new file renamed into place: Dovecot sees a new inode at once,
	// whatever the mtime's resolution.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")), 0o640); err != nil {
		return fmt.Errorf("mailstack: SetPassword: %w", err)
	}
	if st, err := os.Stat(path); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			_ = os.Chown(tmp, int(sys.Uid), int(sys.Gid))
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("mailstack: SetPassword: %w", err)
	}
	// Dovecot looks at the file at most once a second (db-passwd-file's
	// last_sync_time): after this, every login sees the new password.
	time.Sleep(1100 * time.Millisecond)
	return nil
}

// Doveadm runs doveadm -c DIR/etc/dovecot.conf ARGS... and returns its
// combined output.
func (s *Stack) Doveadm(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.doveadm, append([]string{"-c", filepath.Join(s.Dir, "etc", "dovecot.conf")}, args...)...)
	cmd.Env = s.env()
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("mailstack: doveadm %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// MessageCount returns the number of messages in user's mailbox (UTF-8
// name, "" = INBOX), as Dovecot sees it now.
func (s *Stack) MessageCount(user, mailbox string) (int, error) {
	if mailbox == "" {
		mailbox = "INBOX"
	}
	out, err := s.Doveadm("-f", "flow", "mailbox", "status", "-u", user, "messages", mailbox)
	if err != nil {
		return 0, err
	}
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "messages="); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("mailstack: unexpected doveadm output %q", out)
}

// WaitMessages polls until user's mailbox holds at least n messages or
// timeout passes, and returns the last count seen.
func (s *Stack) WaitMessages(user, mailbox string, n int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		got, err := s.MessageCount(user, mailbox)
		if err == nil && got >= n {
			return got, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return got, err
			}
			return got, fmt.Errorf("mailstack: %s %s has %d messages after %v, want %d", user, mailbox, got, timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TLSConfig returns a new tls.Config that trusts the stack's certificate,
// with ServerName "localhost".
func (s *Stack) TLSConfig() *tls.Config {
	return &tls.Config{RootCAs: s.roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}
}

func (s *Stack) addr(port int) string { return net.JoinHostPort(s.Host, strconv.Itoa(port)) }

// IMAPAddr is host:port of IMAP (plain + STARTTLS).
func (s *Stack) IMAPAddr() string { return s.addr(s.IMAPPort) }

// IMAPSAddr is host:port of IMAP with implicit TLS.
func (s *Stack) IMAPSAddr() string { return s.addr(s.IMAPSPort) }

// SubmissionAddr is host:port of SMTP submission (STARTTLS, then AUTH).
func (s *Stack) SubmissionAddr() string { return s.addr(s.SubmissionPort) }

// SubmissionsAddr is host:port of SMTP submission with implicit TLS.
func (s *Stack) SubmissionsAddr() string { return s.addr(s.SubmissionsPort) }

// MXAddr is host:port of the SMTP port without AUTH.
func (s *Stack) MXAddr() string { return s.addr(s.MXPort) }

// Deliver injects raw (an RFC 5322 message, LF or CRLF line endings) as
// incoming mail through the MX port, without AUTH. It returns once Postfix
// has accepted the message; delivery into Dovecot follows asynchronously
// (see WaitMessages). Recipients must be users of the stack.
func (s *Stack) Deliver(from string, to []string, raw []byte) error {
	if len(to) == 0 {
		return errors.New("mailstack: Deliver: no recipients")
	}
	conn, err := net.DialTimeout("tcp", s.MXAddr(), 10*time.Second)
	if err != nil {
		return fmt.Errorf("mailstack: Deliver: %w", err)
	}
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		conn.Close()
		return fmt.Errorf("mailstack: Deliver: %w", err)
	}
	c := smtp.NewClient(conn)
	c.CommandTimeout = 30 * time.Second
	c.SubmissionTimeout = 30 * time.Second
	defer c.Close()
	if err := c.SendMail(from, to, bytes.NewReader(raw)); err != nil {
		return fmt.Errorf("mailstack: Deliver: %w", err)
	}
	if err := c.Quit(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mailstack: Deliver: QUIT: %w", err)
	}
	return nil
}
