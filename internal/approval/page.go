package approval

import (
	"context"
	"crypto/subtle"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/memory"
)

// Prefix is the path of the approval page; the link's token follows it.
const Prefix = "/approve/"

// Executor does what a link stands for. It is the tools' business: this
// package only shows, asks and guards.
type Executor interface {
	// Preview says what approving l will do (read from the mailbox now);
	// it fails when what l holds to (its Binding) no longer holds.
	Preview(ctx context.Context, l Link) (Preview, error)
	// Approve does it, only while l's Binding holds; the sentence says
	// what happened.
	Approve(ctx context.Context, l Link) (string, error)
	// Reject drops it (a held draft is removed); the sentence says so.
	Reject(ctx context.Context, l Link) (string, error)
}

// Providers lets a person sign in on the approval page at the mailbox's
// provider ("Continue with ..."), as on the gateway's own sign-in page.
type Providers interface {
	// Buttons are the providers offered, in order.
	Buttons() []ProviderButton
	// Start sends the person to provider name (hint: the mailbox address).
	// Once the provider has said who they are, the person comes back to
	// Page.Identified with returnTo.
	Start(w http.ResponseWriter, r *http.Request, name, hint, returnTo string)
}

// ProviderButton is one "Continue with" button.
type ProviderButton struct{ Name, Display string }

// PageConfig configures the approval page.
type PageConfig struct {
	Approvals *Approvals
	Exec      Executor
	// Password checks a login at the mail server (a real login, under the
	// gateway's limits on guessing); its errors are mailerr errors.
	Password func(ctx context.Context, creds credentials.Credentials) error
	// Providers, when set, offers sign-in at the mailbox's provider.
	Providers Providers
	// Secure says the gateway is reached over https (PUBLIC_URL): the
	// sign-in cookie is then a __Host- cookie, Secure, for the whole
	// site. Without it a request's own TLS (or X-Forwarded-Proto) decides.
	Secure bool
	Log    *slog.Logger
}

// Page serves the approval page. It shows nothing of a link, and takes no
// answer to it, but to the person signed in as the mailbox (and agent)
// the link is for: someone who holds only the link, such as the model
// that was given it, gets a sign-in form. A sign-in is a login the mail
// server accepts (the mailbox password), or one at the mailbox's
// provider; it gives a short-lived HttpOnly, SameSite=Strict cookie, and
// each form's anti-forgery token is derived from that cookie and the
// link. GET shows what will happen with Approve and Reject; POST signs in
// or does one of them, once. No JavaScript; a CSP that allows nothing but
// the page's own style; no framing.
type Page struct {
	cfg PageConfig
	log *slog.Logger
}

// NewPage makes the page.
func NewPage(cfg PageConfig) *Page {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Page{cfg: cfg, log: log.With("component", "approval")}
}

// The sign-in cookie: a __Host- cookie (Secure, the whole site, no
// Domain) over https; elsewhere (a gateway on localhost) one for the
// approval pages alone.
const (
	personCookieSecure = "__Host-mbx_approver"
	personCookie       = "mbx_approver"
)

func (p *Page) secure(r *http.Request) bool {
	return p.cfg.Secure || r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (p *Page) cookieName(r *http.Request) string {
	if p.secure(r) {
		return personCookieSecure
	}
	return personCookie
}

func (p *Page) setPerson(w http.ResponseWriter, r *http.Request, value string) {
	c := &http.Cookie{Name: p.cookieName(r), Value: value, MaxAge: int(SignInTTL.Seconds()), HttpOnly: true, SameSite: http.SameSiteStrictMode}
	if p.secure(r) {
		c.Path, c.Secure = "/", true
	} else {
		c.Path = Prefix
	}
	http.SetCookie(w, c)
}

// personFor is the person signed in in r's browser, when they are the
// caller l is for.
func (p *Page) personFor(r *http.Request, l Link) (person, bool) {
	c, err := r.Cookie(p.cookieName(r))
	if err != nil {
		return person{}, false
	}
	who, ok := p.cfg.Approvals.openPerson(c.Value)
	if !ok || who.Caller != l.Caller() {
		return person{}, false
	}
	return who, true
}

func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token := strings.TrimPrefix(r.URL.Path, Prefix)
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		p.show(w, r, token)
	case http.MethodPost:
		p.answer(w, r, token)
	default:
		w.Header().Set("Allow", "GET, POST")
		p.page(w, http.StatusMethodNotAllowed, pageData{Fatal: "Open the link the agent gave you."})
	}
}

func (p *Page) show(w http.ResponseWriter, r *http.Request, token string) {
	l, err := p.cfg.Approvals.OpenLink(r.Context(), token)
	if err != nil {
		p.refused(w, err)
		return
	}
	who, ok := p.personFor(r, l)
	if !ok {
		p.signIn(w, http.StatusOK, l, "", "")
		return
	}
	pv, err := p.cfg.Exec.Preview(r.Context(), l)
	if err != nil {
		p.page(w, http.StatusConflict, pageData{Fatal: "This can no longer be approved: " + mailerr.Message(err) + "."})
		return
	}
	pv = pv.Shown()
	p.page(w, http.StatusOK, pageData{Preview: &pv, CSRF: who.csrf(l.Nonce), Account: Visible(l.Creds.User), Expires: l.Expires.UTC().Format("15:04 MST, 2 Jan")})
}

func (p *Page) answer(w http.ResponseWriter, r *http.Request, token string) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		p.page(w, http.StatusBadRequest, pageData{Fatal: "The form could not be read."})
		return
	}
	l, err := p.cfg.Approvals.OpenLink(r.Context(), token)
	if err != nil {
		p.refused(w, err)
		return
	}
	action := r.PostForm.Get("action")
	if name, ok := strings.CutPrefix(action, "provider:"); ok && p.cfg.Providers != nil {
		p.cfg.Providers.Start(w, r, name, l.Creds.User, Prefix+token)
		return
	}
	switch action {
	case "signin":
		p.passwordSignIn(w, r, l, token)
		return
	case "approve", "reject":
	default:
		p.page(w, http.StatusBadRequest, pageData{Fatal: "Choose Approve or Reject."})
		return
	}
	who, ok := p.personFor(r, l)
	if !ok {
		p.signIn(w, http.StatusForbidden, l, "", "Sign in first: only the person whose mailbox this is can approve or reject it.")
		return
	}
	if subtle.ConstantTimeCompare([]byte(who.csrf(l.Nonce)), []byte(r.PostForm.Get("csrf"))) != 1 {
		p.page(w, http.StatusForbidden, pageData{Fatal: "This form was not opened in this browser for this approval. Open the link again."})
		return
	}
	// Used before it is done: a second click, or the link opened twice,
	// does nothing more.
	if err := p.cfg.Approvals.UseLink(context.WithoutCancel(r.Context()), l); err != nil {
		p.refused(w, err)
		return
	}
	ctx := r.Context()
	var msg string
	if action == "approve" {
		msg, err = p.cfg.Exec.Approve(ctx, l)
	} else {
		msg, err = p.cfg.Exec.Reject(ctx, l)
	}
	if err != nil {
		status := http.StatusBadGateway
		switch mailerr.KindOf(err) {
		case mailerr.Internal:
			p.log.ErrorContext(ctx, "approval failed", "tool", l.Tool, "action", action, "err", err)
		case mailerr.BadInput, mailerr.NotFound, mailerr.Forbidden:
			// What was approved no longer holds: refused, nothing done.
			status = http.StatusConflict
		}
		p.page(w, status, pageData{Fatal: "It did not work: " + mailerr.Message(err) + "."})
		return
	}
	p.log.InfoContext(ctx, "approval answered", "tool", l.Tool, "action", action)
	p.page(w, http.StatusOK, pageData{Done: msg})
}

// passwordSignIn takes the sign-in form: the mailbox the link is for, and
// its password, which the mail server must accept.
func (p *Page) passwordSignIn(w http.ResponseWriter, r *http.Request, l Link, token string) {
	user := strings.TrimSpace(r.PostForm.Get("username"))
	pass := r.PostForm.Get("password")
	if user == "" || pass == "" || strings.ContainsRune(user, 0) || strings.ContainsRune(pass, 0) {
		p.signIn(w, http.StatusOK, l, user, "Enter the mailbox's address and password.")
		return
	}
	creds := credentials.New(user, pass)
	creds.Host, creds.Agent = l.Creds.Host, l.Creds.Agent
	if CallerOf(creds) != l.Caller() {
		// Never asked of the mail server: the page is no oracle for other
		// mailboxes' passwords.
		p.signIn(w, http.StatusOK, l, user, "This approval is for another mailbox: sign in as "+l.Creds.User+".")
		return
	}
	if p.cfg.Password == nil {
		p.signIn(w, http.StatusOK, l, user, "Signing in with a password is not possible here.")
		return
	}
	if err := p.cfg.Password(r.Context(), creds); err != nil {
		msg := "The address and password could not be checked just now: " + mailerr.Message(err) + ". Try again in a moment."
		status := http.StatusOK
		switch d, down := memory.RetryAfter(err); {
		case down:
			// The sign-in limits and back-off could not be checked
			// (REDIS_FAIL=closed): nothing was tried.
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(d.Seconds()))))
			msg = capitalize(mailerr.Message(err)) + ". Try again in a few seconds."
		case mailerr.KindOf(err) == mailerr.Auth:
			msg = "The mail server did not accept this address and password."
		case mailerr.KindOf(err) == mailerr.RateLimited:
			msg = capitalize(mailerr.Message(err)) + "."
		}
		p.signIn(w, status, l, user, msg)
		return
	}
	if !p.signedIn(w, r, l) {
		return
	}
	p.log.InfoContext(r.Context(), "approval sign-in", "method", "password")
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, Prefix+token, http.StatusSeeOther)
}

// Identified takes a person back from their provider (Providers.Start),
// who proved to be the mailbox who: signed in, when that is the mailbox
// returnTo's link is for. It answers with a page that goes on to the
// approval by itself: a navigation from the gateway's own page, so that
// the SameSite=Strict cookie comes along (after a redirect chain that
// began at the provider's site it would not).
func (p *Page) Identified(w http.ResponseWriter, r *http.Request, who credentials.Credentials, returnTo string) {
	token, ok := strings.CutPrefix(returnTo, Prefix)
	if !ok {
		p.page(w, http.StatusBadRequest, pageData{Fatal: "This sign-in was not for an approval."})
		return
	}
	l, err := p.cfg.Approvals.OpenLink(r.Context(), token)
	if err != nil {
		p.refused(w, err)
		return
	}
	who.Agent = l.Creds.Agent
	if CallerOf(who) != l.Caller() {
		p.page(w, http.StatusForbidden, pageData{Fatal: "You signed in as " + Visible(who.User) + ", and this approval is for another mailbox (" + Visible(l.Creds.User) + "). Nothing was shown or done."})
		return
	}
	if !p.signedIn(w, r, l) {
		return
	}
	p.log.InfoContext(r.Context(), "approval sign-in", "method", "provider")
	p.page(w, http.StatusOK, pageData{Continue: Prefix + token})
}

// signedIn sets the sign-in cookie for l's caller.
func (p *Page) signedIn(w http.ResponseWriter, r *http.Request, l Link) bool {
	v, err := p.cfg.Approvals.newPerson(l.Caller())
	if err != nil {
		p.log.ErrorContext(r.Context(), "approval sign-in cookie", "err", err)
		p.page(w, http.StatusInternalServerError, pageData{Fatal: "The sign-in could not be completed."})
		return false
	}
	p.setPerson(w, r, v)
	return true
}

func (p *Page) signIn(w http.ResponseWriter, status int, l Link, user, errMsg string) {
	d := &signInData{Account: Visible(l.Creds.User), User: user, Error: errMsg, Password: p.cfg.Password != nil}
	if user == "" {
		d.User = l.Creds.User
	}
	if p.cfg.Providers != nil {
		d.Providers = p.cfg.Providers.Buttons()
	}
	p.page(w, status, pageData{SignIn: d, Expires: l.Expires.UTC().Format("15:04 MST, 2 Jan")})
}

func (p *Page) refused(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	var pending *PendingError
	var later *UnavailableError
	switch {
	case errors.Is(err, ErrLinkExpired) || errors.Is(err, ErrLinkUsed):
		status = http.StatusGone
	case errors.As(err, &later):
		// Nothing was shown or done: the page can be loaded again.
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(later.RetryAfter.Seconds()))))
	case errors.As(err, &pending):
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "60")
	case !errors.Is(err, ErrLinkInvalid):
		// The memory failed otherwise (the request's own end).
		p.log.Error("approval link not checked", "err", err)
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "5")
		err = errors.New("the approval could not be checked just now, so nothing was done; try again in a few seconds")
	}
	p.page(w, status, pageData{Fatal: capitalize(err.Error()) + "."})
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

type pageData struct {
	Preview  *Preview
	SignIn   *signInData
	CSRF     string
	Account  string
	Expires  string
	Done     string
	Fatal    string
	Continue string // a path to go on to at once (after a provider sign-in)
}

type signInData struct {
	Account, User, Error string
	Password             bool
	Providers            []ProviderButton
}

func (p *Page) page(w http.ResponseWriter, status int, d pageData) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	// No form-action: Chrome applies it to the redirect that follows a
	// POST, and "Continue with" goes on to the provider.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(status)
	if err := pageTemplate.Execute(w, d); err != nil {
		p.log.Error("approval page", "err", err)
	}
}

// The page: what will happen, as text (every value escaped by
// html/template), then Approve and Reject; or the sign-in form, which
// shows nothing of the approval but the mailbox it is for.
var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{"size": Size}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
{{if .Continue}}<meta http-equiv="refresh" content="0;url={{.Continue}}">
{{end}}<title>Approve what your agent wants to do</title>
<style>
body{font-family:system-ui,sans-serif;max-width:42rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#111;background:#fff}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}
dt{font-weight:600}
dd{margin:0;overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere;border:1px solid #ccc;padding:.75rem;background:#f7f7f7}
label{display:block;margin-top:1rem;font-weight:600}
input[type=email],input[type=password],input[type=text]{width:100%;padding:.5rem;font-size:1rem;box-sizing:border-box}
.hint{font-size:.9rem;color:#444;margin:.25rem 0 0}
.warning{border:2px solid #b00020;padding:.5rem 1rem;color:#b00020}
.done{border:2px solid #1b5e20;padding:.5rem 1rem}
.actions{margin-top:1.5rem;display:flex;gap:1rem}
.providers{display:flex;flex-direction:column;gap:.5rem;margin-top:1rem}
button{font-size:1rem;padding:.5rem 1.25rem}
</style>
</head>
<body>
<main>
{{if .Fatal}}<h1>Approval</h1>
<p class="warning" role="alert" id="error">{{.Fatal}}</p>
{{else if .Done}}<h1>Done</h1>
<p class="done" role="status" id="done">{{.Done}}</p>
{{else if .Continue}}<h1>Signed in</h1>
<p><a href="{{.Continue}}" id="continue">Continue to the approval</a></p>
{{else if .SignIn}}{{with .SignIn}}<h1 id="signin">Sign in to see what your agent asks</h1>
<p>An agent using the mailbox <strong>{{.Account}}</strong> asks for your approval. Sign in as that mailbox to see exactly what it wants to do; nothing happens unless you then approve.</p>
{{if .Error}}<p class="warning" role="alert" id="error">{{.Error}}</p>{{end}}
<form method="post">
{{if .Providers}}<div class="providers">{{range .Providers}}
<button type="submit" name="action" value="provider:{{.Name}}" formnovalidate>Continue with {{.Display}}</button>{{end}}
</div>{{if $.SignIn.Password}}
<p class="hint">Or with the mailbox password:</p>{{end}}{{end}}
{{if .Password}}<label for="username">Mail address</label>
<input type="email" id="username" name="username" autocomplete="username" required value="{{.User}}"{{if .Error}} aria-describedby="error"{{end}}>
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required>
<p class="hint">It is checked with your mail server and kept nowhere; you stay signed in here for 15 minutes.</p>
<div class="actions">
<button type="submit" name="action" value="signin" id="signin-button">Sign in</button>
</div>{{end}}
</form>{{end}}
<p><small>This link works once and expires at {{.Expires}}.</small></p>
{{else}}{{with .Preview}}<h1 id="title">{{.Title}}</h1>
<p>Your agent asked to do this. Nothing happens unless you approve.</p>
<dl id="fields">{{range .Fields}}<dt>{{.Name}}</dt><dd>{{.Value}}</dd>{{end}}</dl>
{{if .Attachments}}<h2>Attachments</h2><ul id="attachments">{{range .Attachments}}<li>{{.Name}} ({{size .Size}})</li>{{end}}</ul>{{end}}
{{if .Text}}<h2>{{if .HTML}}Text version{{else}}Text{{end}}</h2><pre id="text">{{.Text}}</pre>{{end}}
{{if .HTML}}<h2>{{.HTMLLabel}}</h2><pre id="html">{{.HTML}}</pre>{{end}}
{{if .Items}}<ul id="items">{{range .Items}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Warning}}<p class="warning">{{.Warning}}</p>{{end}}
{{end}}<form method="post">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<div class="actions">
<button type="submit" name="action" value="approve" id="approve">Approve</button>
<button type="submit" name="action" value="reject" id="reject">Reject</button>
</div>
</form>
<p><small>Signed in as {{.Account}}. This link works once and expires at {{.Expires}}.</small></p>
{{end}}</main>
</body>
</html>
`))
