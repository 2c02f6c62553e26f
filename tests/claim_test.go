package tests

// imap_check_inbox on a server that reports FLAGS for its own STORE
// (Cyrus) and on one that does not (Dovecot): consumers at once drain a
// folder, and every message is returned, none is left unread, none is
// \Seen without having been returned; a gateway killed right after its
// STORE loses nothing when the consumer retries with its idempotency key
// on another gateway.

import (
	"bufio"
	"crypto/sha256"
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
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/mark3labs/mcp-go/client"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailstack"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// claimServer is a server the claim tests drain.
type claimServer struct {
	interopServer
	prefix    string // personal namespace prefix of new folders
	plainAddr string // IMAP without TLS (LOGIN allowed), for a proxy to read
}

func claimServers(t *testing.T) []claimServer {
	t.Helper()
	const user = "drain@example.test"
	st := mailtest.StartT(t, mailtest.Options{Users: map[string]string{user: "drain-pw-1"}})
	cy := mailtest.StartIMAP(t, mailtest.Cyrus, nil)
	return []claimServer{
		{interopServer{name: "dovecot", user: user, pass: "drain-pw-1",
			env:  []string{"IMAP_HOST=127.0.0.1", "IMAP_PORT=" + strconv.Itoa(st.IMAPSPort), "MAIL_CA_FILE=" + st.CAFile},
			dial: func(t testing.TB) *imapclient.Client { return direct(t, st, user) }}, "", st.IMAPAddr()},
		{plainServer("cyrus", cy.Addr(), mailstack.ServerAlice, mailstack.ServerAlicePassword), "INBOX.", cy.Addr()},
	}
}

// fillFolder creates folder with n unread messages and returns their UIDs.
func fillFolder(t *testing.T, d *imapclient.Client, folder string, n int) []imap.UID {
	t.Helper()
	if err := d.Create(folder, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	var uids []imap.UID
	for i := range n {
		raw := fmt.Sprintf("From: Worker <w%d@example.org>\r\nSubject: job %d\r\nMessage-ID: <job%d.%d@example.org>\r\n\r\njob %d\r\n", i%7, i, i, time.Now().UnixNano(), i)
		uids = append(uids, appendUID(t, d, folder, []byte(raw), nil, time.Time{}))
	}
	return uids
}

// drained is what consumers got.
type drained struct {
	mu     sync.Mutex
	got    map[uint32]int
	loose  map[uint32]bool // returned at least once
	exact  bool
	errs   []string
	repeat int
}

func (d *drained) add(res map[string]any) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	msgs := list(res["messages"])
	for _, m := range msgs {
		d.got[num(obj(m)["uid"])]++
	}
	for _, u := range list(res["at_least_once"]) {
		d.loose[num(u)] = true
	}
	if res["repeated"] == true {
		d.repeat++
	}
	d.exact = d.exact && res["exactly_once"] == true
	return len(msgs)
}

// check: every message returned, the duplicates only among those marked
// at least once, nothing unread left, nothing \Seen unreturned.
func (d *drained) check(t *testing.T, c *imapclient.Client, folder string, all []imap.UID, wantExact bool) {
	t.Helper()
	if len(d.errs) > 0 {
		t.Fatalf("consumer errors: %v", d.errs)
	}
	twice := 0
	for u, n := range d.got {
		if n > 1 {
			twice++
			if !d.loose[u] {
				t.Errorf("UID %d returned %d times without being marked at_least_once", u, n)
			}
		}
	}
	if len(d.got) != len(all) {
		t.Errorf("%d of %d messages returned", len(d.got), len(all))
	}
	unseen := searchUIDs(t, c, folder, &imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}})
	if len(unseen) > 0 {
		t.Errorf("%d messages left unread: %v", len(unseen), unseen)
	}
	seen := searchUIDs(t, c, folder, &imap.SearchCriteria{Flag: []imap.Flag{imap.FlagSeen}})
	for _, u := range seen {
		if d.got[uint32(u)] == 0 {
			t.Errorf("UID %d is \\Seen but no consumer got it", u)
		}
	}
	if wantExact && (!d.exact || twice > 0) {
		t.Errorf("exactly_once %v, %d returned twice", d.exact, twice)
	}
	t.Logf("%d messages, %d returned twice (%d marked at least once), exactly_once=%v", len(d.got), twice, len(d.loose), d.exact)
}

// drain runs consumers on the clients until the folder has nothing left.
func drain(t *testing.T, clients []*client.Client, folder string, extra map[string]any) *drained {
	t.Helper()
	d := &drained{got: map[uint32]int{}, loose: map[uint32]bool{}, exact: true}
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			empty := 0
			for k := 0; k < 200 && empty < 2; k++ {
				args := map[string]any{"folder": folder, "limit": 10}
				for a, v := range extra {
					args[a] = fmt.Sprintf("%v-%d-%d", v, i, k)
				}
				res, err := mailtest.CallErr(c, "imap_check_inbox", args)
				if err == nil && res.IsError {
					err = fmt.Errorf("%s", mailtest.Text(res))
				}
				var out map[string]any
				if err == nil {
					err = mailtest.DecodeErr(res, &out)
				}
				if err != nil {
					d.mu.Lock()
					d.errs = append(d.errs, err.Error())
					d.mu.Unlock()
					return
				}
				if d.add(out) == 0 {
					empty++
				} else {
					empty = 0
				}
			}
		}()
	}
	wg.Wait()
	return d
}

// Consumers at once, 2 and 8, on two gateways, on both kinds of server;
// half of them use an idempotency key (a fresh one per call).
func TestClaimConcurrentConsumers(t *testing.T) {
	for _, srv := range claimServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			g1, g2 := startGatewayEnv(t, srv.env...), startGatewayEnv(t, srv.env...)
			h := map[string]string{"x-imap-user": srv.user, "x-imap-pass": srv.pass}
			for _, n := range []int{2, 8} {
				for _, keyed := range []bool{false, true} {
					name := fmt.Sprintf("%d_consumers", n)
					var extra map[string]any
					if keyed {
						name += "_with_idempotency_keys"
						extra = map[string]any{"idempotency_key": fmt.Sprintf("drain-%d", time.Now().UnixNano())}
					}
					t.Run(name, func(t *testing.T) {
						d := srv.dial(t)
						folder := fmt.Sprintf("%sDrain%d", srv.prefix, time.Now().UnixNano()%1e9)
						all := fillFolder(t, d, folder, 60)
						var clients []*client.Client
						for i := range n {
							g := []*gateway{g1, g2}[i%2]
							clients = append(clients, mailtest.MCPClient(t, g.URL, h, ""))
						}
						got := drain(t, clients, folder, extra)
						got.check(t, srv.dial(t), folder, all, srv.name == "cyrus")
					})
				}
			}
		})
	}
}

// gatewayProc is the gateway binary running as a process of its own.
type gatewayProc struct {
	URL string
	cmd *exec.Cmd
}

// startGatewayProc runs bin serve with env on a free port until the test
// ends, and waits until /health answers.
func startGatewayProc(t *testing.T, bin string, env ...string) *gatewayProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	key, _ := credentials.NewKey()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), append([]string{"ENCRYPTION_KEY=" + key, "PORT=" + strconv.Itoa(port), "LOG_LEVEL=warn"}, env...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	for i := 0; ; i++ {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if i > 200 {
			t.Fatalf("the gateway did not start: %v", err)
		}
		time.Sleep(25 * time.Millisecond)
	}
	return &gatewayProc{URL: base + "/mcp", cmd: cmd}
}

// Exactly once on Cyrus: 200 unread messages drained by 8 consumers on two
// gateway processes.
func TestExactlyOnceCyrus(t *testing.T) {
	cy := mailtest.StartIMAP(t, mailtest.Cyrus, nil)
	srv := plainServer("cyrus", cy.Addr(), mailstack.ServerAlice, mailstack.ServerAlicePassword)
	bin := buildGateway(t)
	p1, p2 := startGatewayProc(t, bin, srv.env...), startGatewayProc(t, bin, srv.env...)
	d := srv.dial(t)
	folder := "INBOX.Drain200"
	all := fillFolder(t, d, folder, 200)
	h := map[string]string{"x-imap-user": srv.user, "x-imap-pass": srv.pass}
	var clients []*client.Client
	for i := range 8 {
		clients = append(clients, mailtest.MCPClient(t, []*gatewayProc{p1, p2}[i%2].URL, h, ""))
	}
	got := drain(t, clients, folder, nil)
	got.check(t, srv.dial(t), folder, all, true)
}

// killProxy forwards IMAP between a gateway and the server; when the
// server answers OK to a conditional STORE it kills the gateway process
// (SIGKILL) instead of passing the answer on. beforeStore, when set, runs
// once when the first conditional STORE arrives, before it goes on; with
// atStore the gateway is killed then instead, and the STORE never goes.
type killProxy struct {
	addr        string
	target      string
	mu          sync.Mutex
	victim      *os.Process
	killed      chan struct{}
	once        sync.Once
	beforeStore func()
	atStore     bool
	held        sync.Once
}

// kill kills the victim, once.
func (p *killProxy) kill() {
	p.once.Do(func() {
		p.mu.Lock()
		if p.victim != nil {
			p.victim.Signal(syscall.SIGKILL)
		}
		p.mu.Unlock()
		close(p.killed)
	})
}

func startKillProxy(t *testing.T, target string) *killProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &killProxy{addr: ln.Addr().String(), target: target, killed: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *killProxy) serve(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	var mu sync.Mutex
	tags := map[string]bool{} // tags of conditional STOREs in flight
	go func() {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				if f := strings.Fields(line); len(f) > 2 && strings.Contains(strings.ToUpper(line), "UNCHANGEDSINCE") && strings.EqualFold(f[1], "UID") && strings.EqualFold(f[2], "STORE") {
					mu.Lock()
					tags[f[0]] = true
					mu.Unlock()
					if p.atStore {
						p.kill()
						s.Close()
						return
					}
					if p.beforeStore != nil {
						p.held.Do(p.beforeStore)
					}
				}
				if _, werr := s.Write([]byte(line)); werr != nil {
					return
				}
			}
			if err != nil {
				s.Close()
				return
			}
		}
	}()
	r := bufio.NewReader(s)
	for {
		line, err := r.ReadString('\n')
		if f := strings.Fields(line); len(f) > 1 && strings.EqualFold(f[1], "OK") {
			mu.Lock()
			hit := tags[f[0]]
			mu.Unlock()
			if hit {
				p.kill()
				return
			}
		}
		if line != "" {
			if _, werr := c.Write([]byte(line)); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A consumer whose gateway is killed right after its STORE retries with the
// same idempotency key on another gateway and gets the same messages; none
// is lost, and a new key takes the rest.
func TestClaimRetryAfterGatewayKilled(t *testing.T) {
	bin := buildGateway(t)
	for _, srv := range claimServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			d := srv.dial(t)
			folder := fmt.Sprintf("%sKill%d", srv.prefix, time.Now().UnixNano()%1e9)
			all := fillFolder(t, d, folder, 15)
			proxy := startKillProxy(t, srv.plainAddr)
			_, pport, _ := net.SplitHostPort(proxy.addr)
			a := startGatewayProc(t, bin, "IMAP_HOST=127.0.0.1", "IMAP_PORT="+pport, "IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true")
			proxy.mu.Lock()
			proxy.victim = a.cmd.Process
			proxy.mu.Unlock()
			b := startGatewayProc(t, bin, srv.env...)
			h := map[string]string{"x-imap-user": srv.user, "x-imap-pass": srv.pass}
			ca := mailtest.MCPClient(t, a.URL, h, "")
			key := fmt.Sprintf("batch-%d", time.Now().UnixNano())
			args := map[string]any{"folder": folder, "limit": 10, "idempotency_key": key}
			res, err := mailtest.CallErr(ca, "imap_check_inbox", args)
			select {
			case <-proxy.killed:
			case <-time.After(10 * time.Second):
				t.Fatalf("the gateway was not killed after its STORE (result %v, %v)", res, err)
			}
			if err == nil && !res.IsError {
				t.Fatalf("the call succeeded although its gateway was killed: %s", mailtest.Text(res))
			}
			// What the killed gateway's STORE marked.
			marked := searchUIDs(t, srv.dial(t), folder, &imap.SearchCriteria{Flag: []imap.Flag{imap.FlagSeen}})
			if len(marked) == 0 {
				t.Fatalf("the STORE marked nothing")
			}
			cb := mailtest.MCPClient(t, b.URL, h, "")
			var again map[string]any
			mailtest.Decode(t, mailtest.Call(t, cb, "imap_check_inbox", args), &again)
			if got := uidsOf(again["messages"]); !slices.Equal(got, marked) || again["repeated"] != true {
				t.Fatalf("the retry returned %v (repeated %v), the killed call's STORE marked %v", got, again["repeated"], marked)
			}
			// Once more: the same batch again, nothing new taken.
			var third map[string]any
			mailtest.Decode(t, mailtest.Call(t, cb, "imap_check_inbox", args), &third)
			if got := uidsOf(third["messages"]); !slices.Equal(got, marked) {
				t.Fatalf("a second retry returned %v, want %v", got, marked)
			}
			// A new key takes the rest; nothing is lost.
			d2 := &drained{got: map[uint32]int{}, loose: map[uint32]bool{}, exact: true}
			d2.add(again)
			d2.add(drain(t, []*client.Client{cb}, folder, map[string]any{"idempotency_key": key + "-next"}).asResult())
			d2.check(t, srv.dial(t), folder, all, false)
			t.Logf("killed after its STORE marked %d messages; the retry returned the same %d", len(marked), len(uidsOf(again["messages"])))
		})
	}
}

// asResult turns what drain got into one result with every message once.
func (d *drained) asResult() map[string]any {
	var msgs []any
	for u := range d.got {
		msgs = append(msgs, map[string]any{"uid": float64(u)})
	}
	var loose []any
	for u := range d.loose {
		loose = append(loose, float64(u))
	}
	return map[string]any{"messages": msgs, "at_least_once": loose, "exactly_once": d.exact}
}

// sameSlotKeys are two idempotency keys whose claim keyword is the same
// (the gateway's 32 slots, chosen by the key's hash).
func sameSlotKeys(prefix string) (string, string) {
	slot := func(k string) byte {
		sum := sha256.Sum256([]byte("mailbox-mcp claim v1\x00" + k))
		return sum[16] % 32
	}
	a := prefix + "-a"
	for i := 0; ; i++ {
		if b := fmt.Sprintf("%s-b%d", prefix, i); slot(b) == slot(a) {
			return a, b
		}
	}
}

// A crash between a claim's steps, with two idempotency keys that share a
// keyword slot (issue 35). Gateway A claims two messages with key A; while
// its conditional STORE is on the way, gateway B claims the oldest of them
// with key B (same slot) and returns it; A's STORE then takes the other
// one, and A is killed before it hears the answer. A's retry, on B, returns
// A's message only (on Cyrus exactly once; on Dovecot, whose conditional
// STORE is not atomic, named at least once), never B's; B's retry returns
// B's; nothing is left \Seen without having been returned. Killed before
// its STORE, A's retry returns nothing and nothing is \Seen.
func TestClaimCrashWithTwoKeysOfOneSlot(t *testing.T) {
	bin := buildGateway(t)
	for _, srv := range claimServers(t) {
		for _, atStore := range []bool{false, true} {
			name := srv.name + "/killed_after_its_STORE_while_another_key_of_its_slot_claims"
			if atStore {
				name = srv.name + "/killed_before_its_STORE"
			}
			t.Run(name, func(t *testing.T) {
				d := srv.dial(t)
				folder := fmt.Sprintf("%sSlot%d", srv.prefix, time.Now().UnixNano()%1e9)
				all := fillFolder(t, d, folder, 4)
				keyA, keyB := sameSlotKeys(fmt.Sprintf("slot-%d", time.Now().UnixNano()))
				proxy := startKillProxy(t, srv.plainAddr)
				_, pport, _ := net.SplitHostPort(proxy.addr)
				a := startGatewayProc(t, bin, "IMAP_HOST=127.0.0.1", "IMAP_PORT="+pport, "IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true")
				proxy.mu.Lock()
				proxy.victim = a.cmd.Process
				proxy.mu.Unlock()
				b := startGatewayProc(t, bin, srv.env...)
				h := map[string]string{"x-imap-user": srv.user, "x-imap-pass": srv.pass}
				cb := mailtest.MCPClient(t, b.URL, h, "")
				argsA := map[string]any{"folder": folder, "limit": 2, "idempotency_key": keyA}
				argsB := map[string]any{"folder": folder, "limit": 1, "idempotency_key": keyB}
				var byB map[string]any
				proxy.atStore = atStore
				if !atStore {
					proxy.beforeStore = func() { byB = claimCall(t, cb, argsB) }
				}
				res, err := mailtest.CallErr(mailtest.MCPClient(t, a.URL, h, ""), "imap_check_inbox", argsA)
				select {
				case <-proxy.killed:
				case <-time.After(10 * time.Second):
					t.Fatalf("gateway A was not killed (result %v, %v)", res, err)
				}
				seen := func() []imap.UID {
					return searchUIDs(t, srv.dial(t), folder, &imap.SearchCriteria{Flag: []imap.Flag{imap.FlagSeen}})
				}
				again := claimCall(t, cb, argsA)
				if again["repeated"] != true {
					t.Errorf("A's retry is not a repeat: %v", again)
				}
				if atStore {
					if got := uidsOf(again["messages"]); len(got) != 0 || len(seen()) != 0 {
						t.Fatalf("killed before its STORE: the retry returned %v, \\Seen: %v", got, seen())
					}
				} else {
					if got := uidsOf(byB["messages"]); !slices.Equal(got, all[:1]) || byB["exactly_once"] != true {
						t.Fatalf("B claimed %v (exactly_once %v), want %v", got, byB["exactly_once"], all[:1])
					}
					if s := seen(); !slices.Equal(s, all[:2]) {
						t.Fatalf("after A's STORE, \\Seen: %v, want %v", s, all[:2])
					}
					got := uidsOf(again["messages"])
					if !slices.Equal(got, all[1:2]) {
						t.Fatalf("A's retry returned %v (exactly_once %v), want A's own %v and never B's %v", got, again["exactly_once"], all[1:2], all[:1])
					}
					loose := list(again["at_least_once"])
					switch srv.name {
					case "cyrus":
						if again["exactly_once"] != true || len(loose) != 0 {
							t.Errorf("Cyrus (atomic conditional STORE): exactly_once %v, at_least_once %v", again["exactly_once"], loose)
						}
					default:
						if again["exactly_once"] != false || len(loose) != 1 || num(loose[0]) != uint32(all[1]) {
							t.Errorf("Dovecot: exactly_once %v, at_least_once %v; want %d named at least once", again["exactly_once"], loose, all[1])
						}
					}
					if got := uidsOf(claimCall(t, cb, argsB)["messages"]); !slices.Equal(got, all[:1]) {
						t.Errorf("B's retry returned %v, want %v", got, all[:1])
					}
				}
				// A new key takes the rest; each message returned once,
				// nothing \Seen unreturned.
				d2 := &drained{got: map[uint32]int{}, loose: map[uint32]bool{}, exact: true}
				d2.add(again)
				if byB != nil {
					d2.add(byB)
				}
				d2.add(drain(t, []*client.Client{cb}, folder, map[string]any{"idempotency_key": keyA + "-next"}).asResult())
				d2.check(t, srv.dial(t), folder, all, false)
			})
		}
	}
}

// claimCall calls imap_check_inbox and decodes its result.
func claimCall(t *testing.T, c *client.Client, args map[string]any) map[string]any {
	t.Helper()
	res, err := mailtest.CallErr(c, "imap_check_inbox", args)
	if err != nil {
		t.Errorf("imap_check_inbox %v: %v", args, err)
		return nil
	}
	if res.IsError {
		t.Errorf("imap_check_inbox %v: %s", args, mailtest.Text(res))
		return nil
	}
	var out map[string]any
	if err := mailtest.DecodeErr(res, &out); err != nil {
		t.Error(err)
	}
	return out
}
