package tests

import (
	"bufio"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// capProxy sits between the gateway and Dovecot's plain IMAP port. It
// removes capabilities from the server's CAPABILITY answers (so Dovecot acts
// as an older server) and records every command line the gateway sends.
// With stallOn set, the first command line containing it stops all traffic
// in both directions: a server that goes silent mid-session.
type capProxy struct {
	ln      net.Listener
	target  string
	drop    []string
	stallOn string
	stalled atomic.Bool

	mu       sync.Mutex
	commands []string
	conns    []net.Conn

	fromServer atomic.Int64 // bytes the server sent, literals included
}

func startCapProxy(t *testing.T, target string, drop ...string) *capProxy {
	t.Helper()
	return startProxy(t, &capProxy{target: target, drop: drop})
}

// startStallProxy forwards until the gateway sends a command containing
// trigger, then forwards and answers nothing more.
func startStallProxy(t *testing.T, target, trigger string) *capProxy {
	t.Helper()
	return startProxy(t, &capProxy{target: target, stallOn: trigger})
}

func startProxy(t *testing.T, p *capProxy) *capProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

func (p *capProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *capProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		go p.pipe(client, server, p.recordLine, nil)
		go p.pipe(server, client, p.rewriteLine, &p.fromServer)
	}
}

var literalAtEnd = regexp.MustCompile(`\{(\d+)\+?\}\r\n$`)

// pipe copies from src to dst a line at a time, passing each line (not the
// literal data that follows a {n} marker) through edit.
func (p *capProxy) pipe(src, dst net.Conn, edit func(string) string, count *atomic.Int64) {
	defer dst.Close()
	r := bufio.NewReader(src)
	for {
		line, err := r.ReadString('\n')
		if line != "" && !p.stalled.Load() {
			if count != nil {
				count.Add(int64(len(line)))
			}
			if _, werr := io.WriteString(dst, edit(line)); werr != nil {
				return
			}
			if m := literalAtEnd.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				if count != nil {
					count.Add(int64(n))
				}
				if _, err := io.CopyN(dst, r, int64(n)); err != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *capProxy) recordLine(line string) string {
	if p.stallOn != "" && strings.Contains(line, p.stallOn) {
		p.stalled.Store(true)
		return ""
	}
	p.mu.Lock()
	p.commands = append(p.commands, strings.TrimSpace(line))
	p.mu.Unlock()
	return line
}

// rewriteLine drops the capabilities from "* CAPABILITY ..." lines and from
// [CAPABILITY ...] response codes.
func (p *capProxy) rewriteLine(line string) string {
	if !strings.Contains(strings.ToUpper(line), "CAPABILITY") {
		return line
	}
	words := strings.Split(strings.TrimRight(line, "\r\n"), " ")
	kept := words[:0]
	for _, w := range words {
		bare := strings.ToUpper(strings.TrimRight(w, "]"))
		if slices.Contains(p.drop, bare) {
			if strings.HasSuffix(w, "]") && len(kept) > 0 {
				kept[len(kept)-1] += "]"
			}
			continue
		}
		kept = append(kept, w)
	}
	return strings.Join(kept, " ") + "\r\n"
}

func (p *capProxy) sent(substr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.commands {
		if strings.Contains(strings.ToUpper(c), substr) {
			n++
		}
	}
	return n
}

// Against a server without LIST-STATUS and ESEARCH, list_folders falls back
// to one STATUS per folder and search to plain UID SEARCH, with the same
// answers as Dovecot gives directly.
func TestFallbacksWithoutListStatusAndESearch(t *testing.T) {
	s := seededStack(t)
	proxy := startCapProxy(t, s.IMAPAddr(), "LIST-STATUS", "ESEARCH", "IMAP4REV2")
	g := startGateway(t, s, "IMAP_PORT="+strconv.Itoa(proxy.port()), "IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true", "MAIL_CA_FILE=")
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	d := direct(t, s, bob)

	var folders tools.FoldersResult
	mailtest.Decode(t, mailtest.Call(t, c, "imap_list_folders", nil), &folders)
	if len(folders.Folders) < 5 {
		t.Fatalf("only %d folders", len(folders.Folders))
	}
	for _, f := range folders.Folders {
		if !f.Selectable {
			continue
		}
		sd, err := d.Status(f.Name, &imap.StatusOptions{NumMessages: true, NumUnseen: true}).Wait()
		if err != nil {
			t.Fatalf("STATUS %q: %v", f.Name, err)
		}
		if f.Total != *sd.NumMessages || f.Unread != *sd.NumUnseen {
			t.Errorf("%s: gateway says %d/%d, Dovecot %d/%d", f.Name, f.Total, f.Unread, *sd.NumMessages, *sd.NumUnseen)
		}
	}
	if n := proxy.sent("RETURN (STATUS"); n != 0 {
		t.Errorf("the gateway sent LIST-STATUS %d times to a server that does not offer it", n)
	}
	if n := proxy.sent(" STATUS "); n < len(folders.Folders)-1 {
		t.Errorf("the gateway sent %d STATUS commands for %d folders", n, len(folders.Folders))
	}

	want := allUIDs(t, d, "INBOX", &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "From", Value: "grace.tanaka"}}})
	if len(want) == 0 {
		t.Fatal("Dovecot finds nothing: the test proves nothing")
	}
	got := walkSearch(t, func(args map[string]any) mailbox.Page {
		var p mailbox.Page
		mailtest.Decode(t, mailtest.Call(t, c, "imap_search_emails", args), &p)
		return p
	}, map[string]any{"from": "grace.tanaka"})
	slices.Sort(got)
	if len(got) != len(want) {
		t.Fatalf("gateway found %d, Dovecot %d", len(got), len(want))
	}
	for i := range got {
		if imap.UID(got[i]) != want[i] {
			t.Fatalf("UID %d != %d at %d", got[i], want[i], i)
		}
	}
	var page mailbox.Page
	mailtest.Decode(t, mailtest.Call(t, c, "imap_list_emails", nil), &page)
	inbox := allUIDs(t, d, "INBOX", nil)
	if len(page.Messages) != 20 || imap.UID(page.Messages[0].UID) != inbox[len(inbox)-1] {
		t.Fatalf("newest page without ESEARCH: %d messages, first uid %d, want %d", len(page.Messages), page.Messages[0].UID, inbox[len(inbox)-1])
	}
	if n := proxy.sent("SEARCH RETURN"); n != 0 {
		t.Errorf("the gateway sent ESEARCH %d times to a server that does not offer it", n)
	}
	if proxy.sent("UID SEARCH") == 0 {
		t.Error("no UID SEARCH went through the proxy: the test proves nothing")
	}
}

// Reading a message with a 25 MB attachment fetches its text part and its
// structure, not the attachment: the bytes the server sends for the read are
// counted on the wire by the proxy.
func TestReadHugeMessageFetchesOnlyText(t *testing.T) {
	s := seededStack(t)
	proxy := startCapProxy(t, s.IMAPAddr())
	g := startGateway(t, s, "IMAP_PORT="+strconv.Itoa(proxy.port()), "IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true", "MAIL_CA_FILE=")
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	d := direct(t, s, bob)

	const attachment = 25 << 20
	const line = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkwMTIzNDU2Nzg5MDEyMzQ1Njc4\r\n"
	var b strings.Builder
	b.WriteString("From: Big Sender <big@example.org>\r\nTo: bob@example.test\r\nSubject: the 25 MB report\r\n" +
		"Message-ID: <huge@example.org>\r\nDate: Tue, 03 Nov 2026 09:00:00 +0000\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=huge\r\n\r\n--huge\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		"Here is the quarterly data dump. Grüße!\r\n--huge\r\nContent-Type: application/octet-stream\r\n" +
		"Content-Disposition: attachment; filename=dump.bin\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	for n := 0; n <= attachment/57; n++ { // 57 bytes a line once decoded
		b.WriteString(line)
	}
	b.WriteString("--huge--\r\n")
	raw := b.String()
	// A folder of its own, so the other tests' view of INBOX is unchanged.
	const folder = "Huge"
	if err := d.Create(folder, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Delete(folder).Wait() })
	cmd := d.Append(folder, int64(len(raw)), nil)
	cmd.Write([]byte(raw))
	cmd.Close()
	ad, err := cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}

	// Warm the connection (login, EXAMINE) so only the read is measured.
	mailtest.Call(t, c, "imap_list_emails", map[string]any{"folder": folder, "limit": 1})
	before := proxy.fromServer.Load()
	var m mailbox.Message
	mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"folder": folder, "uid": ad.UID}), &m)
	fetched := proxy.fromServer.Load() - before

	if !strings.Contains(m.Text, "quarterly data dump. Grüße!") {
		t.Errorf("text: %q", m.Text)
	}
	// The decoded size: 51 bytes for each line of the loop above.
	if len(m.Attachments) != 1 || m.Attachments[0].Filename != "dump.bin" || m.Attachments[0].Size != int64(attachment/57+1)*51 {
		t.Errorf("attachments: %+v", m.Attachments)
	}
	if m.Size < int64(len(raw)) {
		t.Errorf("size %d, message is %d bytes", m.Size, len(raw))
	}
	t.Logf("reading a %d-byte message moved %d bytes from the server", len(raw), fetched)
	if fetched > 64<<10 {
		t.Fatalf("reading the message moved %d bytes from the server: the attachment was fetched", fetched)
	}
}
