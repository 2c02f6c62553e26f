package app_test

import (
	"context"
	"io"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

// Both smtp_ tools work in the demo, configured as `mailbox-mcp demo` does:
// the embedded SMTP server delivers into the demo mailboxes.
func TestDemoSendAndReply(t *testing.T) {
	g := startDemoGatewayWith(t, true)
	alice, bob := g.Users[0], g.Users[1]
	ac := mailtest.MCPClient(t, g.URL, headers(alice), "")
	bc := mailtest.MCPClient(t, g.URL, headers(bob), mcp.ProtocolVersion20250618)

	list, err := ac.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "smtp_send_email") || !slices.Contains(names, "smtp_reply_email") {
		t.Fatalf("demo tools: %v", names)
	}

	folderTotal := func(c interface {
		CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
	}, folder string) (uint32, []mailbox.Summary) {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "imap_list_emails", map[string]any{"folder": folder, "limit": 1}
		res, err := c.CallTool(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var p mailbox.Page
		mailtest.Decode(t, res, &p)
		return p.Total, p.Messages
	}
	sentBefore, _ := folderTotal(ac, demo.FolderSent)
	inboxBefore, _ := folderTotal(bc, demo.FolderInbox)

	const body = "Treffen wir uns um drei? Secret-body-marker-7781"
	var sent tools.SendResult
	mailtest.Decode(t, mailtest.Call(t, ac, "smtp_send_email", map[string]any{
		"to": []any{bob.Address}, "subject": "Kaffee ☕ heute?", "text": body,
	}), &sent)
	if !slices.Equal(sent.Accepted, []string{bob.Address}) || !sent.SentCopy.Saved || sent.SentCopy.Folder != demo.FolderSent {
		t.Fatalf("send: %+v", sent)
	}
	if n, _ := folderTotal(ac, demo.FolderSent); n != sentBefore+1 {
		t.Errorf("alice's Sent: %d messages, want %d", n, sentBefore+1)
	}
	n, newest := folderTotal(bc, demo.FolderInbox)
	if n != inboxBefore+1 || newest[0].Subject != "Kaffee ☕ heute?" || newest[0].Flags.Seen {
		t.Fatalf("bob's INBOX: %d messages, newest %+v", n, newest)
	}

	var reply tools.SendResult
	mailtest.Decode(t, mailtest.Call(t, bc, "smtp_reply_email", map[string]any{"uid": newest[0].UID, "text": "Gern!", "reply_all": true}), &reply)
	if !slices.Equal(reply.To, []string{alice.Address}) || len(reply.Cc) != 0 || reply.Subject != "Re: Kaffee ☕ heute?" ||
		reply.InReplyTo != sent.MessageID || reply.Original == nil || !reply.Original.Answered {
		t.Fatalf("reply: %+v", reply)
	}
	_, back := folderTotal(ac, demo.FolderInbox)
	var read mailbox.Message
	mailtest.Decode(t, mailtest.Call(t, ac, "imap_read_email", map[string]any{"uid": back[0].UID}), &read)
	if read.MessageID != reply.MessageID || !slices.Equal(read.InReplyTo, []string{sent.MessageID}) || !strings.Contains(read.Text, "Gern!") {
		t.Fatalf("alice got %+v", read)
	}
	_, orig := folderTotal(bc, demo.FolderInbox)
	if orig[0].UID != newest[0].UID || !orig[0].Flags.Answered || orig[0].Flags.Seen {
		t.Errorf("original after the reply: %+v (want uid %d, answered, unread)", orig[0], newest[0].UID)
	}

	// A blind copy: bob gets it, and neither his copy nor the To
	// recipient's names him (the demo server stores what it receives as
	// is, unlike Postfix, which would strip a Bcc header itself).
	var blind tools.SendResult
	mailtest.Decode(t, mailtest.Call(t, ac, "smtp_send_email", map[string]any{
		"to": []any{alice.Address}, "bcc": []any{bob.Address}, "subject": "blind", "text": "psst",
	}), &blind)
	for _, u := range []demo.User{alice, bob} {
		hdr := newestHeader(t, g.Demo.IMAPAddr, u, demo.FolderInbox)
		if !strings.Contains(hdr, blind.MessageID) || strings.Contains(strings.ToLower(hdr), "bcc") {
			t.Errorf("%s's copy of the blind message:\n%s", u.Address, hdr)
		}
	}
	if hdr := newestHeader(t, g.Demo.IMAPAddr, alice, demo.FolderSent); !strings.Contains(hdr, "Bcc: <"+bob.Address+">") {
		t.Errorf("alice's Sent copy lacks the Bcc header:\n%s", hdr)
	}

	// Nothing secret or private reached the log.
	logs := g.Logs.String()
	for _, secret := range []string{alice.Password, bob.Password, body} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log contains %q", secret)
		}
	}
}

// newestHeader reads the header of the newest message of folder with a bare
// IMAP client (EXAMINE, BODY.PEEK).
func newestHeader(t *testing.T, addr string, u demo.User, folder string) string {
	t.Helper()
	c, err := imapclient.DialInsecure(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(u.Address, u.Password).Wait(); err != nil {
		t.Fatal(err)
	}
	mb, err := c.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil || mb.NumMessages == 0 {
		t.Fatalf("EXAMINE %s: %v", folder, err)
	}
	sec := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, Peek: true}
	bufs, err := c.Fetch(imap.SeqSetNum(mb.NumMessages), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
	if err != nil || len(bufs) != 1 {
		t.Fatalf("FETCH: %v", err)
	}
	return string(bufs[0].FindBodySection(sec))
}

// greylister is an SMTP server that logs anyone in and answers every RCPT
// with 451: a temporary failure.
type greylister struct{}

func (greylister) NewSession(*smtp.Conn) (smtp.Session, error) { return greySession{}, nil }

type greySession struct{}

func (greySession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (greySession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, _, _ string) error { return nil }), nil
}
func (greySession) Mail(string, *smtp.MailOptions) error { return nil }
func (greySession) Rcpt(string, *smtp.RcptOptions) error {
	return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "Greylisted, come back later"}
}
func (greySession) Data(io.Reader) error { return nil }
func (greySession) Reset()               {}
func (greySession) Logout() error        { return nil }

// A 4xx answer is a temporary failure with a retry hint, and nothing is
// filed in Sent.
func TestSendTemporaryFailure(t *testing.T) {
	srv := smtp.NewServer(greylister{})
	srv.AllowInsecureAuth = true
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	g := startDemoGatewayWith(t, true, "SMTP_PORT="+port)
	alice := g.Users[0]
	c := mailtest.MCPClient(t, g.URL, headers(alice), "")
	res := mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{g.Users[1].Address}, "subject": "x", "text": "x"})
	txt := mailtest.Text(res)
	if !res.IsError || !strings.Contains(txt, "temporary failure") || !strings.Contains(txt, "451 4.7.1 Greylisted") ||
		!strings.HasSuffix(txt, "; nothing was sent); try again later") || strings.Count(txt, "try again") != 1 || !strings.Contains(txt, g.Users[1].Address) {
		t.Fatalf("IsError=%v %q", res.IsError, txt)
	}
	if n := g.Demo.Seeded(alice.Address, demo.FolderSent); n == 0 {
		t.Fatal("no seeded Sent messages to compare with")
	}
	var p mailbox.Page
	mailtest.Decode(t, mailtest.Call(t, c, "imap_list_emails", map[string]any{"folder": demo.FolderSent, "limit": 1}), &p)
	if int(p.Total) != g.Demo.Seeded(alice.Address, demo.FolderSent) {
		t.Errorf("Sent has %d messages after a failed send, seeded %d", p.Total, g.Demo.Seeded(alice.Address, demo.FolderSent))
	}
}
