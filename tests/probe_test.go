package tests

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// The hostile-input probe's safe results, kept as regression tests: what
// held when the gateway was attacked must go on holding.

// imapInjections try to end the gateway's IMAP command and start one of
// their own (a CREATE the test then looks for), or to smuggle a literal.
var imapInjections = []string{
	"INBOX\r\nA999 CREATE pwned1",
	"x\"\r\nA999 CREATE pwned2",
	"{17}\r\nA999 CREATE pwned3",
	"x\x00A999 CREATE pwned4",
	"x\nA999 CREATE pwned5",
	"INBOX\" \"pwned6",
	"\\\") CREATE pwned7",
}

// mailboxState is what an injected command could change: the folder names
// and every folder's message count and flags.
func mailboxState(t *testing.T, c *imapclient.Client) string {
	t.Helper()
	list, err := c.List("", "*", &imap.ListOptions{ReturnStatus: &imap.StatusOptions{NumMessages: true, NumUnseen: true}}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range list {
		n, u := uint32(0), uint32(0)
		if l.Status != nil && l.Status.NumMessages != nil {
			n, u = *l.Status.NumMessages, *l.Status.NumUnseen
		}
		lines = append(lines, fmt.Sprintf("%s %d %d", l.Mailbox, n, u))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// CRLF, NUL and literal injection in every string argument of every IMAP
// tool: each call is refused with a sentence or answered harmlessly, and
// the mailbox is exactly as before (no folder created, no count or unread
// count changed).
func TestInjectionInEveryStringArgument(t *testing.T) {
	s := mailtest.Shared(t)
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, mailtest.Alice), "")
	d := direct(t, s, mailtest.Alice)
	uid := deliverOne(t, s, mailtest.Alice, "probe target "+strconv.FormatInt(int64(len(imapInjections)), 10))
	before := mailboxState(t, d)

	tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, tool := range tools.Tools {
		if !strings.HasPrefix(tool.Name, "imap_") {
			continue
		}
		var in struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		}
		raw, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(raw, &in); err != nil {
			t.Fatal(err)
		}
		for arg, p := range in.Properties {
			if p.Type != "string" || arg == "credentials" || arg == "password" || arg == "user" {
				continue
			}
			for _, payload := range imapInjections {
				args := map[string]any{arg: payload}
				switch tool.Name {
				case "imap_read_email":
					args["uid"] = uid
				case "imap_search_emails":
					if arg != "text" {
						args["text"] = "x"
					}
				case "imap_check_inbox":
					if arg == "idempotency_key" {
						// any printable key is a key: with a filter
						// that matches nothing, the call takes nothing
						args["from"] = "no-such-sender.invalid"
					}
				}
				res := mailtest.Call(t, c, tool.Name, args)
				calls++
				if res.IsError && (strings.Contains(mailtest.Text(res), "internal error") || strings.TrimSpace(mailtest.Text(res)) == "") {
					t.Errorf("%s(%s=%q): unclear error %q", tool.Name, arg, payload, mailtest.Text(res))
				}
			}
		}
	}
	if calls < 30 {
		t.Fatalf("only %d injected calls: the test proves little", calls)
	}
	t.Logf("%d injected calls", calls)
	if after := mailboxState(t, d); after != before {
		t.Fatalf("the mailbox changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	list, err := d.List("", "pwned*", nil).Collect()
	if err != nil || len(list) > 0 {
		t.Fatalf("an injected CREATE ran: %v %v", list, err)
	}
}

// SMTP header injection through every header-like argument of the sending
// tools: refused, and nothing arrives anywhere.
func TestSMTPHeaderInjectionEveryField(t *testing.T) {
	s := mailtest.Shared(t)
	g := startGateway(t, s, smtpEnv(s)...)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, mailtest.Alice), "")
	uid := deliverOne(t, s, mailtest.Alice, "probe reply target")
	bobBefore, _ := s.MessageCount(mailtest.Bob, "INBOX")
	evil := "\r\nBcc: " + mailtest.Bob
	base := func() map[string]any {
		return map[string]any{"to": []any{"nobody@example.test"}, "subject": "probe", "text": "x"}
	}
	cases := []struct {
		tool string
		args map[string]any
	}{}
	for _, field := range []string{"subject", "from"} {
		a := base()
		a[field] = mailtest.Alice + evil
		cases = append(cases, struct {
			tool string
			args map[string]any
		}{"smtp_send_email", a})
	}
	for _, field := range []string{"to", "cc", "bcc", "reply_to"} {
		a := base()
		a[field] = []any{"x@example.test" + evil}
		cases = append(cases, struct {
			tool string
			args map[string]any
		}{"smtp_send_email", a})
	}
	for _, field := range []string{"filename", "content_type"} {
		a := base()
		att := map[string]any{"filename": "a.txt", "content_type": "text/plain", "content_base64": "eA=="}
		att[field] = "a" + evil
		a["attachments"] = []any{att}
		cases = append(cases, struct {
			tool string
			args map[string]any
		}{"smtp_send_email", a})
	}
	for _, field := range []string{"from", "cc", "bcc"} {
		a := map[string]any{"uid": uid, "text": "x"}
		if field == "from" {
			a[field] = mailtest.Alice + evil
		} else {
			a[field] = []any{"x@example.test" + evil}
		}
		cases = append(cases, struct {
			tool string
			args map[string]any
		}{"smtp_reply_email", a})
	}
	for _, tc := range cases {
		res := mailtest.Call(t, c, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(mailtest.Text(res), "line break") {
			t.Errorf("%s(%v): isError=%v %q, want a refusal naming the line break", tc.tool, tc.args, res.IsError, mailtest.Text(res))
		}
	}
	if strings.Contains(g.Logs.String(), "message submitted") {
		t.Fatal("a message was submitted")
	}
	if after, _ := s.MessageCount(mailtest.Bob, "INBOX"); after != bobBefore {
		t.Fatalf("bob's INBOX went from %d to %d", bobBefore, after)
	}
}

// Hostile structures: a message nested 1,000 multiparts deep, one with a
// 1 MB header, one with a 50 MB attachment; and arguments nested 1,000
// levels deep. Each is answered (or refused) cleanly, the gateway keeps
// serving, and reading the 50 MB message neither moves nor holds the
// attachment.
func TestHostileStructures(t *testing.T) {
	s := mailtest.Shared(t)
	proxy := startCapProxy(t, s.IMAPAddr())
	g := startGateway(t, s, "IMAP_PORT="+strconv.Itoa(proxy.port()), "IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true", "MAIL_CA_FILE=")
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, mailtest.Alice), "")
	d := direct(t, s, mailtest.Alice)
	const folder = "Probe"
	if err := d.Create(folder, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Delete(folder).Wait() })
	appendRaw := func(raw []byte) uint32 {
		t.Helper()
		cmd := d.Append(folder, int64(len(raw)), nil)
		cmd.Write(raw)
		cmd.Close()
		ad, err := cmd.Wait()
		if err != nil {
			t.Fatal(err)
		}
		return uint32(ad.UID)
	}
	hdr := "From: Probe <probe@example.org>\r\nTo: alice@example.test\r\nDate: Tue, 03 Nov 2026 09:00:00 +0000\r\nMIME-Version: 1.0\r\n"

	// 1,000 nested multiparts.
	var nested strings.Builder
	nested.WriteString(hdr + "Subject: nested\r\nContent-Type: multipart/mixed; boundary=b0\r\n\r\n")
	for i := range 1000 {
		fmt.Fprintf(&nested, "--b%d\r\nContent-Type: multipart/mixed; boundary=b%d\r\n\r\n", i, i+1)
	}
	nested.WriteString("--b1000\r\nContent-Type: text/plain\r\n\r\ndeep inside\r\n--b1000--\r\n")
	for i := 999; i >= 0; i-- {
		fmt.Fprintf(&nested, "--b%d--\r\n", i)
	}
	nestedUID := appendRaw([]byte(nested.String()))

	// A 1 MB header field.
	bigHeader := hdr + "Subject: big header\r\nX-Filler: " + strings.Repeat("a", 1<<20) + "\r\nContent-Type: text/plain\r\n\r\nbody after a 1 MB header\r\n"
	bigHeaderUID := appendRaw([]byte(bigHeader))

	for _, tc := range []struct {
		name string
		uid  uint32
	}{{"nested_1000", nestedUID}, {"header_1MB", bigHeaderUID}} {
		res := mailtest.Call(t, c, "imap_read_email", map[string]any{"folder": folder, "uid": tc.uid})
		if res.IsError && strings.Contains(mailtest.Text(res), "internal error") {
			t.Errorf("%s: %s", tc.name, mailtest.Text(res))
		}
		t.Logf("%s: isError=%v, %d characters of text", tc.name, res.IsError, len(mailtest.Text(res)))
	}
	if res := mailtest.Call(t, c, "imap_list_emails", map[string]any{"folder": folder}); res.IsError {
		t.Fatalf("list after the hostile messages: %s", mailtest.Text(res))
	}

	// A 50 MB attachment.
	const attachment = 50 << 20
	const line = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkwMTIzNDU2Nzg5MDEyMzQ1Njc4\r\n"
	var big strings.Builder
	big.Grow(attachment/57*len(line) + 1024)
	big.WriteString(hdr + "Subject: the 50 MB file\r\nContent-Type: multipart/mixed; boundary=big\r\n\r\n--big\r\nContent-Type: text/plain\r\n\r\nThe file is attached.\r\n" +
		"--big\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=big.bin\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	for range attachment / 57 {
		big.WriteString(line)
	}
	big.WriteString("--big--\r\n")
	raw := []byte(big.String())
	big.Reset()
	bigUID := appendRaw(raw)
	raw = nil
	mailtest.Call(t, c, "imap_list_emails", map[string]any{"folder": folder, "limit": 1}) // warm: login, EXAMINE
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	fromServer := proxy.fromServer.Load()
	var msg mailbox.Message
	mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"folder": folder, "uid": bigUID}), &msg)
	moved := proxy.fromServer.Load() - fromServer
	runtime.ReadMemStats(&m1)
	grew := int64(m1.TotalAlloc - m0.TotalAlloc)
	t.Logf("50 MB message read: %d bytes from Dovecot, %d bytes allocated in the test process during the call", moved, grew)
	if !strings.Contains(msg.Text, "The file is attached") || len(msg.Attachments) != 1 || msg.Attachments[0].Filename != "big.bin" {
		t.Fatalf("read: %+v", msg)
	}
	if moved > 64<<10 {
		t.Errorf("reading moved %d bytes from the server: the attachment was fetched", moved)
	}
	if grew > 8<<20 {
		t.Errorf("reading allocated %d bytes: the attachment was held in memory", grew)
	}

	// Arguments nested 1,000 levels deep.
	deep := any("x")
	for range 1000 {
		deep = []any{deep}
	}
	res := mailtest.Call(t, c, "imap_list_emails", map[string]any{"folder": deep})
	if !res.IsError || mailtest.Text(res) != "folder must be a string (got a list)" {
		t.Fatalf("deeply nested argument: %q", mailtest.Text(res))
	}
	// Still serving.
	if res := mailtest.Call(t, c, "imap_list_folders", nil); res.IsError || !slices.ContainsFunc(strings.Split(mailtest.Text(res), "\n"), func(l string) bool { return strings.Contains(l, folder) }) {
		t.Fatalf("after the probe: %s", mailtest.Text(res))
	}
}
