package approval

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// fakeExec records what the page asks of the tools.
type fakeExec struct {
	approved, rejected int
	preview            Preview
}

func (f *fakeExec) Preview(context.Context, Link) (Preview, error) { return f.preview, nil }
func (f *fakeExec) Approve(context.Context, Link) (string, error) {
	f.approved++
	return "Sent.", nil
}
func (f *fakeExec) Reject(context.Context, Link) (string, error) {
	f.rejected++
	return "Rejected.", nil
}

type pageTest struct {
	t        *testing.T
	a        *Approvals
	exec     *fakeExec
	page     *Page
	checked  []string // the users whose passwords reached the "mail server"
	password string
}

func newPageTest(t *testing.T) *pageTest {
	a, _ := newTest(t)
	pt := &pageTest{t: t, a: a, password: "right-password",
		exec: &fakeExec{preview: Preview{Title: "Send this email?", Fields: []Field{{"Subject", "Secret plans \u202Efdp.exe"}}, Text: "the body"}}}
	pt.page = NewPage(PageConfig{Approvals: a, Exec: pt.exec, Password: func(_ context.Context, c credentials.Credentials) error {
		pt.checked = append(pt.checked, c.User)
		if c.Password() != pt.password {
			return mailerr.New(mailerr.Auth, "refused")
		}
		return nil
	}})
	return pt
}

func (pt *pageTest) link(user, agent string) string {
	c := credentials.New(user, "pw")
	c.Agent = agent
	m, err := pt.a.NewLink(ctx, Link{Creds: c, Tool: "smtp_send_email", Binding: Binding{Draft: &DraftRef{Folder: "Drafts", UID: 1, UIDValidity: 1, MessageID: "m@x"}}}, time.Hour)
	if err != nil {
		pt.t.Fatal(err)
	}
	return Prefix + m.Token
}

func (pt *pageTest) do(method, path string, form url.Values, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(method, path, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	pt.page.ServeHTTP(w, r)
	return w
}

func (pt *pageTest) signIn(path, user, password string) *http.Cookie {
	w := pt.do(http.MethodPost, path, url.Values{"action": {"signin"}, "username": {user}, "password": {password}})
	for _, c := range w.Result().Cookies() {
		if c.Name == personCookie {
			return c
		}
	}
	return nil
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// TestPageNeedsThePerson: the model's view of the approval page. Holding
// only the link it sees a sign-in form and nothing of what it would
// approve; a cookie and form token of its own choosing, a sign-in as
// another mailbox, or a form token of another link do nothing.
func TestPageNeedsThePerson(t *testing.T) {
	pt := newPageTest(t)
	link := pt.link("alice@x.test", "")

	w := pt.do(http.MethodGet, link, nil)
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, `id="signin"`) || strings.Contains(body, "Secret plans") || strings.Contains(body, "the body") || strings.Contains(body, `name="csrf"`) {
		t.Fatalf("without a sign-in: %d %s", w.Code, body)
	}
	// The old page's trick: any value as both cookie and form field.
	for _, name := range []string{personCookie, personCookieSecure, "mbx_approve"} {
		w = pt.do(http.MethodPost, link, url.Values{"action": {"approve"}, "csrf": {"x"}}, &http.Cookie{Name: name, Value: "x"})
		if w.Code != http.StatusForbidden || pt.exec.approved != 0 {
			t.Fatalf("self-made cookie %s: %d, approved %d", name, w.Code, pt.exec.approved)
		}
	}
	// Another mailbox's name: never even asked of the mail server.
	if c := pt.signIn(link, "bob@x.test", "right-password"); c != nil || len(pt.checked) != 0 {
		t.Fatalf("signed in as another mailbox: %v, checked %v", c, pt.checked)
	}
	// The wrong password.
	if c := pt.signIn(link, "alice@x.test", "guess"); c != nil {
		t.Fatal("a refused password signed in")
	}
	// The person.
	cookie := pt.signIn(link, "ALICE@x.test", "right-password")
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != Prefix || cookie.MaxAge != int(SignInTTL.Seconds()) {
		t.Fatalf("sign-in cookie %+v", cookie)
	}
	w = pt.do(http.MethodGet, link, nil, cookie)
	body = html.UnescapeString(w.Body.String())
	m := csrfField.FindStringSubmatch(body)
	if w.Code != http.StatusOK || m == nil || !strings.Contains(body, "Secret plans ⟨U+202E⟩fdp.exe") || strings.Contains(body, "\u202E") {
		t.Fatalf("signed in: %d %s", w.Code, body)
	}
	// A form token of another link of the same person does not answer
	// this one.
	other := pt.link("alice@x.test", "")
	wo := pt.do(http.MethodGet, other, nil, cookie)
	mo := csrfField.FindStringSubmatch(wo.Body.String())
	if mo == nil || mo[1] == m[1] {
		t.Fatal("two links share a form token")
	}
	if w := pt.do(http.MethodPost, link, url.Values{"action": {"approve"}, "csrf": {mo[1]}}, cookie); w.Code != http.StatusForbidden || pt.exec.approved != 0 {
		t.Fatalf("another link's token: %d", w.Code)
	}
	// The right token without the cookie.
	if w := pt.do(http.MethodPost, link, url.Values{"action": {"approve"}, "csrf": {m[1]}}); w.Code != http.StatusForbidden || pt.exec.approved != 0 {
		t.Fatalf("token without the sign-in: %d", w.Code)
	}
	// Approve, once.
	if w := pt.do(http.MethodPost, link, url.Values{"action": {"approve"}, "csrf": {m[1]}}, cookie); w.Code != http.StatusOK || pt.exec.approved != 1 {
		t.Fatalf("approve: %d %d %s", w.Code, pt.exec.approved, w.Body)
	}
	if w := pt.do(http.MethodPost, link, url.Values{"action": {"approve"}, "csrf": {m[1]}}, cookie); w.Code != http.StatusGone || pt.exec.approved != 1 {
		t.Fatalf("again: %d %d", w.Code, pt.exec.approved)
	}
	// alice's sign-in shows nothing of bob's links, nor of her agents'.
	for _, l := range []string{pt.link("bob@x.test", ""), pt.link("alice@x.test", "alpha")} {
		w := pt.do(http.MethodGet, l, nil, cookie)
		if !strings.Contains(w.Body.String(), `id="signin"`) || strings.Contains(w.Body.String(), "Secret plans") {
			t.Fatalf("%s with alice's sign-in: %s", l, w.Body)
		}
	}
}

// TestPageIdentified: a person back from their provider is signed in
// when the provider vouched for the link's mailbox, and goes on to the
// approval by a navigation of the gateway's own page; another mailbox is
// turned away.
func TestPageIdentified(t *testing.T) {
	pt := newPageTest(t)
	link := pt.link("alice@x.test", "alpha")
	w := httptest.NewRecorder()
	pt.page.Identified(w, httptest.NewRequest(http.MethodGet, "/authorize/callback", nil), credentials.NewOAuth("bob@x.test", "tok"), link)
	if w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
		t.Fatalf("bob for alice's link: %d", w.Code)
	}
	w = httptest.NewRecorder()
	pt.page.Identified(w, httptest.NewRequest(http.MethodGet, "/authorize/callback", nil), credentials.NewOAuth("Alice@x.test", "tok"), link)
	cs := w.Result().Cookies()
	if w.Code != http.StatusOK || len(cs) != 1 || !strings.Contains(w.Body.String(), `http-equiv="refresh"`) {
		t.Fatalf("alice: %d %v %s", w.Code, cs, w.Body)
	}
	if w := pt.do(http.MethodGet, link, nil, cs[0]); csrfField.FindString(w.Body.String()) == "" {
		t.Fatalf("after the provider: %s", w.Body)
	}
}

// TestPageSecureCookie: behind https the sign-in is a __Host- cookie,
// Secure, for the whole site.
func TestPageSecureCookie(t *testing.T) {
	pt := newPageTest(t)
	pt.page.cfg.Secure = true
	link := pt.link("alice@x.test", "")
	w := pt.do(http.MethodPost, link, url.Values{"action": {"signin"}, "username": {"alice@x.test"}, "password": {"right-password"}})
	var c *http.Cookie
	for _, x := range w.Result().Cookies() {
		c = x
	}
	if c == nil || c.Name != "__Host-mbx_approver" || !c.Secure || c.Path != "/" || c.Domain != "" || w.Code != http.StatusSeeOther {
		t.Fatalf("%d %+v", w.Code, c)
	}
}
