package tests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/rttproxy"
)

// The round trips each tool costs between the gateway and the mail
// servers, counted by a proxy that holds every chunk for half a round trip
// each way (internal/rttproxy: a round trip is a TCP connection or a
// flight of the client's bytes sent after the server answered). With 8 ms
// each way the count does not depend on scheduling: a pipelined burst
// leaves long before an answer to its first command could arrive.
const rtRTT = 16 * time.Millisecond

// rtProxy puts a proxy with rtRTT in front of addr for the test.
func rtProxy(t *testing.T, addr string) *rttproxy.Proxy {
	t.Helper()
	p, err := rttproxy.Start(addr, rtRTT)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// rtMessage is one seeded message.
func rtMessage(user, id, from, subject, extra, body string) string {
	return "From: " + from + "\r\nTo: " + user + "\r\nSubject: " + subject +
		"\r\nDate: Mon, 02 Mar 2026 10:00:00 +0000\r\nMessage-ID: <" + id + ">\r\n" + extra +
		"MIME-Version: 1.0\r\n" + body
}

// rtSeed fills user's INBOX over a direct connection (not counted): UID 1
// starts a conversation that UID 2 answers, UID 3 has an attachment (part
// 2), UIDs 4-9 are more unread mail; and makes the folder Archive.
func rtSeed(t *testing.T, s *mailtest.Stack, user string) {
	t.Helper()
	c := direct(t, s, user)
	plain := "Content-Type: text/plain; charset=utf-8\r\n\r\nHello, this is a short message.\r\n"
	msgs := []string{
		rtMessage(user, "t1."+user, "Carol <carol@example.test>", "Plans", "", plain),
		rtMessage(user, "t2."+user, "Bob <bob@example.test>", "Re: Plans", "In-Reply-To: <t1."+user+">\r\nReferences: <t1."+user+">\r\n", plain),
		rtMessage(user, "a."+user, "Carol <carol@example.test>", "Report", "",
			"Content-Type: multipart/mixed; boundary=b1\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\nSee the file.\r\n"+
				"--b1\r\nContent-Type: text/plain; name=report.txt\r\nContent-Disposition: attachment; filename=report.txt\r\n\r\n"+
				strings.Repeat("report line\r\n", 20)+"--b1--\r\n"),
	}
	for i := 4; i <= 9; i++ {
		msgs = append(msgs, rtMessage(user, "m"+strconv.Itoa(i)+"."+user, "Dave <dave@example.test>", "Note "+strconv.Itoa(i), "", plain))
	}
	for _, m := range msgs {
		cmd := c.Append("INBOX", int64(len(m)), nil)
		cmd.Write([]byte(m))
		cmd.Close()
		if _, err := cmd.Wait(); err != nil {
			t.Fatalf("APPEND for %s: %v", user, err)
		}
	}
	if err := c.Create("Archive", nil).Wait(); err != nil {
		t.Fatalf("CREATE Archive for %s: %v", user, err)
	}
}

// rtCall is one tool call of the table, with arguments for the first
// (cold) call and the second (warm) one, and the most round trips each may
// take: IMAP, and SMTP for a send. A change that adds one fails here; one
// that saves one lowers the figure (and docs/benchmarks.md's table).
type rtCall struct {
	tool       string
	cold, warm map[string]any
	// coldMax, warmMax: IMAP round trips; coldSMTP, warmSMTP: SMTP ones.
	coldMax, warmMax   int
	coldSMTP, warmSMTP int
}

// rtCalls is the table. A cold call (the user's first: no pooled
// connection) pays the TCP connection and the TLS handshake (2) before its
// LOGIN, which carries the EXAMINE and, where the host's capabilities are
// known, the operation's first commands in the same flight.
func rtCalls() []rtCall {
	same := func(tool string, args map[string]any, cold, warm int) rtCall {
		return rtCall{tool: tool, cold: args, warm: args, coldMax: cold, warmMax: warm}
	}
	send := map[string]any{"to": []string{mailtest.Bob}, "subject": "Round trips", "text": "Counted."}
	return []rtCall{
		same("imap_list_emails", map[string]any{"limit": 5}, 4, 1),
		same("imap_search_emails", map[string]any{"from": "carol"}, 5, 2),
		same("imap_read_email", map[string]any{"uid": 1}, 3, 1),
		same("imap_list_folders", nil, 3, 1),
		same("imap_get_thread", map[string]any{"uid": 2}, 6, 3),
		same("imap_peek_inbox", nil, 5, 2),
		same("imap_check_inbox", map[string]any{"limit": 1}, 6, 3),
		same("imap_get_attachment", map[string]any{"uid": 3, "part_id": "2"}, 3, 1),
		{tool: "imap_set_flags", cold: map[string]any{"uids": []int{1}, "add": []string{"flagged"}}, warm: map[string]any{"uids": []int{2}, "add": []string{"flagged"}}, coldMax: 4, warmMax: 2},
		{tool: "imap_move_emails", cold: map[string]any{"uids": []int{8}, "to_folder": "Archive"}, warm: map[string]any{"uids": []int{9}, "to_folder": "Archive"}, coldMax: 4, warmMax: 2},
		{tool: "smtp_send_email", cold: send, warm: send, coldMax: 5, warmMax: 1, coldSMTP: 8, warmSMTP: 8},
	}
}

// rtCount is what one call cost.
type rtCount struct {
	imap, smtp rttproxy.Counts
}

func (c rtCount) String() string {
	s := strconv.Itoa(c.imap.RoundTrips)
	if c.smtp.RoundTrips > 0 {
		s = fmt.Sprintf("%d smtp + %d imap", c.smtp.RoundTrips, c.imap.RoundTrips)
	}
	return s
}

// measure calls tool and returns what crossed the proxies.
func measure(t *testing.T, imapP, smtpP *rttproxy.Proxy, c *client.Client, tool string, args map[string]any) rtCount {
	t.Helper()
	imapP.Reset()
	if smtpP != nil {
		smtpP.Reset()
	}
	res := mailtest.Call(t, c, tool, args)
	if res.IsError {
		t.Fatalf("%s: %s", tool, mailtest.Text(res))
	}
	out := rtCount{imap: imapP.Counts()}
	if smtpP != nil {
		out.smtp = smtpP.Counts()
	}
	return out
}

// TestRoundTrips pins each tool's round trips to Dovecot and Postfix on a
// user's first call and on a warm pooled connection (issue 27).
func TestRoundTrips(t *testing.T) {
	calls := rtCalls()
	users := map[string]string{}
	for i := range calls {
		users["rt"+strconv.Itoa(i)+"@example.test"] = "rtpw" + strconv.Itoa(i)
	}
	s := mailtest.StartT(t, mailtest.Options{Users: users})
	imapP := rtProxy(t, s.IMAPSAddr())
	smtpP := rtProxy(t, s.SubmissionsAddr())
	g := startGatewayEnv(t, "IMAP_HOST=127.0.0.1", "IMAP_PORT="+strconv.Itoa(imapP.Port()), "MAIL_CA_FILE="+s.CAFile,
		"SMTP_HOST=127.0.0.1", "SMTP_PORT="+strconv.Itoa(smtpP.Port()), "SMTP_SECURITY=tls", "POOL_REVALIDATE=1h", "MAILBOX_ACCESS=organize")

	// The gateway's first call learns the server (its capabilities and
	// namespace): not what a user's cold call costs afterwards.
	first := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": mailtest.Alice, "x-imap-pass": mailtest.AlicePassword}, "")
	measure(t, imapP, nil, first, "imap_list_folders", nil)

	var b strings.Builder
	fmt.Fprintf(&b, "round trips per tool call (IMAPS, SMTPS, password; in brackets the most allowed: SMTP/IMAP)\n%-22s %26s %26s\n", "tool", "cold", "warm")
	for i, call := range calls {
		user := "rt" + strconv.Itoa(i) + "@example.test"
		rtSeed(t, s, user)
		c := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": user, "x-imap-pass": users[user]}, "")
		var sp *rttproxy.Proxy
		if strings.HasPrefix(call.tool, "smtp_") {
			sp = smtpP
		}
		cold := measure(t, imapP, sp, c, call.tool, call.cold)
		warm := measure(t, imapP, sp, c, call.tool, call.warm)
		fmt.Fprintf(&b, "%-22s %18s [%d/%d] %18s [%d/%d]\n", call.tool, cold, call.coldSMTP, call.coldMax, warm, call.warmSMTP, call.warmMax)
		check := func(when string, got rtCount, imapMax, smtpMax int) {
			if got.imap.RoundTrips > imapMax || got.smtp.RoundTrips > smtpMax {
				t.Errorf("%s, %s call: %d IMAP and %d SMTP round trips, at most %d and %d allowed", call.tool, when, got.imap.RoundTrips, got.smtp.RoundTrips, imapMax, smtpMax)
			}
		}
		check("cold", cold, call.coldMax, call.coldSMTP)
		check("warm", warm, call.warmMax, call.warmSMTP)
	}
	t.Log(b.String())
}
