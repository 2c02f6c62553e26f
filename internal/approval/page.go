package approval

import (
	"context"
	"crypto/subtle"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Prefix is the path of the approval page; the link's token follows it.
const Prefix = "/approve/"

// Executor does what a link stands for. It is the tools' business: this
// package only shows, asks and guards.
type Executor interface {
	// Preview says what approving l will do (read from the mailbox now).
	Preview(ctx context.Context, l Link) (Preview, error)
	// Approve does it; the sentence says what happened.
	Approve(ctx context.Context, l Link) (string, error)
	// Reject drops it (a held draft is removed); the sentence says so.
	Reject(ctx context.Context, l Link) (string, error)
}

// Page serves the approval page: GET shows what will happen with Approve
// and Reject, POST does one of them, once. No JavaScript; a CSP that
// allows nothing but the page's own style; no framing; the form is bound
// to a SameSite=Strict cookie.
type Page struct {
	approvals *Approvals
	exec      Executor
	log       *slog.Logger
}

// NewPage makes the page.
func NewPage(a *Approvals, exec Executor, log *slog.Logger) *Page {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Page{approvals: a, exec: exec, log: log.With("component", "approval")}
}

const csrfCookie = "mbx_approve"

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
	l, err := p.approvals.OpenLink(token)
	if err != nil {
		p.refused(w, err)
		return
	}
	pv, err := p.exec.Preview(r.Context(), l)
	if err != nil {
		p.page(w, http.StatusConflict, pageData{Fatal: "This can no longer be approved: " + mailerr.Message(err) + "."})
		return
	}
	csrf := nonce()
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: csrf, Path: Prefix, MaxAge: 3600,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
	p.page(w, http.StatusOK, pageData{Preview: &pv, CSRF: csrf, Expires: l.Expires.UTC().Format("15:04 MST, 2 Jan")})
}

func (p *Page) answer(w http.ResponseWriter, r *http.Request, token string) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		p.page(w, http.StatusBadRequest, pageData{Fatal: "The form could not be read."})
		return
	}
	cookie, err := r.Cookie(csrfCookie)
	if err != nil || cookie.Value == "" || subtle.ConstantTimeCompare([]byte(cookie.Value), []byte(r.PostForm.Get("csrf"))) != 1 {
		p.page(w, http.StatusForbidden, pageData{Fatal: "This form was not opened in this browser (or cookies are off). Open the link again."})
		return
	}
	action := r.PostForm.Get("action")
	if action != "approve" && action != "reject" {
		p.page(w, http.StatusBadRequest, pageData{Fatal: "Choose Approve or Reject."})
		return
	}
	l, err := p.approvals.OpenLink(token)
	if err != nil {
		p.refused(w, err)
		return
	}
	// Used before it is done: a second click, or the link opened twice,
	// does nothing more.
	if err := p.approvals.UseLink(l); err != nil {
		p.refused(w, err)
		return
	}
	ctx := r.Context()
	var msg string
	if action == "approve" {
		msg, err = p.exec.Approve(ctx, l)
	} else {
		msg, err = p.exec.Reject(ctx, l)
	}
	if err != nil {
		if mailerr.KindOf(err) == mailerr.Internal {
			p.log.ErrorContext(ctx, "approval failed", "tool", l.Tool, "action", action, "err", err)
		}
		p.page(w, http.StatusBadGateway, pageData{Fatal: "It did not work: " + mailerr.Message(err) + "."})
		return
	}
	p.log.InfoContext(ctx, "approval answered", "tool", l.Tool, "action", action)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Path: Prefix, MaxAge: -1})
	p.page(w, http.StatusOK, pageData{Done: msg})
}

func (p *Page) refused(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	if errors.Is(err, ErrLinkExpired) || errors.Is(err, ErrLinkUsed) {
		status = http.StatusGone
	}
	if errors.Is(err, ErrBusy) {
		status = http.StatusServiceUnavailable
	}
	p.page(w, status, pageData{Fatal: capitalize(err.Error()) + "."})
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// secure says whether the page was reached over https (directly or behind
// a proxy that says so), for the cookie's Secure attribute.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

type pageData struct {
	Preview *Preview
	CSRF    string
	Expires string
	Done    string
	Fatal   string
}

func (p *Page) page(w http.ResponseWriter, status int, d pageData) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	w.WriteHeader(status)
	if err := pageTemplate.Execute(w, d); err != nil {
		p.log.Error("approval page", "err", err)
	}
}

// The page: what will happen, as text (every value escaped by
// html/template), then Approve and Reject.
var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{"size": Size}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Approve what your agent wants to do</title>
<style>
body{font-family:system-ui,sans-serif;max-width:42rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#111;background:#fff}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}
dt{font-weight:600}
dd{margin:0;overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere;border:1px solid #ccc;padding:.75rem;background:#f7f7f7}
.warning{border:2px solid #b00020;padding:.5rem 1rem;color:#b00020}
.done{border:2px solid #1b5e20;padding:.5rem 1rem}
.actions{margin-top:1.5rem;display:flex;gap:1rem}
button{font-size:1rem;padding:.5rem 1.25rem}
</style>
</head>
<body>
<main>
{{if .Fatal}}<h1>Approval</h1>
<p class="warning" role="alert" id="error">{{.Fatal}}</p>
{{else if .Done}}<h1>Done</h1>
<p class="done" role="status" id="done">{{.Done}}</p>
{{else}}{{with .Preview}}<h1 id="title">{{.Title}}</h1>
<p>Your agent asked to do this. Nothing happens unless you approve.</p>
<dl id="fields">{{range .Fields}}<dt>{{.Name}}</dt><dd>{{.Value}}</dd>{{end}}</dl>
{{if .Attachments}}<h2>Attachments</h2><ul id="attachments">{{range .Attachments}}<li>{{.Name}} ({{size .Size}})</li>{{end}}</ul>{{end}}
{{if .Text}}<h2>Text</h2><pre id="text">{{.Text}}</pre>{{end}}
{{if .Items}}<ul id="items">{{range .Items}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Warning}}<p class="warning">{{.Warning}}</p>{{end}}
{{end}}<form method="post">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<div class="actions">
<button type="submit" name="action" value="approve" id="approve">Approve</button>
<button type="submit" name="action" value="reject" id="reject">Reject</button>
</div>
</form>
<p><small>This link works once and expires at {{.Expires}}.</small></p>
{{end}}</main>
</body>
</html>
`))
