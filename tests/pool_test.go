package tests

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// connectionsTo returns the ESTABLISHED TCP connections this machine has
// open to port, client side: the sockets the gateway holds to the mail
// server. (The server's side of a socket the gateway has just closed can stay
// ESTABLISHED for a moment until its kernel processes the FIN, so the client
// side is the exact measure of the bound.) One read of the file is not a
// snapshot: a socket closed during the read and its replacement can both
// appear, so callers intersect two reads (see concurrentConnections).
func connectionsTo(port int) map[string]bool {
	seen := map[string]bool{}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		want := fmt.Sprintf(":%04X", port)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && strings.HasSuffix(fields[2], want) && fields[3] == "01" {
				seen[fields[1]+" "+fields[2]] = true
			}
		}
		f.Close()
	}
	return seen
}

// concurrentConnections counts the sockets present in both prev and cur:
// each was open from its row in the first read to its row in the second, so
// all of them were open at once at the moment between the two reads. (An
// address pair is not reused that fast: ephemeral ports cycle.) It never
// over-counts; it may miss a socket that lived only between two reads.
func concurrentConnections(prev, cur map[string]bool) int {
	n := 0
	for k := range cur {
		if prev[k] {
			n++
		}
	}
	return n
}

// 50 concurrent callers across 8 users through a pool of 10: every call
// succeeds and the server never holds more than 10 connections.
func TestPoolBoundUnderLoad(t *testing.T) {
	users := map[string]string{}
	for i := range 8 {
		users[fmt.Sprintf("user%d@example.test", i)] = fmt.Sprintf("pw%d", i)
	}
	s := mailtest.StartT(t, mailtest.Options{Users: users})
	for u := range users {
		if err := s.Seed(u, 200, "INBOX"); err != nil {
			t.Fatal(err)
		}
	}
	g := startGateway(t, s, "MAX_POOL_SIZE=10", "MAX_POOL_PER_USER=4")

	var peak atomic.Int64
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		prev := connectionsTo(s.IMAPSPort)
		for {
			cur := connectionsTo(s.IMAPSPort)
			if n := int64(concurrentConnections(prev, cur)); n > peak.Load() {
				peak.Store(n)
			}
			prev = cur
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()

	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	const callers, callsEach = 50, 5
	var wg sync.WaitGroup
	var failures atomic.Int64
	errs := make(chan string, callers*callsEach)
	for i := range callers {
		user := names[i%len(names)]
		c := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": user, "x-imap-pass": users[user]}, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range callsEach {
				tool, args := "imap_list_emails", map[string]any{"limit": 10}
				if j%2 == 1 {
					tool, args = "imap_search_emails", map[string]any{"from": "example", "limit": 5}
				}
				res, err := mailtest.CallErr(c, tool, args)
				if err != nil || res.IsError {
					failures.Add(1)
					errs <- fmt.Sprint(err, mailtest.Text(res))
					continue
				}
				var p mailbox.Page
				if err := mailtest.DecodeErr(res, &p); err != nil || len(p.Messages) == 0 {
					failures.Add(1)
					errs <- fmt.Sprintf("%s: empty page (%v)", user, err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	st := g.App.PoolStats()
	t.Logf("%d calls, %d failures; peak connections to the server %d; pool: opened %d reused %d evicted %d waited %d",
		callers*callsEach, failures.Load(), peak.Load(), st.Opened, st.Reused, st.Evicted, st.WaitedTotal)
	if peak.Load() > 10 {
		t.Fatalf("the gateway held %d connections to the server at once, MAX_POOL_SIZE is 10", peak.Load())
	}
	if peak.Load() < 5 {
		t.Fatalf("at most %d connections observed at once: the load did not fill the pool, so the test proves nothing", peak.Load())
	}
}

// A pooled connection that the server drops is replaced on the next call
// without the caller seeing an error.
func TestKickedConnectionIsReplaced(t *testing.T) {
	s := seededStack(t)
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	if res := mailtest.Call(t, c, "imap_list_emails", map[string]any{"limit": 1}); res.IsError {
		t.Fatal(mailtest.Text(res))
	}
	opened := g.App.PoolStats().Opened
	if err := s.Kick(bob); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if res := mailtest.Call(t, c, "imap_list_emails", map[string]any{"limit": 1}); res.IsError {
			t.Fatalf("call %d after kick: %s", i, mailtest.Text(res))
		}
	}
	if got := g.App.PoolStats().Opened; got != opened+1 {
		t.Fatalf("pool opened %d connections after the kick, want exactly 1 new", got-opened)
	}
}

// A server that accepts and never answers makes the call fail with a
// timeout within IMAP_TIMEOUT + 1 s, for TLS and plain connections.
func TestSilentServerTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, security := range []string{"tls", "starttls", "plain"} {
		t.Run(security, func(t *testing.T) {
			s := &mailtest.Stack{}
			g := startGateway(t, s, "IMAP_PORT="+port, "IMAP_SECURITY="+security, "ALLOW_PLAINTEXT_AUTH=true", "IMAP_TIMEOUT=2s", "MAIL_CA_FILE=")
			c := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": "u", "x-imap-pass": "p"}, "")
			start := time.Now()
			res := mailtest.Call(t, c, "imap_list_folders", nil)
			took := time.Since(start)
			if !res.IsError || !strings.Contains(mailtest.Text(res), "did not answer in time") {
				t.Fatalf("IsError=%v %q", res.IsError, mailtest.Text(res))
			}
			if took > 3*time.Second {
				t.Fatalf("took %v, want at most IMAP_TIMEOUT + 1 s = 3 s", took)
			}
		})
	}
}
