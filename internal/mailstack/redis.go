package mailstack

// A Redis server for the tests of the shared memories (internal/memory)
// and of several gateway replicas: Debian's redis-server (7.0 in
// bookworm), on 127.0.0.1, without persistence (--save "" --appendonly
// no), its files in one temp directory. It needs no root. A watchdog
// kills it if this process dies without calling Stop.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RedisOptions change a RedisServer.
type RedisOptions struct {
	// TLS serves rediss:// only (a self-signed CA in CAFile), no plain port.
	TLS bool
	// User and Password, when set, make an ACL user and switch the
	// default user off; the user's rights are Rules (ACL rules such as
	// "~prefix:*" "+get"), every right when Rules is empty.
	User, Password string
	Rules          []string
}

// RedisServer is a running redis-server.
type RedisServer struct {
	Dir    string
	Host   string // 127.0.0.1
	Port   int
	CAFile string // with TLS: the CA that signed the server's certificate
	Opts   RedisOptions

	bin   string
	lock  *os.File
	guard *os.File
	watch *exec.Cmd

	mu   sync.Mutex
	cmd  *exec.Cmd
	done bool
}

// StartRedis starts a redis-server on a free loopback port. It wraps
// ErrUnavailable when redis-server is not installed (apt-get install
// redis-server).
func StartRedis(opts RedisOptions) (*RedisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if bin, err = lookPath("redis-server", "/usr/bin:/usr/sbin"); err != nil {
			return nil, fmt.Errorf("%w: redis-server is not installed (apt-get install redis-server)", ErrUnavailable)
		}
	}
	dir, err := os.MkdirTemp(tempRoot(), "mmcp-redis-")
	if err != nil {
		return nil, fmt.Errorf("mailstack: %w", err)
	}
	s := &RedisServer{Dir: dir, Host: "127.0.0.1", Opts: opts, bin: bin}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	// The watchdog kills whatever redis-server DIR/redis.pid names once
	// every write end of its stdin is closed, then removes DIR.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("mailstack: %w", err)
	}
	s.watch = exec.Command("/bin/sh", "-c", `read -r _ || true
pid=$(cat "$1/redis.pid" 2>/dev/null)
if [ -n "$pid" ] && grep -q redis-server "/proc/$pid/cmdline" 2>/dev/null; then kill -9 "$pid"; fi
rm -rf "$1"`, "redis-watchdog", dir)
	s.watch.Stdin = pr
	s.watch.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.watch.Start(); err != nil {
		pr.Close()
		pw.Close()
		s.watch = nil
		return nil, fmt.Errorf("mailstack: redis watchdog: %w", err)
	}
	pr.Close()
	s.guard = pw
	if opts.TLS {
		if s.CAFile, err = writeRedisCerts(dir); err != nil {
			return nil, err
		}
	}
	var errs []error
	tried := map[int]bool{}
	for range 5 {
		port, lock, err := reserveOnePort(tried)
		if err != nil {
			return nil, errors.Join(append(errs, err)...)
		}
		s.Port, s.lock = port, lock
		if err = s.start(); err == nil {
			ok = true
			return s, nil
		}
		lock.Close()
		s.lock = nil
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// URL is the server's redis:// (or rediss://) URL for database db, with
// the ACL user's credentials when there are some.
func (s *RedisServer) URL(db int) string {
	u := url.URL{Scheme: "redis", Host: net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), Path: "/" + strconv.Itoa(db)}
	if s.Opts.TLS {
		u.Scheme = "rediss"
	}
	if s.Opts.User != "" {
		u.User = url.UserPassword(s.Opts.User, s.Opts.Password)
	}
	return u.String()
}

// Addr is host:port.
func (s *RedisServer) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

func (s *RedisServer) args() []string {
	a := []string{"--bind", s.Host, "--save", "", "--appendonly", "no", "--daemonize", "no",
		"--dir", s.Dir, "--pidfile", filepath.Join(s.Dir, "redis.pid"), "--logfile", filepath.Join(s.Dir, "redis.log")}
	if s.Opts.TLS {
		a = append(a, "--port", "0", "--tls-port", strconv.Itoa(s.Port),
			"--tls-cert-file", filepath.Join(s.Dir, "cert.pem"), "--tls-key-file", filepath.Join(s.Dir, "key.pem"),
			"--tls-ca-cert-file", s.CAFile, "--tls-auth-clients", "no")
	} else {
		a = append(a, "--port", strconv.Itoa(s.Port))
	}
	if s.Opts.User != "" {
		rules := s.Opts.Rules
		if len(rules) == 0 {
			rules = []string{"~*", "&*", "+@all"}
		}
		a = append(a, "--user", s.Opts.User, "on", ">"+s.Opts.Password)
		a = append(append(a, rules...), "--user", "default", "off")
	}
	return a
}

// start runs redis-server and waits until it accepts connections.
func (s *RedisServer) start() error {
	cmd := exec.Command(s.bin, s.args()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mailstack: redis-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			return fmt.Errorf("mailstack: redis-server exited (%v):\n%s", err, s.Log(2000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("mailstack: redis-server did not listen on %s in 10 s:\n%s", s.Addr(), s.Log(2000))
		}
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	go func() { // reap it whenever it ends
		<-exited
		s.mu.Lock()
		if s.cmd == cmd {
			s.cmd = nil
		}
		s.mu.Unlock()
	}()
	return nil
}

// Kill ends the server at once (SIGKILL): everything it held is lost.
func (s *RedisServer) Kill() error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("mailstack: redis-server is not running")
	}
	if err := cmd.Process.Kill(); err != nil {
		return err
	}
	for range 500 {
		s.mu.Lock()
		gone := s.cmd != cmd
		s.mu.Unlock()
		if gone {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("mailstack: redis-server did not end after SIGKILL")
}

// Restart starts the server again on the same port (after Kill), empty.
func (s *RedisServer) Restart() error {
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		return errors.New("mailstack: redis-server is still running")
	}
	return s.start()
}

// Pause stops the server's process (SIGSTOP): connections stay open and
// nothing answers, as with a server that hangs. Resume continues it.
func (s *RedisServer) Pause() error  { return s.signal(syscall.SIGSTOP) }
func (s *RedisServer) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *RedisServer) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("mailstack: redis-server is not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Pid is the server process's id (0 when it is not running).
func (s *RedisServer) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Log returns the last n bytes of the server's log.
func (s *RedisServer) Log(n int) string {
	data, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	return string(data[max(0, len(data)-n):])
}

// Stop ends the server and removes its directory; again does nothing.
func (s *RedisServer) Stop() error {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return nil
	}
	s.done = true
	cmd := s.cmd
	s.mu.Unlock()
	if cmd != nil {
		cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot end
		cmd.Process.Kill()
	}
	if s.guard != nil {
		s.guard.Close()
		s.watch.Wait()
	}
	if s.lock != nil {
		s.lock.Close()
	}
	return os.RemoveAll(s.Dir)
}

// writeRedisCerts writes a CA (ca.pem) and a server certificate for
// 127.0.0.1 and localhost signed by it (cert.pem, key.pem) into dir, and
// returns the CA's path.
func writeRedisCerts(dir string) (string, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailbox-mcp test Redis CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	files := map[string]*pem.Block{
		"ca.pem":   {Type: "CERTIFICATE", Bytes: caDER},
		"cert.pem": {Type: "CERTIFICATE", Bytes: leafDER},
		"key.pem":  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(b), 0o600); err != nil {
			return "", fmt.Errorf("mailstack: %w", err)
		}
	}
	return filepath.Join(dir, "ca.pem"), nil
}

// redisVersion is what redis-server --version says (for test names).
func redisVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return ""
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return ""
}

// Version is the server's version, such as 7.0.15.
func (s *RedisServer) Version() string { return redisVersion(s.bin) }
