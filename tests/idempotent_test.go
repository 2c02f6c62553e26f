package tests

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// countMessageID counts the messages of user's folder whose Message-ID is
// id, waiting until at least one is there and then settle longer, so that
// a second delivery on its way is counted too.
func countMessageID(t *testing.T, s *mailtest.Stack, user, folder, id string, settle time.Duration) int {
	t.Helper()
	c := direct(t, s, user)
	if _, err := c.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	search := func() int {
		c.Noop().Wait()
		d, err := c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: id}}}, nil).Wait()
		if err != nil {
			t.Fatal(err)
		}
		return len(d.AllUIDs())
	}
	for deadline := time.Now().Add(15 * time.Second); search() == 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(settle)
	return search()
}

func sendResult(t *testing.T, res *mcp.CallToolResult) tools.SendResult {
	t.Helper()
	var out tools.SendResult
	mailtest.Decode(t, res, &out)
	return out
}

// The same idempotency_key twice sends once, for every sending tool; the
// second call returns the first message with duplicate=true. Other users'
// keys never collide. Without a Sent folder a key is refused.
func TestIdempotentSend(t *testing.T) {
	s := sendStack(t)
	g := startGateway(t, s, smtpEnv(s, "MAILBOX_ACCESS=organize")...)
	ac := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")
	bc := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	d := direct(t, s, alice)
	key := func(name string) string { return fmt.Sprintf("%s-%d", name, time.Now().UnixNano()) }

	twice := func(t *testing.T, tool string, args map[string]any, rcpt string) tools.SendResult {
		t.Helper()
		first := sendResult(t, mailtest.Call(t, ac, tool, args))
		second := sendResult(t, mailtest.Call(t, ac, tool, args))
		if first.Duplicate || !second.Duplicate || second.MessageID != first.MessageID || second.Subject != first.Subject || !second.Date.Equal(first.Date) {
			t.Fatalf("first %+v\nsecond %+v", first, second)
		}
		if n := countMessageID(t, s, rcpt, "INBOX", first.MessageID, time.Second); n != 1 {
			t.Fatalf("%d messages delivered to %s, want 1", n, rcpt)
		}
		if n := countMessageID(t, s, alice, "Sent", first.MessageID, 0); n != 1 {
			t.Fatalf("%d Sent copies, want 1", n)
		}
		sc := findByMessageID(t, d, "Sent", first.MessageID)
		if containsFlag(sc.flags, "$MailboxMcpSending") || !sc.has(imap.FlagSeen) {
			t.Errorf("Sent copy flags %v", sc.flags)
		}
		return first
	}

	t.Run("send", func(t *testing.T) {
		k := key("send")
		first := twice(t, "smtp_send_email", map[string]any{"to": []any{bob}, "subject": "once " + k, "text": "x", "idempotency_key": k}, bob)
		// The same key with other arguments still sends nothing.
		again := sendResult(t, mailtest.Call(t, ac, "smtp_send_email", map[string]any{"to": []any{carol}, "subject": "other", "text": "y", "idempotency_key": k}))
		if !again.Duplicate || again.MessageID != first.MessageID {
			t.Fatalf("same key, other arguments: %+v", again)
		}
		// Bob's same key is his own.
		theirs := sendResult(t, mailtest.Call(t, bc, "smtp_send_email", map[string]any{"to": []any{alice}, "subject": "bob's", "text": "x", "idempotency_key": k}))
		if theirs.Duplicate || theirs.MessageID == first.MessageID {
			t.Fatalf("another user's key collided: %+v", theirs)
		}
	})

	t.Run("reply", func(t *testing.T) {
		uid := appendTo(t, d, "INBOX", "From: "+carol+"\r\nTo: "+alice+"\r\nSubject: Frage\r\nMessage-ID: <idem-q-1@example.test>\r\n\r\n?\r\n")
		k := key("reply")
		r := twice(t, "smtp_reply_email", map[string]any{"uid": int(uid), "text": "Antwort", "idempotency_key": k}, carol)
		if r.Original == nil || !r.Original.Answered {
			t.Errorf("original: %+v", r.Original)
		}
	})

	t.Run("forward", func(t *testing.T) {
		uid := appendTo(t, d, "INBOX", "From: "+carol+"\r\nTo: "+alice+"\r\nSubject: Info\r\nMessage-ID: <idem-f-1@example.test>\r\n\r\ninfo\r\n")
		k := key("forward")
		twice(t, "smtp_forward_email", map[string]any{"uid": int(uid), "to": []any{bob}, "idempotency_key": k}, bob)
	})

	t.Run("send_draft: the retry is answered though the draft is gone", func(t *testing.T) {
		var saved outbox.SavedDraft
		mailtest.Decode(t, mailtest.Call(t, ac, "imap_save_draft", map[string]any{"to": []any{bob}, "subject": "draft once", "text": "x"}), &saved)
		k := key("draft")
		first := twice(t, "smtp_send_draft", map[string]any{"uid": int(saved.UID), "idempotency_key": k}, bob)
		if first.Draft == nil || !first.Draft.Removed {
			t.Errorf("draft: %+v", first.Draft)
		}
	})

	t.Run("a bad key is refused", func(t *testing.T) {
		for _, k := range []string{strings.Repeat("k", 201), "tab\there", "umlaut-ä"} {
			res := mailtest.Call(t, ac, "smtp_send_email", map[string]any{"to": []any{bob}, "subject": "x", "text": "x", "idempotency_key": k})
			if !res.IsError || !strings.Contains(mailtest.Text(res), "idempotency_key") {
				t.Errorf("key %q: %s", k, mailtest.Text(res))
			}
		}
	})

	t.Run("SENT_FOLDER=none: a key is refused, nothing sent", func(t *testing.T) {
		g2 := startGateway(t, s, smtpEnv(s, "SENT_FOLDER=none")...)
		c := mailtest.MCPClient(t, g2.URL, userHeaders(s, alice), "")
		before := count(t, s, bob, "INBOX")
		res := mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{bob}, "subject": "x", "text": "x", "idempotency_key": key("none")})
		if txt := mailtest.Text(res); !res.IsError || !strings.Contains(txt, "SENT_FOLDER=none") || !strings.Contains(txt, "nothing was sent") {
			t.Fatalf("%s", txt)
		}
		time.Sleep(500 * time.Millisecond)
		if after := count(t, s, bob, "INBOX"); after != before {
			t.Errorf("bob's INBOX went from %d to %d", before, after)
		}
	})
}

func containsFlag(fs []imap.Flag, f string) bool {
	for _, x := range fs {
		if strings.EqualFold(string(x), f) {
			return true
		}
	}
	return false
}

// served is a gateway running as a process of its own.
type served struct {
	URL string // of /mcp
	PID int
}

// serveProcess runs `mailbox-mcp serve` as its own process on a free
// port until the test ends, and returns it once /health answers.
func serveProcess(t *testing.T, bin string, s *mailtest.Stack, key string, env ...string) served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"IMAP_HOST=127.0.0.1", "IMAP_PORT=" + strconv.Itoa(s.IMAPSPort), "MAIL_CA_FILE=" + s.CAFile,
		"ENCRYPTION_KEY=" + key, "BIND_ADDRESS=127.0.0.1", "PORT=" + strconv.Itoa(port), "LOG_LEVEL=warn",
	}, env...)
	logs := &mailtest.LogBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			l := logs.String()
			t.Logf("gateway on port %d, log (last 4 KB):\n%s", port, l[max(0, len(l)-4000):])
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(15 * time.Second); health(base) != nil; {
		select {
		case <-done:
			t.Fatalf("gateway exited:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway not ready:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return served{URL: base + "/mcp", PID: cmd.Process.Pid}
}

// The same idempotency_key from two gateway processes at the same moment
// (same ENCRYPTION_KEY, separate pools and SMTP sessions): exactly one
// message is delivered and one Sent copy kept, every round; the other call
// returns the same Message-ID as a duplicate, or says the send is under
// way.
func TestIdempotentAcrossProcesses(t *testing.T) {
	s := sendStack(t)
	bin := buildCLI(t)
	key, _ := credentials.NewKey()
	env := smtpEnv(s)
	urls := []string{serveProcess(t, bin, s, key, env...).URL, serveProcess(t, bin, s, key, env...).URL}
	cs := [2]*client.Client{}
	for i, u := range urls {
		cs[i] = mailtest.MCPClient(t, u, userHeaders(s, alice), "")
	}
	const rounds = 10
	sentCopiesBefore := count(t, s, alice, "Sent")
	for round := range rounds {
		k := fmt.Sprintf("two-processes-%d-%d", time.Now().UnixNano(), round)
		args := map[string]any{"to": []any{bob}, "subject": "race " + k, "text": "exactly once", "idempotency_key": k}
		var wg sync.WaitGroup
		start := make(chan struct{})
		results := [2]*mcp.CallToolResult{}
		errs := [2]error{}
		for i := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = mailtest.CallErr(cs[i], "smtp_send_email", args)
			}()
		}
		close(start)
		wg.Wait()
		var id string
		sent, duplicates, underWay := 0, 0, 0
		for i := range cs {
			if errs[i] != nil {
				t.Fatalf("round %d, process %d: %v", round, i, errs[i])
			}
			if results[i].IsError {
				if txt := mailtest.Text(results[i]); strings.Contains(txt, "under way") {
					underWay++
					continue
				}
				t.Fatalf("round %d, process %d: %s", round, i, mailtest.Text(results[i]))
			}
			r := sendResult(t, results[i])
			if r.Duplicate {
				duplicates++
			} else {
				sent++
			}
			if id != "" && r.MessageID != id {
				t.Fatalf("round %d: Message-IDs differ: %s, %s", round, id, r.MessageID)
			}
			id = r.MessageID
		}
		if sent != 1 || duplicates+underWay != 1 {
			t.Fatalf("round %d: %d sent, %d duplicates, %d under way; want exactly one sent", round, sent, duplicates, underWay)
		}
		if n := countMessageID(t, s, bob, "INBOX", id, 700*time.Millisecond); n != 1 {
			t.Fatalf("round %d: %d messages delivered with Message-ID %s, want 1", round, n, id)
		}
		if n := countMessageID(t, s, alice, "Sent", id, 0); n != 1 {
			t.Fatalf("round %d: %d Sent copies, want 1", round, n)
		}
		t.Logf("round %d: one sent, %d duplicate, %d under way", round, duplicates, underWay)
	}
	if after := count(t, s, alice, "Sent"); after != sentCopiesBefore+rounds {
		t.Errorf("alice's Sent went from %d to %d messages, want +%d", sentCopiesBefore, after, rounds)
	}
}
