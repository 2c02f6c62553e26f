package tests

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
)

const bob = "bob@example.test"

// bobMessages is how many synthetic messages bob's INBOX is seeded with.
const bobMessages = 10000

var seedOnce sync.Once

// seededStack returns the shared stack with bob's INBOX holding 10,000
// seeded messages and a folder with a non-ASCII name.
func seededStack(t *testing.T) *mailtest.Stack {
	t.Helper()
	s := mailtest.Shared(t)
	var err error
	seedOnce.Do(func() {
		start := time.Now()
		if err = s.Seed(bob, bobMessages, "INBOX"); err != nil {
			return
		}
		if err = s.Seed(bob, 25, "Entw&APw-rfe"); err != nil {
			return
		}
		t.Logf("seeded bob with %d + 25 messages in %v", bobMessages, time.Since(start).Round(time.Millisecond))
	})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	return s
}

func TestListFoldersMatchesDovecotStatus(t *testing.T) {
	s := seededStack(t)
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	var res tools.FoldersResult
	mailtest.Decode(t, mailtest.Call(t, c, "imap_list_folders", nil), &res)

	d := direct(t, s, bob)
	seen := map[string]bool{}
	for _, f := range res.Folders {
		seen[f.Name] = true
		sd, err := d.Status(f.Name, &imap.StatusOptions{NumMessages: true, NumUnseen: true}).Wait()
		if err != nil {
			t.Fatalf("STATUS %q: %v", f.Name, err)
		}
		if f.Total != *sd.NumMessages || f.Unread != *sd.NumUnseen {
			t.Errorf("%s: gateway says %d/%d, Dovecot %d/%d", f.Name, f.Total, f.Unread, *sd.NumMessages, *sd.NumUnseen)
		}
	}
	for _, want := range []string{"INBOX", "Sent", "Drafts", "Trash", "Junk", "Entwürfe"} {
		if !seen[want] {
			t.Errorf("folder %q missing from %v", want, res.Folders)
		}
	}
	roles := map[string]string{}
	for _, f := range res.Folders {
		roles[f.Name] = f.Role
	}
	if roles["INBOX"] != "inbox" || roles["Sent"] != "sent" || roles["Trash"] != "trash" || roles["Junk"] != "junk" || roles["Drafts"] != "drafts" {
		t.Errorf("roles wrong: %v", roles)
	}
	if res.Folders[0].Name != "INBOX" {
		t.Errorf("INBOX not first")
	}
	var inbox mailbox.Folder
	for _, f := range res.Folders {
		if f.Name == "INBOX" {
			inbox = f
		}
	}
	if inbox.Total < bobMessages {
		t.Errorf("INBOX total %d < %d", inbox.Total, bobMessages)
	}
}

// allUIDs asks Dovecot for every UID of a folder.
func allUIDs(t *testing.T, d *imapclient.Client, folder string, crit *imap.SearchCriteria) []imap.UID {
	t.Helper()
	if _, err := d.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	if crit == nil {
		crit = &imap.SearchCriteria{}
	}
	data, err := d.UIDSearch(crit, nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	uids := data.AllUIDs()
	slices.Sort(uids)
	return uids
}

func TestListEmailsNewestFirst(t *testing.T) {
	s := seededStack(t)
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	var page mailbox.Page
	mailtest.Decode(t, mailtest.Call(t, c, "imap_list_emails", nil), &page)
	uids := allUIDs(t, direct(t, s, bob), "INBOX", nil)
	want := uids[len(uids)-20:]
	slices.Reverse(want)
	if len(page.Messages) != 20 {
		t.Fatalf("got %d messages, want 20", len(page.Messages))
	}
	for i, m := range page.Messages {
		if imap.UID(m.UID) != want[i] {
			t.Fatalf("message %d has UID %d, want %d", i, m.UID, want[i])
		}
		if m.From == nil || m.From.Email == "" || m.Subject == "" || m.Date.IsZero() || m.Size == 0 {
			t.Errorf("uid %d incomplete: %+v", m.UID, m)
		}
	}
	if page.Total != uint32(len(uids)) || page.NextCursor == "" || page.Unread == 0 || page.UIDValidity == 0 {
		t.Fatalf("page header wrong: total %d unread %d cursor %q", page.Total, page.Unread, page.NextCursor)
	}
	// The text fallback names the messages too.
	text := mailtest.Text(mailtest.Call(t, c, "imap_list_emails", map[string]any{"limit": 3}))
	if !strings.Contains(text, fmt.Sprintf("uid %d", want[0])) {
		t.Errorf("text fallback lacks the newest uid: %s", text)
	}
}

// Walking every page returns each message exactly once, even while new mail
// arrives during the walk.
func TestListEmailsCursorWalkWhileMailArrives(t *testing.T) {
	s := seededStack(t)
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	before := allUIDs(t, direct(t, s, bob), "INBOX", nil)

	appender := direct(t, s, bob)
	stop := make(chan struct{})
	var appended int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			raw := fmt.Sprintf("From: new@example.org\r\nTo: bob@example.test\r\nSubject: arrived during walk %d\r\nDate: %s\r\nMessage-ID: <walk%d@example.org>\r\n\r\nhello\r\n",
				i, time.Now().Format(time.RFC1123Z), i)
			cmd := appender.Append("INBOX", int64(len(raw)), nil)
			cmd.Write([]byte(raw))
			cmd.Close()
			if _, err := cmd.Wait(); err != nil {
				t.Errorf("append: %v", err)
				return
			}
			appended++
		}
	}()

	got := map[uint32]int{}
	cursor := ""
	pages := 0
	for {
		args := map[string]any{"limit": 100}
		if cursor != "" {
			args["cursor"] = cursor
		}
		var page mailbox.Page
		mailtest.Decode(t, mailtest.Call(t, c, "imap_list_emails", args), &page)
		pages++
		last := uint32(1 << 31)
		for _, m := range page.Messages {
			if m.UID >= last {
				t.Fatalf("page %d not newest first: %d after %d", pages, m.UID, last)
			}
			last = m.UID
			got[m.UID]++
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
		if pages > 200 {
			t.Fatal("too many pages")
		}
	}
	close(stop)
	wg.Wait()
	if appended == 0 {
		t.Fatal("no mail arrived during the walk; the test proves nothing")
	}
	for uid, n := range got {
		if n != 1 {
			t.Errorf("uid %d returned %d times", uid, n)
		}
	}
	for _, uid := range before {
		if got[uint32(uid)] != 1 {
			t.Fatalf("uid %d missing from the walk (gap)", uid)
		}
	}
	t.Logf("walked %d pages, %d messages; %d arrived meanwhile", pages, len(got), appended)

	// A cursor from another folder, or a garbled one, is refused clearly.
	res := mailtest.Call(t, c, "imap_list_emails", map[string]any{"folder": "Sent", "cursor": cursor})
	if !res.IsError || !strings.Contains(mailtest.Text(res), "belongs to folder") {
		t.Errorf("cursor of another folder: %s", mailtest.Text(res))
	}
	res = mailtest.Call(t, c, "imap_list_emails", map[string]any{"cursor": "not-a-cursor"})
	if !res.IsError || !strings.Contains(mailtest.Text(res), "invalid cursor") {
		t.Errorf("garbled cursor: %s", mailtest.Text(res))
	}
}

// walkSearch collects every UID a search returns, page by page.
func walkSearch(t *testing.T, call func(args map[string]any) mailbox.Page, args map[string]any) []uint32 {
	t.Helper()
	var uids []uint32
	cursor := ""
	for i := 0; i < 1000; i++ {
		a := map[string]any{"limit": 100}
		for k, v := range args {
			a[k] = v
		}
		if cursor != "" {
			a["cursor"] = cursor
		}
		page := call(a)
		for _, m := range page.Messages {
			uids = append(uids, m.UID)
		}
		if page.NextCursor == "" {
			return uids
		}
		cursor = page.NextCursor
	}
	t.Fatal("search did not end")
	return nil
}

func TestSearchMatchesDovecot(t *testing.T) {
	s := seededStack(t)
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	d := direct(t, s, bob)
	call := func(args map[string]any) mailbox.Page {
		var p mailbox.Page
		mailtest.Decode(t, mailtest.Call(t, c, "imap_search_emails", args), &p)
		return p
	}
	tests := []struct {
		name string
		args map[string]any
		crit *imap.SearchCriteria
	}{
		{"from", map[string]any{"from": "grace.tanaka"}, &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "From", Value: "grace.tanaka"}}}},
		{"subject and unread", map[string]any{"subject": "invoice", "seen": false},
			&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "invoice"}}, NotFlag: []imap.Flag{imap.FlagSeen}}},
		{"flagged since", map[string]any{"flagged": true, "since": time.Now().AddDate(0, -6, 0).Format("2006-01-02")},
			&imap.SearchCriteria{Flag: []imap.Flag{imap.FlagFlagged}, Since: time.Now().AddDate(0, -6, 0)}},
		{"larger", map[string]any{"larger": 200000}, &imap.SearchCriteria{Larger: 200000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := allUIDs(t, d, "INBOX", tt.crit)
			got := walkSearch(t, call, tt.args)
			slices.Sort(got)
			if len(want) == 0 {
				t.Fatal("Dovecot finds nothing: the test proves nothing")
			}
			if len(got) != len(want) {
				t.Fatalf("gateway found %d, Dovecot %d", len(got), len(want))
			}
			for i := range got {
				if imap.UID(got[i]) != want[i] {
					t.Fatalf("UID %d != %d at %d", got[i], want[i], i)
				}
			}
		})
	}
}

func TestSearchNonASCII(t *testing.T) {
	s := seededStack(t)
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	for _, term := range []string{"Привет", "会議", "Grüße"} {
		var p mailbox.Page
		mailtest.Decode(t, mailtest.Call(t, c, "imap_search_emails", map[string]any{"subject": term, "limit": 5}), &p)
		if len(p.Messages) == 0 {
			t.Errorf("subject %q found nothing", term)
		}
		for _, m := range p.Messages {
			if !strings.Contains(m.Subject, term) {
				t.Errorf("subject %q: result %q does not contain it", term, m.Subject)
			}
		}
	}
}

func TestSearchBadInput(t *testing.T) {
	s := seededStack(t)
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, "the search is empty"},
		{map[string]any{"since": "31/01/2026"}, "since must be a date: YYYY-MM-DD (e.g. 2026-01-31) or RFC 3339 (e.g. 2026-01-31T09:00:00Z) (got \"31/01/2026\")"},
		{map[string]any{"before": "yesterday"}, "before must be a date: YYYY-MM-DD (e.g. 2026-01-31) or RFC 3339 (e.g. 2026-01-31T09:00:00Z) (got \"yesterday\")"},
		{map[string]any{"from": "x", "folder": "No Such Folder"}, "folder \"No Such Folder\" does not exist; call imap_list_folders to see the folders"},
		{map[string]any{"from": "x", "limit": 1000}, "limit must be between 1 and 100 (got 1000)"},
	} {
		res := mailtest.Call(t, c, "imap_search_emails", tc.args)
		if !res.IsError || !strings.Contains(mailtest.Text(res), tc.want) {
			t.Errorf("%v: IsError=%v %q, want %q", tc.args, res.IsError, mailtest.Text(res), tc.want)
		}
	}
}

// flagsOf reads a message's flags straight from Dovecot.
func flagsOf(t *testing.T, d *imapclient.Client, uid imap.UID) []imap.Flag {
	t.Helper()
	bufs, err := d.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{Flags: true}).Collect()
	if err != nil || len(bufs) != 1 {
		t.Fatalf("fetch flags: %v (%d)", err, len(bufs))
	}
	return bufs[0].Flags
}

func TestReadCharsetsAndFlagsUnchanged(t *testing.T) {
	s := seededStack(t)
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	d := direct(t, s, bob)
	if _, err := d.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	// subject term (as the seed writes it) -> a phrase of the decoded body
	cases := []struct{ subject, body string }{
		{"Grüße aus Köln", "Straße, Äpfel, Öl"},
		{"Café", "Déjà vu: naïve café"},
		{"Привет из Москвы", "Здравствуйте! Это тестовое письмо в кодировке KOI8-R."},
		{"会議の議事録", "こんにちは。これはテストメールです。"},
		{"請求書のお知らせ", "いつもお世話になっております。"},
		{"季度报告", "您好，这是一封测试邮件。"},
		{"Zażółć gęślą jaźń", "Dzień dobry, pozdrowienia z Łodzi."},
	}
	for _, tc := range cases {
		t.Run(tc.subject, func(t *testing.T) {
			var p mailbox.Page
			mailtest.Decode(t, mailtest.Call(t, c, "imap_search_emails", map[string]any{"subject": tc.subject, "limit": 1}), &p)
			if len(p.Messages) == 0 {
				t.Fatalf("no seeded message with subject %q", tc.subject)
			}
			uid := p.Messages[0].UID
			before := flagsOf(t, d, imap.UID(uid))
			var m mailbox.Message
			mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": uid}), &m)
			if !strings.Contains(m.Text, tc.body) {
				t.Errorf("body of uid %d lacks %q:\n%s", uid, tc.body, m.Text[:min(300, len(m.Text))])
			}
			if !strings.Contains(m.Subject, tc.subject) {
				t.Errorf("subject %q lacks %q", m.Subject, tc.subject)
			}
			after := flagsOf(t, d, imap.UID(uid))
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Errorf("flags changed by reading: %v -> %v", before, after)
			}
		})
	}
}

func TestReadHTMLOnlyAndAttachments(t *testing.T) {
	s := seededStack(t)
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	d := direct(t, s, bob)
	raw := "From: News <news@example.org>\r\nTo: bob@example.test\r\nSubject: HTML only test\r\nMessage-ID: <html1@example.org>\r\n" +
		"Date: Mon, 02 Nov 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b1\r\n\r\n" +
		"--b1\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><head><style>p{color:red}</style><script>alert(1)</script></head>" +
		"<body><h1>Release notes</h1><p>Read <a href=\"https://example.org/notes\">the notes</a> &amp; enjoy.</p><table><tr><td>a</td><td>b</td></tr></table></body></html>\r\n" +
		"--b1\r\nContent-Type: application/pdf; name=\"report.pdf\"\r\nContent-Disposition: attachment; filename*=UTF-8''Gr%C3%BC%C3%9Fe.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b1--\r\n"
	cmd := d.Append("Entwürfe", int64(len(raw)), &imap.AppendOptions{Flags: []imap.Flag{imap.FlagFlagged}})
	cmd.Write([]byte(raw))
	cmd.Close()
	ad, err := cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	var m mailbox.Message
	mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"folder": "Entwürfe", "uid": ad.UID}), &m)
	if strings.Contains(m.Text, "<") || strings.Contains(m.Text, "alert(1)") || strings.Contains(m.Text, "color:red") {
		t.Errorf("HTML leaked into the text:\n%s", m.Text)
	}
	for _, want := range []string{"Release notes", "https://example.org/notes", "the notes", "& enjoy"} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, m.Text)
		}
	}
	if m.TextFrom != "text/html" {
		t.Errorf("text_from = %q", m.TextFrom)
	}
	if len(m.Attachments) != 1 || m.Attachments[0].Filename != "Grüße.pdf" || m.Attachments[0].PartID != "2" || m.Attachments[0].ContentType != "application/pdf" {
		t.Errorf("attachments: %+v", m.Attachments)
	}
	if !m.Flags.Flagged || m.Flags.Seen {
		t.Errorf("flags: %+v", m.Flags)
	}
}

func TestReadTruncationAndErrors(t *testing.T) {
	s := seededStack(t)
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	var p mailbox.Page
	mailtest.Decode(t, mailtest.Call(t, c, "imap_search_emails", map[string]any{"larger": 20000, "limit": 1}), &p)
	if len(p.Messages) == 0 {
		t.Fatal("no large message")
	}
	uid := p.Messages[0].UID
	var whole mailbox.Message
	mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": uid}), &whole)
	var parts []string
	offset := 0
	for i := 0; i < 10000; i++ {
		var m mailbox.Message
		mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": uid, "max_chars": 300, "offset": offset}), &m)
		parts = append(parts, m.Text)
		if !m.Truncated {
			break
		}
		offset = m.NextOffset
	}
	if len(parts) < 2 {
		t.Fatalf("a %d-character body was not cut at 300", whole.TotalChars)
	}
	if strings.Join(parts, "") != whole.Text {
		t.Fatal("the pieces do not add up to the whole body")
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"uid": 999999999}, "no message with UID 999999999"},
		{map[string]any{"uid": 1, "folder": "Nope"}, "does not exist"},
		{map[string]any{"uid": -4}, "uid"},
		{map[string]any{"uid": "seven"}, "uid"},
		{map[string]any{}, "uid"},
	} {
		res := mailtest.Call(t, c, "imap_read_email", tc.args)
		if !res.IsError || !strings.Contains(mailtest.Text(res), tc.want) {
			t.Errorf("%v: IsError=%v %q, want %q", tc.args, res.IsError, mailtest.Text(res), tc.want)
		}
	}
}

func TestWrongPasswordThenRight(t *testing.T) {
	s := seededStack(t)
	g := startGateway(t, s)
	bad := mailtest.MCPClient(t, g.URL, map[string]string{"x-imap-user": bob, "x-imap-pass": "wrong"}, "")
	res := mailtest.Call(t, bad, "imap_list_folders", nil)
	if !res.IsError || !strings.Contains(mailtest.Text(res), "authentication failed") {
		t.Fatalf("wrong password: %q", mailtest.Text(res))
	}
	good := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	if res := mailtest.Call(t, good, "imap_list_folders", nil); res.IsError {
		t.Fatalf("right password after wrong: %s", mailtest.Text(res))
	}
	if st := g.App.PoolStats(); st.Opened != 1 {
		t.Errorf("pool opened %d connections, want 1 (the failed login must not be pooled)", st.Opened)
	}
}

// A cursor taken before a folder was deleted and created again (so the
// server gave it a new UIDVALIDITY) is refused with a clear error instead of
// silently paging through different messages.
func TestCursorRefusedAfterUIDValidityChange(t *testing.T) {
	s := seededStack(t)
	g := startGateway(t, s)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, bob), "")
	d := direct(t, s, bob)
	const folder = "Rebuilt"
	fill := func() uint32 {
		t.Helper()
		if err := d.Create(folder, nil).Wait(); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			raw := fmt.Sprintf("From: a@example.org\r\nTo: bob@example.test\r\nSubject: rebuilt %d\r\nMessage-ID: <rebuilt%d.%d@example.org>\r\n\r\nx\r\n", i, i, time.Now().UnixNano())
			cmd := d.Append(folder, int64(len(raw)), nil)
			cmd.Write([]byte(raw))
			cmd.Close()
			if _, err := cmd.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		st, err := d.Status(folder, &imap.StatusOptions{UIDValidity: true}).Wait()
		if err != nil {
			t.Fatal(err)
		}
		return st.UIDValidity
	}
	uv1 := fill()
	t.Cleanup(func() { d.Delete(folder).Wait() })

	var page mailbox.Page
	mailtest.Decode(t, mailtest.Call(t, c, "imap_list_emails", map[string]any{"folder": folder, "limit": 1}), &page)
	if page.NextCursor == "" || page.UIDValidity != uv1 {
		t.Fatalf("first page: cursor %q, uidvalidity %d (server says %d)", page.NextCursor, page.UIDValidity, uv1)
	}
	var found mailbox.Page
	mailtest.Decode(t, mailtest.Call(t, c, "imap_search_emails", map[string]any{"folder": folder, "subject": "rebuilt", "limit": 1}), &found)
	if found.NextCursor == "" {
		t.Fatal("search gave no cursor")
	}

	if err := d.Delete(folder).Wait(); err != nil {
		t.Fatal(err)
	}
	if uv2 := fill(); uv2 == uv1 {
		t.Fatalf("the server kept UIDVALIDITY %d for the new folder: the test proves nothing", uv1)
	}
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"imap_list_emails", map[string]any{"folder": folder, "cursor": page.NextCursor}},
		{"imap_search_emails", map[string]any{"folder": folder, "subject": "rebuilt", "cursor": found.NextCursor}},
	} {
		res := mailtest.Call(t, c, call.tool, call.args)
		if !res.IsError || !strings.Contains(mailtest.Text(res), "UIDVALIDITY changed") {
			t.Errorf("%s with a stale cursor: IsError=%v %q", call.tool, res.IsError, mailtest.Text(res))
		}
	}
	// Without the cursor the rebuilt folder lists normally.
	mailtest.Decode(t, mailtest.Call(t, c, "imap_list_emails", map[string]any{"folder": folder}), &page)
	if len(page.Messages) != 3 {
		t.Fatalf("rebuilt folder lists %d messages, want 3", len(page.Messages))
	}
}
