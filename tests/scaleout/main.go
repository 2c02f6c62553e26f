// Command scaleout checks that gateway replicas behind a load balancer act as
// one stateless service (scripts/docker-ci.sh runs it against three
// containers behind HAProxy and a real Dovecot/Postfix):
//
//  1. -calls imap_list_folders calls from -clients concurrent clients through
//     the balancer: no errors, and every answer's INBOX total equals the
//     mail server's (-want-inbox);
//  2. a credentials token sealed by replica 1 opens on every other replica;
//  3. the same load while -kill stops one replica: calls that started before
//     HAProxy marked it down may fail cleanly (a tool error or an HTTP error,
//     never a wrong answer); every call that started after must succeed; a
//     send made meanwhile is delivered exactly once or reported failed.
//
// With -redis, every replica's /health must report the shared memory
// (REDIS_URL) "ok" before the load and after the kill. With
// -refresh-replay (replicas with PUBLIC_URL = -public-url and OAuth on),
// single use holds across replicas: a code redeemed at replica 1 is
// refused at replica 2, and a refresh token rotated at replica 2 and
// replayed at replica 3 is refused and revokes the sign-in at replica 1.
// -only refresh-replay runs that check alone (no balancer needed).
//
// It prints the figures (calls, errors, p50/p99, time to recovery) and exits
// 1 when a check fails.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	lbURL      = flag.String("lb", "", "the balancer's /mcp URL")
	replicas   = flag.String("replicas", "", "comma-separated /mcp URLs of the replicas, the one -kill stops second")
	user       = flag.String("user", "", "account for the load (its INBOX must not change during the run)")
	pass       = flag.String("pass", "", "its password")
	wantInbox  = flag.Int("want-inbox", -1, "messages in the account's INBOX, per the mail server")
	calls      = flag.Int("calls", 2000, "calls of the first phase")
	clients    = flag.Int("clients", 16, "concurrent clients")
	killCmd    = flag.String("kill", "", "shell command that kills the second replica")
	statsSock  = flag.String("stats-socket", "", "HAProxy's stats socket, to learn when it marks the killed replica down")
	killServer = flag.String("kill-server", "gw2", "HAProxy's name of the killed replica")
	sendUser   = flag.String("send-user", "", "account that sends one message during the kill phase")
	sendPass   = flag.String("send-pass", "", "its password")
	sendTo     = flag.String("send-to", "", "recipient of that message")
	countCmd   = flag.String("count-cmd", "", "shell command printing the recipient's INBOX message count (doveadm mailbox status)")
	cpuCmd     = flag.String("cpu-cmd", "", "optional shell command printing the CPU time the replicas used so far, in nanoseconds (cgroup cpuacct.usage)")
	redisCheck = flag.Bool("redis", false, "the replicas share REDIS_URL: check that each /health reports it ok")
	replay     = flag.Bool("refresh-replay", false, "check that a code and a refresh token stay single-use across replicas (needs -public-url)")
	publicURL  = flag.String("public-url", "", "the replicas' PUBLIC_URL (the OAuth issuer), for -refresh-replay")
	only       = flag.String("only", "", "run one check alone: refresh-replay")
)

var httpClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
}

type callResult struct {
	start, end time.Time
	err        error
	server     string
}

// toolCall makes one stateless MCP tools/call and returns the structured
// result; a tool error is returned as an error.
func toolCall(ctx context.Context, url string, hdr map[string]string, tool string, args any) (map[string]any, string, error) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	server := resp.Header.Get("X-Served-By")
	if err != nil {
		return nil, server, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, server, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, raw)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, l := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				raw = []byte(d)
			}
		}
	}
	var out struct {
		Result struct {
			IsError           bool             `json:"isError"`
			Content           []map[string]any `json:"content"`
			StructuredContent map[string]any   `json:"structuredContent"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, server, fmt.Errorf("bad JSON-RPC answer: %v: %.200s", err, raw)
	}
	if out.Error != nil {
		return nil, server, fmt.Errorf("JSON-RPC error: %s", out.Error.Message)
	}
	if out.Result.IsError {
		return nil, server, fmt.Errorf("tool error: %v", out.Result.Content)
	}
	return out.Result.StructuredContent, server, nil
}

// errWrong marks an answer that came back but was wrong: never allowed.
var errWrong = errors.New("wrong answer")

// listFolders calls imap_list_folders and checks the INBOX total.
func listFolders(ctx context.Context, url string, hdr map[string]string) (string, error) {
	sc, server, err := toolCall(ctx, url, hdr, "imap_list_folders", map[string]any{})
	if err != nil {
		return server, err
	}
	folders, _ := sc["folders"].([]any)
	for _, f := range folders {
		m, _ := f.(map[string]any)
		if m["name"] == "INBOX" {
			if total, _ := m["total"].(float64); int(total) != *wantInbox {
				return server, fmt.Errorf("%w: INBOX total %v, the mail server has %d", errWrong, m["total"], *wantInbox)
			}
			return server, nil
		}
	}
	return server, fmt.Errorf("%w: no INBOX in %v", errWrong, sc)
}

// load runs clients workers making list calls through the balancer until n
// calls were started or stop is closed.
func load(n int, stop <-chan struct{}) []callResult {
	hdr := map[string]string{"X-Imap-User": *user, "X-Imap-Pass": *pass}
	var (
		mu      sync.Mutex
		results []callResult
		started atomic.Int64
		wg      sync.WaitGroup
	)
	for range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if n > 0 && started.Add(1) > int64(n) {
					return
				}
				r := callResult{start: time.Now()}
				r.server, r.err = listFolders(context.Background(), *lbURL, hdr)
				r.end = time.Now()
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return results
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func summary(rs []callResult) (errs int, p50, p99 time.Duration, by map[string]int) {
	var ds []time.Duration
	by = map[string]int{}
	for _, r := range rs {
		if r.err != nil {
			errs++
			continue
		}
		ds = append(ds, r.end.Sub(r.start))
		by[r.server]++
	}
	return errs, percentile(ds, 0.50), percentile(ds, 0.99), by
}

// serverDown polls HAProxy's stats socket until it reports name DOWN.
func serverDown(ctx context.Context, sock, name string) (time.Time, error) {
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			fmt.Fprintf(c, "show stat\n")
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				f := strings.Split(sc.Text(), ",")
				if len(f) > 17 && f[1] == name && strings.HasPrefix(f[17], "DOWN") {
					c.Close()
					return time.Now(), nil
				}
			}
			c.Close()
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("HAProxy never marked %s down: %v", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func count() (int, error) {
	out, err := exec.Command("sh", "-c", *countCmd).Output()
	if err != nil {
		return 0, fmt.Errorf("%s: %v", *countCmd, err)
	}
	// doveadm mailbox status prints "INBOX messages=N"
	s := strings.TrimSpace(string(out))
	return strconv.Atoi(s[strings.LastIndex(s, "messages=")+len("messages="):])
}

// cpuNanos runs -cpu-cmd; -1 when there is none or it fails.
func cpuNanos() int64 {
	if *cpuCmd == "" {
		return -1
	}
	out, err := exec.Command("sh", "-c", *cpuCmd).Output()
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func fatalf(format string, args ...any) {
	fmt.Printf("FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	flag.Parse()
	reps := strings.Split(*replicas, ",")
	if *only == "refresh-replay" {
		if err := refreshReplay(reps, *publicURL, *user, *pass); err != nil {
			fatalf("refresh replay: %v", err)
		}
		fmt.Println("refresh replay: code and refresh token single-use across replicas")
		fmt.Println("PASS")
		return
	}
	if *replay && *publicURL == "" {
		fatalf("-refresh-replay needs -public-url")
	}
	if *redisCheck {
		if err := redisHealthy(context.Background(), reps); err != nil {
			fatalf("redis: %v", err)
		}
		fmt.Printf("redis: every replica reports the shared memory ok\n")
	}
	if *lbURL == "" || len(reps) < 2 || *wantInbox < 0 || *killCmd == "" || *statsSock == "" {
		fatalf("need -lb, -replicas (2 or more), -want-inbox, -kill and -stats-socket")
	}

	// 1. the load, all replicas up
	cpu0 := cpuNanos()
	t0 := time.Now()
	rs := load(*calls, nil)
	el := time.Since(t0)
	cpuPerCall := "n/a"
	if cpu1 := cpuNanos(); cpu0 >= 0 && cpu1 >= cpu0 {
		cpuPerCall = fmt.Sprintf("%.2f ms", float64(cpu1-cpu0)/1e6/float64(len(rs)))
	}
	errs, p50, p99, by := summary(rs)
	fmt.Printf("load: %d calls, %d clients, %d errors, p50 %v, p99 %v, %.0f calls/s, gateway CPU per call %s, per replica %v\n",
		len(rs), *clients, errs, p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond), float64(len(rs))/el.Seconds(), cpuPerCall, by)
	for _, r := range rs {
		if r.err != nil {
			fatalf("load: %v", r.err)
		}
	}
	if len(by) != len(reps) {
		fatalf("load: served by %v, want all %d replicas", by, len(reps))
	}

	// 2. a token sealed by replica 1 opens on the others
	// with the user's headers: with PUBLIC_URL (the sign-in server on), an
	// anonymous /mcp request is answered 401 with the sign-in's metadata
	sc, _, err := toolCall(context.Background(), reps[0], map[string]string{"X-Imap-User": *user, "X-Imap-Pass": *pass}, "imap_encrypt_credentials", map[string]any{"user": *user, "password": *pass})
	if err != nil {
		fatalf("imap_encrypt_credentials on replica 1: %v", err)
	}
	token, _ := sc["token"].(string)
	if token == "" {
		fatalf("imap_encrypt_credentials: no token in %v", sc)
	}
	for i, u := range reps[1:] {
		if _, err := listFolders(context.Background(), u, map[string]string{"X-Mailbox-Token": token}); err != nil {
			fatalf("the token of replica 1 on replica %d: %v", i+2, err)
		}
	}
	fmt.Printf("token: sealed by replica 1, opened by replicas 2-%d\n", len(reps))
	if *replay {
		if err := refreshReplay(reps, *publicURL, *user, *pass); err != nil {
			fatalf("refresh replay: %v", err)
		}
		fmt.Println("refresh replay: a code and a refresh token stay single-use across replicas")
	}

	// 3. kill a replica under load, send once meanwhile
	before, err := count()
	if err != nil {
		fatalf("%v", err)
	}
	stop := make(chan struct{})
	var (
		killAt, downAt time.Time
		downErr        error
		sendErr        error
		sendDone       = make(chan struct{})
		loadOut        = make(chan []callResult)
	)
	go func() { loadOut <- load(0, stop) }()
	time.Sleep(1500 * time.Millisecond)
	go func() {
		defer close(sendDone)
		subject := fmt.Sprintf("scaleout send %d", time.Now().UnixNano())
		_, _, sendErr = toolCall(context.Background(), *lbURL, map[string]string{"X-Imap-User": *sendUser, "X-Imap-Pass": *sendPass},
			"smtp_send_email", map[string]any{"to": []string{*sendTo}, "subject": subject, "text": "sent while a replica is killed"})
	}()
	killAt = time.Now()
	if out, err := exec.Command("sh", "-c", *killCmd).CombinedOutput(); err != nil {
		fatalf("%s: %v: %s", *killCmd, err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	downAt, downErr = serverDown(ctx, *statsSock, *killServer)
	cancel()
	time.Sleep(3 * time.Second) // calls after HAProxy noticed
	close(stop)
	rs = <-loadOut
	<-sendDone
	if downErr != nil {
		fatalf("%v", downErr)
	}
	var early, late, wrong int
	var lastErr time.Time
	for _, r := range rs {
		if r.err == nil {
			continue
		}
		if errors.Is(r.err, errWrong) {
			wrong++
			fmt.Printf("wrong answer: %v\n", r.err)
		}
		if r.start.After(downAt) {
			late++
			fmt.Printf("error after HAProxy marked the replica down (%v after): %v\n", r.start.Sub(downAt), r.err)
		} else {
			early++
		}
		if r.end.After(lastErr) {
			lastErr = r.end
		}
	}
	errs, p50, p99, by = summary(rs)
	recovery := downAt.Sub(killAt)
	if !lastErr.IsZero() && lastErr.Sub(killAt) > recovery {
		recovery = lastErr.Sub(killAt)
	}
	fmt.Printf("kill: %d calls, %d errors (%d started before HAProxy marked it down, %d after, %d wrong answers), p50 %v, p99 %v, marked down %v after the kill, last error %v after, per replica %v\n",
		len(rs), errs, early, late, wrong, p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond),
		downAt.Sub(killAt).Round(time.Millisecond), func() any {
			if lastErr.IsZero() {
				return "none"
			}
			return lastErr.Sub(killAt).Round(time.Millisecond)
		}(), by)
	if late > 0 || wrong > 0 {
		fatalf("kill: %d errors after HAProxy noticed, %d wrong answers", late, wrong)
	}

	// the send: delivered exactly once, or reported failed (and then at most once)
	deadline := time.Now().Add(15 * time.Second)
	var after int
	for {
		if after, err = count(); err != nil {
			fatalf("%v", err)
		}
		if after-before >= 1 || time.Now().After(deadline) || (sendErr != nil && time.Now().After(deadline.Add(-10*time.Second))) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if after, err = count(); err != nil {
		fatalf("%v", err)
	}
	switch {
	case sendErr == nil && after-before == 1:
		fmt.Printf("send during the kill: reported sent, delivered once\n")
	case sendErr != nil && after-before <= 1:
		// a replica killed after the SMTP server accepted the message but
		// before it answered reports a failure for a delivered message
		fmt.Printf("send during the kill: reported failed (%s), delivered %d time(s), not twice\n",
			strings.Join(strings.Fields(sendErr.Error()), " "), after-before)
	default:
		fatalf("send during the kill: error %v, delivered %d times", sendErr, after-before)
	}
	fmt.Printf("recovered within %v of the kill\n", recovery.Round(time.Millisecond))
	if *redisCheck {
		alive := append([]string{reps[0]}, reps[2:]...) // the second was killed
		if err := redisHealthy(context.Background(), alive); err != nil {
			fatalf("redis after the kill: %v", err)
		}
	}
	fmt.Println("PASS")
}
