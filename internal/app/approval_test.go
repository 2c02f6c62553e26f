package app_test

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

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mcpcall"
)

// elicitor answers every form with action, and remembers what it was shown.
type elicitor struct {
	action mcp.ElicitationResponseAction
	mu     sync.Mutex
	shown  []string
}

func (e *elicitor) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.mu.Lock()
	e.shown = append(e.shown, req.Params.Message)
	e.mu.Unlock()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: e.action, Content: map[string]any{}}}, nil
}

func (e *elicitor) messages() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.shown...)
}

func approvalClient(t *testing.T, g *gateway, h map[string]string, protocol string, e client.ElicitationHandler, hc *http.Client) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpcall.Connect(ctx, g.URL, mcpcall.Options{Headers: h, Protocol: protocol, Elicit: e, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// inbox counts the messages with subject in user's INBOX, read with the
// headers (no approval involved: listing is not covered).
func inbox(t *testing.T, g *gateway, user int, subject string) int {
	t.Helper()
	c := mailtest.MCPClient(t, g.URL, headers(g.Users[user]), "")
	return count(t, c, "INBOX", subject)
}

func count(t *testing.T, c *client.Client, folder, subject string) int {
	t.Helper()
	res := mailtest.Call(t, c, "imap_search_emails", map[string]any{"folder": folder, "subject": subject})
	var page struct{ Messages []struct{ Subject string } }
	mailtest.Decode(t, res, &page)
	n := 0
	for _, m := range page.Messages {
		if m.Subject == subject {
			n++
		}
	}
	return n
}

var (
	modern = ""
	legacy = mcp.ProtocolVersion20250618
)

// TestApprovalByForm: under APPROVAL=all, a client that can show its user
// a form is asked, with exactly what will be sent; accept sends once,
// decline and cancel send nothing; with both the 2026-07-28 protocol
// (input_required, requestState) and the earlier one (mcp-go's bridge,
// which needs the sealed session id).
func TestApprovalByForm(t *testing.T) {
	g := startDemoGatewayWith(t, true, "APPROVAL=all", "MAILBOX_ACCESS=full")
	alice, bob := g.Users[0], g.Users[1]
	for _, proto := range []string{modern, legacy} {
		for _, action := range []mcp.ElicitationResponseAction{mcp.ElicitationResponseActionAccept, mcp.ElicitationResponseActionDecline, mcp.ElicitationResponseActionCancel} {
			t.Run(fmt.Sprintf("protocol=%q %s", proto, action), func(t *testing.T) {
				e := &elicitor{action: action}
				c := approvalClient(t, g, headers(alice), proto, e, nil)
				subject := fmt.Sprintf("Approved? protocol %q %s %d", proto, action, time.Now().UnixNano())
				res := mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{bob.Address}, "cc": []any{"carol@example.test"},
					"subject": subject, "text": "Line one\nLine two",
					"attachments": []any{map[string]any{"filename": "q3.txt", "content_base64": "aGVsbG8="}}})
				shown := e.messages()
				if len(shown) != 1 {
					t.Fatalf("the user was shown %d forms: %q", len(shown), shown)
				}
				for _, want := range []string{"Send this email?", "From: " + alice.Address, "To: " + bob.Address, "Cc: carol@example.test", "Subject: " + subject, "Line one\nLine two", "q3.txt (5 bytes)"} {
					if !strings.Contains(shown[0], want) {
						t.Errorf("the form lacks %q:\n%s", want, shown[0])
					}
				}
				got := inbox(t, g, 1, subject)
				if action == mcp.ElicitationResponseActionAccept {
					if res.IsError || got != 1 {
						t.Fatalf("accepted: %d delivered, result %s", got, mailtest.Text(res))
					}
					return
				}
				if !res.IsError || !strings.Contains(mailtest.Text(res), "nothing was sent") || got != 0 {
					t.Fatalf("%s: %d delivered, result %q", action, got, mailtest.Text(res))
				}
			})
		}
	}
}

// rewriter changes the retry of a call (the request that carries a
// requestState) before it leaves, and records every request body.
type rewriter struct {
	change func(body map[string]any, h http.Header)
	mu     sync.Mutex
	retry  []byte
	header http.Header
}

func (rw *rewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		var msg map[string]any
		if json.Unmarshal(b, &msg) == nil {
			if p, _ := msg["params"].(map[string]any); p != nil && p["requestState"] != nil {
				r = r.Clone(r.Context())
				if rw.change != nil {
					rw.change(msg, r.Header)
				}
				b, _ = json.Marshal(msg)
				rw.mu.Lock()
				rw.retry, rw.header = b, r.Header.Clone()
				rw.mu.Unlock()
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestApprovalStateRefusals: the retry that carries the person's yes is
// refused, and nothing is sent, when its requestState was altered, when
// the arguments changed (another recipient), when another user sends it,
// and when it is sent a second time.
func TestApprovalStateRefusals(t *testing.T) {
	g := startDemoGatewayWith(t, true, "APPROVAL=send")
	alice, bob := g.Users[0], g.Users[1]
	yes := &elicitor{action: mcp.ElicitationResponseActionAccept}
	cases := []struct {
		name   string
		change func(body map[string]any, h http.Header)
		want   string
	}{
		{"tampered state", func(b map[string]any, _ http.Header) {
			p := b["params"].(map[string]any)
			s := []byte(p["requestState"].(string))
			s[len(s)/2] ^= 1
			p["requestState"] = string(s)
		}, "does not belong to this call"},
		{"another recipient", func(b map[string]any, _ http.Header) {
			b["params"].(map[string]any)["arguments"].(map[string]any)["to"] = []any{"mallory@example.test"}
		}, "does not belong to this call"},
		{"another user", func(_ map[string]any, h http.Header) {
			h.Set("X-Imap-User", bob.Address)
			h.Set("X-Imap-Pass", bob.Password)
		}, "does not belong to this call"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rw := &rewriter{change: tc.change}
			c := approvalClient(t, g, headers(alice), modern, yes, &http.Client{Transport: rw})
			subject := "Refused " + tc.name + fmt.Sprint(time.Now().UnixNano())
			res := mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{bob.Address}, "subject": subject, "text": "x"})
			if !res.IsError || !strings.Contains(mailtest.Text(res), tc.want) || !strings.Contains(mailtest.Text(res), "nothing was done") {
				t.Fatalf("got %q (error %v)", mailtest.Text(res), res.IsError)
			}
			if n := inbox(t, g, 1, subject) + count(t, mailtest.MCPClient(t, g.URL, headers(alice), ""), "Sent", subject); n != 0 {
				t.Fatalf("%d copies exist", n)
			}
		})
	}
	t.Run("replayed", func(t *testing.T) {
		rw := &rewriter{}
		c := approvalClient(t, g, headers(alice), modern, yes, &http.Client{Transport: rw})
		subject := fmt.Sprint("Replayed ", time.Now().UnixNano())
		if res := mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{bob.Address}, "subject": subject, "text": "x"}); res.IsError {
			t.Fatal(mailtest.Text(res))
		}
		rw.mu.Lock()
		body, h := rw.retry, rw.header
		rw.mu.Unlock()
		req, _ := http.NewRequest(http.MethodPost, g.URL, bytes.NewReader(body))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "already used") {
			t.Fatalf("replay answered %d %s", resp.StatusCode, b)
		}
		if n := inbox(t, g, 1, subject); n != 1 {
			t.Fatalf("%d delivered, want exactly 1", n)
		}
	})
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// person is a browser signed in on the approval page as user: it opens
// link, signs in with password, and comes back to the link.
func person(t *testing.T, link, user, password string) (*http.Client, string) {
	hc, _, page := signInOn(t, link, user, password)
	return hc, page
}

// signInOn is person with the status of the page it ends on.
func signInOn(t *testing.T, link, user, password string) (*http.Client, int, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	resp, err := hc.PostForm(link, url.Values{"action": {"signin"}, "username": {user}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return hc, resp.StatusCode, string(b)
}

// answerPage signs in as user on the approval page, opens link and
// answers it.
func answerPage(t *testing.T, link, action string, u demo.User) (status int, body string) {
	t.Helper()
	hc, status, b := signInOn(t, link, u.Address, u.Password)
	m := csrfField.FindStringSubmatch(b)
	if m == nil {
		return status, b
	}
	resp, err := hc.PostForm(link, url.Values{"csrf": {html.UnescapeString(m[1])}, "action": {action}})
	if err != nil {
		t.Fatal(err)
	}
	bb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(bb)
}

// TestApprovalByPage: a client that cannot ask gets a link; the page shows
// the message, Approve sends it once (a second answer is refused) and
// files it in Sent, Reject removes the held draft; a destructive call
// waits the same way.
func TestApprovalByPage(t *testing.T) {
	g := startDemoGatewayWith(t, true, "APPROVAL=all", "MAILBOX_ACCESS=full")
	alice, bob := g.Users[0], g.Users[1]
	c := mailtest.MCPClient(t, g.URL, headers(alice), legacy)
	for _, action := range []string{"approve", "reject"} {
		t.Run(action, func(t *testing.T) {
			subject := fmt.Sprintf("<b>Page</b> %s %d", action, time.Now().UnixNano())
			res := mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{bob.Address}, "subject": subject, "text": "Hello <script>alert(1)</script>"})
			var out struct {
				Approval struct {
					Status, URL string
					DraftUID    uint32 `json:"draft_uid"`
				}
			}
			mailtest.Decode(t, res, &out)
			if out.Approval.Status != "approval_required" || out.Approval.URL == "" || out.Approval.DraftUID == 0 {
				t.Fatalf("result %s", mailtest.Text(res))
			}
			if n := count(t, c, "Drafts", subject); n != 1 {
				t.Fatalf("%d held drafts", n)
			}
			hc, _ := person(t, out.Approval.URL, alice.Address, alice.Password)
			resp, err := hc.Get(out.Approval.URL)
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, want := range []string{html.EscapeString(subject), bob.Address, "Hello &lt;script&gt;"} {
				if !strings.Contains(string(page), want) {
					t.Errorf("the page lacks %q", want)
				}
			}
			if strings.Contains(string(page), "<script>") || resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
				t.Errorf("page protections: %v", resp.Header)
			}
			status, body := answerPage(t, out.Approval.URL, action, alice)
			if status != 200 {
				t.Fatalf("%s: %d %s", action, status, body)
			}
			want := 0
			if action == "approve" {
				want = 1
			}
			if n := inbox(t, g, 1, subject); n != want {
				t.Fatalf("%d delivered, want %d", n, want)
			}
			if n := count(t, c, "Sent", subject); n != want {
				t.Fatalf("%d in Sent, want %d", n, want)
			}
			if n := count(t, c, "Drafts", subject); n != 0 {
				t.Fatalf("%d drafts left", n)
			}
			if status, body := answerPage(t, out.Approval.URL, action, alice); status != http.StatusGone || !strings.Contains(body, "already used") {
				t.Fatalf("second answer: %d %s", status, body)
			}
			if n := inbox(t, g, 1, subject); n != want {
				t.Fatalf("after a second answer %d delivered, want %d", n, want)
			}
		})
	}
	t.Run("delete folder", func(t *testing.T) {
		mailtest.Call(t, mailtest.MCPClient(t, g.URL, headers(alice), ""), "imap_create_folder", map[string]any{"name": "Doomed"})
		res := mailtest.Call(t, c, "imap_delete_folder", map[string]any{"folder": "Doomed"})
		var out struct{ Approval struct{ URL string } }
		mailtest.Decode(t, res, &out)
		_, page := person(t, out.Approval.URL, alice.Address, alice.Password)
		if !strings.Contains(page, "Doomed") || !strings.Contains(page, "cannot be undone") {
			t.Fatalf("page: %s", page)
		}
		if status, body := answerPage(t, out.Approval.URL, "approve", alice); status != 200 || !strings.Contains(body, "Deleted folder") {
			t.Fatalf("approve: %d %s", status, body)
		}
		folders := mailtest.Text(mailtest.Call(t, c, "imap_list_folders", map[string]any{}))
		if strings.Contains(folders, "Doomed") {
			t.Fatalf("the folder is still there:\n%s", folders)
		}
	})
}

// pendingOf decodes a result waiting on the approval page.
func pendingOf(t *testing.T, res *mcp.CallToolResult) (link string, draft uint32) {
	t.Helper()
	var out struct {
		Approval struct {
			URL      string
			DraftUID uint32 `json:"draft_uid"`
		}
	}
	mailtest.Decode(t, res, &out)
	if out.Approval.URL == "" {
		t.Fatalf("no approval link: %s", mailtest.Text(res))
	}
	return out.Approval.URL, out.Approval.DraftUID
}

// TestApprovalNeedsThePerson: the model holds the link the result gave
// it, and an HTTP tool (curl). It sees a sign-in form and nothing of the
// message; its own cookie and form value, the page's old trick, do
// nothing; signing in as another mailbox (whose password it may know)
// does nothing. Only the person, signed in as the mailbox, sees and
// approves, once.
func TestApprovalNeedsThePerson(t *testing.T) {
	g := startDemoGatewayWith(t, true, "APPROVAL=send")
	alice, bob := g.Users[0], g.Users[1]
	c := mailtest.MCPClient(t, g.URL, headers(alice), legacy)
	subject := fmt.Sprint("Wire 9000 EUR ", time.Now().UnixNano())
	link, draft := pendingOf(t, mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{bob.Address}, "subject": subject, "text": "to account 12345"}))

	// The model: GET, then POST with a cookie and csrf of its choosing.
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `id="signin"`) || strings.Contains(string(b), "Wire 9000") || strings.Contains(string(b), "12345") || strings.Contains(string(b), bob.Address) {
		t.Fatalf("the link alone shows: %d %s", resp.StatusCode, b)
	}
	for _, cookie := range []string{"mbx_approve", "mbx_approver", "__Host-mbx_approver"} {
		req, _ := http.NewRequest(http.MethodPost, link, strings.NewReader(url.Values{"csrf": {"forged"}, "action": {"approve"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: cookie, Value: "forged"})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a forged %s: %d", cookie, resp.StatusCode)
		}
	}
	// Signed in as bob (another mailbox of this gateway).
	if status, body := answerPage(t, link, "approve", bob); status != http.StatusOK || !strings.Contains(body, "another mailbox") {
		t.Fatalf("bob: %d %s", status, body)
	}
	if n := inbox(t, g, 1, subject); n != 0 {
		t.Fatalf("%d delivered before the person approved", n)
	}
	if n := count(t, c, "Drafts", subject); n != 1 || draft == 0 {
		t.Fatalf("%d held drafts", n)
	}
	// The person.
	if status, body := answerPage(t, link, "approve", alice); status != http.StatusOK || !strings.Contains(body, "Sent") {
		t.Fatalf("alice: %d %s", status, body)
	}
	if n := inbox(t, g, 1, subject); n != 1 {
		t.Fatalf("%d delivered, want 1", n)
	}
}

// TestApprovalUnproven: a call with credentials the mail server refuses
// gets no link and no form, and takes no place: a made-up user cannot
// fill anyone's approvals.
func TestApprovalUnproven(t *testing.T) {
	g := startDemoGatewayWith(t, true, "APPROVAL=send", "APPROVAL_MAX_PENDING=1")
	bob := g.Users[1]
	for i := range 5 {
		nobody := map[string]string{"x-imap-user": fmt.Sprintf("nobody%d@nowhere.invalid", i), "x-imap-pass": "x"}
		for _, proto := range []string{legacy, modern} {
			var c *client.Client
			e := &elicitor{action: mcp.ElicitationResponseActionAccept}
			if proto == modern {
				c = approvalClient(t, g, nobody, modern, e, nil)
			} else {
				c = mailtest.MCPClient(t, g.URL, nobody, legacy)
			}
			res := mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{bob.Address}, "subject": "x", "text": "x"})
			if !res.IsError || strings.Contains(mailtest.Text(res), "/approve/") || res.StructuredContent != nil || len(e.messages()) != 0 {
				t.Fatalf("unproven credentials got %d forms and: %s", len(e.messages()), mailtest.Text(res))
			}
		}
	}
	// bob's one place is his.
	c := mailtest.MCPClient(t, g.URL, headers(bob), legacy)
	pendingOf(t, mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{g.Users[0].Address}, "subject": "bob's", "text": "x"}))
}

// TestApprovalPendingCap: one mailbox may have APPROVAL_MAX_PENDING
// approvals waiting; past it the call is refused with a sentence, holds
// no draft, and another mailbox is not affected.
func TestApprovalPendingCap(t *testing.T) {
	g := startDemoGatewayWith(t, true, "APPROVAL=send", "APPROVAL_MAX_PENDING=3")
	alice, bob := g.Users[0], g.Users[1]
	c := mailtest.MCPClient(t, g.URL, headers(alice), legacy)
	subject := fmt.Sprint("Capped ", time.Now().UnixNano())
	links, refused := 0, 0
	for range 6 {
		res := mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{bob.Address}, "subject": subject, "text": "x"})
		switch {
		case !res.IsError:
			pendingOf(t, res)
			links++
		case strings.Contains(mailtest.Text(res), "APPROVAL_MAX_PENDING") && strings.Contains(mailtest.Text(res), "3 approvals waiting"):
			refused++
		default:
			t.Fatalf("unexpected: %s", mailtest.Text(res))
		}
	}
	if links != 3 || refused != 3 {
		t.Fatalf("%d links, %d refused", links, refused)
	}
	if n := count(t, c, "Drafts", subject); n != 3 {
		t.Fatalf("%d held drafts, want 3", n)
	}
	cb := mailtest.MCPClient(t, g.URL, headers(bob), legacy)
	pendingOf(t, mailtest.Call(t, cb, "smtp_send_email", map[string]any{"to": []any{alice.Address}, "subject": subject, "text": "x"}))
}

// TestApprovalLogsNoSecret: a whole approval run (a form, a link signed
// in to and approved, one rejected) at LOG_LEVEL=debug leaves no link
// token, requestState, sign-in cookie or password in any log line.
func TestApprovalLogsNoSecret(t *testing.T) {
	g := startDemoGatewayWith(t, true, "APPROVAL=send")
	alice, bob := g.Users[0], g.Users[1]
	var secrets []string
	rw := &rewriter{}
	fc := approvalClient(t, g, headers(alice), modern, &elicitor{action: mcp.ElicitationResponseActionAccept}, &http.Client{Transport: rw})
	if res := mailtest.Call(t, fc, "smtp_send_email", map[string]any{"to": []any{bob.Address}, "subject": "form", "text": "x"}); res.IsError {
		t.Fatal(mailtest.Text(res))
	}
	var retry struct{ Params struct{ RequestState string } }
	json.Unmarshal(rw.retry, &retry)
	secrets = append(secrets, retry.Params.RequestState)
	c := mailtest.MCPClient(t, g.URL, headers(alice), legacy)
	for _, action := range []string{"approve", "reject"} {
		link, _ := pendingOf(t, mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{bob.Address}, "subject": action, "text": "x"}))
		hc, _ := person(t, link, alice.Address, alice.Password)
		u, _ := url.Parse(link)
		for _, ck := range hc.Jar.Cookies(u) {
			secrets = append(secrets, ck.Value)
		}
		if status, body := answerPage(t, link, action, alice); status != http.StatusOK {
			t.Fatalf("%s: %d %s", action, status, body)
		}
		secrets = append(secrets, strings.TrimPrefix(u.Path, "/approve/"))
	}
	secrets = append(secrets, alice.Password)
	logs := g.Logs.String()
	if !strings.Contains(logs, `"path":"/approve/…"`) {
		t.Fatalf("no approval request was logged:\n%s", logs)
	}
	for _, line := range strings.Split(logs, "\n") {
		for _, s := range secrets {
			// Any 24 characters of a secret are too many (all of a shorter one).
			if len(s) < 24 && strings.Contains(line, s) {
				t.Fatalf("a log line holds a secret:\n%s", line)
			}
			for i := 0; i+24 <= len(s); i += 12 {
				if strings.Contains(line, s[i:i+24]) {
					t.Fatalf("a log line holds part of a secret:\n%s", line)
				}
			}
		}
	}
}
