package agents

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-message/mail"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
func (nopLogger) Println(...any)        {}

// memAgents runs an in-process IMAP server with one user (INBOX, Trash)
// and returns a Service on it and a bare client of the same user.
func memAgents(t *testing.T) (*Service, credentials.Credentials, *imapclient.Client) {
	t.Helper()
	mem := imapmemserver.New()
	u := imapmemserver.NewUser("u@example.test", "pw")
	for _, f := range []string{"INBOX", "Trash"} {
		if err := u.Create(f, nil); err != nil {
			t.Fatal(err)
		}
	}
	mem.AddUser(u)
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIdle: {}, imap.CapUIDPlus: {}, imap.CapMove: {}},
		InsecureAuth: true,
		Logger:       nopLogger{},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	mb := mailbox.New(mailbox.Config{Host: "127.0.0.1", Port: port, Security: transport.Plain, AllowPlaintextAuth: true, Timeout: 5 * time.Second},
		pool.Config{}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { mb.Close(context.Background()) })
	d, err := imapclient.DialInsecure(ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Login("u@example.test", "pw").Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return New(Config{}, mb), credentials.New("u@example.test", "pw"), d
}

// counts is the number of messages and unread of every Agents/ folder.
func counts(t *testing.T, d *imapclient.Client) map[string][2]uint32 {
	t.Helper()
	out := map[string][2]uint32{}
	list, err := d.List("", "Agents/*", nil).Collect()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list {
		sd, err := d.Status(l.Mailbox, &imap.StatusOptions{NumMessages: true, NumUnseen: true}).Wait()
		if err != nil {
			t.Fatal(err)
		}
		out[l.Mailbox] = [2]uint32{*sd.NumMessages, *sd.NumUnseen}
	}
	return out
}

// raws are the messages of folder, oldest first.
func raws(t *testing.T, d *imapclient.Client, folder string) [][]byte {
	t.Helper()
	if _, err := d.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	sec := &imap.FetchItemBodySection{Peek: true}
	bufs, err := d.Fetch(imap.SeqSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, b := range bufs {
		out = append(out, b.FindBodySection(sec))
	}
	return out
}

func TestSendFormatAndCreate(t *testing.T) {
	s, creds, d := memAgents(t)
	ctx := context.Background()
	sent, err := s.Send(ctx, creds, Message{From: "backend", To: []string{"frontend", "planner.v1"}, Subject: "API ready", Text: "Deployed.\n", Tags: []string{"api", "api"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Delivered) != 2 || !sent.Delivered[0].Created || sent.Delivered[1].Folder != "Agents/planner\u2024v1" || sent.MessageID == "" {
		t.Fatalf("sent: %+v", sent)
	}
	for _, f := range []string{"Agents/frontend", "Agents/planner\u2024v1"} {
		rs := raws(t, d, f)
		if len(rs) != 1 {
			t.Fatalf("%s: %d messages", f, len(rs))
		}
		mr, err := mail.CreateReader(bytes.NewReader(rs[0]))
		if err != nil {
			t.Fatal(err)
		}
		h := mr.Header
		from, _ := h.AddressList("From")
		to, _ := h.AddressList("To")
		id, _ := h.MessageID()
		if len(from) != 1 || from[0].Name != "backend" || from[0].Address != "u@example.test" || len(to) != 2 || to[0].Name != "frontend" ||
			id != sent.MessageID || h.Get(HeaderFrom) != "backend" || h.Get(HeaderTo) != "frontend, planner.v1" || h.Get("X-Mailbox-Tags") != "api" {
			t.Fatalf("%s header: %v", f, h.Map())
		}
		if date, err := h.Date(); err != nil || time.Since(date) > time.Minute {
			t.Fatalf("date %v %v", date, err)
		}
	}
	if c := counts(t, d); c["Agents/frontend"] != [2]uint32{1, 1} {
		t.Fatalf("counts %v", c)
	}
	// A second send finds the folder.
	sent, err = s.Send(ctx, creds, Message{From: "backend", To: []string{"frontend"}, Text: "again"})
	if err != nil || sent.Delivered[0].Created {
		t.Fatalf("%+v %v", sent, err)
	}
}

func TestSendRefusesBeforeAppending(t *testing.T) {
	s, creds, d := memAgents(t)
	ctx := context.Background()
	if _, err := s.Send(ctx, creds, Message{From: "backend", To: []string{"frontend"}, Text: "x"}); err != nil {
		t.Fatal(err)
	}
	before := counts(t, d)
	long := strings.Repeat("X", 5000)
	for _, m := range []Message{
		{From: "", To: []string{"frontend"}, Text: "x"},
		{From: "backend", To: []string{"frontend", "Bad Name"}, Text: "x"},
		{From: "backend", To: []string{"frontend", long}, Text: "x"},
		{From: "backend", To: []string{"frontend", ".state"}, Text: "x"},
		{From: "backend", To: []string{"*", "frontend"}, Text: "x"},
		{From: "backend", To: []string{"frontend"}, Text: ""},
		{From: "backend", To: []string{"frontend"}, Text: "x", Tags: []string{"Not A Tag"}},
		{From: "backend", To: []string{"frontend"}, Text: "x", Subject: "a\r\nBcc: x@y"},
		{From: "backend", To: []string{"newcomer"}, Text: "x", Subject: "a\nb"},
		{From: "backend", Conversation: "conv-nothere", Text: "x"},
		{From: "backend", To: []string{}, Text: "x"},
	} {
		_, err := s.Send(ctx, creds, m)
		if k := mailerr.KindOf(err); k != mailerr.BadInput && k != mailerr.NotFound {
			t.Errorf("%+v: %v", m.To, err)
		}
		if strings.Contains(mailerr.Message(err), long) {
			t.Errorf("the sentence echoes the long value")
		}
	}
	if after := counts(t, d); len(after) != len(before) || after["Agents/frontend"] != before["Agents/frontend"] {
		t.Fatalf("before %v after %v", before, after)
	}
}

func TestBroadcastDirectoryPrune(t *testing.T) {
	s, creds, d := memAgents(t)
	ctx := context.Background()
	for _, to := range []string{"frontend", "db", "backend"} {
		if _, _, err := s.Folder(ctx, creds, to); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Create("Agents/\u2024state", nil).Wait(); err != nil { // the gateway's own
		t.Fatal(err)
	}
	sent, err := s.Send(ctx, creds, Message{From: "backend", To: []string{"*"}, Text: "all hands"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range sent.Delivered {
		got = append(got, x.Agent)
	}
	if !slices.Equal(got, []string{"db", "frontend"}) {
		t.Fatalf("broadcast to %v", got)
	}
	c := counts(t, d)
	if c["Agents/db"] != [2]uint32{1, 1} || c["Agents/frontend"] != [2]uint32{1, 1} || c["Agents/backend"] != [2]uint32{0, 0} || c["Agents/\u2024state"][0] != 0 {
		t.Fatalf("counts %v", c)
	}
	if _, err := s.Send(ctx, creds, Message{From: "db", To: []string{"frontend"}, Text: "from db"}); err != nil {
		t.Fatal(err)
	}
	dir, err := s.Directory(ctx, creds, "backend")
	if err != nil {
		t.Fatal(err)
	}
	if len(dir) != 3 || dir[0].Name != "backend" || dir[2].Name != "frontend" || dir[2].Total != 2 || dir[2].Unread != 2 || *dir[2].UnreadFromYou != 1 || dir[2].LastActivity == nil || dir[0].LastActivity != nil {
		t.Fatalf("directory %+v", dir)
	}
	dir, err = s.Directory(ctx, creds, "")
	if err != nil || dir[2].UnreadFromYou != nil {
		t.Fatalf("%+v %v", dir, err)
	}

	// Prune: a read old message goes, an unread old one and a read new one stay.
	old := time.Now().AddDate(0, 0, -40)
	for _, seen := range []bool{true, false} {
		var flags []imap.Flag
		if seen {
			flags = []imap.Flag{imap.FlagSeen}
		}
		raw := "From: x@y\r\nSubject: old\r\n\r\nold\r\n"
		cmd := d.Append("Agents/frontend", int64(len(raw)), &imap.AppendOptions{Flags: flags, Time: old})
		cmd.Write([]byte(raw))
		cmd.Close()
		if _, err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Select("Agents/frontend", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := d.Store(imap.SeqSetNum(1), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagSeen}, Silent: true}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	d.Unselect().Wait()
	p, err := s.Prune(ctx, creds, "frontend", 30, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Moved != 1 || p.TrashFolder != "Trash" || len(p.Folders) != 1 {
		t.Fatalf("pruned %+v", p)
	}
	if c := counts(t, d); c["Agents/frontend"] != [2]uint32{3, 2} {
		t.Fatalf("after prune %v", c)
	}
	if _, err := s.Prune(ctx, creds, "", 0, nil); err != nil {
		t.Fatal(err)
	}
}

func TestConversation(t *testing.T) {
	s, creds, d := memAgents(t)
	ctx := context.Background()
	created, err := s.CreateConversation(ctx, creds, "backend", "Release 1.4", []string{"frontend", "db", "backend"})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Conversation
	if !strings.HasPrefix(id, "conv-") || len(created.Delivered) != 3 {
		t.Fatalf("created %+v", created)
	}
	if _, err := s.Send(ctx, creds, Message{From: "frontend", Conversation: id, Text: "UI done"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaveConversation(ctx, creds, "db", id); err != nil {
		t.Fatal(err)
	}
	last, err := s.Send(ctx, creds, Message{From: "backend", Conversation: id, Text: "shipping"})
	if err != nil {
		t.Fatal(err)
	}
	if len(last.Delivered) != 2 {
		t.Fatalf("after leave, delivered to %+v", last.Delivered)
	}
	if _, err := s.Send(ctx, creds, Message{From: "db", Conversation: id, Text: "still here?"}); mailerr.KindOf(err) != mailerr.BadInput {
		t.Fatalf("a leaver sends: %v", err)
	}
	c := counts(t, d)
	// backend: 4 (its own copies read); frontend: 4; db: 3 (not the last).
	if c["Agents/backend"] != [2]uint32{4, 2} || c["Agents/frontend"] != [2]uint32{4, 3} || c["Agents/db"] != [2]uint32{3, 2} {
		t.Fatalf("counts %v", c)
	}
	h, err := s.History(ctx, creds, "frontend", id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var from []string
	for _, m := range h.Messages {
		from = append(from, m.From)
	}
	if !slices.Equal(from, []string{"backend", "frontend", "db", "backend"}) || h.Messages[2].Left != "db" || !slices.Equal(h.Participants, []string{"backend", "frontend"}) ||
		h.Name != "Release 1.4" || !strings.Contains(h.Messages[3].Text, "shipping") {
		t.Fatalf("history %+v", h)
	}
	if h, err = s.History(ctx, creds, "backend", id, 2); err != nil || len(h.Messages) != 2 || h.Earlier != 2 {
		t.Fatalf("limited %+v %v", h, err)
	}
	// Threaded: the last message answers the one before it and refers to the first.
	rs := raws(t, d, "Agents/frontend")
	mr, _ := mail.CreateReader(bytes.NewReader(rs[3]))
	irt, _ := mr.Header.MsgIDList("In-Reply-To")
	refs, _ := mr.Header.MsgIDList("References")
	if len(irt) != 1 || len(refs) < 1 || refs[0] != created.MessageID || mr.Header.Get(HeaderConversation) != id {
		t.Fatalf("threading %v %v", irt, refs)
	}
	convs, err := s.Conversations(ctx, creds, "frontend")
	if err != nil || len(convs) != 1 || convs[0].Messages != 4 || convs[0].Name != "Release 1.4" {
		t.Fatalf("conversations %+v %v", convs, err)
	}
	if convs, err = s.Conversations(ctx, creds, "db"); err != nil || len(convs) != 0 {
		t.Fatalf("the leaver's %+v %v", convs, err)
	}
}
