package tests

// The coordination operations of the mailbox layer (wait, peek, consume,
// thread) straight against Dovecot, without the tool layer: wake-up latency
// from the moment Dovecot has the message, the connection a wait holds and
// frees, the caps, the polling fallback without IDLE, exactly-once
// consumption by concurrent consumers with separate pools (two gateway
// processes), peek counts against STATUS, and a conversation across INBOX
// and Sent.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-smtp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

func stackCreds(s *mailtest.Stack, user string) credentials.Credentials {
	return credentials.New(user, s.Users[user])
}

// coordMsg is a small message; tags "" leaves out X-Mailbox-Tags.
func coordMsg(from, subject, tags, body string) string {
	h := fmt.Sprintf("From: %s\nTo: bob@example.test\nSubject: %s\nMessage-ID: <%d.%s@coord.test>\nDate: %s\n",
		from, subject, time.Now().UnixNano(), strings.NewReplacer(" ", "-", "/", "-").Replace(subject), time.Now().Format(time.RFC1123Z))
	if tags != "" {
		h += mailbox.TagsHeader + ": " + tags + "\n"
	}
	return h + "MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n" + body + "\n"
}

type waitOut struct {
	res *mailbox.WaitResult
	err error
	at  time.Time
}

func startWait(ctx context.Context, c *mailbox.Client, creds credentials.Credentials, o mailbox.WaitOptions) <-chan waitOut {
	ch := make(chan waitOut, 1)
	go func() {
		res, err := c.Wait(ctx, creds, o, nil)
		ch <- waitOut{res, err, time.Now()}
	}()
	return ch
}

func recvWait(t *testing.T, ch <-chan waitOut, within time.Duration) waitOut {
	t.Helper()
	select {
	case w := <-ch:
		return w
	case <-time.After(within):
		t.Fatalf("the wait did not return within %v", within)
		return waitOut{}
	}
}

// idleConns counts user's IMAP connections at Dovecot.
func idleConns(t *testing.T, s *mailtest.Stack, user string) int {
	t.Helper()
	out, err := s.Doveadm("who", "-1")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == user && f[1] == "imap" {
			n++
		}
	}
	return n
}

// untilConns polls until user has want connections and returns how long it
// took, failing after limit.
func untilConns(t *testing.T, s *mailtest.Stack, user string, want int, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got := idleConns(t, s, user)
		if got == want {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("%s has %d IMAP connections after %v, want %d", user, got, limit, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lmtpDeliver hands raw to Dovecot over LMTP for rcpt and returns when
// Dovecot has answered that it stored it.
func lmtpDeliver(t *testing.T, s *mailtest.Stack, rcpt, raw string) time.Time {
	t.Helper()
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(s.Host, strconv.Itoa(s.LMTPPort)), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := smtp.NewClientLMTP(conn)
	defer c.Close()
	if err := c.Hello("coord.test"); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("agent@example.org", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt(rcpt, nil); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(strings.ReplaceAll(raw, "\n", "\r\n"))); err != nil {
		t.Fatal(err)
	}
	if _, err := w.CloseWithLMTPResponse(); err != nil {
		t.Fatal(err)
	}
	done := time.Now()
	c.Quit()
	return done
}

// waitModes are the two ways a wait learns of new mail: IDLE (Dovecot 2.3
// tells of new mail 0.5 s after it came) and a NOOP poll every 100 ms.
var waitModes = []struct {
	name      string
	poll      time.Duration
	p50, p99  time.Duration // the bounds asserted
	allowIdle bool
}{
	{"idle", 0, 700 * time.Millisecond, time.Second, true},
	{"poll 100ms", 100 * time.Millisecond, 100 * time.Millisecond, time.Second, false},
}

// A wait returns a message APPENDed after it started, with and without the
// From and tag filters, ignoring mail that does not match (a tag that only
// contains the wanted one included); the wake-up latency is measured from
// the end of the APPEND, in IDLE and polling.
func TestCoordWaitWakeLatency(t *testing.T) {
	s := mailtest.Shared(t)
	creds := stackCreds(s, bob)
	for _, mode := range waitModes {
		t.Run(mode.name, func(t *testing.T) {
			c := mailboxClient(t, s)
			c.SetWaitPoll(mode.poll)
			d := direct(t, s, bob)
			folder := scratchFolder(t, d)
			const trials = 21
			var lat []time.Duration
			last := uint32(0)
			for i := range trials {
				o := mailbox.WaitOptions{Folder: folder, SinceUID: new(last), Timeout: 15 * time.Second}
				var decoy string
				from, tags := "Peer Agent <peer@example.org>", ""
				switch i % 3 {
				case 1:
					o.From = "planner@example.org"
					from = "Planner <planner@example.org>"
					decoy = coordMsg("Someone Else <other@example.org>", "decoy "+strconv.Itoa(i), "", "not for you")
				case 2:
					o.Tag = "task"
					tags = "review, task"
					decoy = coordMsg(from, "decoy "+strconv.Itoa(i), "task-old, subtask", "tags that contain the tag")
				}
				ch := startWait(context.Background(), c, creds, o)
				time.Sleep(200 * time.Millisecond) // waiting by now
				if decoy != "" {
					last = appendRaw(t, d, folder, decoy)
					time.Sleep(50 * time.Millisecond)
				}
				want := appendRaw(t, d, folder, coordMsg(from, "wake "+strconv.Itoa(i), tags, "hello"))
				delivered := time.Now()
				w := recvWait(t, ch, 10*time.Second)
				if w.err != nil {
					t.Fatalf("trial %d: %v", i, w.err)
				}
				if w.res.TimedOut || len(w.res.Messages) != 1 || w.res.Messages[0].UID != want || w.res.NextSinceUID != want {
					t.Fatalf("trial %d (%+v): got %+v, want only uid %d", i, o, w.res, want)
				}
				if got := w.res.Messages[0].Subject; got != "wake "+strconv.Itoa(i) {
					t.Fatalf("trial %d: subject %q", i, got)
				}
				last = want
				lat = append(lat, w.at.Sub(delivered))
			}
			p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
			t.Logf("%s: wake-up after APPEND over %d trials: p50 %v, p99 %v, min %v", mode.name, trials, p50, p99, slices.Min(lat))
			if p50 > mode.p50 || p99 > mode.p99 {
				t.Errorf("wake-up p50 %v / p99 %v: want at most %v / %v", p50, p99, mode.p50, mode.p99)
			}
		})
	}
}

// The same, with mail delivered over LMTP into INBOX (the way mail from
// outside arrives), filtered on a tag of this test's own: the latency is
// from Dovecot's LMTP answer.
func TestCoordWaitWakeLatencyLMTP(t *testing.T) {
	s := mailtest.Shared(t)
	creds := stackCreds(s, bob)
	for _, mode := range waitModes {
		t.Run(mode.name, func(t *testing.T) {
			c := mailboxClient(t, s)
			c.SetWaitPoll(mode.poll)
			tag := fmt.Sprintf("lmtp-%d", time.Now().UnixNano()%1_000_000)
			var lat []time.Duration
			for i := range 21 {
				ch := startWait(context.Background(), c, creds, mailbox.WaitOptions{Tag: tag, Timeout: 15 * time.Second})
				time.Sleep(200 * time.Millisecond)
				delivered := lmtpDeliver(t, s, bob, coordMsg("Agent <agent@example.org>", "lmtp "+strconv.Itoa(i), tag, "over LMTP"))
				w := recvWait(t, ch, 10*time.Second)
				if w.err != nil || len(w.res.Messages) != 1 || w.res.Messages[0].Subject != "lmtp "+strconv.Itoa(i) {
					t.Fatalf("trial %d: %+v %v", i, w.res, w.err)
				}
				if got := w.res.Messages[0].Tags; !slices.Equal(got, []string{tag}) {
					t.Errorf("tags %q", got)
				}
				lat = append(lat, w.at.Sub(delivered))
			}
			p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
			t.Logf("%s: wake-up after LMTP delivery over %d trials: p50 %v, p99 %v", mode.name, len(lat), p50, p99)
			if p50 > mode.p50 || p99 > mode.p99 {
				t.Errorf("wake-up p50 %v / p99 %v after LMTP: want at most %v / %v", p50, p99, mode.p50, mode.p99)
			}
		})
	}
}

// since_uid returns what is already there at once, oldest first, with the
// cursor past it; waiting again from that cursor times out with no
// messages, and the cursor of another UIDVALIDITY is refused.
func TestCoordWaitSinceUIDAndTimeout(t *testing.T) {
	s := mailtest.Shared(t)
	c := mailboxClient(t, s)
	d := direct(t, s, bob)
	folder := scratchFolder(t, d)
	creds := stackCreds(s, bob)
	var uids []uint32
	for i := range 4 {
		uids = append(uids, appendRaw(t, d, folder, coordMsg("Peer <peer@example.org>", "early "+strconv.Itoa(i), "", "x")))
	}
	start := time.Now()
	res, err := c.Wait(context.Background(), creds, mailbox.WaitOptions{Folder: folder, SinceUID: new(uint32(uids[0])), Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("returning mail already there took %v", took)
	}
	if res.TimedOut || len(res.Messages) != 3 || res.NextSinceUID != uids[3] {
		t.Fatalf("%+v", res)
	}
	for i, m := range res.Messages {
		if m.UID != uids[i+1] {
			t.Fatalf("message %d is uid %d, want %d (oldest first)", i, m.UID, uids[i+1])
		}
	}
	// Without since_uid only newer mail counts: what is there is not returned.
	start = time.Now()
	res2, err := c.Wait(context.Background(), creds, mailbox.WaitOptions{Folder: folder, Timeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); !res2.TimedOut || len(res2.Messages) != 0 || res2.Messages == nil || res2.NextSinceUID != uids[3] || took < time.Second || took > 3*time.Second {
		t.Fatalf("timeout after %v: %+v", took, res2)
	}
	_, err = c.Wait(context.Background(), creds, mailbox.WaitOptions{Folder: folder, SinceUID: new(uint32(uids[3])), UIDValidity: res.UIDValidity + 1, Timeout: time.Second}, nil)
	if mailerr.SubjectOf(err) != mailerr.SubjectCursor {
		t.Fatalf("another UIDVALIDITY: %v, want an error about the cursor", err)
	}
	// A caller deadline sooner than the timeout ends the wait as a timeout
	// result, not as an error.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	res3, err := c.Wait(ctx, creds, mailbox.WaitOptions{Folder: folder, SinceUID: new(uint32(uids[3])), Timeout: time.Minute}, nil)
	if err != nil || !res3.TimedOut {
		t.Fatalf("caller deadline: %+v %v", res3, err)
	}
	if _, err := c.Wait(ctx, creds, mailbox.WaitOptions{Folder: "No such folder " + t.Name()}, nil); mailerr.KindOf(err) != mailerr.NotFound {
		t.Errorf("missing folder: %v", err)
	}
}

// A caller that goes away ends its wait, and the connection the wait held
// is gone at Dovecot within a second.
func TestCoordWaitCancelFreesConnection(t *testing.T) {
	s := mailtest.Shared(t)
	c := mailboxClient(t, s)
	creds := stackCreds(s, alice)
	before := idleConns(t, s, alice)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := startWait(ctx, c, creds, mailbox.WaitOptions{Timeout: time.Minute})
	untilConns(t, s, alice, before+1, 5*time.Second)
	time.Sleep(100 * time.Millisecond) // in IDLE
	cancelled := time.Now()
	cancel()
	w := recvWait(t, ch, time.Second)
	returned := w.at.Sub(cancelled)
	if mailerr.KindOf(w.err) != mailerr.Timeout || !strings.Contains(mailerr.Message(w.err), "cancelled") {
		t.Errorf("cancelled wait: %+v %v", w.res, w.err)
	}
	untilConns(t, s, alice, before, 2*time.Second)
	freed := time.Since(cancelled)
	t.Logf("cancelled wait returned after %v; Dovecot lists the connection gone after %v", returned, freed)
	if freed > time.Second {
		t.Errorf("the connection was freed %v after the cancel, want under 1 s", freed)
	}
	if c.Waiting() != 0 {
		t.Errorf("%d waits still counted", c.Waiting())
	}
}

// The 11th wait of one account is refused naming the per-account cap,
// however the user name is spelt; the total cap is named too.
func TestCoordWaitCaps(t *testing.T) {
	s := mailtest.Shared(t)
	c := mailboxClient(t, s)
	creds := stackCreds(s, alice)
	ctx, cancel := context.WithCancel(context.Background())
	var chans []<-chan waitOut
	for range mailbox.DefaultMaxWaitersPerUser {
		chans = append(chans, startWait(ctx, c, creds, mailbox.WaitOptions{Timeout: time.Minute}))
	}
	for deadline := time.Now().Add(5 * time.Second); c.Waiting() < mailbox.DefaultMaxWaitersPerUser; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d waits running", c.Waiting())
		}
		time.Sleep(10 * time.Millisecond)
	}
	spelt := credentials.New(" ALICE@Example.test", s.Users[alice])
	_, err := c.Wait(context.Background(), spelt, mailbox.WaitOptions{Timeout: time.Second}, nil)
	if mailerr.KindOf(err) != mailerr.Busy || !strings.Contains(mailerr.Message(err), "for this account (the limit is 10)") {
		t.Errorf("11th wait: %v", err)
	}
	// Another account still gets its wait.
	res, err := c.Wait(context.Background(), stackCreds(s, bob), mailbox.WaitOptions{Timeout: 500 * time.Millisecond}, nil)
	if err != nil || !res.TimedOut {
		t.Errorf("bob's wait next to alice's ten: %+v %v", res, err)
	}
	cancel()
	for _, ch := range chans {
		if w := recvWait(t, ch, 2*time.Second); mailerr.KindOf(w.err) != mailerr.Timeout {
			t.Errorf("cancelled: %+v %v", w.res, w.err)
		}
	}

	c2 := mailboxClient(t, s)
	c2.SetWaitLimits(2, 10)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	a := startWait(ctx2, c2, creds, mailbox.WaitOptions{Timeout: time.Minute})
	b := startWait(ctx2, c2, stackCreds(s, bob), mailbox.WaitOptions{Timeout: time.Minute})
	for c2.Waiting() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	_, err = c2.Wait(context.Background(), creds, mailbox.WaitOptions{Timeout: time.Second}, nil)
	if mailerr.KindOf(err) != mailerr.Busy || !strings.Contains(mailerr.Message(err), "on this gateway (the limit is 2)") {
		t.Errorf("3rd wait over a total of 2: %v", err)
	}
	// Shutting down ends the waits as timeouts and refuses new ones.
	c2.CloseWaits()
	for _, ch := range []<-chan waitOut{a, b} {
		if w := recvWait(t, ch, 2*time.Second); w.err != nil || !w.res.TimedOut {
			t.Errorf("after CloseWaits: %+v %v", w.res, w.err)
		}
	}
	if _, err := c2.Wait(context.Background(), creds, mailbox.WaitOptions{}, nil); mailerr.KindOf(err) != mailerr.Unavailable {
		t.Errorf("wait after CloseWaits: %v", err)
	}
}

// Against a server without IDLE (the proxy strips it) the wait polls, still
// wakes, and never sends IDLE.
func TestCoordWaitPollingWithoutIdle(t *testing.T) {
	s := mailtest.Shared(t)
	proxy := startCapProxy(t, s.IMAPAddr(), "IDLE")
	c := mailbox.New(mailbox.Config{Host: "127.0.0.1", Port: proxy.port(), Security: transport.Plain, AllowPlaintextAuth: true, Timeout: 10 * time.Second},
		pool.Config{}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { c.Close(context.Background()) })
	d := direct(t, s, bob)
	folder := scratchFolder(t, d)
	ch := startWait(context.Background(), c, stackCreds(s, bob), mailbox.WaitOptions{Folder: folder, Timeout: 20 * time.Second})
	time.Sleep(2500 * time.Millisecond) // at least one poll without news
	uid := appendRaw(t, d, folder, coordMsg("Peer <peer@example.org>", "polled", "", "x"))
	delivered := time.Now()
	w := recvWait(t, ch, 5*time.Second)
	if w.err != nil || len(w.res.Messages) != 1 || w.res.Messages[0].UID != uid {
		t.Fatalf("%+v %v", w.res, w.err)
	}
	t.Logf("without IDLE the wait woke %v after the APPEND; %d NOOPs went through the proxy", w.at.Sub(delivered), proxy.sent(" NOOP"))
	if n := proxy.sent(" IDLE"); n != 0 {
		t.Errorf("the wait sent IDLE %d times to a server without it", n)
	}
	if w.at.Sub(delivered) > 3*time.Second {
		t.Errorf("woke %v after the APPEND, want within the 2 s poll", w.at.Sub(delivered))
	}
	if n := proxy.sent(" NOOP"); n < 1 {
		t.Errorf("no NOOP: the wait did not poll")
	}
}

// fillUnread appends n unread messages to folder and returns their UIDs.
func fillUnread(t *testing.T, d *imapclient.Client, folder string, n int) []uint32 {
	t.Helper()
	var uids []uint32
	for i := range n {
		uids = append(uids, appendRaw(t, d, folder, coordMsg("Producer <producer@example.org>", fmt.Sprintf("job %03d", i), "job", fmt.Sprintf("job body %d", i))))
	}
	return uids
}

// Concurrent consumers, each with a pool of its own (as two gateway
// processes have), drain 200 unread messages: every message is returned
// exactly once and none is left unread. Eight consumers drain three times:
// Dovecot lets two simultaneous conditional stores both pass on the same
// message in about one run in four (see consume.go), which the claim must
// catch.
func TestCoordConsumeExactlyOnce(t *testing.T) {
	s := mailtest.Shared(t)
	creds := stackCreds(s, bob)
	for round, consumers := range []int{2, 8, 8, 8} {
		t.Run(fmt.Sprintf("%d consumers, round %d", consumers, round), func(t *testing.T) {
			d := direct(t, s, bob)
			folder := scratchFolder(t, d)
			uids := fillUnread(t, d, folder, 200)
			clients := make([]*mailbox.Client, consumers)
			for i := range clients {
				clients[i] = mailboxClient(t, s)
			}
			var (
				mu       sync.Mutex
				got      = map[uint32]int{}
				calls    int
				empty    int
				failures []error
			)
			start := time.Now()
			var wg sync.WaitGroup
			for _, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						res, err := c.Consume(context.Background(), creds, mailbox.ConsumeOptions{Folder: folder, Limit: 10})
						mu.Lock()
						calls++
						if err != nil {
							failures = append(failures, err)
							mu.Unlock()
							return
						}
						if !res.ExactlyOnce {
							failures = append(failures, errors.New("exactly_once false against Dovecot"))
						}
						if len(res.Messages) == 0 {
							empty++
						}
						for _, m := range res.Messages {
							got[m.UID]++
							if !strings.HasPrefix(m.Text, "job body ") || !m.Flags.Seen {
								failures = append(failures, fmt.Errorf("uid %d: text %q flags %+v", m.UID, m.Text, m.Flags))
							}
						}
						mu.Unlock()
						if len(res.Messages) == 0 && !res.More {
							return
						}
					}
				}()
			}
			wg.Wait()
			took := time.Since(start)
			for _, err := range failures {
				t.Error(err)
			}
			dup := 0
			for uid, n := range got {
				if n > 1 {
					dup++
					t.Errorf("uid %d returned %d times", uid, n)
				}
			}
			for _, u := range uids {
				if got[u] == 0 {
					t.Errorf("uid %d never returned", u)
				}
			}
			left := allUIDs(t, d, folder, &imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}})
			if len(left) != 0 {
				t.Errorf("%d messages left unread: %v", len(left), left)
			}
			t.Logf("%d consumers drained %d messages in %v: %d calls (%d empty), %d duplicates, %d unread left",
				consumers, len(got), took.Round(time.Millisecond), calls, empty, dup, len(left))
		})
	}
}

// Consume takes only the messages with exactly the tag (and sender), reads
// them as Read does, and a second consume does not return them again. On a
// server without CONDSTORE it says the guarantee is at least once.
func TestCoordConsumeFiltersAndFallback(t *testing.T) {
	s := mailtest.Shared(t)
	c := mailboxClient(t, s)
	d := direct(t, s, bob)
	folder := scratchFolder(t, d)
	creds := stackCreds(s, bob)
	urgent := appendRaw(t, d, folder, coordMsg("Lead <lead@example.org>", "do this now", "urgent, ops", "Deploy the fix.\nThanks"))
	appendRaw(t, d, folder, coordMsg("Lead <lead@example.org>", "later", "not-urgent", "no hurry"))
	appendRaw(t, d, folder, coordMsg("Other <other@example.org>", "other urgent", "urgent", "from someone else"))

	res, err := c.Consume(context.Background(), creds, mailbox.ConsumeOptions{Folder: folder, Tag: "urgent", From: "lead@example.org"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 1 || res.Messages[0].UID != urgent || !res.ExactlyOnce || res.More {
		t.Fatalf("%+v", res)
	}
	read, err := c.Read(context.Background(), creds, mailbox.ReadOptions{Folder: folder, UID: urgent})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Messages[0]; got.Text != read.Text || got.Subject != read.Subject || got.MessageID != read.MessageID || !read.Flags.Seen {
		t.Errorf("consumed %+v\nread %+v", got, read)
	}
	again, err := c.Consume(context.Background(), creds, mailbox.ConsumeOptions{Folder: folder, Tag: "urgent", From: "lead@example.org"})
	if err != nil || len(again.Messages) != 0 {
		t.Fatalf("second consume: %+v %v", again, err)
	}
	if unread := allUIDs(t, d, folder, &imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}}); len(unread) != 2 {
		t.Errorf("%d unread left, want the 2 that did not match", len(unread))
	}

	proxy := startCapProxy(t, s.IMAPAddr(), "CONDSTORE", "QRESYNC")
	loose := mailbox.New(mailbox.Config{Host: "127.0.0.1", Port: proxy.port(), Security: transport.Plain, AllowPlaintextAuth: true, Timeout: 10 * time.Second},
		pool.Config{}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { loose.Close(context.Background()) })
	res, err = loose.Consume(context.Background(), creds, mailbox.ConsumeOptions{Folder: folder, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExactlyOnce || len(res.Messages) != 1 || !res.More {
		t.Errorf("without CONDSTORE: %+v", res)
	}
	if n := proxy.sent("UNCHANGEDSINCE"); n != 0 {
		t.Errorf("sent UNCHANGEDSINCE %d times to a server without CONDSTORE", n)
	}
}

// Peek's counts are Dovecot's STATUS; by_sender counts the unread per
// sender; with a tag only the messages carrying it exactly count.
func TestCoordPeek(t *testing.T) {
	s := mailtest.Shared(t)
	c := mailboxClient(t, s)
	d := direct(t, s, bob)
	folder := scratchFolder(t, d)
	creds := stackCreds(s, bob)

	empty, err := c.Peek(context.Background(), creds, folder, "")
	if err != nil {
		t.Fatal(err)
	}
	if empty.Total != 0 || empty.Unread != 0 || empty.OldestUnreadAt != nil || empty.NewestAt != nil || len(empty.BySender) != 0 {
		t.Fatalf("empty folder: %+v", empty)
	}
	senders := []string{"Ann <ann@example.org>", "Bo <bo@example.org>", "Ann <ANN@example.org>", "Cy <cy@example.org>", "Bo <bo@example.org>", "Ann <ann@example.org>"}
	var uids []uint32
	for i, from := range senders {
		tags := ""
		if i%2 == 0 {
			tags = "review"
		} else {
			tags = "pre-review"
		}
		uids = append(uids, appendRaw(t, d, folder, coordMsg(from, "peek "+strconv.Itoa(i), tags, "x")))
	}
	// Cy's message and the first of Ann's are read.
	if _, err := d.Select(folder, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := d.Store(imap.UIDSetNum(imap.UID(uids[0]), imap.UID(uids[3])), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	p, err := c.Peek(context.Background(), creds, folder, "")
	if err != nil {
		t.Fatal(err)
	}
	sd, err := d.Status(folder, &imap.StatusOptions{NumMessages: true, NumUnseen: true, UIDNext: true}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != *sd.NumMessages || p.Unread != *sd.NumUnseen || p.Unread != 4 || p.NextSinceUID != uint32(sd.UIDNext)-1 {
		t.Errorf("peek %d/%d next %d, Dovecot STATUS %d/%d next %d", p.Total, p.Unread, p.NextSinceUID, *sd.NumMessages, *sd.NumUnseen, sd.UIDNext)
	}
	want := []mailbox.SenderCount{{From: "bo@example.org", Name: "Bo", Unread: 2}, {From: "ann@example.org", Name: "Ann", Unread: 2}}
	if len(p.BySender) != 2 || p.BySender[0].Unread != 2 || p.BySender[1].Unread != 2 ||
		!strings.EqualFold(p.BySender[0].From+p.BySender[1].From, "ann@example.orgbo@example.org") {
		t.Errorf("by_sender %+v, want %+v (either order of equal counts)", p.BySender, want)
	}
	dates := internalDates(t, d, folder)
	if p.OldestUnreadAt == nil || !p.OldestUnreadAt.Equal(dates[uids[1]]) || p.NewestAt == nil || !p.NewestAt.Equal(dates[uids[5]]) {
		t.Errorf("oldest unread %v (want %v), newest %v (want %v)", p.OldestUnreadAt, dates[uids[1]], p.NewestAt, dates[uids[5]])
	}

	tagged, err := c.Peek(context.Background(), creds, folder, "review")
	if err != nil {
		t.Fatal(err)
	}
	// review: uids 0 (read), 2, 4; pre-review does not count.
	if tagged.Total != 3 || tagged.Unread != 2 || len(tagged.BySender) != 2 || !tagged.OldestUnreadAt.Equal(dates[uids[2]]) || !tagged.NewestAt.Equal(dates[uids[4]]) {
		t.Errorf("tagged peek: %+v", tagged)
	}

	inbox, err := c.Peek(context.Background(), creds, "INBOX", "")
	if err != nil {
		t.Fatal(err)
	}
	sd, err = d.Status("INBOX", &imap.StatusOptions{NumMessages: true, NumUnseen: true}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if inbox.Total != *sd.NumMessages || inbox.Unread != *sd.NumUnseen {
		t.Errorf("INBOX peek %d/%d, STATUS %d/%d", inbox.Total, inbox.Unread, *sd.NumMessages, *sd.NumUnseen)
	}
}

func internalDates(t *testing.T, d *imapclient.Client, folder string) map[uint32]time.Time {
	t.Helper()
	if _, err := d.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	bufs, err := d.Fetch(imap.SeqSet{imap.SeqRange{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, InternalDate: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint32]time.Time{}
	for _, b := range bufs {
		out[uint32(b.UID)] = b.InternalDate
	}
	return out
}

// A three-message conversation between bob and a peer, across INBOX and
// Sent, is found from any of its messages, oldest first; a copy of bob's
// reply that also landed in INBOX is listed once, and a message that only
// shares the subject is not part of it.
func TestCoordThreadAcrossInboxAndSent(t *testing.T) {
	s := mailtest.Shared(t)
	c := mailboxClient(t, s)
	d := direct(t, s, bob)
	creds := stackCreds(s, bob)
	n := time.Now().UnixNano()
	id := func(k string) string { return fmt.Sprintf("%s.%d@coord.test", k, n) }
	msg := func(from, to, subject, date, mid, inReplyTo, refs, body string) string {
		h := fmt.Sprintf("From: %s\nTo: %s\nSubject: %s\nDate: %s\nMessage-ID: <%s>\n", from, to, subject, date, mid)
		if inReplyTo != "" {
			h += "In-Reply-To: <" + inReplyTo + ">\n"
		}
		if refs != "" {
			h += "References: " + refs + "\n"
		}
		return h + "Content-Type: text/plain; charset=utf-8\n\n" + body + "\n"
	}
	first := msg("Peer <peer@example.org>", "bob@example.test", "Plan for the migration", "Mon, 02 Nov 2026 09:00:00 +0000",
		id("a"), "", "", "Can you take the database part?")
	reply := msg("Bob <bob@example.test>", "peer@example.org", "Re: Plan for the migration", "Mon, 02 Nov 2026 10:00:00 +0000",
		id("b"), id("a"), "<"+id("a")+">", "Yes, I take it.\n\n> Can you take the database part?")
	answer := msg("Peer <peer@example.org>", "bob@example.test", "Re: Plan for the migration", "Mon, 02 Nov 2026 11:00:00 +0000",
		id("c"), id("b"), "<"+id("a")+"> <"+id("b")+">", "Great, thanks!")
	unrelated := msg("Peer <peer@example.org>", "bob@example.test", "Re: Plan for the migration", "Mon, 02 Nov 2026 12:00:00 +0000",
		id("x"), "", "", "Another plan entirely.")

	var added []struct {
		folder string
		uid    uint32
	}
	put := func(folder, raw string) uint32 {
		u := appendRaw(t, d, folder, raw)
		added = append(added, struct {
			folder string
			uid    uint32
		}{folder, u})
		return u
	}
	t.Cleanup(func() {
		for _, a := range added {
			if _, err := d.Select(a.folder, nil).Wait(); err == nil {
				d.Store(imap.UIDSetNum(imap.UID(a.uid)), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close()
				d.UIDExpunge(imap.UIDSetNum(imap.UID(a.uid))).Close()
			}
		}
	})
	u1 := put("INBOX", first)
	u2 := put("Sent", reply)
	u2copy := put("INBOX", reply)
	u3 := put("INBOX", answer)
	put("INBOX", unrelated)

	for _, start := range []struct {
		folder string
		uid    uint32
	}{{"INBOX", u3}, {"INBOX", u1}, {"Sent", u2}} {
		res, err := c.Thread(context.Background(), creds, start.folder, start.uid, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range res.Messages {
			got = append(got, fmt.Sprintf("%s/%d", m.Folder, m.UID))
		}
		primary2 := fmt.Sprintf("INBOX/%d", u2copy)
		if start.folder == "Sent" {
			primary2 = fmt.Sprintf("Sent/%d", u2)
		}
		want := []string{fmt.Sprintf("INBOX/%d", u1), primary2, fmt.Sprintf("INBOX/%d", u3)}
		if !slices.Equal(got, want) {
			t.Fatalf("from %s/%d: %v, want %v", start.folder, start.uid, got, want)
		}
		if res.Truncated || !slices.Contains(res.Folders, "Sent") {
			t.Errorf("truncated %v, folders %v", res.Truncated, res.Folders)
		}
		m2 := res.Messages[1]
		if len(m2.AlsoIn) != 1 || m2.MessageID != id("b") || m2.InReplyTo != id("a") {
			t.Errorf("bob's reply: %+v", m2)
		}
		if res.Messages[0].Snippet != "Can you take the database part?" || res.Messages[1].Snippet != "Yes, I take it." || res.Messages[2].Snippet != "Great, thanks!" {
			t.Errorf("snippets: %q / %q / %q", res.Messages[0].Snippet, res.Messages[1].Snippet, res.Messages[2].Snippet)
		}
		if res.Messages[0].From == nil || res.Messages[0].From.Email != "peer@example.org" || res.Messages[0].Subject != "Plan for the migration" {
			t.Errorf("first: %+v", res.Messages[0])
		}
	}
	if _, err := c.Thread(context.Background(), creds, "INBOX", u1, []string{"No such folder " + t.Name()}); mailerr.KindOf(err) != mailerr.NotFound || mailerr.SubjectOf(err) != mailerr.SubjectFolder {
		t.Errorf("a named folder that does not exist: %v", err)
	}
}
