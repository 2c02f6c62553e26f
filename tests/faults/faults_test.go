package faults

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/faultproxy"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// consumed is what imap_check_inbox returns, as far as these cases look.
type consumed struct {
	Messages []struct {
		UID     uint32 `json:"uid"`
		Subject string `json:"subject"`
	} `json:"messages"`
	More        bool     `json:"more"`
	Repeated    bool     `json:"repeated"`
	AtLeastOnce []uint32 `json:"at_least_once"`
}

func decode[T any](t *testing.T, res *mcp.CallToolResult) (T, bool) {
	t.Helper()
	var v T
	if res.IsError {
		return v, false
	}
	mailtest.Decode(t, res, &v)
	return v, true
}

func line(substrs ...string) func([]byte) bool {
	return func(l []byte) bool {
		u := bytes.ToUpper(l)
		for _, s := range substrs {
			if !bytes.Contains(u, []byte(strings.ToUpper(s))) {
				return false
			}
		}
		return true
	}
}

// recover checks that the gateway works again once the fault is gone: n
// calls of each of a read, a list and a send, none failing.
func (r *rig) recover(c *client.Client, user string, n int) {
	r.t.Helper()
	if err := r.tox.ResetState(); err != nil {
		r.t.Fatal(err)
	}
	for i := range n {
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"imap_list_folders", nil},
			{"imap_list_emails", map[string]any{"limit": 5}},
			{"smtp_send_email", map[string]any{"to": []string{user}, "subject": fmt.Sprintf("recovery %d %d", time.Now().UnixNano(), i), "text": "after the fault"}},
		} {
			if res, _ := r.call(c, toolTimeout, call.tool, call.args); res.IsError {
				r.t.Errorf("after the fault: %s failed: %s", call.tool, mailtest.Text(res))
			}
		}
	}
}

// A server that goes silent in the middle of an answer (the first bytes of
// a FETCH answer, then nothing, the connection open): the call ends by its
// limit, says it timed out, and the next call works; the connection it
// held is closed, not pooled.
func TestSilentServerMidAnswer(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{})
	deliver(t, s, mailtest.Alice, "silent", 3)
	r := newRig(t, s)
	c := r.client(mailtest.Alice)
	fired := r.fimap.Arm(faultproxy.Fault{Match: line("FETCH"), Action: faultproxy.StallAnswer, Bytes: 30})
	res, took := r.call(c, toolTimeout, "imap_list_emails", map[string]any{"limit": 10})
	select {
	case <-fired:
	default:
		t.Fatal("the fault did not fire")
	}
	if text := mailtest.Text(res); !res.IsError || !strings.Contains(text, "did not finish within") && !strings.Contains(text, "did not answer in time") {
		t.Errorf("after a silent server: %q, want a timeout", text)
	}
	t.Logf("silent mid-answer: ended after %v (limit %v)", took.Round(time.Millisecond), toolTimeout)
	res, _ = r.call(c, toolTimeout, "imap_list_emails", map[string]any{"limit": 10})
	list, ok := decode[struct {
		Messages []struct{ Subject string } `json:"messages"`
	}](t, res)
	if !ok || len(list.Messages) != 3 {
		t.Errorf("after the fault: %d messages listed, want 3 (%s)", len(list.Messages), mailtest.Text(res))
	}
	r.recover(c, mailtest.Bob, 2)
	c.Close()
	r.checkBaseline()
}

// The answer to one of check_inbox's STOREs is lost after Dovecot applied
// it (the connection resets): the one that marks the batch \Seen, and the
// one that carries the key's claim keyword (the same one, on a server where
// the gateway sets both in one STORE). The retry with the same key returns
// the messages the first call took, or names them as returned at least
// once; every message Dovecot shows as \Seen was returned, and none is
// returned twice as new.
func TestLostStoreAnswerInCheckInbox(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{})
	r := newRig(t, s)
	for i, tc := range []struct {
		name  string
		store func([]byte) bool
	}{
		{"the \\Seen store", line("STORE", `\SEEN`)},
		{"the claim keyword's store", line("STORE", "$MBXCLAIM")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := fmt.Sprintf("claim%d", i)
			deliver(t, s, mailtest.Alice, prefix, 4)
			c := r.client(mailtest.Alice)
			defer c.Close()
			fired := r.fimap.Arm(faultproxy.Fault{Match: tc.store, Action: faultproxy.LoseAnswer})
			key := fmt.Sprintf("batch-%d", time.Now().UnixNano())
			args := map[string]any{"limit": 10, "idempotency_key": key}
			first, _ := r.call(c, toolTimeout, "imap_check_inbox", args)
			select {
			case <-fired:
			default:
				t.Fatal("the fault did not fire")
			}
			returned := map[uint32]int{}
			if got, ok := decode[consumed](t, first); ok {
				// the lost answer may have been made up for inside the call
				for _, m := range got.Messages {
					returned[m.UID]++
				}
				t.Logf("first call: %d messages", len(got.Messages))
			} else {
				t.Logf("first call: %s", mailtest.Text(first))
			}
			retry, _ := r.call(c, toolTimeout, "imap_check_inbox", args)
			got, ok := decode[consumed](t, retry)
			if !ok {
				t.Fatalf("the retry with the key failed: %s", mailtest.Text(retry))
			}
			t.Logf("the retry: %d messages, repeated=%v, at_least_once=%v", len(got.Messages), got.Repeated, got.AtLeastOnce)
			if len(returned) == 0 {
				for _, m := range got.Messages {
					returned[m.UID]++
				}
			}
			// Nothing lost: everything Dovecot marked \Seen was returned;
			// what was not returned is still unread.
			for uid, isSeen := range seen(t, s, mailtest.Alice, "INBOX", prefix) {
				var u uint32
				fmt.Sscan(uid, &u)
				if isSeen && returned[u] == 0 {
					t.Errorf("UID %d is \\Seen at the server and was returned to nobody", u)
				}
			}
			// Nothing duplicated: the next call without a key takes nothing
			// the batch already returned, and the rest.
			next, _ := r.call(c, toolTimeout, "imap_check_inbox", map[string]any{"limit": 10})
			if more, ok := decode[consumed](t, next); ok {
				for _, m := range more.Messages {
					if returned[m.UID] > 0 {
						t.Errorf("UID %d returned again as new", m.UID)
					}
					returned[m.UID]++
				}
			}
			if len(returned) != 4 {
				t.Errorf("%d of 4 messages returned in all", len(returned))
			}
		})
	}
	c := r.client(mailtest.Alice)
	r.recover(c, mailtest.Bob, 1)
	c.Close()
	r.checkBaseline()
}

// Resets during SMTP's DATA (before the final dot) and right after it
// (once Postfix took the message), and silence after it, with and without
// an idempotency key:
// "nothing was sent" only when Postfix has nothing, "may have been sent"
// only when it has, the Sent copy flagged in the second case, no advice to
// try again there, a retry with the key never sends twice; counted in
// bob's INBOX and alice's Sent.
func TestSMTPResetsAroundTheDot(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{})
	r := newRig(t, s)
	c := r.client(mailtest.Alice)
	send := func(subject, key string) *mcp.CallToolResult {
		args := map[string]any{"to": []string{mailtest.Bob}, "subject": subject, "text": "fault " + subject}
		if key != "" {
			args["idempotency_key"] = key
		}
		res, _ := r.call(c, toolTimeout, "smtp_send_email", args)
		return res
	}
	dot := func(l []byte) bool { return string(l) == ".\r\n" }
	for _, tc := range []struct {
		name   string
		at     func([]byte) bool
		action faultproxy.Action
		// delivered: how many Postfix has after the fault
		delivered int
		says      string
	}{
		{"reset at DATA", line("DATA"), faultproxy.LoseAnswer, 0, "nothing was sent"},
		{"reset after the dot", dot, faultproxy.LoseAnswer, 1, "may have been sent"},
		{"silence after the dot", dot, faultproxy.StallAnswer, 1, "may have been sent"},
	} {
		for _, withKey := range []bool{false, true} {
			name := tc.name
			key := ""
			if withKey {
				name += ", with a key"
				key = fmt.Sprintf("key-%d", time.Now().UnixNano())
			}
			t.Run(name, func(t *testing.T) {
				subject := fmt.Sprintf("%s %d", name, time.Now().UnixNano())
				r.fsmtp.Arm(faultproxy.Fault{Match: tc.at, Action: tc.action})
				res := send(subject, key)
				text := mailtest.Text(res)
				if !res.IsError || !strings.Contains(text, tc.says) {
					t.Fatalf("%q, want an error saying %q", text, tc.says)
				}
				if tc.delivered == 1 && (strings.Contains(text, "try again") || strings.Contains(text, "nothing was sent")) {
					t.Errorf("%q advises trying again, or contradicts itself", text)
				}
				time.Sleep(300 * time.Millisecond) // a delivery on its way
				if n := count(t, s, mailtest.Bob, "INBOX", subject); n != tc.delivered {
					t.Fatalf("bob has %d, want %d: the answer %q is not true", n, tc.delivered, text)
				}
				sent := count(t, s, mailtest.Alice, "Sent", subject)
				if tc.delivered == 1 {
					if sent != 1 || !strings.Contains(text, "flagged for checking") {
						t.Errorf("%d Sent copies (want 1, flagged); %q", sent, text)
					}
				} else if sent != 0 {
					t.Errorf("%d Sent copies of a message that was not sent", sent)
				}
				// What the answer says to do: "nothing was sent" -> send
				// again; with a key, retry with it whatever was said.
				if tc.delivered == 0 || withKey {
					res := send(subject, key)
					if tc.delivered == 0 && res.IsError {
						t.Fatalf("sending again after nothing was sent: %s", mailtest.Text(res))
					}
					if tc.delivered == 1 && (!res.IsError || !strings.Contains(mailtest.Text(res), "answer was lost")) {
						t.Errorf("the retry with the key: %q, want what is known (the answer was lost)", mailtest.Text(res))
					}
				}
				time.Sleep(300 * time.Millisecond)
				if n := count(t, s, mailtest.Bob, "INBOX", subject); n != 1 {
					t.Errorf("bob has %d in the end, want exactly 1", n)
				}
			})
		}
	}
	r.recover(c, mailtest.Bob, 1)
	c.Close()
	r.checkBaseline()
}

// Random resets during mixed calls by two users (toxiproxy's reset_peer on
// a share of the connections to Dovecot and Postfix): every call ends by
// its limit; sends with a key, retried with it until the answer is known,
// are delivered exactly once (or once at most, flagged in Sent, when the
// answer said it may have been sent); check_inbox with a key leaves
// nothing \Seen unreturned; after the fault, no errors.
func TestRandomResetsDuringMixedCalls(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{})
	deliver(t, s, mailtest.Alice, "mixed", 12)
	r := newRig(t, s)
	for _, p := range []*toxiproxy.Proxy{r.imap, r.smtp} {
		for _, dir := range []string{"downstream", "upstream"} {
			if _, err := p.AddToxic("reset-"+dir, "reset_peer", dir, 0.3, toxiproxy.Attributes{"timeout": 150}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var (
		mu       sync.Mutex
		calls    int
		failed   int
		returned = map[uint32]int{}
		// what the last answer for each subject's send said: sent (1
		// delivery), unsure (at most 1), nothing (none)
		outcome = map[string]string{}
	)
	var wg sync.WaitGroup
	end := time.Now().Add(12 * time.Second)
	// Every 2 s every connection through the proxies is dropped
	// (toxiproxy closes them when a proxy is disabled): pooled connections
	// break in the middle of calls too.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(end) {
			time.Sleep(2 * time.Second)
			for _, p := range []*toxiproxy.Proxy{r.imap, r.smtp} {
				if err := p.Disable(); err != nil {
					t.Error(err)
				}
			}
			time.Sleep(100 * time.Millisecond)
			for _, p := range []*toxiproxy.Proxy{r.imap, r.smtp} {
				if err := p.Enable(); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	for w, user := range []string{mailtest.Alice, mailtest.Bob} {
		c := r.client(user)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 35))
			for i := 0; time.Now().Before(end); i++ {
				var res *mcp.CallToolResult
				switch op := rnd.IntN(4); {
				case op == 0:
					res, _ = r.call(c, toolTimeout, "imap_list_emails", map[string]any{"limit": 5})
				case op == 1:
					res, _ = r.call(c, toolTimeout, "imap_search_emails", map[string]any{"subject": "mixed"})
				case op == 2 && user == mailtest.Alice:
					// consume with a key, retried with it until it answers
					key := fmt.Sprintf("mixed-%d-%d", w, i)
					for try := 0; try < 5; try++ {
						res, _ = r.call(c, toolTimeout, "imap_check_inbox", map[string]any{"limit": 3, "idempotency_key": key})
						if got, ok := decode[consumed](t, res); ok {
							mu.Lock()
							for _, m := range got.Messages {
								returned[m.UID]++
							}
							mu.Unlock()
							break
						}
					}
				default:
					subject := fmt.Sprintf("mixed send %d-%d-%d", w, i, time.Now().UnixNano())
					key := "k-" + subject
					got := "nothing"
					for try := 0; try < 5 && got == "nothing"; try++ {
						res, _ = r.call(c, toolTimeout, "smtp_send_email", map[string]any{"to": []string{mailtest.Bob}, "subject": subject, "text": "x", "idempotency_key": key})
						switch text := mailtest.Text(res); {
						case !res.IsError:
							got = "sent"
						case strings.Contains(text, "answer was lost"), strings.Contains(text, "may have been sent"),
							strings.Contains(text, "may or may not have been delivered"), strings.Contains(text, "has not recorded its outcome"):
							got = "unsure"
						case !strings.Contains(text, "nothing was sent") && !strings.Contains(text, "sent nothing"):
							t.Errorf("a send's answer says neither that nothing was sent nor that it may have been: %q", text)
						}
					}
					mu.Lock()
					outcome[subject] = got
					mu.Unlock()
				}
				mu.Lock()
				calls++
				if res != nil && res.IsError {
					failed++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("during the resets: %d calls, %d ended in an error", calls, failed)
	if err := r.tox.ResetState(); err != nil {
		t.Fatal(err)
	}
	// Sends: exactly once when the answer said sent, never when it said
	// nothing was sent, at most once where it could not know.
	time.Sleep(500 * time.Millisecond)
	tally := map[string]int{}
	for subject, got := range outcome {
		tally[got]++
		n := count(t, s, mailtest.Bob, "INBOX", subject)
		switch {
		case got == "sent" && n != 1, got == "nothing" && n != 0, got == "unsure" && n > 1:
			t.Errorf("%q: the answers said %s, and bob has %d", subject, got, n)
		}
	}
	t.Logf("sends: %v", tally)
	// Consumed: nothing \Seen unreturned, nothing returned twice as new.
	for uid, isSeen := range seen(t, s, mailtest.Alice, "INBOX", "mixed") {
		var u uint32
		fmt.Sscan(uid, &u)
		if isSeen && returned[u] == 0 {
			t.Errorf("UID %d is \\Seen at the server and was returned to nobody", u)
		}
	}
	c := r.client(mailtest.Alice)
	r.recover(c, mailtest.Bob, 3)
	c.Close()
	r.checkBaseline()
}

// A slow drip (toxiproxy's bandwidth and latency toxics on the way back
// from Dovecot): a read that cannot finish in time ends by its limit, a
// small one still succeeds, and after the fault everything works.
func TestSlowDrip(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{})
	big := "Subject: big drip\r\nFrom: sender@example.test\r\nTo: " + mailtest.Alice + "\r\n\r\n" + strings.Repeat(strings.Repeat("y", 76)+"\r\n", 4000)
	if err := s.Deliver("sender@example.test", []string{mailtest.Alice}, []byte(big)); err != nil {
		t.Fatal(err)
	}
	deliver(t, s, mailtest.Alice, "small drip", 1)
	for count(t, s, mailtest.Alice, "INBOX", "big drip") == 0 {
		time.Sleep(50 * time.Millisecond)
	}
	r := newRig(t, s)
	c := r.client(mailtest.Alice)
	res, _ := r.call(c, toolTimeout, "imap_search_emails", map[string]any{"subject": "big drip"})
	var found struct {
		Messages []struct {
			UID uint32 `json:"uid"`
		} `json:"messages"`
	}
	mailtest.Decode(t, res, &found)
	if len(found.Messages) != 1 {
		t.Fatalf("%d big messages", len(found.Messages))
	}
	uid := found.Messages[0].UID
	if _, err := r.imap.AddToxic("drip", "bandwidth", "downstream", 1, toxiproxy.Attributes{"rate": 8}); err != nil { // 8 KB/s
		t.Fatal(err)
	}
	if _, err := r.imap.AddToxic("lag", "latency", "downstream", 1, toxiproxy.Attributes{"latency": 100, "jitter": 50}); err != nil {
		t.Fatal(err)
	}
	res, took := r.call(c, toolTimeout, "imap_read_email", map[string]any{"uid": uid, "max_chars": 1000000})
	if !res.IsError {
		t.Errorf("a 300 KB read at 8 KB/s finished in %v", took)
	} else {
		t.Logf("slow drip: the 300 KB read ended after %v: %s", took.Round(time.Millisecond), mailtest.Text(res))
	}
	res, took = r.call(c, toolTimeout, "imap_list_folders", nil)
	if res.IsError {
		t.Errorf("a small call during the drip failed after %v: %s", took, mailtest.Text(res))
	}
	r.recover(c, mailtest.Bob, 1)
	res, _ = r.call(c, toolTimeout, "imap_read_email", map[string]any{"uid": uid, "max_chars": 1000000})
	if res.IsError {
		t.Errorf("the big read after the drip: %s", mailtest.Text(res))
	}
	c.Close()
	r.checkBaseline()
}

// Waits across a Dovecot restart, and Dovecot restarted under load: a wait
// ends by its own timeout (plus 2 s); the message that arrives while
// Dovecot restarts is returned by the wait or by the next one with the
// cursor, never lost; calls during the restart end by their limit, and
// after it none fails; consumers with keys leave nothing \Seen unreturned.
func TestDovecotRestart(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{})
	deliver(t, s, mailtest.Alice, "load", 10)
	r := newRig(t, s)
	waiter := r.client(mailtest.Bob)

	// A wait across the restart.
	const waitS = 8
	type waited struct {
		Messages []struct {
			Subject string `json:"subject"`
		} `json:"messages"`
		NextSinceUID uint32 `json:"next_since_uid"`
		TimedOut     bool   `json:"timed_out"`
	}
	// The cursor comes from a peek, as an agent's loop does; bob's INBOX
	// is not empty, so that it is one on main as well.
	deliver(t, s, mailtest.Bob, "before restart", 1)
	var peeked struct {
		NextSinceUID uint32 `json:"next_since_uid"`
	}
	res, _ := r.call(waiter, toolTimeout, "imap_peek_inbox", nil)
	mailtest.Decode(t, res, &peeked)
	cursor := peeked.NextSinceUID
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := r.call(waiter, waitS*time.Second, "imap_wait_for_email", map[string]any{"timeout_s": waitS, "since_uid": cursor})
		done <- res
	}()
	time.Sleep(time.Second)
	if err := s.RestartDovecot(); err != nil {
		t.Fatal(err)
	}
	deliver(t, s, mailtest.Bob, "after restart", 1)
	res = <-done
	got, ok := decode[waited](t, res)
	if !ok || len(got.Messages) == 0 {
		t.Logf("the wait across the restart: %s", mailtest.Text(res))
		// Not returned by this wait: the next one with the cursor (the
		// one it returned, or the one it was given) must.
		if ok && got.NextSinceUID > 0 {
			cursor = got.NextSinceUID
		}
		res, _ = r.call(waiter, 3*time.Second, "imap_wait_for_email", map[string]any{"timeout_s": 3, "since_uid": cursor})
		got, ok = decode[waited](t, res)
	}
	if !ok || !slices.ContainsFunc(got.Messages, func(m struct {
		Subject string `json:"subject"`
	}) bool {
		return strings.Contains(m.Subject, "after restart")
	}) {
		t.Errorf("the message that arrived during the restart was not returned: %s", mailtest.Text(res))
	}

	// Restart under load: two readers and a consumer with keys.
	var (
		mu       sync.Mutex
		returned = map[uint32]int{}
		calls    int
	)
	end := time.Now().Add(6 * time.Second)
	var wg sync.WaitGroup
	for w, user := range []string{mailtest.Alice, mailtest.Bob, mailtest.Alice} {
		c := r.client(user)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				if w == 2 {
					key := fmt.Sprintf("load-%d", i)
					for try := 0; try < 6; try++ {
						res, _ := r.call(c, toolTimeout, "imap_check_inbox", map[string]any{"limit": 2, "idempotency_key": key})
						if got, ok := decode[consumed](t, res); ok {
							mu.Lock()
							for _, m := range got.Messages {
								returned[m.UID]++
							}
							mu.Unlock()
							break
						}
						time.Sleep(200 * time.Millisecond)
					}
				} else {
					r.call(c, toolTimeout, "imap_list_emails", map[string]any{"limit": 5})
				}
				mu.Lock()
				calls++
				mu.Unlock()
			}
		}()
	}
	time.Sleep(2 * time.Second)
	if err := s.RestartDovecot(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("under load: %d calls across the restart", calls)
	for uid, isSeen := range seen(t, s, mailtest.Alice, "INBOX", "load") {
		var u uint32
		fmt.Sscan(uid, &u)
		if isSeen && returned[u] == 0 {
			t.Errorf("UID %d is \\Seen at the server and was returned to nobody", u)
		}
	}
	c := r.client(mailtest.Alice)
	r.recover(c, mailtest.Bob, 3)
	c.Close()
	waiter.Close()
	r.checkBaseline()
}

// A wait on a server that goes silent while it waits (toxiproxy's timeout
// toxic: nothing passes, the connection stays open): the wait ends by its
// own timeout plus 2 s, not by the call's larger limit, and the next call
// works once the server speaks again.
func TestWaitOnASilentServer(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{})
	r := newRig(t, s)
	c := r.client(mailtest.Alice)
	const waitS = 6
	done := make(chan time.Duration, 1)
	go func() {
		_, took := r.call(c, waitS*time.Second, "imap_wait_for_email", map[string]any{"timeout_s": waitS})
		done <- took
	}()
	time.Sleep(time.Second) // the wait is in IDLE
	for _, dir := range []string{"downstream", "upstream"} {
		if _, err := r.imap.AddToxic("silence-"+dir, "timeout", dir, 1, toxiproxy.Attributes{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
	}
	took := <-done
	t.Logf("a %d s wait on a silent server ended after %v", waitS, took.Round(time.Millisecond))
	r.recover(c, mailtest.Bob, 1)
	c.Close()
	r.checkBaseline()
}

// Flapping logins: the server refuses bob's right password now and then
// (the password changes and changes back); alice, behind the same client
// address, is never held back, and bob works again once it stops.
func TestFlappingLogins(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{})
	r := newRig(t, s, "LOGIN_BACKOFF_FAILURES=5", "LOGIN_BACKOFF_FAILURES_PER_ADDRESS=3", "LOGIN_BACKOFF_DELAY=60s")
	alice := r.client(mailtest.Alice)
	bob := r.client(mailtest.Bob)
	refused := 0
	for i := range 4 {
		if err := s.SetPassword(mailtest.Bob, "flapped"); err != nil {
			t.Fatal(err)
		}
		if err := s.Kick(mailtest.Bob); err != nil {
			t.Fatal(err)
		}
		if res, _ := r.call(bob, toolTimeout, "imap_list_folders", nil); res.IsError && strings.Contains(mailtest.Text(res), "authentication failed") {
			refused++
		} else {
			t.Errorf("cycle %d: %s, want the server's refusal", i, mailtest.Text(res))
		}
		if err := s.SetPassword(mailtest.Bob, mailtest.BobPassword); err != nil {
			t.Fatal(err)
		}
		if res, _ := r.call(bob, toolTimeout, "imap_list_folders", nil); res.IsError {
			t.Errorf("cycle %d: bob's right password, accepted again: %s", i, mailtest.Text(res))
		}
		if res, _ := r.call(alice, toolTimeout, "smtp_send_email", map[string]any{"to": []string{mailtest.Alice}, "subject": "flap " + itoa(i), "text": "x"}); res.IsError {
			t.Errorf("cycle %d: alice behind the same address: %s", i, mailtest.Text(res))
		}
	}
	if refused != 4 {
		t.Errorf("%d refusals reached the gateway, want 4", refused)
	}
	r.recover(bob, mailtest.Alice, 1)
	alice.Close()
	bob.Close()
	r.checkBaseline()
}
