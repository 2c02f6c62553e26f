package demo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message/charset"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

func start(t *testing.T) *Server {
	t.Helper()
	s, err := Start(t.Context(), Options{
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// login dials the IMAP server and logs in; the client is closed at cleanup.
func login(t *testing.T, s *Server, user, password string) *imapclient.Client {
	t.Helper()
	c, err := imapclient.DialInsecure(s.IMAPAddr, &imapclient.Options{
		WordDecoder: &mime.WordDecoder{CharsetReader: charset.Reader},
	})
	if err != nil {
		t.Fatalf("dial IMAP: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Login(user, password).Wait(); err != nil {
		t.Fatalf("LOGIN %s: %v", user, err)
	}
	return c
}

func count(t *testing.T, c *imapclient.Client, folder string) int {
	t.Helper()
	st, err := c.Status(folder, &imap.StatusOptions{NumMessages: true}).Wait()
	if err != nil {
		t.Fatalf("STATUS %s: %v", folder, err)
	}
	return int(*st.NumMessages)
}

func seededByTag(t *testing.T, s *Server, user, tag string) Message {
	t.Helper()
	for _, m := range s.Messages(user) {
		if m.Tag == tag {
			return m
		}
	}
	t.Fatalf("no seeded message %q for %s", tag, user)
	return Message{}
}

// uidOf finds a message by Message-ID in the selected folder.
func uidOf(t *testing.T, c *imapclient.Client, messageID string) imap.UID {
	t.Helper()
	data, err := c.UIDSearch(&imap.SearchCriteria{
		Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: messageID}},
	}, nil).Wait()
	if err != nil {
		t.Fatalf("UID SEARCH: %v", err)
	}
	uids := data.AllUIDs()
	if len(uids) != 1 {
		t.Fatalf("UID SEARCH Message-ID %s: got %v, want one", messageID, uids)
	}
	return uids[0]
}

func TestCapabilities(t *testing.T) {
	s := start(t)
	c := login(t, s, AliceAddress, AlicePassword)
	caps := c.Caps()
	for _, want := range []imap.Cap{imap.CapIMAP4rev2, imap.CapSpecialUse, imap.CapListStatus, imap.CapESearch, imap.CapMove, imap.CapUIDPlus, imap.CapChildren, "APPENDLIMIT=26214400"} {
		if !caps.Has(want) {
			t.Errorf("capability %s not advertised; have %v", want, caps)
		}
	}
	for _, unwanted := range []imap.Cap{imap.CapCondStore, imap.CapQResync, imap.CapSort, imap.CapStartTLS} {
		if caps.Has(unwanted) {
			t.Errorf("capability %s advertised but not implemented", unwanted)
		}
	}
}

func TestListFoldersSpecialUseAndStatus(t *testing.T) {
	s := start(t)
	// imapclient writes to DebugWriter from its reading goroutine and from
	// the caller's: the buffer needs a lock.
	var wire mailtest.LogBuffer
	c, err := imapclient.DialInsecure(s.IMAPAddr, &imapclient.Options{DebugWriter: &wire})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(AliceAddress, AlicePassword).Wait(); err != nil {
		t.Fatal(err)
	}

	list, err := c.List("", "*", &imap.ListOptions{
		ReturnSpecialUse: true,
		ReturnStatus:     &imap.StatusOptions{NumMessages: true, NumUnseen: true},
	}).Collect()
	if err != nil {
		t.Fatalf("LIST: %v", err)
	}
	var names []string
	attrs := map[string][]imap.MailboxAttr{}
	for _, l := range list {
		names = append(names, l.Mailbox)
		attrs[l.Mailbox] = l.Attrs
		if l.Delim != '/' {
			t.Errorf("%s: delimiter %q, want '/'", l.Mailbox, l.Delim)
		}
		if l.Status == nil || l.Status.NumMessages == nil {
			t.Errorf("%s: no LIST-STATUS data", l.Mailbox)
			continue
		}
		if got, want := int(*l.Status.NumMessages), s.Seeded(AliceAddress, l.Mailbox); got != want {
			t.Errorf("%s: LIST-STATUS MESSAGES %d, Seeded %d", l.Mailbox, got, want)
		}
	}
	want := []string{"INBOX", "Archive", "Drafts", "Projekte", "Projekte/Übersicht", "Rechnungen & Belege", "Sent", "Trash"}
	if !slices.Equal(names, want) {
		t.Errorf("LIST names = %q, want %q", names, want)
	}
	// On the wire, names are modified UTF-7 (no ENABLE UTF8=ACCEPT here).
	checkContains(t, "LIST response", wire.String(), `"Projekte/&ANw-bersicht"`, `"Rechnungen &- Belege"`)

	top, err := c.List("", "%", nil).Collect()
	if err != nil || len(top) != len(want)-1 {
		t.Errorf(`LIST "" "%%": %d folders, %v; want %d`, len(top), err, len(want)-1)
	}
	sub, err := c.List("Projekte/", "%", nil).Collect()
	if err != nil || len(sub) != 1 || sub[0].Mailbox != FolderOverview {
		t.Errorf(`LIST "Projekte/" "%%": %+v, %v`, sub, err)
	}
	for folder, attr := range map[string]imap.MailboxAttr{
		FolderSent: imap.MailboxAttrSent, FolderDrafts: imap.MailboxAttrDrafts,
		FolderTrash: imap.MailboxAttrTrash, FolderArchive: imap.MailboxAttrArchive,
		FolderProjects: imap.MailboxAttrHasChildren, FolderOverview: imap.MailboxAttrHasNoChildren,
	} {
		if !slices.Contains(attrs[folder], attr) {
			t.Errorf("%s: attrs %v, want %s", folder, attrs[folder], attr)
		}
	}

	// Plain LIST (no RETURN options) carries special-use too, like Dovecot.
	plain, err := c.List("", "Sent", nil).Collect()
	if err != nil || len(plain) != 1 || !slices.Contains(plain[0].Attrs, imap.MailboxAttrSent) {
		t.Errorf("plain LIST Sent = %+v, %v; want \\Sent", plain, err)
	}
	// LIST (SPECIAL-USE) selects the four special folders.
	special, err := c.List("", "*", &imap.ListOptions{SelectSpecialUse: true}).Collect()
	if err != nil || len(special) != 4 {
		t.Errorf("LIST (SPECIAL-USE): %d folders, %v; want 4", len(special), err)
	}

	// STATUS agrees with Seeded for every folder, and alice has several dozen
	// messages.
	total := 0
	for _, f := range Folders() {
		n := count(t, c, f)
		if n != s.Seeded(AliceAddress, f) {
			t.Errorf("STATUS %s = %d, Seeded = %d", f, n, s.Seeded(AliceAddress, f))
		}
		total += n
	}
	if total < 40 || total != len(s.Messages(AliceAddress)) {
		t.Errorf("alice has %d messages (Messages: %d), want several dozen", total, len(s.Messages(AliceAddress)))
	}
}

func TestEnvelopeCharsets(t *testing.T) {
	s := start(t)
	c := login(t, s, AliceAddress, AlicePassword)
	if _, err := c.Select(FolderInbox, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatalf("EXAMINE: %v", err)
	}
	for _, tc := range []struct {
		tag, subject, fromName string
	}{
		{TagLatin1, "Grüße aus Köln: Angebot für Büromöbel", "Jürgen Weiß"},
		{TagShiftJIS, "会議の議事録について", "山田 太郎"},
		{TagKOI8R, "Отчёт за третий квартал", "Дмитрий Иванов"},
		{TagWindows1252, "Facture n° 2025-0042 – rappel", "Claire Dubois"},
		{TagEmoji, "🎉 We shipped the beta!", "Priya Natarajan"},
		{TagNoSubject, "", "Tom Fischer"},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			m := seededByTag(t, s, AliceAddress, tc.tag)
			uid := uidOf(t, c, m.MessageID)
			msgs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{Envelope: true}).Collect()
			if err != nil || len(msgs) != 1 {
				t.Fatalf("FETCH ENVELOPE: %d messages, %v", len(msgs), err)
			}
			env := msgs[0].Envelope
			if env.Subject != tc.subject {
				t.Errorf("subject %q, want %q", env.Subject, tc.subject)
			}
			if len(env.From) != 1 || env.From[0].Name != tc.fromName || env.From[0].Addr() != m.From {
				t.Errorf("from %+v, want %q <%s>", env.From, tc.fromName, m.From)
			}
			if env.MessageID != m.MessageID {
				t.Errorf("Message-ID %q, want %q", env.MessageID, m.MessageID)
			}
			if !env.Date.Equal(m.Date) {
				t.Errorf("date %v, want %v", env.Date, m.Date)
			}
		})
	}
}

// TestSearchDecodes checks that server-side SEARCH sees decoded text in
// every charset of the seed, as Dovecot's does.
func TestSearchDecodes(t *testing.T) {
	s := start(t)
	c := login(t, s, AliceAddress, AlicePassword)
	if _, err := c.Select(FolderInbox, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tag      string
		criteria imap.SearchCriteria
	}{
		{TagLatin1, imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "grüße aus"}}}},
		{TagLatin1, imap.SearchCriteria{Body: []string{"Büromöbel"}}},
		{TagShiftJIS, imap.SearchCriteria{Body: []string{"議事録"}}},
		{TagKOI8R, imap.SearchCriteria{Text: []string{"Санкт-Петербурге"}}},
		{TagWindows1252, imap.SearchCriteria{Body: []string{"1 250,00 €"}}},
		{TagUTF8QP, imap.SearchCriteria{Body: []string{"Łodzi"}}},
	} {
		data, err := c.UIDSearch(&tc.criteria, nil).Wait()
		if err != nil {
			t.Errorf("%s: SEARCH: %v", tc.tag, err)
			continue
		}
		uids := data.AllUIDs()
		want := uidOf(t, c, seededByTag(t, s, AliceAddress, tc.tag).MessageID)
		if len(uids) != 1 || uids[0] != want {
			t.Errorf("%s: SEARCH %+v found %v, want [%d]", tc.tag, tc.criteria, uids, want)
		}
	}
}

// TestSeedWellFormed reads every seeded message back over IMAP and checks
// that it is valid RFC 5322 with CRLF line ends, that every MIME part
// decodes, and that flags, threading and the special cases are as described.
func TestSeedWellFormed(t *testing.T) {
	s := start(t)
	for _, user := range s.Users {
		c := login(t, s, user.Address, user.Password)
		seeded := s.Messages(user.Address)
		ids := map[string]bool{}
		for _, m := range seeded {
			ids[m.MessageID] = true
		}
		for _, folder := range Folders() {
			var want []Message
			for _, m := range seeded {
				if m.Folder == folder {
					want = append(want, m)
				}
			}
			sel, err := c.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait()
			if err != nil {
				t.Fatalf("EXAMINE %s: %v", folder, err)
			}
			if int(sel.NumMessages) != len(want) {
				t.Fatalf("%s/%s: %d messages, want %d", user.Address, folder, sel.NumMessages, len(want))
			}
			if len(want) == 0 {
				continue
			}
			bodySection := &imap.FetchItemBodySection{Peek: true}
			got, err := c.Fetch(imap.SeqSet{{Start: 1, Stop: uint32(len(want))}}, &imap.FetchOptions{
				UID: true, Flags: true, InternalDate: true, RFC822Size: true, BodySection: []*imap.FetchItemBodySection{bodySection},
			}).Collect()
			if err != nil || len(got) != len(want) {
				t.Fatalf("FETCH %s: %d messages, %v", folder, len(got), err)
			}
			slices.SortFunc(got, func(a, b *imapclient.FetchMessageBuffer) int { return int(a.SeqNum) - int(b.SeqNum) })
			for i, w := range want {
				checkSeeded(t, w, got[i], got[i].FindBodySection(bodySection), ids)
				if i > 0 && got[i].UID <= got[i-1].UID {
					t.Errorf("%s: UIDs not ascending", folder)
				}
				if i > 0 && w.Date.Before(want[i-1].Date) {
					t.Errorf("%s: %s is older than the message before it", folder, w.Tag)
				}
			}
		}
	}
}

// checkSeeded verifies one fetched message against its description.
func checkSeeded(t *testing.T, w Message, got *imapclient.FetchMessageBuffer, raw []byte, ids map[string]bool) {
	t.Helper()
	name := w.Folder + "/" + w.Tag
	if len(raw) != w.Size || got.RFC822Size != int64(w.Size) {
		t.Errorf("%s: %d bytes fetched, RFC822.SIZE %d, Size %d", name, len(raw), got.RFC822Size, w.Size)
	}
	for i, b := range raw {
		if b == '\n' && (i == 0 || raw[i-1] != '\r') || b == '\r' && (i+1 == len(raw) || raw[i+1] != '\n') {
			t.Errorf("%s: bare CR or LF at byte %d", name, i)
			break
		}
	}
	for _, line := range bytes.Split(raw, []byte("\r\n")) {
		if len(line) > 998 {
			t.Errorf("%s: line of %d bytes", name, len(line))
		}
	}
	var flags []string
	for _, f := range got.Flags {
		flags = append(flags, strings.ToLower(string(f)))
	}
	var wantFlags []string
	for _, f := range w.Flags {
		wantFlags = append(wantFlags, strings.ToLower(f))
	}
	slices.Sort(flags)
	slices.Sort(wantFlags)
	if !slices.Equal(flags, wantFlags) {
		t.Errorf("%s: flags %v, want %v", name, got.Flags, w.Flags)
	}
	if d := got.InternalDate.Sub(w.Date); d < 0 || d > time.Minute {
		t.Errorf("%s: internal date %v, Date header %v", name, got.InternalDate, w.Date)
	}

	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if subject, err := mr.Header.Subject(); err != nil || subject != w.Subject {
		t.Errorf("%s: subject %q (%v), want %q", name, subject, err, w.Subject)
	}
	if id, err := mr.Header.MessageID(); err != nil || id != w.MessageID {
		t.Errorf("%s: Message-ID %q (%v), want %q", name, id, err, w.MessageID)
	}
	if addrs, err := mr.Header.AddressList("From"); err != nil || len(addrs) != 1 || addrs[0].Address != w.From {
		t.Errorf("%s: From %v (%v), want %s", name, addrs, err, w.From)
	}
	inReplyTo, _ := mr.Header.MsgIDList("In-Reply-To")
	refs, _ := mr.Header.MsgIDList("References")
	if len(inReplyTo) > 0 {
		if len(refs) == 0 || refs[len(refs)-1] != inReplyTo[0] {
			t.Errorf("%s: In-Reply-To %v does not end References %v", name, inReplyTo, refs)
		}
		for _, r := range refs {
			if !ids[r] {
				t.Errorf("%s: references %s, which is not in the mailbox", name, r)
			}
		}
	}

	var texts, files []string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Errorf("%s: next part: %v", name, err)
			return
		}
		body, err := io.ReadAll(p.Body)
		if err != nil {
			t.Errorf("%s: reading part: %v", name, err)
			return
		}
		switch h := p.Header.(type) {
		case *mail.InlineHeader:
			text := string(body)
			if strings.ContainsRune(text, '\uFFFD') {
				t.Errorf("%s: decoded text has U+FFFD", name)
			}
			texts = append(texts, text)
		case *mail.AttachmentHeader:
			fn, err := h.Filename()
			if err != nil {
				t.Errorf("%s: filename: %v", name, err)
			}
			files = append(files, fn)
			if len(body) == 0 {
				t.Errorf("%s: empty attachment %s", name, fn)
			}
		}
	}
	if len(texts) == 0 {
		t.Errorf("%s: no text part", name)
	}
	all := strings.Join(texts, "\n")
	switch w.Tag {
	case TagLatin1:
		checkContains(t, name, all, "Grüße", "Büromöbel", "«Ergo Plus»")
	case TagShiftJIS:
		checkContains(t, name, all, "議事録", "十月一日")
	case TagKOI8R:
		checkContains(t, name, all, "отчёт", "Санкт-Петербурге")
	case TagWindows1252:
		checkContains(t, name, all, "1 250,00 €", "d’un", "prochain…")
	case TagUTF8QP:
		checkContains(t, name, all, "Łodzi", "środy")
	case TagHTMLOnly:
		checkContains(t, name, string(raw), "Content-Type: text/html")
		checkContains(t, name, all, "<script", "<style", "<table", `<a href="https://example.org/`, "&mdash;")
	case TagRFC2231:
		checkContains(t, name, string(raw), "filename*=utf-8''Protokoll_Besprechung_M%C3%A4rz.txt")
		if !slices.Contains(files, "Protokoll_Besprechung_März.txt") {
			t.Errorf("%s: attachments %q", name, files)
		}
	case TagPDF:
		if !slices.Contains(files, "Service-Agreement-signed.pdf") {
			t.Errorf("%s: attachments %q", name, files)
		}
	case TagPNG:
		checkContains(t, name, string(raw), "Content-Type: image/png")
	case TagNested:
		if len(texts) != 2 || len(files) != 1 {
			t.Errorf("%s: %d text parts and %d attachments, want 2 and 1", name, len(texts), len(files))
		}
	case TagInjection:
		checkContains(t, name, all, "ignore all previous", "display:none")
		if !slices.Contains(files, "quota_report\u202efdp.exe") {
			t.Errorf("%s: attachments %q, want the bidi-spoofed name", name, files)
		}
	case TagCalendar:
		checkContains(t, name, all, "BEGIN:VCALENDAR")
	case TagRFC2047Name:
		checkContains(t, name, string(raw), `filename="=?utf-8?q?Gruppenfoto=5FM=C3=BCggelsee.png?="`)
		t.Logf("%s: go-message reads the attachment names as %q", name, files)
	}
}

func checkContains(t *testing.T, name, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s: %q not found", name, sub)
		}
	}
}

func TestSMTPDelivery(t *testing.T) {
	s := start(t)
	bobIMAP := login(t, s, BobAddress, BobPassword)
	before := count(t, bobIMAP, FolderInbox)
	if before != s.Seeded(BobAddress, FolderInbox) {
		t.Fatalf("bob INBOX %d, Seeded %d", before, s.Seeded(BobAddress, FolderInbox))
	}

	// go-smtp's client sends AUTH PLAIN over a plain connection without
	// complaint (unlike net/smtp.PlainAuth); the server allows it because
	// AllowInsecureAuth is set.
	c, err := smtp.Dial(s.SMTPAddr)
	if err != nil {
		t.Fatalf("dial SMTP: %v", err)
	}
	defer c.Close()
	if ok, mechs := c.Extension("AUTH"); !ok || !strings.Contains(mechs, "PLAIN") {
		t.Fatalf("AUTH not offered: %v %q", ok, mechs)
	}
	if err := c.Auth(sasl.NewPlainClient("", AliceAddress, AlicePassword)); err != nil {
		t.Fatalf("AUTH: %v", err)
	}
	const body = "Hi Bob,\r\n\r\nthe demo server delivered this.\r\n\r\nAlice\r\n"
	raw := "From: Alice Martin <alice@demo.test>\r\n" +
		"To: Bob Keller <bob@demo.test>\r\n" +
		"Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe_via_SMTP?=\r\n" +
		"Message-ID: <smtp-test-1@demo.test>\r\n" +
		"Date: " + time.Now().Format(time.RFC1123Z) + "\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body
	// Envelope: bob, a duplicate of bob and someone outside demo.test.
	if err := c.SendMail(AliceAddress, []string{BobAddress, "BOB@demo.test", "carol@example.com"}, strings.NewReader(raw)); err != nil {
		t.Fatalf("SendMail: %v", err)
	}
	if err := c.Quit(); err != nil {
		t.Errorf("QUIT: %v", err)
	}

	if got := count(t, bobIMAP, FolderInbox); got != before+1 {
		t.Fatalf("bob INBOX %d after delivery, want %d", got, before+1)
	}
	if _, err := bobIMAP.Select(FolderInbox, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	uid := uidOf(t, bobIMAP, "smtp-test-1@demo.test")
	section := &imap.FetchItemBodySection{Peek: true}
	msgs, err := bobIMAP.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{
		Envelope: true, Flags: true, BodySection: []*imap.FetchItemBodySection{section},
	}).Collect()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("FETCH: %v", err)
	}
	m := msgs[0]
	if m.Envelope.Subject != "Grüße via SMTP" {
		t.Errorf("subject %q", m.Envelope.Subject)
	}
	if slices.Contains(m.Flags, imap.FlagSeen) {
		t.Errorf("delivered message is \\Seen: %v", m.Flags)
	}
	stored := string(m.FindBodySection(section))
	if !strings.HasPrefix(stored, "Return-Path: <alice@demo.test>\r\nReceived: from ") ||
		!strings.Contains(stored, "for <bob@demo.test>;") {
		t.Errorf("trace fields missing:\n%s", stored[:min(len(stored), 300)])
	}
	if !strings.HasSuffix(stored, "\r\n\r\n"+body) {
		t.Errorf("body not delivered intact:\n%q", stored)
	}
	// Alice's own mailbox is untouched: the SMTP server does not file a copy
	// in Sent.
	aliceIMAP := login(t, s, AliceAddress, AlicePassword)
	if got := count(t, aliceIMAP, FolderSent); got != s.Seeded(AliceAddress, FolderSent) {
		t.Errorf("alice Sent %d, want %d", got, s.Seeded(AliceAddress, FolderSent))
	}
}

func smtpCode(err error) int {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

func TestSMTPRefusals(t *testing.T) {
	s := start(t)

	c, err := smtp.Dial(s.SMTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("client.test"); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail(AliceAddress, nil); smtpCode(err) != 530 {
		t.Errorf("MAIL before AUTH: %v, want 530", err)
	}
	if err := c.Auth(sasl.NewPlainClient("", AliceAddress, "wrong")); smtpCode(err) != 535 {
		t.Errorf("AUTH with wrong password: %v, want 535", err)
	}
	if err := c.Auth(sasl.NewPlainClient("", "mallory@demo.test", AlicePassword)); smtpCode(err) != 535 {
		t.Errorf("AUTH as unknown user: %v, want 535", err)
	}
	if err := c.Auth(sasl.NewPlainClient("", AliceAddress, AlicePassword)); err != nil {
		t.Fatalf("AUTH: %v", err)
	}
	// MAIL FROM another address is accepted (and logged).
	if err := c.Mail("someone@example.org", nil); err != nil {
		t.Errorf("MAIL FROM other address: %v", err)
	}
	if err := c.Rcpt("nobody@demo.test", nil); smtpCode(err) != 550 {
		t.Errorf("RCPT unknown demo user: %v, want 550", err)
	}
}

func TestIMAPWrongPassword(t *testing.T) {
	s := start(t)
	for _, tc := range []struct{ user, password string }{
		{AliceAddress, "wrong"},
		{AliceAddress, BobPassword},
		{"mallory@demo.test", AlicePassword},
	} {
		c, err := imapclient.DialInsecure(s.IMAPAddr, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Login(tc.user, tc.password).Wait()
		var ie *imap.Error
		if !errors.As(err, &ie) || ie.Code != imap.ResponseCodeAuthenticationFailed {
			t.Errorf("LOGIN %s/%s: %v, want NO [AUTHENTICATIONFAILED]", tc.user, tc.password, err)
		}
		c.Close()
	}
}

func TestExamineIsReadOnly(t *testing.T) {
	s := start(t)
	c := login(t, s, AliceAddress, AlicePassword)
	m := seededByTag(t, s, AliceAddress, TagPlain) // unread
	if _, err := c.Select(FolderInbox, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	uid := uidOf(t, c, m.MessageID)
	// BODY[] without PEEK must not set \Seen in an EXAMINEd mailbox.
	if _, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{{}}}).Collect(); err != nil {
		t.Fatal(err)
	}
	err := c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagFlagged}, Silent: true}, nil).Close()
	if err == nil {
		t.Error("STORE in an EXAMINEd mailbox succeeded")
	}
	msgs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{Flags: true}).Collect()
	if err != nil || len(msgs) != 1 {
		t.Fatal(err)
	}
	if len(msgs[0].Flags) != 0 {
		t.Errorf("flags after read-only access: %v, want none", msgs[0].Flags)
	}

	// With SELECT, the same FETCH marks it read and STORE works.
	if _, err := c.Select(FolderInbox, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{{}}}).Collect(); err != nil {
		t.Fatal(err)
	}
	if err := c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagFlagged}, Silent: true}, nil).Close(); err != nil {
		t.Errorf("STORE after SELECT: %v", err)
	}
	msgs, err = c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{Flags: true}).Collect()
	if err != nil || len(msgs) != 1 {
		t.Fatal(err)
	}
	if !slices.Contains(msgs[0].Flags, imap.FlagSeen) || !slices.Contains(msgs[0].Flags, imap.FlagFlagged) {
		t.Errorf("flags after SELECT, FETCH and STORE: %v", msgs[0].Flags)
	}

	// A \Deleted message survives EXPUNGE and CLOSE after EXAMINE; CLOSE
	// itself succeeds, as RFC 3501 requires.
	n := count(t, c, FolderInbox)
	if err := c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagDeleted}, Silent: true}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select(FolderInbox, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.UIDExpunge(imap.UIDSetNum(uid)).Close(); err != nil {
		t.Errorf("UID EXPUNGE after EXAMINE: %v", err)
	}
	if err := c.UnselectAndExpunge().Wait(); err != nil {
		t.Errorf("CLOSE after EXAMINE: %v", err)
	}
	if got := count(t, c, FolderInbox); got != n {
		t.Errorf("INBOX has %d messages after EXPUNGE/CLOSE in EXAMINE, want %d", got, n)
	}
	// After SELECT, CLOSE does expunge.
	if _, err := c.Select(FolderInbox, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.UnselectAndExpunge().Wait(); err != nil {
		t.Fatal(err)
	}
	if got := count(t, c, FolderInbox); got != n-1 {
		t.Errorf("INBOX has %d messages after CLOSE, want %d", got, n-1)
	}
}

func TestMailboxManagement(t *testing.T) {
	s := start(t)
	c := login(t, s, AliceAddress, AlicePassword)

	if err := c.Create("Junk", &imap.CreateOptions{SpecialUse: []imap.MailboxAttr{imap.MailboxAttrJunk}}).Wait(); err != nil {
		t.Fatalf("CREATE Junk (USE (\\Junk)): %v", err)
	}
	if err := c.Create("Everything", &imap.CreateOptions{SpecialUse: []imap.MailboxAttr{imap.MailboxAttrAll}}).Wait(); err == nil {
		t.Error("CREATE with USE (\\All) succeeded")
	}
	if err := c.Create("Reisen/2025/Lissabon", nil).Wait(); err != nil {
		t.Fatalf("CREATE nested: %v", err)
	}
	if err := c.Delete("Reisen").Wait(); err == nil {
		t.Error("DELETE of a mailbox with children succeeded")
	}
	if err := c.Rename("Reisen", "Urlaub", nil).Wait(); err != nil {
		t.Fatalf("RENAME: %v", err)
	}
	if err := c.Rename(FolderInbox, "Old", nil).Wait(); err == nil {
		t.Error("RENAME INBOX succeeded")
	}
	if err := c.Delete(FolderInbox).Wait(); err == nil {
		t.Error("DELETE INBOX succeeded")
	}
	list, err := c.List("", "*", nil).Collect()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]imap.MailboxAttr{}
	for _, l := range list {
		got[l.Mailbox] = l.Attrs
	}
	for _, name := range []string{"Junk", "Urlaub", "Urlaub/2025", "Urlaub/2025/Lissabon", FolderInbox} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s missing from LIST %v", name, got)
		}
	}
	for _, name := range []string{"Reisen", "Reisen/2025", "Everything"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s still listed", name)
		}
	}
	if !slices.Contains(got["Junk"], imap.MailboxAttrJunk) {
		t.Errorf("Junk attrs %v", got["Junk"])
	}

	// MOVE to Trash works with UIDPLUS data.
	if _, err := c.Select(FolderInbox, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	uid := uidOf(t, c, seededByTag(t, s, AliceAddress, TagPlain).MessageID)
	md, err := c.Move(imap.UIDSetNum(uid), FolderTrash).Wait()
	if err != nil || md == nil || md.DestUIDs == nil {
		t.Fatalf("MOVE: %+v, %v", md, err)
	}
	if n := count(t, c, FolderTrash); n != s.Seeded(AliceAddress, FolderTrash)+1 {
		t.Errorf("Trash has %d after MOVE", n)
	}
}

func TestStartRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:143", ":143", "example.com:143", "nonsense"} {
		if s, err := Start(t.Context(), Options{IMAPAddr: addr}); err == nil {
			s.Close()
			t.Errorf("Start with IMAPAddr %q succeeded", addr)
		}
		if s, err := Start(t.Context(), Options{SMTPAddr: addr}); err == nil {
			s.Close()
			t.Errorf("Start with SMTPAddr %q succeeded", addr)
		}
	}
	s, err := Start(t.Context(), Options{IMAPAddr: "localhost:0", SMTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.IMAPAddr, "127.0.0.1:") || !strings.HasPrefix(s.SMTPAddr, "127.0.0.1:") {
		t.Errorf("addresses %s %s, want 127.0.0.1", s.IMAPAddr, s.SMTPAddr)
	}
}

// TestCloseNoLeak leaves connections open in every state and checks that
// Close cuts them and that no goroutine survives.
func TestCloseNoLeak(t *testing.T) {
	base := settledGoroutines(0)

	s, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// An IMAP client logged in with a mailbox selected, one in IDLE, one
	// that never says anything, and an SMTP client in the middle of a
	// transaction.
	imap1, err := imapclient.DialInsecure(s.IMAPAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := imap1.Login(AliceAddress, AlicePassword).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := imap1.Select(FolderInbox, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	imap2, err := imapclient.DialInsecure(s.IMAPAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := imap2.Login(BobAddress, BobPassword).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := imap2.Select(FolderInbox, nil).Wait(); err != nil {
		t.Fatal(err)
	}
	idle, err := imap2.Idle()
	if err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", s.IMAPAddr)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := smtp.Dial(s.SMTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Auth(sasl.NewPlainClient("", AliceAddress, AlicePassword)); err != nil {
		t.Fatal(err)
	}
	if err := sc.Mail(AliceAddress, nil); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if n := len(s.imapConns.conns) + len(s.smtpConns.conns); n != 0 {
		t.Errorf("%d connections still tracked after Close", n)
	}

	// The clients notice the server went away.
	idle.Wait()
	imap1.Close()
	imap2.Close()
	silent.Close()
	sc.Close()

	if n := settledGoroutines(base); n > base {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, base, buf)
	}
}

// settledGoroutines waits until the goroutine count stops changing (or drops
// to target) and returns it.
func settledGoroutines(target int) int {
	n := runtime.NumGoroutine()
	for i := 0; i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if (target > 0 && m <= target) || (target == 0 && m == n && i > 5) {
			return m
		}
		n = m
	}
	return n
}
