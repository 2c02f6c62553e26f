package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/submission"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// testSubmission sends through the demo server's SMTP.
func testSubmission(srv *demo.Server) *submission.Client {
	sh, sp, _ := net.SplitHostPort(srv.SMTPAddr)
	sport, _ := strconv.Atoi(sp)
	return submission.New(submission.Config{Host: sh, Port: sport, Security: transport.Plain, AllowPlaintextAuth: true}, nil)
}

// demoDeps are tools Deps against the in-process demo mail server.
func demoDeps(t *testing.T) (*Deps, *demo.Server) {
	t.Helper()
	srv, err := demo.Start(context.Background(), demo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ih, ip, _ := net.SplitHostPort(srv.IMAPAddr)
	iport, _ := strconv.Atoi(ip)
	log := slog.New(slog.DiscardHandler)
	mb := mailbox.New(mailbox.Config{Host: ih, Port: iport, Security: transport.Plain, AllowPlaintextAuth: true, Timeout: 20 * time.Second},
		pool.Config{MaxTotal: 8, MaxPerGroup: 4}, log)
	t.Cleanup(func() { mb.Close(context.Background()) })
	sealer, err := credentials.NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	sub := testSubmission(srv)
	return &Deps{
		Sealer: sealer, Mailbox: mb, Log: log,
		Outbox:          outbox.New(outbox.Config{MaxRecipients: 5}, mb, sub, log),
		MaxRequestBytes: 1 << 20,
	}, srv
}

func call(t *testing.T, tool Tool, user demo.User, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx := credentials.NewContext(context.Background(), credentials.New(user.Address, user.Password))
	req := mcp.CallToolRequest{}
	req.Params.Name = tool.Def.Name
	req.Params.Arguments = args
	res, err := tool.Handler(ctx, req)
	if err != nil {
		t.Fatalf("%s: Go error %v", tool.Def.Name, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

func decodeSend(t *testing.T, res *mcp.CallToolResult) SendResult {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", resultText(res))
	}
	var out SendResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func total(t *testing.T, d *Deps, u demo.User, folder string) uint32 {
	t.Helper()
	p, err := d.Mailbox.ListEmails(context.Background(), credentials.New(u.Address, u.Password), mailbox.ListOptions{Folder: folder, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return p.Total
}

// newest reads the newest message of a folder.
func newest(t *testing.T, d *Deps, u demo.User, folder string) *mailbox.Message {
	t.Helper()
	creds := credentials.New(u.Address, u.Password)
	p, err := d.Mailbox.ListEmails(context.Background(), creds, mailbox.ListOptions{Folder: folder, Limit: 1})
	if err != nil || len(p.Messages) == 0 {
		t.Fatalf("list %s: %v", folder, err)
	}
	m, err := d.Mailbox.Read(context.Background(), creds, mailbox.ReadOptions{Folder: folder, UID: p.Messages[0].UID})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tool returns the bound tool named name.
func tool(t *testing.T, d *Deps, name string) Tool {
	t.Helper()
	for _, x := range All(d) {
		if x.Def.Name == name {
			return x
		}
	}
	t.Fatalf("no tool %s", name)
	return Tool{}
}

func TestSendToolDefinitions(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	d := &Deps{MaxRequestBytes: 2 << 20, Outbox: outbox.New(outbox.Config{MaxRecipients: 7, MaxAttachmentBytes: 3 << 19}, nil, submission.New(submission.Config{}, nil), log)}
	for _, name := range []string{"smtp_send_email", "smtp_reply_email"} {
		def := tool(t, d, name).Def
		if err := checkContract(def); err != nil {
			t.Fatal(err)
		}
		a := def.Annotations
		if *a.ReadOnlyHint || *a.DestructiveHint || *a.IdempotentHint || !*a.OpenWorldHint {
			t.Errorf("%s annotations: readOnly=%v destructive=%v idempotent=%v openWorld=%v", name,
				*a.ReadOnlyHint, *a.DestructiveHint, *a.IdempotentHint, *a.OpenWorldHint)
		}
		// The cap is stated, consistent with the request limit: 3/4 of 2 MiB.
		if !strings.Contains(def.Description, "at most 1.5 MiB (1572864 bytes) in total") ||
			!strings.Contains(def.Description, "2 MiB") || !strings.Contains(def.Description, "MAX_REQUEST_BYTES") ||
			!strings.Contains(def.Description, "at most 7") && !strings.Contains(def.Description, "At most 7") {
			t.Errorf("%s description does not state the limits: %s", name, def.Description)
		}
		for _, field := range []string{"message_id", "accepted", "sent_copy", "rejected"} {
			if !strings.Contains(string(def.RawOutputSchema), `"`+field+`"`) {
				t.Errorf("%s output schema lacks %s: %s", name, field, def.RawOutputSchema)
			}
		}
	}
	if got := All(&Deps{}); slices.ContainsFunc(got, func(t Tool) bool { return strings.HasPrefix(t.Def.Name, "smtp_") }) {
		t.Error("smtp_ tools registered without SMTP")
	}
}

// Every bad input is refused with a clear message and nothing is sent.
func TestSendBadInput(t *testing.T) {
	d, srv := demoDeps(t)
	d.Outbox = outbox.New(outbox.Config{MaxRecipients: 5, MaxAttachmentBytes: 1000}, d.Mailbox, testSubmission(srv), slog.New(slog.DiscardHandler))
	alice, bob := srv.Users[0], srv.Users[1]
	send := tool(t, d, "smtp_send_email")
	before := total(t, d, bob, "INBOX")
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	base := func(mod func(map[string]any)) map[string]any {
		a := map[string]any{"to": []any{bob.Address}, "subject": "hello", "text": "body"}
		mod(a)
		return a
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"subject injection", base(func(a map[string]any) { a["subject"] = "hi\r\nBcc: evil@example.test" }), "Subject: line breaks"},
		{"subject LF", base(func(a map[string]any) { a["subject"] = "hi\nX: y" }), "Subject: line breaks"},
		{"to injection", base(func(a map[string]any) { a["to"] = []any{bob.Address + "\r\nBcc: evil@example.test"} }), "to: line breaks"},
		{"from name injection", base(func(a map[string]any) { a["from"] = "A\rB <" + alice.Address + ">" }), "from: line breaks"},
		{"filename injection", base(func(a map[string]any) {
			a["attachments"] = []any{map[string]any{"filename": "a\r\nb.txt", "content_base64": b64(3)}}
		}), "file name: line breaks"},
		{"invalid address", base(func(a map[string]any) { a["to"] = []any{"not an address"} }), `"not an address" is not a valid email address`},
		{"invalid cc", base(func(a map[string]any) { a["cc"] = []any{"bob@"} }), "cc:"},
		{"empty address", base(func(a map[string]any) { a["to"] = []any{" "} }), "to: an empty address"},
		{"no recipients", base(func(a map[string]any) { delete(a, "to") }), "no recipients"},
		{"too many recipients", base(func(a map[string]any) {
			a["to"] = []any{"a@demo.test, b@demo.test", "c@demo.test"}
			a["bcc"] = []any{"d@demo.test", "e@demo.test", "f@demo.test"}
		}), "too many recipients: 6, at most 5"},
		{"no body", base(func(a map[string]any) { a["text"] = "  " }), "text (or html) is required"},
		{"oversized attachment", base(func(a map[string]any) {
			a["attachments"] = []any{map[string]any{"filename": "a.bin", "content_base64": b64(600)}, map[string]any{"filename": "b.bin", "content_base64": b64(600)}}
		}), "attachments[1] (b.bin): the attachments exceed the limit of 1000 bytes"},
		{"bad base64", base(func(a map[string]any) {
			a["attachments"] = []any{map[string]any{"filename": "x.pdf", "content_base64": "not*base64"}}
		}), "attachments[0] (x.pdf): content_base64 must be base64"},
		{"bad content type", base(func(a map[string]any) {
			a["attachments"] = []any{map[string]any{"filename": "x", "content_type": "nonsense", "content_base64": b64(3)}}
		}), "not a valid content type"},
		{"wrong type", map[string]any{"to": "bob@demo.test", "text": "x"}, `to must be a list (got "bob@demo.test")`},
		{"unknown argument", base(func(a map[string]any) { a["body"] = "x" }), `unknown argument "body"; did you mean "text"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, send, alice, tc.args)
			if !res.IsError || !strings.Contains(resultText(res), tc.want) {
				t.Fatalf("IsError=%v %q, want it to contain %q", res.IsError, resultText(res), tc.want)
			}
		})
	}
	if after := total(t, d, bob, "INBOX"); after != before {
		t.Fatalf("bob's INBOX went from %d to %d messages: something was sent", before, after)
	}
	// Wrong password: authentication failed, nothing sent.
	res := call(t, send, demo.User{Address: alice.Address, Password: "wrong"}, base(func(map[string]any) {}))
	if !res.IsError || !strings.Contains(resultText(res), "authentication failed") {
		t.Fatalf("wrong password: %q", resultText(res))
	}
	// An unknown local recipient is a permanent failure naming it.
	res = call(t, send, alice, base(func(a map[string]any) { a["to"] = []any{"nobody@demo.test"} }))
	if !res.IsError || !strings.Contains(resultText(res), "nobody@demo.test") || !strings.Contains(resultText(res), "550") {
		t.Fatalf("unknown recipient: %q", resultText(res))
	}
	if after := total(t, d, bob, "INBOX"); after != before {
		t.Fatalf("bob's INBOX went from %d to %d messages", before, after)
	}
}

func TestSendAndReplyOnDemo(t *testing.T) {
	d, srv := demoDeps(t)
	alice, bob := srv.Users[0], srv.Users[1]
	sentBefore := total(t, d, alice, demo.FolderSent)
	pdf := []byte("%PDF-1.4\n\x00\x01\xff binary")
	res := decodeSend(t, call(t, tool(t, d, "smtp_send_email"), alice, map[string]any{
		"to": []any{"Bob <" + bob.Address + ">"}, "cc": []any{"nobody@elsewhere.example"}, "bcc": []any{"hidden@elsewhere.example"},
		"subject": "Grüße aus Köln ✓", "text": "Hallo Bob", "html": "<p>Hallo <b>Bob</b></p>",
		"attachments": []any{map[string]any{"filename": "bericht.pdf", "content_base64": base64.StdEncoding.EncodeToString(pdf)}},
	}))
	if !slices.Equal(res.Accepted, []string{bob.Address, "nobody@elsewhere.example", "hidden@elsewhere.example"}) ||
		res.MessageID == "" || !res.SentCopy.Saved || res.SentCopy.Folder != demo.FolderSent {
		t.Fatalf("result: %+v", res)
	}
	got := newest(t, d, bob, "INBOX")
	if got.MessageID != res.MessageID || got.Subject != "Grüße aus Köln ✓" || !strings.Contains(got.Text, "Hallo Bob") ||
		len(got.Attachments) != 1 || got.Attachments[0].Filename != "bericht.pdf" || got.Attachments[0].ContentType != "application/pdf" {
		t.Fatalf("bob got %+v", got)
	}
	if total(t, d, alice, demo.FolderSent) != sentBefore+1 {
		t.Fatal("no Sent copy")
	}
	copyMsg := newest(t, d, alice, demo.FolderSent)
	if copyMsg.MessageID != res.MessageID || !copyMsg.Flags.Seen {
		t.Fatalf("Sent copy: %+v", copyMsg)
	}

	// bob replies to all: to alice, cc the other recipient, never himself.
	p, _ := d.Mailbox.ListEmails(context.Background(), credentials.New(bob.Address, bob.Password), mailbox.ListOptions{Limit: 1})
	uid := p.Messages[0].UID
	rep := decodeSend(t, call(t, tool(t, d, "smtp_reply_email"), bob, map[string]any{"uid": uid, "text": "Danke!", "reply_all": true}))
	if !slices.Equal(rep.To, []string{alice.Address}) || !slices.Equal(rep.Cc, []string{"nobody@elsewhere.example"}) ||
		rep.Subject != "Re: Grüße aus Köln ✓" || rep.InReplyTo != res.MessageID ||
		!slices.Equal(rep.References, []string{res.MessageID}) || rep.Original == nil || !rep.Original.Answered {
		t.Fatalf("reply: %+v", rep)
	}
	back := newest(t, d, alice, "INBOX")
	if back.MessageID != rep.MessageID || !slices.Equal(back.InReplyTo, []string{res.MessageID}) || !slices.Equal(back.References, []string{res.MessageID}) {
		t.Fatalf("alice got %+v", back)
	}
	orig, err := d.Mailbox.ReplyInfo(context.Background(), credentials.New(bob.Address, bob.Password), "INBOX", uid)
	if err != nil || !orig.Flags.Answered || orig.Flags.Seen {
		t.Fatalf("original after reply: %+v %v (want answered, still unread)", orig, err)
	}
}

// SENT_FOLDER names the folder for the copy, or turns the copy off.
func TestSentFolderSetting(t *testing.T) {
	d, srv := demoDeps(t)
	alice, bob := srv.Users[0], srv.Users[1]
	args := map[string]any{"to": []any{bob.Address}, "subject": "copy", "text": "x"}

	d.Outbox = outbox.New(outbox.Config{SentFolder: demo.FolderArchive}, d.Mailbox, testSubmission(srv), slog.New(slog.DiscardHandler))
	archived := total(t, d, alice, demo.FolderArchive)
	res := decodeSend(t, call(t, tool(t, d, "smtp_send_email"), alice, args))
	if !res.SentCopy.Saved || res.SentCopy.Folder != demo.FolderArchive || total(t, d, alice, demo.FolderArchive) != archived+1 {
		t.Fatalf("SENT_FOLDER=Archive: %+v", res.SentCopy)
	}

	d.Outbox = outbox.New(outbox.Config{SentFolder: "none"}, d.Mailbox, testSubmission(srv), slog.New(slog.DiscardHandler))
	sent := total(t, d, alice, demo.FolderSent)
	res = decodeSend(t, call(t, tool(t, d, "smtp_send_email"), alice, args))
	if res.SentCopy.Saved || !strings.Contains(res.SentCopy.Reason, "SENT_FOLDER=none") || total(t, d, alice, demo.FolderSent) != sent {
		t.Fatalf("SENT_FOLDER=none: %+v", res.SentCopy)
	}
	if !strings.Contains(resultText(call(t, tool(t, d, "smtp_send_email"), alice, args)), "No copy in the Sent folder") {
		t.Error("the text result does not say that no copy was saved")
	}
}

func TestDecodeBase64(t *testing.T) {
	want := []byte{0xfb, 0xff, 0x00, 'a'}
	for _, s := range []string{"+/8AYQ==", "+/8AYQ", "-_8AYQ==", "-_8A\r\nYQ"} {
		if got, err := decodeBase64(s); err != nil || string(got) != string(want) {
			t.Errorf("%q: %v %v", s, got, err)
		}
	}
	for _, s := range []string{"", "abc*", "YQ=x"} {
		if _, err := decodeBase64(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
