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
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/submission"
)

// demoDeps are tools Deps against the in-process demo mail server.
func demoDeps(t *testing.T) (Deps, *demo.Server) {
	t.Helper()
	srv, err := demo.Start(context.Background(), demo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ih, ip, _ := net.SplitHostPort(srv.IMAPAddr)
	sh, sp, _ := net.SplitHostPort(srv.SMTPAddr)
	iport, _ := strconv.Atoi(ip)
	sport, _ := strconv.Atoi(sp)
	log := slog.New(slog.DiscardHandler)
	mb := mailbox.New(mailbox.Config{Host: ih, Port: iport, Security: mailbox.Plain, AllowPlaintextAuth: true, Timeout: 20 * time.Second},
		pool.Config{MaxTotal: 8, MaxPerKey: 4}, log)
	t.Cleanup(func() { mb.Close(context.Background()) })
	sealer, err := credentials.NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	return Deps{
		Sealer: sealer, Mailbox: mb, Log: log, SMTPEnabled: true,
		Submission:      submission.New(submission.Config{Host: sh, Port: sport, Security: submission.Plain, AllowPlaintextAuth: true}, log),
		MaxRecipients:   5,
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

func total(t *testing.T, d Deps, u demo.User, folder string) uint32 {
	t.Helper()
	p, err := d.Mailbox.ListEmails(context.Background(), credentials.New(u.Address, u.Password), mailbox.ListOptions{Folder: folder, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return p.Total
}

// newest reads the newest message of a folder.
func newest(t *testing.T, d Deps, u demo.User, folder string) *mailbox.Message {
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

func TestSendToolDefinitions(t *testing.T) {
	d := Deps{MaxRecipients: 7, MaxRequestBytes: 2 << 20}
	for _, tool := range []Tool{SendEmail(d), ReplyEmail(d)} {
		if err := checkAnnotations(tool.Def); err != nil {
			t.Fatal(err)
		}
		a := tool.Def.Annotations
		if *a.ReadOnlyHint || *a.DestructiveHint || *a.IdempotentHint || !*a.OpenWorldHint {
			t.Errorf("%s annotations: readOnly=%v destructive=%v idempotent=%v openWorld=%v", tool.Def.Name,
				*a.ReadOnlyHint, *a.DestructiveHint, *a.IdempotentHint, *a.OpenWorldHint)
		}
		// The cap is stated, consistent with the request limit: 3/4 of 2 MiB.
		if !strings.Contains(tool.Def.Description, "At most 1.5 MiB (1572864 bytes) in total") ||
			!strings.Contains(tool.Def.Description, "2 MiB") || !strings.Contains(tool.Def.Description, "MAX_REQUEST_BYTES") ||
			!strings.Contains(tool.Def.Description, "at most 7") && !strings.Contains(tool.Def.Description, "At most 7") {
			t.Errorf("%s description does not state the limits: %s", tool.Def.Name, tool.Def.Description)
		}
		schema, _ := json.Marshal(tool.Def.OutputSchema)
		for _, field := range []string{"message_id", "accepted", "sent_copy", "rejected"} {
			if !strings.Contains(string(schema), `"`+field+`"`) {
				t.Errorf("%s output schema lacks %s: %s", tool.Def.Name, field, schema)
			}
		}
	}
	if got := All(Deps{}); slices.ContainsFunc(got, func(t Tool) bool { return strings.HasPrefix(t.Def.Name, "smtp_") }) {
		t.Error("smtp_ tools registered without SMTP")
	}
	got := All(Deps{SMTPEnabled: true, Submission: submission.New(submission.Config{}, nil)})
	var names []string
	for _, tool := range got {
		names = append(names, tool.Def.Name)
	}
	if !slices.Contains(names, "smtp_send_email") || !slices.Contains(names, "smtp_reply_email") {
		t.Errorf("with SMTP: %v", names)
	}
}

// Every bad input is refused with a clear message and nothing is sent.
func TestSendBadInput(t *testing.T) {
	d, srv := demoDeps(t)
	d.MaxAttachmentBytes = 1000
	alice, bob := srv.Users[0], srv.Users[1]
	send := SendEmail(d)
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
		}), "attachment 2 (b.bin): the attachments exceed the limit of 1000 bytes"},
		{"bad base64", base(func(a map[string]any) {
			a["attachments"] = []any{map[string]any{"filename": "x.pdf", "content_base64": "not*base64"}}
		}), "attachment 1 (x.pdf): content_base64 is not valid base64"},
		{"bad content type", base(func(a map[string]any) {
			a["attachments"] = []any{map[string]any{"filename": "x", "content_type": "nonsense", "content_base64": b64(3)}}
		}), "not a valid content type"},
		{"wrong type", map[string]any{"to": "bob@demo.test", "text": "x"}, "invalid arguments"},
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
	res := decodeSend(t, call(t, SendEmail(d), alice, map[string]any{
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
	rep := decodeSend(t, call(t, ReplyEmail(d), bob, map[string]any{"uid": uid, "text": "Danke!", "reply_all": true}))
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

	d.SentFolder = demo.FolderArchive
	archived := total(t, d, alice, demo.FolderArchive)
	res := decodeSend(t, call(t, SendEmail(d), alice, args))
	if !res.SentCopy.Saved || res.SentCopy.Folder != demo.FolderArchive || total(t, d, alice, demo.FolderArchive) != archived+1 {
		t.Fatalf("SENT_FOLDER=Archive: %+v", res.SentCopy)
	}

	d.SentFolder = "none"
	sent := total(t, d, alice, demo.FolderSent)
	res = decodeSend(t, call(t, SendEmail(d), alice, args))
	if res.SentCopy.Saved || !strings.Contains(res.SentCopy.Reason, "SENT_FOLDER=none") || total(t, d, alice, demo.FolderSent) != sent {
		t.Fatalf("SENT_FOLDER=none: %+v", res.SentCopy)
	}
	if !strings.Contains(resultText(call(t, SendEmail(d), alice, args)), "No copy in the Sent folder") {
		t.Error("the text result does not say that no copy was saved")
	}
}

func TestReplyRecipients(t *testing.T) {
	self := map[string]bool{"me@example.test": true}
	a := func(s ...string) []mailbox.Address {
		var out []mailbox.Address
		for _, x := range s {
			out = append(out, mailbox.Address{Email: x})
		}
		return out
	}
	emails := func(as []mailmsg.Address) []string {
		var out []string
		for _, x := range as {
			out = append(out, x.Email)
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		o          mailbox.Original
		all        bool
		extra      []mailmsg.Address
		wantTo     []string
		wantCc     []string
		wantWarned bool
	}{
		{name: "from", o: mailbox.Original{From: a("x@example.test"), To: a("me@example.test", "y@example.test")},
			wantTo: []string{"x@example.test"}},
		{name: "reply-to wins", o: mailbox.Original{From: a("x@example.test"), ReplyTo: a("list@example.test")},
			wantTo: []string{"list@example.test"}},
		{name: "all, minus self, no duplicates", all: true, o: mailbox.Original{From: a("X@example.test"),
			To: a("ME@example.test", "y@example.test", "x@EXAMPLE.test"), Cc: a("Y@example.test", "z@example.test")},
			wantTo: []string{"X@example.test"}, wantCc: []string{"y@example.test", "z@example.test"}},
		{name: "extra cc deduplicated", all: true, o: mailbox.Original{From: a("x@example.test"), Cc: a("z@example.test")},
			extra:  []mailmsg.Address{{Email: "Z@example.test"}, {Email: "w@example.test"}},
			wantTo: []string{"x@example.test"}, wantCc: []string{"z@example.test", "w@example.test"}},
		{name: "own message answers its recipients", all: true, o: mailbox.Original{From: a("me@example.test"),
			To: a("y@example.test"), Cc: a("z@example.test", "me@example.test")},
			wantTo: []string{"y@example.test"}, wantCc: []string{"z@example.test"}},
		{name: "invalid address skipped", all: true, o: mailbox.Original{From: a("x@example.test"), Cc: a("bad address@")},
			wantTo: []string{"x@example.test"}, wantWarned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to, cc, warn := replyRecipients(&tc.o, self, tc.all, tc.extra)
			if !slices.Equal(emails(to), tc.wantTo) || !slices.Equal(emails(cc), tc.wantCc) || (len(warn) > 0) != tc.wantWarned {
				t.Fatalf("to %v cc %v warnings %v; want %v %v", emails(to), emails(cc), warn, tc.wantTo, tc.wantCc)
			}
		})
	}
}

func TestReplyReferences(t *testing.T) {
	if got := replyReferences(&mailbox.Original{MessageID: "c@x", References: []string{"a@x", "b@x"}}); !slices.Equal(got, []string{"a@x", "b@x", "c@x"}) {
		t.Errorf("got %v", got)
	}
	if got := replyReferences(&mailbox.Original{MessageID: "c@x", InReplyTo: []string{"b@x"}}); !slices.Equal(got, []string{"b@x", "c@x"}) {
		t.Errorf("from In-Reply-To: %v", got)
	}
	var long []string
	for i := range 30 {
		long = append(long, strconv.Itoa(i)+"@x")
	}
	got := replyReferences(&mailbox.Original{MessageID: "last@x", References: long})
	if len(got) != maxReferences || got[0] != "0@x" || got[len(got)-1] != "last@x" || got[len(got)-2] != "29@x" {
		t.Errorf("trimmed: %v", got)
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
