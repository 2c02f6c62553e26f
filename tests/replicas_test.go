package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// replica is one gateway process of a replicaSet.
type replica struct {
	Name string // "A", "B", ...
	Base string // http://127.0.0.1:PORT
	URL  string // Base + "/mcp"
	Logs *logBuffer
	cmd  *exec.Cmd
}

// replicaSet is what a deployment behind a load balancer runs: gateway
// processes (the real binary) with one ENCRYPTION_KEY and, with Redis,
// one REDIS_URL, against one mail stack. Tests address each replica
// directly, as a load balancer without stickiness may.
type replicaSet struct {
	Key      string
	Redis    *mailtest.RedisServer // nil without Redis
	Replicas []*replica
}

type replicaOptions struct {
	N     int  // replicas (2 when 0)
	Redis bool // start a redis-server and give every replica its REDIS_URL
	// SamePublicURL gives every replica PUBLIC_URL = the first replica's
	// base URL (the OAuth issuer), as replicas behind one name have.
	SamePublicURL bool
	Env           []string // more variables, for every replica
}

// startReplicas builds the gateway and starts the replicas against s
// (IMAPS, and submission with STARTTLS), each on a free port, stopped
// when the test ends (their logs printed if it failed).
func startReplicas(t *testing.T, s *mailtest.Stack, o replicaOptions) *replicaSet {
	t.Helper()
	if o.N == 0 {
		o.N = 2
	}
	bin := buildGateway(t)
	key, err := credentials.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	set := &replicaSet{Key: key}
	env := []string{"ENCRYPTION_KEY=" + key, "LOG_LEVEL=info",
		"IMAP_HOST=127.0.0.1", "IMAP_PORT=" + strconv.Itoa(s.IMAPSPort), "MAIL_CA_FILE=" + s.CAFile,
		"SMTP_HOST=127.0.0.1", "SMTP_PORT=" + strconv.Itoa(s.SubmissionPort), "SMTP_TLS=true"}
	if o.Redis {
		set.Redis = mailtest.StartRedis(t, mailtest.RedisOptions{})
		env = append(env, "REDIS_URL="+set.Redis.URL(0))
	}
	ports := make([]int, o.N)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	for i, port := range ports {
		r := &replica{Name: string(rune('A' + i)), Base: "http://127.0.0.1:" + strconv.Itoa(port), Logs: &logBuffer{}}
		r.URL = r.Base + "/mcp"
		vars := append(append([]string{}, env...), "PORT="+strconv.Itoa(port))
		if o.SamePublicURL {
			vars = append(vars, fmt.Sprintf("PUBLIC_URL=http://127.0.0.1:%d", ports[0]))
		}
		r.cmd = exec.Command(bin, "serve")
		r.cmd.Env = append(append(os.Environ(), vars...), o.Env...)
		r.cmd.Stdout, r.cmd.Stderr = r.Logs, r.Logs
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			r.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { r.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				r.cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				l := r.Logs.String()
				t.Logf("replica %s log (last 6 KB):\n%s", r.Name, l[max(0, len(l)-6000):])
			}
		})
		set.Replicas = append(set.Replicas, r)
	}
	for _, r := range set.Replicas {
		r.waitHealthy(t)
	}
	return set
}

// waitHealthy waits until the replica's /health answers 200.
func (r *replica) waitHealthy(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(25 * time.Millisecond) {
		if code, _ := r.health(); code == http.StatusOK {
			return
		}
		if r.cmd.ProcessState != nil || time.Now().After(deadline) {
			t.Fatalf("replica %s did not start:\n%s", r.Name, r.Logs.String())
		}
	}
}

// health returns /health's status code and fields (0, nil when it does
// not answer).
func (r *replica) health() (int, map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.Base+"/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var h map[string]string
	json.Unmarshal(body, &h)
	return resp.StatusCode, h
}

// Two gateway processes with one ENCRYPTION_KEY and one REDIS_URL: both
// report the shared memory in /health and their start-up log; with Redis
// killed both stay up and say "degraded", read tools keep working on
// both (they never consult Redis), and when Redis is back both say "ok"
// again without a restart. A token sealed by one opens on the other.
func TestReplicasShareRedis(t *testing.T) {
	s := mailtest.Shared(t)
	set := startReplicas(t, s, replicaOptions{Redis: true})
	a, b := set.Replicas[0], set.Replicas[1]
	all := func(what string, ok func(code int, h map[string]string) bool) {
		t.Helper()
		for _, r := range set.Replicas {
			var code int
			var h map[string]string
			for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if code, h = r.health(); ok(code, h) {
					break
				}
			}
			if !ok(code, h) {
				t.Fatalf("%s: replica %s /health %d %v", what, r.Name, code, h)
			}
		}
	}
	all("up", func(code int, h map[string]string) bool {
		return code == 200 && h["redis"] == "ok" && h["status"] == "ok"
	})
	for _, r := range set.Replicas {
		if want := `"shared_memory":"redis ` + set.Redis.Addr() + `"`; !strings.Contains(r.Logs.String(), want) {
			t.Fatalf("replica %s's start-up log lacks %s", r.Name, want)
		}
	}

	ac := mailtest.MCPClient(t, a.URL, userHeaders(s, mailtest.Alice), "")
	var tok struct {
		Token string `json:"token"`
	}
	mailtest.Decode(t, mailtest.Call(t, ac, "imap_encrypt_credentials", map[string]any{}), &tok)
	bc := mailtest.MCPClient(t, b.URL, map[string]string{"x-mailbox-token": tok.Token}, "")
	mailtest.Call(t, bc, "imap_list_folders", nil)

	if err := set.Redis.Kill(); err != nil {
		t.Fatal(err)
	}
	all("redis killed", func(code int, h map[string]string) bool {
		return code == 200 && h["redis"] == "degraded" && h["status"] == "degraded"
	})
	t.Run("read_tools_work_without_redis", func(t *testing.T) {
		for _, c := range []struct {
			name string
			url  string
			h    map[string]string
		}{{"A", a.URL, userHeaders(s, mailtest.Alice)}, {"B", b.URL, map[string]string{"x-mailbox-token": tok.Token}}} {
			mc := mailtest.MCPClient(t, c.url, c.h, "")
			if res := mailtest.Call(t, mc, "imap_list_folders", nil); res.IsError {
				t.Fatalf("replica %s: %s", c.name, mailtest.Text(res))
			}
			mailtest.Call(t, mc, "imap_list_emails", map[string]any{"folder": "INBOX", "limit": 5})
		}
	})
	if err := set.Redis.Restart(); err != nil {
		t.Fatal(err)
	}
	all("redis back", func(code int, h map[string]string) bool {
		return code == 200 && h["redis"] == "ok" && h["status"] == "ok"
	})
}

// Without REDIS_URL each replica remembers alone (the single-replica
// default, docs/scaling.md): the scale-out check of single use
// (tests/scaleout -refresh-replay) finds an authorization code redeemed
// at replica A accepted again at replica B. With REDIS_URL (issue 38,
// phase 2: oauth on the shared memory) the same check passes.
func TestReplicasWithoutRedisRememberAlone(t *testing.T) {
	s := mailtest.Shared(t)
	set := startReplicas(t, s, replicaOptions{N: 3, SamePublicURL: true})
	var urls []string
	for _, r := range set.Replicas {
		urls = append(urls, r.URL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./scaleout", "-only", "refresh-replay", "-replicas", strings.Join(urls, ","),
		"-public-url", set.Replicas[0].Base, "-user", mailtest.Alice, "-pass", mailtest.AlicePassword)
	out, err := cmd.CombinedOutput()
	const want = "FAIL: refresh replay: the code redeemed at replica 1, again at replica 2: 200 tokens issued"
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("scaleout -only refresh-replay without Redis: %v\n%s\nwant the failure %q", err, out, want)
	}
	if strings.Contains(string(out), "ort1.") || strings.Contains(string(out), "oat1.") {
		t.Fatalf("the check printed a token:\n%s", out)
	}
}
