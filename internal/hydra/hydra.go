// Package hydra runs Ory Hydra v2, a certified OpenID provider, for tests
// and the benchmark: "the provider" of the OAuth sign-in tests, so that the
// gateway is proven against a real one rather than one written here. It is
// never used by the gateway. It does not import testing: tests reach it
// through internal/mailtest (StartHydra, OAuthStack).
//
// A Server is one Hydra process (in-memory database, DSN=memory) on two free
// loopback ports (public and admin), with its own config and log in a temp
// directory, plus an in-process login and consent app that Hydra sends the
// browser to: it signs in the users of Options.Users (a form, or AutoLogin),
// makes the lower-cased mailbox address the OIDC subject, puts it in the ID
// token's email claim, and grants what Options.Consent allows. Dovecot's
// oauth2 passdb can then check Hydra's access tokens at IntrospectionURL
// with username_attribute = sub (see mailstack.Options.OAuthUsernameAttribute).
//
// The binary is built from tests/hydra (a wrapper module) by
// scripts/hydra.sh on first use and cached; Start fails with an error
// wrapping ErrUnavailable when it cannot be built here. A watchdog process
// kills Hydra if this process dies without calling Stop.
//
// The package also has the client side of the flows, over plain HTTP:
// AuthCodeURL, SignIn (a browser's walk through the login app), Exchange,
// Refresh and Login (all of it in one call).
package hydra

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
	"sync"
	"syscall"
	"time"
)

// ErrUnavailable is wrapped by Start's error when Hydra cannot be built on
// this machine (no Go toolchain or C compiler, no module proxy), as opposed
// to a Hydra that failed to start.
var ErrUnavailable = errors.New("OAuth provider (Ory Hydra) unavailable")

// Options configure Start.
type Options struct {
	// Users may sign in at the login app: mailbox address -> password. The
	// subject of a user is the address lower-cased (Dovecot compares it
	// with the SASL user after %Lu).
	Users map[string]string
	// AutoLogin signs this user in without showing the login form, as if
	// they had typed their password ("" shows the form). SetAutoLogin
	// changes it later.
	AutoLogin string
	// AccessTTL, RefreshTTL and IDTokenTTL are the token lifetimes
	// (ttl.access_token, ttl.refresh_token, ttl.id_token); 0 keeps Hydra's
	// defaults (1h, 720h, 1h).
	AccessTTL, RefreshTTL, IDTokenTTL time.Duration
	// Consent decides a consent request: the scopes to grant, or an error
	// to refuse it (the client gets access_denied with the error's text).
	// nil grants every requested scope. It also runs when Hydra remembers
	// an earlier consent (ConsentRequest.Skip).
	Consent func(ConsentRequest) ([]string, error)
	// Scopes are announced in the discovery document besides openid,
	// offline_access and offline (webfinger.oidc_discovery.supported_scope).
	Scopes []string
}

// Server is a running Hydra and its login and consent app.
type Server struct {
	Dir       string // config (hydra.yml) and log (hydra.log)
	IssuerURL string // as in the discovery document: http://127.0.0.1:PORT/
	PublicURL string // http://127.0.0.1:PORT (authorization, token, JWKS, userinfo)
	AdminURL  string // http://127.0.0.1:PORT (clients, login and consent requests, introspection)
	AppURL    string // the login and consent app: http://127.0.0.1:PORT

	opts  Options
	users map[string]string // lower-cased address -> password
	http  *http.Client
	cmd   *exec.Cmd
	exit  chan struct{} // closed when Hydra exits
	app   *http.Server
	guard *os.File  // write end of the watchdog's stdin
	watch *exec.Cmd // the watchdog

	mu        sync.Mutex
	autoLogin string
	consents  []ConsentRequest
	stopped   bool
}

// IntrospectionURL is Hydra's RFC 7662 endpoint (admin port): POST
// token=T answers 200 {"active":true,"sub":…,"client_id":…,"scope":…,
// "exp":…,…} or 200 {"active":false}.
func (s *Server) IntrospectionURL() string { return s.AdminURL + "/admin/oauth2/introspect" }

// AuthURL is the authorization endpoint.
func (s *Server) AuthURL() string { return s.PublicURL + "/oauth2/auth" }

// TokenURL is the token endpoint.
func (s *Server) TokenURL() string { return s.PublicURL + "/oauth2/token" }

// LogPath is Hydra's log (JSON lines).
func (s *Server) LogPath() string { return filepath.Join(s.Dir, "hydra.log") }

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// Build builds Hydra unless the cached binary is current (scripts/hydra.sh
// build) and returns its path; its errors wrap ErrUnavailable. Within a
// process it runs once; parallel processes wait for each other's build.
func Build() (string, error) {
	buildOnce.Do(func() {
		script, err := findScript()
		if err != nil {
			buildErr = fmt.Errorf("%w: %v", ErrUnavailable, err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, script, "build")
		cmd.WaitDelay = 5 * time.Second
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			buildErr = fmt.Errorf("%w: scripts/hydra.sh build: %v\n%s", ErrUnavailable, err, strings.TrimSpace(stderr.String()))
			return
		}
		buildBin = strings.TrimSpace(string(out))
	})
	return buildBin, buildErr
}

// findScript walks up from the working directory to the module root (the
// directory holding go.mod and scripts/hydra.sh).
func findScript() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		script := filepath.Join(d, "scripts", "hydra.sh")
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			if _, err := os.Stat(script); err == nil {
				return script, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no scripts/hydra.sh in a module root above %s", wd)
		}
	}
}

// Start builds Hydra if needed (see Build), starts it with its login and
// consent app, and returns once Hydra answers. The caller must call Stop.
func Start(opts Options) (*Server, error) {
	bin, err := Build()
	if err != nil {
		return nil, err
	}
	users := map[string]string{}
	for u, pw := range opts.Users {
		users[strings.ToLower(u)] = pw
	}
	if opts.AutoLogin != "" {
		if _, ok := users[strings.ToLower(opts.AutoLogin)]; !ok {
			return nil, fmt.Errorf("hydra: AutoLogin %s is not one of Users", opts.AutoLogin)
		}
	}
	s := &Server{
		opts:      opts,
		users:     users,
		http:      &http.Client{Timeout: 15 * time.Second},
		autoLogin: strings.ToLower(opts.AutoLogin),
	}
	if err := s.startApp(); err != nil {
		return nil, err
	}
	var errs []error
	for attempt := 0; attempt < 5; attempt++ {
		err := s.startHydra(bin)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		// another process took a port between our check and Hydra's bind
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	s.app.Close()
	return nil, errors.Join(errs...)
}

// freePorts returns n distinct ports that were free on 127.0.0.1 a moment
// ago (ephemeral ones: the mail stacks use ports below 32768).
func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("hydra: %w", err)
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) startHydra(bin string) (err error) {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mmcp-hydra-")
	if err != nil {
		return fmt.Errorf("hydra: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	s.Dir = dir
	s.PublicURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	s.AdminURL = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if err := os.WriteFile(filepath.Join(dir, "hydra.yml"), []byte(s.config(ports)), 0o600); err != nil {
		return fmt.Errorf("hydra: %w", err)
	}
	logf, err := os.Create(s.LogPath())
	if err != nil {
		return fmt.Errorf("hydra: %w", err)
	}
	defer logf.Close() // the child has its own copy

	// --dev: http issuer and non-Secure cookies on loopback.
	// --sqa-opt-out: no usage reports to Ory.
	cmd := exec.Command(bin, "serve", "all", "--dev", "--sqa-opt-out", "--config", filepath.Join(dir, "hydra.yml"))
	cmd.Dir = dir
	// Hydra takes every config key from the environment too (LOG_LEVEL,
	// DSN, SERVE_PUBLIC_PORT, ...): give it none of ours.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir}
	cmd.Stdin = nil
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("hydra: %w", err)
	}
	s.cmd = cmd
	s.exit = make(chan struct{})
	go func() { cmd.Wait(); close(s.exit) }()

	// The watchdog kills Hydra and removes DIR once every write end of its
	// stdin is closed (Stop, or this process died); its own process group
	// keeps it alive through a Ctrl-C sent to go test's group. Stop removes
	// DIR first, so a watchdog woken by Stop kills no recycled PID.
	pr, pw, err := os.Pipe()
	if err != nil {
		s.kill()
		return fmt.Errorf("hydra: %w", err)
	}
	watch := exec.Command("/bin/sh", "-c",
		`read -r _ || true; if [ -d "$2" ]; then kill -KILL "$1" 2>/dev/null; rm -rf "$2"; fi`,
		"hydra-watchdog", strconv.Itoa(cmd.Process.Pid), dir)
	watch.Stdin = pr
	watch.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := watch.Start(); err != nil {
		pr.Close()
		pw.Close()
		s.kill()
		return fmt.Errorf("hydra: watchdog: %w", err)
	}
	pr.Close()
	s.guard, s.watch = pw, watch

	if err := s.waitReady(60 * time.Second); err != nil {
		s.kill()
		s.guard.Close()
		s.watch.Wait()
		return err
	}
	// the issuer exactly as Hydra announces it (it adds the trailing slash)
	var disc struct {
		Issuer string `json:"issuer"`
	}
	if err := s.getJSON(context.Background(), s.PublicURL+"/.well-known/openid-configuration", &disc); err != nil {
		s.kill()
		s.guard.Close()
		s.watch.Wait()
		return err
	}
	s.IssuerURL = disc.Issuer
	return nil
}

func (s *Server) config(ports []int) string {
	ttl := func(key string, d time.Duration) string {
		if d <= 0 {
			return ""
		}
		return fmt.Sprintf("  %s: %s\n", key, d)
	}
	ttls := ttl("access_token", s.opts.AccessTTL) + ttl("refresh_token", s.opts.RefreshTTL) + ttl("id_token", s.opts.IDTokenTTL)
	if ttls != "" {
		ttls = "ttl:\n" + ttls
	}
	scopes := append([]string{"openid", "offline_access", "offline", "email"}, s.opts.Scopes...)
	q := func(v string) string { b, _ := json.Marshal(v); return string(b) } // YAML accepts JSON strings
	var sc []string
	for _, v := range scopes {
		sc = append(sc, q(v))
	}
	return fmt.Sprintf(`# generated by internal/hydra
dsn: memory
serve:
  public: {host: 127.0.0.1, port: %d}
  admin: {host: 127.0.0.1, port: %d}
  cookies: {same_site_mode: Lax}
urls:
  self: {issuer: %s, public: %s}
  login: %s
  consent: %s
  logout: %s
  error: %s
  post_logout_redirect: %s
secrets:
  system: [%s]
oidc:
  subject_identifiers:
    supported_types: [public, pairwise]
    pairwise: {salt: %s}
webfinger:
  oidc_discovery:
    supported_claims: [email, email_verified]
    supported_scope: [%s]
%slog: {level: info, format: json}
`, ports[0], ports[1], q(s.PublicURL+"/"), q(s.PublicURL+"/"),
		q(s.AppURL+"/login"), q(s.AppURL+"/consent"), q(s.AppURL+"/logout"), q(s.AppURL+"/error"), q(s.AppURL+"/logged-out"),
		q(randomHex(32)), q(randomHex(16)), strings.Join(sc, ", "), ttls)
}

func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.exit:
			return fmt.Errorf("hydra: exited at start: %s", s.logTail(2000))
		default:
		}
		resp, err := s.http.Get(s.AdminURL + "/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("hydra: not ready after %v: %s", timeout, s.logTail(2000))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// logTail is the end of Hydra's log, for errors.
func (s *Server) logTail(n int) string {
	b, err := os.ReadFile(s.LogPath())
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// kill stops Hydra: SIGTERM, then SIGKILL after 5 s.
func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exit:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.exit
	}
}

// Stop stops Hydra and the login app and removes Dir. Calling it again
// does nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()
	s.kill()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.app.Shutdown(ctx)
	if rerr := os.RemoveAll(s.Dir); rerr != nil && err == nil {
		err = rerr
	}
	s.guard.Close()
	s.watch.Wait()
	if err != nil {
		return fmt.Errorf("hydra: stop: %w", err)
	}
	return nil
}

// Running reports whether the Hydra process is still alive.
func (s *Server) Running() bool {
	select {
	case <-s.exit:
		return false
	default:
		return true
	}
}

// SetAutoLogin makes the login app sign user in without the form ("" shows
// the form again).
func (s *Server) SetAutoLogin(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.autoLogin = strings.ToLower(user)
}

// ConsentRequests returns the consent requests the app has seen, oldest
// first (what each client asked for, and for whom).
func (s *Server) ConsentRequests() []ConsentRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ConsentRequest(nil), s.consents...)
}

// getJSON GETs url and decodes a 200 answer into v.
func (s *Server) getJSON(ctx context.Context, url string, v any) error {
	return s.do(ctx, http.MethodGet, url, nil, http.StatusOK, v)
}

// do sends a JSON request (body nil: none) and decodes the answer into v
// when it has the status want; any other status is an error carrying the
// answer.
func (s *Server) do(ctx context.Context, method, url string, body any, want int, v any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	return s.send(req, want, v)
}
