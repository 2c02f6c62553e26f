package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// replica is one gateway process of a replicaSet.
type replica struct {
	Name string // "A", "B", ...
	Base string // http://127.0.0.1:PORT
	URL  string // Base + "/mcp"
	Logs *mailtest.LogBuffer
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
	// EnvOf, when set, gives replica i (0 is A) variables of its own.
	EnvOf func(i int) []string
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
		r := &replica{Name: string(rune('A' + i)), Base: "http://127.0.0.1:" + strconv.Itoa(port), Logs: &mailtest.LogBuffer{}}
		r.URL = r.Base + "/mcp"
		vars := append(append([]string{}, env...), "PORT="+strconv.Itoa(port))
		if o.SamePublicURL {
			vars = append(vars, fmt.Sprintf("PUBLIC_URL=http://127.0.0.1:%d", ports[0]))
		}
		r.cmd = exec.Command(bin, "serve")
		r.cmd.Env = append(append(os.Environ(), vars...), o.Env...)
		if o.EnvOf != nil {
			r.cmd.Env = append(r.cmd.Env, o.EnvOf(i)...)
		}
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

// Two gateway processes with one ENCRYPTION_KEY and one REDIS_URL, Redis
// killed mid-run and started again (empty, as a Redis without
// persistence comes back): both stay up and say "degraded" in /health;
// every single-use decision fails closed with 503, Retry-After and a
// sentence (a refresh and a code at /token, the approval page, a tool
// call that makes an approval), on A with REDIS_FAIL=closed and on B
// with REDIS_FAIL=open alike; limits and the back-off refuse on A and
// count locally on B (a read tool under the rate limit; a first login);
// when Redis is back both say "ok" and everything works again without a
// restart, the sign-in made before included (its tokens name the old
// memory: it is adopted, not taken for ended). A token sealed by one
// replica opens on the other.
func TestReplicasShareRedis(t *testing.T) {
	t.Parallel() // replicas and a Redis of its own
	s := mailtest.Shared(t)
	set := startReplicas(t, s, replicaOptions{Redis: true, SamePublicURL: true,
		Env:   []string{"APPROVAL=send", "RATE_LIMIT_PER_MINUTE=600", "RATE_LIMIT_BURST=100"},
		EnvOf: func(i int) []string { return []string{"REDIS_FAIL=" + []string{"closed", "open"}[i]} }})
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

	alice := userHeaders(s, mailtest.Alice)
	ac := mailtest.MCPClient(t, a.URL, alice, "")
	var tok struct {
		Token string `json:"token"`
	}
	mailtest.Decode(t, mailtest.Call(t, ac, "imap_encrypt_credentials", map[string]any{}), &tok)
	bc := mailtest.MCPClient(t, b.URL, map[string]string{"x-mailbox-token": tok.Token}, "")
	mailtest.Call(t, bc, "imap_list_folders", nil)
	// Before the outage: a sign-in, a code not yet exchanged, an approval
	// link not yet used.
	signedIn := replicaSignIn(t, s, a)
	first := signedIn.exchange(t, a)
	pending := replicaSignIn(t, s, a)
	noForms := mailtest.MCPClient(t, a.URL, alice, mcp.ProtocolVersion20250618)
	link := linkOf(t, mailtest.Call(t, noForms, "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": "during the outage", "text": "x"}))

	// Redis dies while the person looks at a form shown at B: their answer
	// (the requestState's use) is refused, and nothing is sent.
	token := fmt.Sprint("answered during the outage ", time.Now().UnixNano())
	f := &onForm{do: func() {
		if err := set.Redis.Kill(); err != nil {
			t.Error(err)
		}
	}}
	res := mailtest.Call(t, formClientAt(t, b.URL, alice, f, nil), "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": token, "text": "x"})
	if !res.IsError || !strings.Contains(mailtest.Text(res), "cannot check approvals") || !strings.Contains(mailtest.Text(res), "nothing was done") {
		t.Errorf("replica B: a form answered while Redis is away: %s", mailtest.Text(res))
	}
	all("redis killed", func(code int, h map[string]string) bool {
		return code == 200 && h["redis"] == "degraded" && h["status"] == "degraded"
	})
	t.Run("single_use_fails_closed_on_both", func(t *testing.T) {
		for _, r := range set.Replicas {
			if st, ans, retry := signedIn.refreshAt(t, r, first.RefreshToken); st != http.StatusServiceUnavailable || retry == "" || !strings.Contains(ans.Description, "does not answer") {
				t.Errorf("replica %s: a refresh: %d %v (Retry-After %q), want 503 with Retry-After and a sentence", r.Name, st, ans, retry)
			}
		}
		if st, ans, retry := pending.exchangeAt(t, b); st != http.StatusServiceUnavailable || retry == "" {
			t.Errorf("replica B: a code: %d %v (Retry-After %q), want 503", st, ans, retry)
		}
		for _, r := range set.Replicas {
			code, retry, body := httpGetPage(t, strings.Replace(link, a.Base, r.Base, 1))
			if code != http.StatusServiceUnavailable || retry == "" || !strings.Contains(body, "nothing was done") {
				t.Errorf("replica %s: the approval page: %d (Retry-After %q): %.300s", r.Name, code, retry, body)
			}
		}
		res := mailtest.Call(t, noForms, "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": "not now", "text": "x"})
		if !res.IsError || !strings.Contains(mailtest.Text(res), "nothing was done") {
			t.Errorf("replica A: a call that makes an approval: %s", mailtest.Text(res))
		}
		if n := withSubject(t, s, mailtest.Bob, "INBOX", token); n != 0 {
			t.Errorf("the form answered during the outage sent %d messages", n)
		}
	})
	t.Run("limits_as_REDIS_FAIL_says", func(t *testing.T) {
		// A (closed): the rate limit cannot be checked, so a read is
		// refused, and so is a first login (the back-off).
		res := mailtest.Call(t, mailtest.MCPClient(t, a.URL, alice, ""), "imap_list_folders", nil)
		if !res.IsError || !strings.Contains(mailtest.Text(res), "limits cannot be checked") {
			t.Errorf("replica A (REDIS_FAIL=closed), a read: %s", mailtest.Text(res))
		}
		// B (open): this replica's own memory counts meanwhile.
		if res := mailtest.Call(t, bc, "imap_list_emails", map[string]any{"folder": "INBOX", "limit": 5}); res.IsError {
			t.Errorf("replica B (REDIS_FAIL=open), a read: %s", mailtest.Text(res))
		}
		bob := mailtest.MCPClient(t, b.URL, userHeaders(s, mailtest.Bob), "")
		if res := mailtest.Call(t, bob, "imap_list_folders", nil); res.IsError {
			t.Errorf("replica B (REDIS_FAIL=open), a first login: %s", mailtest.Text(res))
		}
		// The sign-in page at A refuses (its limits); B lets the person
		// sign in, and /token still refuses the code (single use).
		c := signedIn.c // registered before (registering is limited too)
		_, challenge := pkce()
		if page, status, _ := c.authorize(c.authParams(challenge, ""), mailtest.Alice, s.Users[mailtest.Alice], "allow"); status != http.StatusServiceUnavailable || !strings.Contains(page, "cannot check sign-ins") {
			t.Errorf("replica A (closed): the sign-in page: %d %.300s", status, page)
		}
		late := replicaSignInAt(t, s, b)
		if st, _, _ := late.exchangeAt(t, b); st != http.StatusServiceUnavailable {
			t.Errorf("replica B (open): a code made during the outage: %d, want 503", st)
		}
	})
	if err := set.Redis.Restart(); err != nil {
		t.Fatal(err)
	}
	all("redis back", func(code int, h map[string]string) bool {
		return code == 200 && h["redis"] == "ok" && h["status"] == "ok"
	})
	t.Run("recovered_without_a_restart", func(t *testing.T) {
		var st int
		var ans tokenAnswer
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if st, ans, _ = signedIn.refreshAt(t, a, first.RefreshToken); st == http.StatusOK {
				break
			}
		}
		if st != http.StatusOK || ans.RefreshToken == "" {
			t.Fatalf("the sign-in made before the outage, after it: %d %v", st, ans)
		}
		if st, ans, _ := signedIn.refreshAt(t, b, ans.RefreshToken); st != http.StatusOK {
			t.Fatalf("its next refresh, at B: %d %v", st, ans)
		}
		if code, _, body := httpGetPage(t, link); code != http.StatusOK {
			t.Errorf("the approval page: %d %.300s", code, body)
		}
		if res := mailtest.Call(t, mailtest.MCPClient(t, a.URL, alice, ""), "imap_list_folders", nil); res.IsError {
			t.Errorf("replica A, a read: %s", mailtest.Text(res))
		}
		if res := mailtest.Call(t, noForms, "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": "after the outage", "text": "x"}); res.IsError {
			t.Errorf("replica A, a call that makes an approval: %s", mailtest.Text(res))
		}
	})
}

// memoryModes are the two ways replicas remember: one memory in Redis,
// and each replica alone (no REDIS_URL: the single-replica default,
// docs/scaling.md).
var memoryModes = []struct {
	name   string
	shared bool
}{{"one_memory_in_redis", true}, {"each_replica_alone", false}}

// TestReplicasAreOneMemory: what one replica used, the other knows, with
// Redis; without it each replica knows only its own (what that lets
// through is shown: it is why more than one replica needs REDIS_URL).
// Two gateway processes with one key and PUBLIC_URL, APPROVAL=send.
func TestReplicasAreOneMemory(t *testing.T) {
	s := mailtest.Shared(t)
	pw := s.Users[mailtest.Alice]
	for _, mode := range memoryModes {
		t.Run(mode.name, func(t *testing.T) {
			metrics := []string{freeAddr(t), freeAddr(t)}
			set := startReplicas(t, s, replicaOptions{Redis: mode.shared, SamePublicURL: true, Env: []string{"APPROVAL=send", "LOGIN_BACKOFF_ACCOUNT_FAILURES=6"},
				EnvOf: func(i int) []string { return []string{"METRICS_ADDR=" + metrics[i]} }})
			a, b := set.Replicas[0], set.Replicas[1]

			t.Run("a_code_redeemed_at_A_again_at_B", func(t *testing.T) {
				c := replicaSignIn(t, s, a)
				c.exchange(t, a)
				st, ans, _ := c.exchangeAt(t, b)
				if mode.shared && (st != http.StatusBadRequest || ans.Error != "invalid_grant" || !strings.Contains(ans.Description, "already been used")) {
					t.Fatalf("B: %d %v, want 400 invalid_grant: already used", st, ans)
				}
				if !mode.shared && st != http.StatusOK {
					t.Fatalf("B, remembering alone: %d %v, want the code redeemed a second time", st, ans)
				}
			})
			t.Run("a_refresh_token_rotated_at_A_replayed_at_B", func(t *testing.T) {
				c := replicaSignIn(t, s, a)
				first := c.exchange(t, a)
				st, second, _ := c.refreshAt(t, a, first.RefreshToken)
				if st != http.StatusOK {
					t.Fatalf("the rotation at A: %d %v", st, second)
				}
				st, replay, _ := c.refreshAt(t, b, first.RefreshToken)
				after, ans, _ := c.refreshAt(t, a, second.RefreshToken)
				if mode.shared {
					if st != http.StatusBadRequest || !strings.Contains(replay.Description, "already been used") {
						t.Fatalf("the replay at B: %d %v, want 400: already used", st, replay)
					}
					if after != http.StatusBadRequest || !strings.Contains(ans.Description, "revoked") {
						t.Fatalf("the sign-in at A after the replay at B: %d %v, want 400: revoked", after, ans)
					}
					return
				}
				if st != http.StatusOK || after != http.StatusOK {
					t.Fatalf("remembering alone: the replay at B %d %v, the newest token at A %d %v; want both accepted", st, replay, after, ans)
				}
			})
			t.Run("an_approval_link_used_at_A_opened_at_B", func(t *testing.T) {
				token := fmt.Sprint("replica link ", time.Now().UnixNano())
				noForms := mailtest.MCPClient(t, a.URL, userHeaders(s, mailtest.Alice), mcp.ProtocolVersion20250618)
				link := linkOf(t, mailtest.Call(t, noForms, "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": token, "text": "one copy"}))
				if status, body := signInAs(t, link, mailtest.Alice, pw).answer(t, "approve"); status != http.StatusOK {
					t.Fatalf("approve at A: %d %.300s", status, body)
				}
				atB := strings.Replace(link, a.Base, b.Base, 1)
				code, _, body := httpGetPage(t, atB)
				if mode.shared && (code != http.StatusGone || !strings.Contains(body, "already used")) {
					t.Fatalf("the link at B: %d %.300s, want 410: already used", code, body)
				}
				if !mode.shared {
					if code != http.StatusOK {
						t.Fatalf("the link at B, remembering alone: %d, want it opened as unused", code)
					}
					// What holds the mail to one copy there is the draft the
					// approval was bound to, gone since it was sent: the page
					// offers nothing to approve.
					if p := signInAs(t, atB, mailtest.Alice, pw); p.csrf != "" || !strings.Contains(p.page, "can no longer be approved") {
						t.Fatalf("the page at B after the person signed in, remembering alone: %.500s", p.page[max(0, strings.Index(p.page, "<main")):])
					}
				}
				if n := deliveredSettled(t, s, mailtest.Bob, token); n != 1 {
					t.Fatalf("bob holds %d copies, want 1", n)
				}
			})
			t.Run("a_requestState_accepted_at_A_again_at_B", func(t *testing.T) {
				token := fmt.Sprint("replica state ", time.Now().UnixNano())
				rec := &retryRecorder{}
				c := formClientAt(t, a.URL, userHeaders(s, mailtest.Alice), &onForm{}, rec)
				res := mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": token, "text": "one copy"})
				if res.IsError || rec.body == nil {
					t.Fatalf("accepted at A: %s (answer recorded: %t)", mailtest.Text(res), rec.body != nil)
				}
				isError, text := rec.replay(t, b.URL)
				if mode.shared && (!isError || !strings.Contains(text, "already used")) {
					t.Fatalf("the same answer at B: %v %q, want refused: already used", isError, text)
				}
				if !mode.shared {
					if strings.Contains(text, "already used") {
						t.Fatalf("the same answer at B, remembering alone: %q", text)
					}
					t.Logf("the same answer at B, remembering alone: error %v: %.200s", isError, text)
				}
				if n := deliveredSettled(t, s, mailtest.Bob, token); n != 1 {
					t.Fatalf("bob holds %d copies, want 1", n)
				}
			})
			t.Run("a_read_tool_makes_no_round_trip", func(t *testing.T) {
				c := mailtest.MCPClient(t, a.URL, userHeaders(s, mailtest.Alice), "")
				mailtest.Call(t, c, "imap_list_folders", nil) // a warm connection: no login
				before := redisOps(t, metrics[0])
				for range 5 {
					mailtest.Call(t, c, "imap_list_emails", map[string]any{"folder": "INBOX", "limit": 5})
					mailtest.Call(t, c, "imap_list_folders", nil)
				}
				if after := redisOps(t, metrics[0]); after != before {
					t.Fatalf("10 reads made %d Redis operations (the rate limit is off), want 0", after-before)
				}
			})
			t.Run("a_password_proven_at_A_passes_the_ceiling_at_B", func(t *testing.T) {
				// bob logs in at A; then 6 guesses at bob's account, each
				// from an address of its own, reach B: the account's
				// ceiling there. bob's own password, proven at A, still
				// logs in at B.
				mailtest.Call(t, mailtest.MCPClient(t, a.URL, userHeaders(s, mailtest.Bob), ""), "imap_list_folders", nil)
				for i := range 6 {
					wrong := map[string]string{"x-imap-user": mailtest.Bob, "x-imap-pass": fmt.Sprint("guess-", i)}
					if text := mailtest.Text(mailtest.Call(t, mcpFrom(t, b.URL, fmt.Sprintf("127.0.0.%d", 41+i), wrong), "imap_list_folders", nil)); !strings.Contains(text, "authentication failed") {
						t.Fatalf("guess %d: %q", i, text)
					}
				}
				text := mailtest.Text(mailtest.Call(t, mcpFrom(t, b.URL, "127.0.0.49", userHeaders(s, mailtest.Bob)), "imap_list_folders", nil))
				if mode.shared && strings.Contains(text, "too many failed logins") {
					t.Fatalf("bob's password proven at A, at B at the account's ceiling: %q", text)
				}
				if !mode.shared && !strings.Contains(text, "too many failed logins") {
					t.Fatalf("bob's password proven at A only, at B at its ceiling, remembering alone: %q, want refused", text)
				}
			})
			t.Run("20_refused_logins_over_A_and_B", func(t *testing.T) {
				const ip = "127.0.0.31"
				t.Run("guesses", func(t *testing.T) {
					for i := range 20 {
						r := set.Replicas[i%2]
						t.Run(fmt.Sprintf("%s_%d", r.Name, i), func(t *testing.T) {
							t.Parallel()
							wrong := map[string]string{"x-imap-user": fmt.Sprintf("guess%d@example.test", i), "x-imap-pass": "wrong"}
							if text := mailtest.Text(mailtest.Call(t, mcpFrom(t, r.URL, ip, wrong), "imap_list_folders", nil)); !strings.Contains(text, "authentication failed") {
								t.Fatalf("guess %d at %s: %q, want refused by the mail server", i, r.Name, text)
							}
						})
					}
				})
				for _, r := range set.Replicas {
					next := map[string]string{"x-imap-user": "guess-next-" + r.Name + "@example.test", "x-imap-pass": "wrong"}
					text := mailtest.Text(mailtest.Call(t, mcpFrom(t, r.URL, ip, next), "imap_list_folders", nil))
					if mode.shared && !strings.Contains(text, "too many failed logins") {
						t.Errorf("the 21st login at %s: %q, want the address's back-off (20 over A and B)", r.Name, text)
					}
					if !mode.shared && !strings.Contains(text, "authentication failed") {
						t.Errorf("the 21st login at %s, remembering alone (10 each): %q, want tried", r.Name, text)
					}
				}
			})
		})
	}
}

// TestReplicasShareTheRateLimit: a client at its rate limit on A is
// limited on B (with Redis; each replica allows the whole limit without),
// and a read tool under the rate limit makes exactly one Redis
// operation: its bucket.
func TestReplicasShareTheRateLimit(t *testing.T) {
	t.Parallel() // replicas and a Redis of its own
	s := mailtest.Shared(t)
	for _, mode := range memoryModes {
		t.Run(mode.name, func(t *testing.T) {
			metrics := freeAddr(t)
			set := startReplicas(t, s, replicaOptions{Redis: mode.shared, Env: []string{"RATE_LIMIT_PER_MINUTE=1", "RATE_LIMIT_BURST=4"},
				EnvOf: func(i int) []string { return []string{"METRICS_ADDR=" + []string{metrics, freeAddr(t)}[i]} }})
			a, b := set.Replicas[0], set.Replicas[1]
			bob := userHeaders(s, mailtest.Bob)
			ca, cb := mailtest.MCPClient(t, a.URL, bob, ""), mailtest.MCPClient(t, b.URL, bob, "")
			mailtest.Call(t, ca, "imap_list_folders", nil) // a warm connection at A
			before := redisOps(t, metrics)
			for i := range 3 {
				if res := mailtest.Call(t, ca, "imap_list_folders", nil); res.IsError {
					t.Fatalf("call %d of the burst at A: %s", i+2, mailtest.Text(res))
				}
			}
			if mode.shared {
				if n := redisOps(t, metrics) - before; n != 3 {
					t.Errorf("3 reads made %d Redis operations, want 3 (the rate limit's)", n)
				}
			}
			res := mailtest.Call(t, cb, "imap_list_folders", nil)
			limited := res.IsError && strings.Contains(mailtest.Text(res), "rate limit reached")
			if mode.shared && !limited {
				t.Fatalf("the 5th call, at B: %s, want the rate limit (4 used at A)", mailtest.Text(res))
			}
			if !mode.shared && limited {
				t.Fatalf("the 5th call, at B, each replica alone: %s, want it allowed", mailtest.Text(res))
			}
			if res := mailtest.Call(t, ca, "imap_list_folders", nil); !res.IsError || !strings.Contains(mailtest.Text(res), "rate limit reached") {
				t.Fatalf("the next call at A: %s, want the rate limit", mailtest.Text(res))
			}
		})
	}
}

// TestReplicasQueueFirstLogins: a client's burst of first calls, spread
// over A and B (MAX_POOL_PER_USER=4 logins at once on each: more than
// LOGIN_BACKOFF_FAILURES=5 allows in progress for one user), is served
// whole: the logins beyond the threshold wait for those in progress, and
// the first success proves the password for the rest. With Redis the
// attempts in progress are counted over both replicas, which refused 2 to
// 5 of the 16 calls (two runs) before they queued.
func TestReplicasQueueFirstLogins(t *testing.T) {
	t.Parallel() // replicas and a Redis of its own
	s := mailtest.Shared(t)
	for _, mode := range memoryModes {
		t.Run(mode.name, func(t *testing.T) {
			set := startReplicas(t, s, replicaOptions{Redis: mode.shared})
			var clients []*client.Client
			for i := range 16 {
				clients = append(clients, mailtest.MCPClient(t, set.Replicas[i%2].URL, userHeaders(s, mailtest.Bob), ""))
			}
			start := make(chan struct{})
			errs := make(chan string, len(clients))
			var wg sync.WaitGroup
			for _, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					res, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "imap_list_folders"}})
					switch {
					case err != nil:
						errs <- err.Error()
					case res.IsError:
						errs <- mailtest.Text(res)
					}
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Errorf("a first call of the burst: %s", e)
			}
		})
	}
}

// redisOps is the number of Redis operations a replica made, its health
// checks (ping) left out, from its metrics.
func redisOps(t *testing.T, addr string) int {
	t.Helper()
	_, out := httpGet(t, "http://"+addr+"/metrics")
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "mailbox_mcp_redis_operations_total{") && !strings.Contains(l, `op="ping"`) {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += int(v)
		}
	}
	return n
}

// oauthAt is a sign-in through the replicas' authorization server: the
// client registered and signed in at one replica, its code, and where
// its requests go.
type oauthAt struct {
	c    *oauthClient
	code url.Values // the code's exchange form
}

// replicaSignIn signs in as alice at replica r's page, as a browser without
// JavaScript would, and fails the test unless a code is issued.
func replicaSignIn(t *testing.T, s *mailtest.Stack, r *replica) *oauthAt {
	t.Helper()
	o := replicaSignInAt(t, s, r)
	if o == nil {
		t.Fatalf("no code at replica %s", r.Name)
	}
	return o
}

// replicaSignInAt is replicaSignIn without failing when the page gives no
// code (nil).
func replicaSignInAt(t *testing.T, s *mailtest.Stack, r *replica) *oauthAt {
	t.Helper()
	c := newOAuthClient(t, &oauthGateway{Base: r.Base})
	verifier, challenge := pkce()
	// The replicas' PUBLIC_URL (the issuer and the resource) is A's.
	params := c.authParams(challenge, "")
	params.Set("resource", strings.TrimSuffix(r.issuer(), "/")+"/mcp")
	page, status, redirect := c.authorize(params, mailtest.Alice, s.Users[mailtest.Alice], "allow")
	if status != http.StatusFound || redirect.Get("code") == "" {
		t.Logf("replica %s's sign-in page: %d %.300s", r.Name, status, page)
		return nil
	}
	return &oauthAt{c: c, code: url.Values{"grant_type": {"authorization_code"}, "code": {redirect.Get("code")}, "redirect_uri": {c.redirect},
		"client_id": {c.id}, "code_verifier": {verifier}, "resource": {params.Get("resource")}}}
}

// post sends form to replica r's /token: the status, the answer and its
// Retry-After.
func (o *oauthAt) post(t *testing.T, r *replica, form url.Values) (int, tokenAnswer, string) {
	t.Helper()
	resp, err := o.c.http.PostForm(r.Base+"/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a tokenAnswer
	json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a, resp.Header.Get("Retry-After")
}

func (o *oauthAt) exchangeAt(t *testing.T, r *replica) (int, tokenAnswer, string) {
	t.Helper()
	return o.post(t, r, o.code)
}

// exchange redeems the code at r and fails the test unless tokens come.
func (o *oauthAt) exchange(t *testing.T, r *replica) tokenAnswer {
	t.Helper()
	st, a, _ := o.exchangeAt(t, r)
	if st != http.StatusOK || a.RefreshToken == "" {
		t.Fatalf("code exchange at replica %s: %d %v", r.Name, st, a)
	}
	return a
}

func (o *oauthAt) refreshAt(t *testing.T, r *replica, token string) (int, tokenAnswer, string) {
	t.Helper()
	return o.post(t, r, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {o.c.id}})
}

// String shows an answer without its tokens.
func (a tokenAnswer) String() string {
	if a.Error != "" {
		return a.Error + ": " + a.Description
	}
	return fmt.Sprintf("tokens (access %t, refresh %t)", a.AccessToken != "", a.RefreshToken != "")
}

// issuer is the replica's PUBLIC_URL.
func (r *replica) issuer() string {
	for _, v := range r.cmd.Env {
		if u, ok := strings.CutPrefix(v, "PUBLIC_URL="); ok {
			return u
		}
	}
	return r.Base
}

// httpGetPage GETs a page: its status, Retry-After and text.
func httpGetPage(t *testing.T, u string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), html.UnescapeString(string(b))
}

// deliveredSettled is how many messages with subject token user's INBOX
// holds once deliveries have settled: it waits for the first, then 2 s
// more for any second one.
func deliveredSettled(t *testing.T, s *mailtest.Stack, user, token string) int {
	t.Helper()
	delivered(t, s, user, token, 1)
	time.Sleep(2 * time.Second)
	return withSubject(t, s, user, "INBOX", token)
}

// retryRecorder carries a client's requests and keeps the one that
// answers a form (it carries the requestState): its body and headers.
type retryRecorder struct {
	mu     sync.Mutex
	body   []byte
	header http.Header
}

func (rr *retryRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if b, ok := answersForm(r); ok {
		rr.mu.Lock()
		rr.body, rr.header = b, r.Header.Clone()
		rr.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// replay sends the recorded answer, unchanged, to another replica's /mcp
// and returns whether the tool's result is an error, and its text.
func (rr *retryRecorder) replay(t *testing.T, mcpURL string) (bool, string) {
	t.Helper()
	rr.mu.Lock()
	req, _ := http.NewRequest(http.MethodPost, mcpURL, bytes.NewReader(rr.body))
	req.Header = rr.header.Clone()
	rr.mu.Unlock()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, l := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				raw = []byte(d)
			}
		}
	}
	var out struct {
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("the replayed answer: %d %.300s", resp.StatusCode, raw)
	}
	if out.Error != nil {
		return true, out.Error.Message
	}
	var text strings.Builder
	for _, c := range out.Result.Content {
		text.WriteString(c.Text)
	}
	return out.Result.IsError, text.String()
}

// formClientAt is formClient for a replica's URL.
func formClientAt(t *testing.T, url string, h map[string]string, f *onForm, rt http.RoundTripper) *client.Client {
	t.Helper()
	return formClient(t, &gateway{URL: url}, h, f, rt)
}

// The scale-out check of single use that docker-ci runs against three
// replicas behind HAProxy (tests/scaleout -refresh-replay), here against
// three gateway processes: with one REDIS_URL it passes (the code
// redeemed at replica 1 is refused at replica 2; the refresh token
// rotated at 2 and replayed at 3 is refused, and the sign-in revoked at
// 1); without it each replica remembers alone (the single-replica
// default, docs/scaling.md) and the check finds the code redeemed twice.
func TestReplicasScaleoutRefreshReplay(t *testing.T) {
	t.Parallel() // replicas and a Redis of its own
	s := mailtest.Shared(t)
	for _, mode := range memoryModes {
		t.Run(mode.name, func(t *testing.T) {
			set := startReplicas(t, s, replicaOptions{N: 3, Redis: mode.shared, SamePublicURL: true})
			var urls []string
			for _, r := range set.Replicas {
				urls = append(urls, r.URL)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "go", "run", "./scaleout", "-only", "refresh-replay", "-replicas", strings.Join(urls, ","),
				"-public-url", set.Replicas[0].Base, "-user", mailtest.Alice, "-pass", mailtest.AlicePassword)
			out, err := cmd.CombinedOutput()
			if strings.Contains(string(out), "ort1.") || strings.Contains(string(out), "oat1.") {
				t.Fatalf("the check printed a token:\n%s", out)
			}
			if mode.shared {
				if err != nil || !strings.Contains(string(out), "code and refresh token single-use across replicas") {
					t.Fatalf("scaleout -only refresh-replay with Redis: %v\n%s", err, out)
				}
				return
			}
			const want = "FAIL: refresh replay: the code redeemed at replica 1, again at replica 2: 200 tokens issued"
			if err == nil || !strings.Contains(string(out), want) {
				t.Fatalf("scaleout -only refresh-replay without Redis: %v\n%s\nwant the failure %q", err, out, want)
			}
		})
	}
}
