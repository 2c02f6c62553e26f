package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mcpcall"
)

// onForm answers every approval form with accept, after running do (the
// change made while the person looks at the form), and keeps what was
// shown.
type onForm struct {
	do     func()
	action mcp.ElicitationResponseAction
	mu     sync.Mutex
	shown  []string
}

func (f *onForm) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	f.mu.Lock()
	f.shown = append(f.shown, req.Params.Message)
	f.mu.Unlock()
	if f.do != nil {
		f.do()
	}
	action := f.action
	if action == "" {
		action = mcp.ElicitationResponseActionAccept
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: action, Content: map[string]any{}}}, nil
}

func (f *onForm) last(t *testing.T) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.shown) == 0 {
		t.Fatal("no form was shown")
	}
	return f.shown[len(f.shown)-1]
}

// formClient is a 2026-07-28 client whose user answers forms with f; rt,
// when set, carries its requests.
func formClient(t *testing.T, g *gateway, h map[string]string, f *onForm, rt http.RoundTripper) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var hc *http.Client
	if rt != nil {
		hc = &http.Client{Transport: rt}
	}
	c, err := mcpcall.Connect(ctx, g.URL, mcpcall.Options{Headers: h, Elicit: f, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// putMessage puts a message with subject and body into user's folder, with
// flags and an internal date (zero: now), as another mail program would.
func putMessage(t *testing.T, s *mailtest.Stack, user, folder, subject, body string, date time.Time, flags ...imap.Flag) {
	t.Helper()
	raw := fmt.Sprintf("From: someone@example.net\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%d.%s@example.net>\r\nDate: %s\r\n\r\n%s\r\n",
		user, subject, time.Now().UnixNano(), strings.ReplaceAll(subject, " ", "."), time.Now().Format(time.RFC1123Z), body)
	appendUID(t, direct(t, s, user), folder, []byte(raw), flags, date)
}

func doveadm(t *testing.T, s *mailtest.Stack, args ...string) string {
	t.Helper()
	out, err := s.Doveadm(args...)
	if err != nil {
		t.Fatalf("doveadm %v: %v %s", args, err, out)
	}
	return out
}

// messagesIn is the number of messages in user's folder, as Dovecot says.
func messagesIn(t *testing.T, s *mailtest.Stack, user, folder string) string {
	t.Helper()
	out := doveadm(t, s, "-f", "flow", "mailbox", "status", "-u", user, "messages", folder)
	_, n, _ := strings.Cut(strings.TrimSpace(out), "messages=")
	return n
}

// signedIn is the person's browser: signed in on the approval page of
// link as user, with the page's form token.
type signedIn struct {
	hc   *http.Client
	link string
	csrf string
	page string
}

var csrfInPage = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func signInAs(t testing.TB, link, user, password string) *signedIn {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	p := &signedIn{hc: &http.Client{Jar: jar}, link: link}
	resp, err := p.hc.PostForm(link, url.Values{"action": {"signin"}, "username": {user}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p.page = html.UnescapeString(string(b))
	if m := csrfInPage.FindStringSubmatch(p.page); m != nil {
		p.csrf = m[1]
	}
	return p
}

func (p *signedIn) answer(t testing.TB, action string) (int, string) {
	t.Helper()
	resp, err := p.hc.PostForm(p.link, url.Values{"action": {action}, "csrf": {p.csrf}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, html.UnescapeString(string(b))
}

func linkOf(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	var out struct{ Approval struct{ URL string } }
	mailtest.Decode(t, res, &out)
	if out.Approval.URL == "" {
		t.Fatalf("no approval link: %s", mailtest.Text(res))
	}
	return out.Approval.URL
}

// TestApprovalBound: what the person approves is what is done, against
// Dovecot and Postfix. Between the question and the answer the mailbox
// changes as a hostile sender or a second session would change it; the
// approval then does nothing (a destructive call) or sends exactly the
// message that was shown (a forward), on the approval page and in the
// client's form alike.
func TestApprovalBound(t *testing.T) {
	t.Parallel() // its own stack
	s, g := approvalStack(t)
	alice := userHeaders(s, mailtest.Alice)
	pw := s.Users[mailtest.Alice]
	noForms := mailtest.MCPClient(t, g.URL, alice, mcp.ProtocolVersion20250618)

	t.Run("delete folder filled after the page was shown", func(t *testing.T) {
		doveadm(t, s, "mailbox", "create", "-u", mailtest.Alice, "Empty1")
		p := signInAs(t, linkOf(t, mailtest.Call(t, noForms, "imap_delete_folder", map[string]any{"folder": "Empty1"})), mailtest.Alice, pw)
		if p.csrf == "" || !strings.Contains(p.page, "0 (0 unread)") {
			t.Fatalf("the page: %s", p.page)
		}
		putMessage(t, s, mailtest.Alice, "Empty1", "Contract A", "signed", time.Time{})
		putMessage(t, s, mailtest.Alice, "Empty1", "Contract B", "signed", time.Time{})
		status, body := p.answer(t, "approve")
		if status != http.StatusConflict || !strings.Contains(body, "changed since the person approved") || !strings.Contains(body, "nothing was done") {
			t.Fatalf("approve after the change: %d %s", status, body)
		}
		if n := messagesIn(t, s, mailtest.Alice, "Empty1"); n != "2" {
			t.Fatalf("the folder holds %s messages after the refused approval", n)
		}
	})
	t.Run("delete folder replaced after the page was shown", func(t *testing.T) {
		doveadm(t, s, "mailbox", "create", "-u", mailtest.Alice, "Empty2")
		p := signInAs(t, linkOf(t, mailtest.Call(t, noForms, "imap_delete_folder", map[string]any{"folder": "Empty2"})), mailtest.Alice, pw)
		doveadm(t, s, "mailbox", "rename", "-u", mailtest.Alice, "Empty2", "Moved2")
		doveadm(t, s, "mailbox", "create", "-u", mailtest.Alice, "Empty2")
		// A page opened after the change says so, and offers nothing.
		late := signInAs(t, p.link, mailtest.Alice, pw)
		if late.csrf != "" || !strings.Contains(late.page, "can no longer be approved") {
			t.Fatalf("a page opened after the change: %s", late.page)
		}
		// The page opened before it: the answer is refused.
		status, body := p.answer(t, "approve")
		if status != http.StatusConflict || !strings.Contains(body, "deleted and made again") {
			t.Fatalf("approve after rename and recreate: %d %s", status, body)
		}
		if out := doveadm(t, s, "mailbox", "list", "-u", mailtest.Alice); !strings.Contains(out, "Empty2") || !strings.Contains(out, "Moved2") {
			t.Fatalf("folders after the refused approval:\n%s", out)
		}
	})
	t.Run("delete folder unchanged is deleted", func(t *testing.T) {
		doveadm(t, s, "mailbox", "create", "-u", mailtest.Alice, "Empty3")
		putMessage(t, s, mailtest.Alice, "Empty3", "old", "x", time.Time{})
		p := signInAs(t, linkOf(t, mailtest.Call(t, noForms, "imap_delete_folder", map[string]any{"folder": "Empty3"})), mailtest.Alice, pw)
		if status, body := p.answer(t, "approve"); status != http.StatusOK || !strings.Contains(body, "Deleted folder") {
			t.Fatalf("approve: %d %s", status, body)
		}
		if out := doveadm(t, s, "mailbox", "list", "-u", mailtest.Alice); strings.Contains(out, "Empty3") {
			t.Fatal("the folder is still there")
		}
	})
	t.Run("permanent trash of a replaced folder, by form", func(t *testing.T) {
		doveadm(t, s, "mailbox", "create", "-u", mailtest.Alice, "Doomed")
		for _, subj := range []string{"spam 1", "spam 2", "spam 3"} {
			putMessage(t, s, mailtest.Alice, "Doomed", subj, "x", time.Time{})
		}
		f := &onForm{do: func() {
			// Replaced while the person reads the form: the same UIDs
			// now name two contracts.
			doveadm(t, s, "mailbox", "delete", "-u", mailtest.Alice, "Doomed")
			doveadm(t, s, "mailbox", "create", "-u", mailtest.Alice, "Doomed")
			for _, subj := range []string{"contract 1", "contract 2", "contract 3"} {
				putMessage(t, s, mailtest.Alice, "Doomed", subj, "x", time.Time{})
			}
		}}
		res := mailtest.Call(t, formClient(t, g, alice, f, nil), "imap_trash_emails", map[string]any{"folder": "Doomed", "uids": []any{1, 2}, "permanent": true})
		if !strings.Contains(f.last(t), "spam 1") || !res.IsError || !strings.Contains(mailtest.Text(res), "changed since the person approved") {
			t.Fatalf("shown %q, result %q", f.last(t), mailtest.Text(res))
		}
		if n := messagesIn(t, s, mailtest.Alice, "Doomed"); n != "3" {
			t.Fatalf("%s messages left, want the 3 contracts", n)
		}
	})
	t.Run("permanent trash unchanged, by form", func(t *testing.T) {
		doveadm(t, s, "mailbox", "create", "-u", mailtest.Alice, "Trashy")
		putMessage(t, s, mailtest.Alice, "Trashy", "junk", "x", time.Time{})
		putMessage(t, s, mailtest.Alice, "Trashy", "keep", "x", time.Time{})
		f := &onForm{}
		res := mailtest.Call(t, formClient(t, g, alice, f, nil), "imap_trash_emails", map[string]any{"folder": "Trashy", "uids": []any{1}, "permanent": true})
		if res.IsError || messagesIn(t, s, mailtest.Alice, "Trashy") != "1" {
			t.Fatalf("%s; %s left", mailtest.Text(res), messagesIn(t, s, mailtest.Alice, "Trashy"))
		}
	})
	forwardCase := func(t *testing.T, folder, token string, swap func(approve func())) {
		doveadm(t, s, "mailbox", "create", "-u", mailtest.Alice, folder)
		putMessage(t, s, mailtest.Alice, folder, "Newsletter "+token, "This week: the newsletter.", time.Time{})
		replace := func() {
			doveadm(t, s, "mailbox", "delete", "-u", mailtest.Alice, folder)
			doveadm(t, s, "mailbox", "create", "-u", mailtest.Alice, folder)
			putMessage(t, s, mailtest.Alice, folder, "CONFIDENTIAL "+token, "The merger closes on Friday.", time.Time{})
		}
		swap(replace)
		if n := delivered(t, s, mailtest.Bob, token, 1); n != 1 {
			t.Fatalf("%d forwards delivered, want 1", n)
		}
		raw := doveadm(t, s, "fetch", "-u", mailtest.Bob, "text", "mailbox", "INBOX", "subject", token)
		if !strings.Contains(raw, "the newsletter") || strings.Contains(raw, "merger") || strings.Contains(raw, "CONFIDENTIAL") {
			t.Fatalf("what was forwarded is not what was shown:\n%s", raw)
		}
	}
	t.Run("forward of a replaced message, by form", func(t *testing.T) {
		token := fmt.Sprint("fwdform", time.Now().UnixNano())
		forwardCase(t, "FwdForm", token, func(replace func()) {
			f := &onForm{do: replace}
			res := mailtest.Call(t, formClient(t, g, alice, f, nil), "smtp_forward_email", map[string]any{"folder": "FwdForm", "uid": 1, "to": []any{mailtest.Bob}})
			if res.IsError || !strings.Contains(f.last(t), "the newsletter") {
				t.Fatalf("shown %q, result %s", f.last(t), mailtest.Text(res))
			}
		})
	})
	t.Run("forward of a replaced message, on the page", func(t *testing.T) {
		token := fmt.Sprint("fwdpage", time.Now().UnixNano())
		forwardCase(t, "FwdPage", token, func(replace func()) {
			p := signInAs(t, linkOf(t, mailtest.Call(t, noForms, "smtp_forward_email", map[string]any{"folder": "FwdPage", "uid": 1, "to": []any{mailtest.Bob}})), mailtest.Alice, pw)
			if !strings.Contains(p.page, "the newsletter") {
				t.Fatalf("the page: %s", p.page)
			}
			replace()
			if status, body := p.answer(t, "approve"); status != http.StatusOK {
				t.Fatalf("approve: %d %s", status, body)
			}
		})
	})
	t.Run("an HTML version that says more is shown", func(t *testing.T) {
		f := &onForm{action: mcp.ElicitationResponseActionDecline}
		mailtest.Call(t, formClient(t, g, alice, f, nil), "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": "Invoice",
			"text": "Please pay 10 EUR.", "html": "<p>Please pay <b>900 EUR</b> to IBAN DE00 1234.</p><p style=\"display:none\">hidden words</p>"})
		shown := f.last(t)
		for _, want := range []string{"Text version", "Please pay 10 EUR.", "HTML version", "Please pay 900 EUR to IBAN DE00 1234."} {
			if !strings.Contains(shown, want) {
				t.Errorf("the form lacks %q:\n%s", want, shown)
			}
		}
		if strings.Contains(shown, "hidden words") {
			t.Errorf("the form shows text the recipient cannot see:\n%s", shown)
		}
		p := signInAs(t, linkOf(t, mailtest.Call(t, noForms, "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": "Invoice page",
			"text": "Please pay 10 EUR.", "html": "<p>Please pay 900 EUR.</p>"})), mailtest.Alice, pw)
		if !strings.Contains(p.page, "Please pay 10 EUR.") || !strings.Contains(p.page, "Please pay 900 EUR.") || !strings.Contains(p.page, "HTML version") {
			t.Fatalf("the page: %s", p.page)
		}
		p.answer(t, "reject")
	})
	t.Run("direction overrides are shown", func(t *testing.T) {
		f := &onForm{action: mcp.ElicitationResponseActionDecline}
		mailtest.Call(t, formClient(t, g, alice, f, nil), "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": "invoice\u202Efdp.exe",
			"text": "see attached", "attachments": []any{map[string]any{"filename": "photo\u202Egpj.exe", "content_base64": "aGk="}}})
		if shown := f.last(t); strings.Contains(shown, "\u202E") || strings.Count(shown, "⟨U+202E⟩") != 2 {
			t.Fatalf("the form: %q", shown)
		}
	})
}

// dropOnRetry carries requests, and removes header from the retry that
// answers a form (the one carrying a requestState).
type dropOnRetry struct{ header string }

func (d dropOnRetry) RoundTrip(r *http.Request) (*http.Response, error) {
	if b, ok := answersForm(r); ok {
		r = r.Clone(r.Context())
		r.Header.Del(d.header)
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// answersForm reads r's body (and puts it back) and reports whether r is
// the retry that answers a form: it carries a requestState.
func answersForm(r *http.Request) ([]byte, bool) {
	if r.Body == nil {
		return nil, false
	}
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	var msg struct {
		Params struct {
			RequestState string `json:"requestState"`
		} `json:"params"`
	}
	return b, json.Unmarshal(b, &msg) == nil && msg.Params.RequestState != ""
}

// TestApprovalAgentBound: a prune a person approved for agent alpha is
// refused when the retry names no agent (which would prune every agent's
// folder), and prunes only alpha's when it comes as asked.
func TestApprovalAgentBound(t *testing.T) {
	t.Parallel() // its own stack
	s, g := approvalStack(t)
	alpha := userHeaders(s, mailtest.Alice)
	alpha["x-mailbox-agent"] = "alpha"
	beta := userHeaders(s, mailtest.Alice)
	beta["x-mailbox-agent"] = "beta"
	// Each agent's folder exists once it has been used.
	for _, h := range []map[string]string{alpha, beta} {
		mailtest.Call(t, mailtest.MCPClient(t, g.URL, h, ""), "agent_list", map[string]any{})
	}
	old := time.Now().AddDate(0, 0, -60)
	for _, folder := range []string{"Agents/alpha", "Agents/beta"} {
		putMessage(t, s, mailtest.Alice, folder, "old note", "x", old, imap.FlagSeen)
	}
	f := &onForm{}
	res := mailtest.Call(t, formClient(t, g, alpha, f, dropOnRetry{"x-mailbox-agent"}), "agent_prune", map[string]any{"older_than_days": 30})
	if !res.IsError || !strings.Contains(mailtest.Text(res), "does not belong to this call") || !strings.Contains(f.last(t), "agent alpha") {
		t.Fatalf("shown %q, retried without the agent: %s", f.last(t), mailtest.Text(res))
	}
	for _, folder := range []string{"Agents/alpha", "Agents/beta"} {
		if n := messagesIn(t, s, mailtest.Alice, folder); n != "1" {
			t.Fatalf("%s holds %s messages after the refused prune", folder, n)
		}
	}
	res = mailtest.Call(t, formClient(t, g, alpha, &onForm{}, nil), "agent_prune", map[string]any{"older_than_days": 30})
	if res.IsError || messagesIn(t, s, mailtest.Alice, "Agents/alpha") != "0" || messagesIn(t, s, mailtest.Alice, "Agents/beta") != "1" {
		t.Fatalf("%s: alpha %s, beta %s", mailtest.Text(res), messagesIn(t, s, mailtest.Alice, "Agents/alpha"), messagesIn(t, s, mailtest.Alice, "Agents/beta"))
	}
}

// TestApprovalUnprovenDovecot: against a real server, a made-up login
// gets no link and no form (a form's state is single-use memory too), and
// holds no draft.
func TestApprovalUnprovenDovecot(t *testing.T) {
	t.Parallel() // its own stack
	s, g := approvalStack(t)
	nobody := map[string]string{"x-imap-user": "nobody1@nowhere.invalid", "x-imap-pass": "x"}
	res := mailtest.Call(t, mailtest.MCPClient(t, g.URL, nobody, mcp.ProtocolVersion20250618), "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": "x", "text": "x"})
	if !res.IsError || strings.Contains(mailtest.Text(res), "/approve/") {
		t.Fatalf("a made-up login: %s", mailtest.Text(res))
	}
	f := &onForm{}
	res = mailtest.Call(t, formClient(t, g, nobody, f, nil), "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": "x", "text": "x"})
	if f.mu.Lock(); len(f.shown) != 0 || !res.IsError {
		t.Fatalf("a made-up login was asked %d forms: %s", len(f.shown), mailtest.Text(res))
	}
	f.mu.Unlock()
	// alice with a wrong password: refused by Dovecot, nothing held.
	wrong := map[string]string{"x-imap-user": mailtest.Alice, "x-imap-pass": "wrong"}
	res = mailtest.Call(t, mailtest.MCPClient(t, g.URL, wrong, mcp.ProtocolVersion20250618), "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": "unproven", "text": "x"})
	if !res.IsError || strings.Contains(mailtest.Text(res), "/approve/") || withSubject(t, s, mailtest.Alice, "Drafts", "unproven") != 0 {
		t.Fatalf("a wrong password: %s", mailtest.Text(res))
	}
}
