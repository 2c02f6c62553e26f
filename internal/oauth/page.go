package oauth

import (
	"html/template"
	"net/http"
	"net/url"
)

// The sign-in page: one form, no JavaScript, labelled fields, the error
// announced to screen readers. The client's name is what it registered
// (untrusted): the redirect host is shown beside it, since that is where
// the code goes.
var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Sign in to your mailbox</title>
<style>
body{font-family:system-ui,sans-serif;max-width:30rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#111;background:#fff}
label{display:block;margin-top:1rem;font-weight:600}
input[type=email],input[type=password],input[type=text]{width:100%;padding:.5rem;font-size:1rem;box-sizing:border-box}
.hint{font-size:.9rem;color:#444;margin:.25rem 0 0}
.error{border:2px solid #b00020;padding:.5rem 1rem;color:#b00020}
.actions{margin-top:1.5rem;display:flex;gap:1rem}
.providers{display:flex;flex-direction:column;gap:.5rem;margin-top:1rem}
button{font-size:1rem;padding:.5rem 1.25rem}
</style>
</head>
<body>
<main>
<h1>Sign in to your mailbox</h1>
{{if .Fatal}}<p class="error" role="alert">{{.Fatal}}</p>{{else}}
<p><strong>{{if .ClientName}}{{.ClientName}}{{else}}An app{{end}}</strong> (returning to <strong>{{.RedirectHost}}</strong>) asks to:</p>
<ul>{{range .Abilities}}<li>{{.}}</li>{{end}}</ul>
{{if .Error}}<p class="error" role="alert" id="error">{{.Error}}</p>{{end}}
<form method="post" action="authorize">
<input type="hidden" name="form" value="{{.Form}}">
{{if .Providers}}<div class="providers">{{range .Providers}}
<button type="submit" name="action" value="provider:{{.Name}}" formnovalidate>Continue with {{.Display}}</button>{{end}}
</div>
<p class="hint">Or with a mail password:</p>{{end}}
<label for="username">Mail address</label>
<input type="email" id="username" name="username" autocomplete="username" required value="{{.User}}"{{if .Error}} aria-describedby="error"{{end}}>
{{if .HostField}}<label for="host">Mail server (optional)</label>
<input type="text" id="host" name="host" autocomplete="off" value="{{.Host}}" aria-describedby="host-hint">
<p class="hint" id="host-hint">Leave it empty for {{.DefaultHost}}, or if your address's domain names its server.</p>{{end}}
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required aria-describedby="password-hint">
<p class="hint" id="password-hint">Your mail password, or an app password if your provider uses them. It is checked with your mail server and sealed into the app's token; this server stores nothing.</p>
<div class="actions">
<button type="submit" name="action" value="allow">Allow</button>
<button type="submit" name="action" value="cancel" formnovalidate>Cancel</button>
</div>
</form>{{end}}
</main>
</body>
</html>
`))

type pageData struct {
	ClientName, RedirectHost string
	Abilities                []string
	Form, User, Error, Fatal string
	Providers                []providerButton
	HostField                bool
	Host, DefaultHost        string
}

type providerButton struct{ Name, Display string }

func (s *Server) signInPage(w http.ResponseWriter, status int, q request, form, user, errMsg string) {
	host := q.RedirectURI
	if u, err := url.Parse(q.RedirectURI); err == nil {
		host = u.Host
		if u.Scheme != "https" && u.Scheme != "http" {
			host = "the app " + u.Scheme + ":" // a native app's own scheme
		}
	}
	d := pageData{ClientName: q.ClientName, RedirectHost: host, Abilities: describe(q.scope()), Form: form, User: user, Error: errMsg}
	for _, p := range s.cfg.Providers {
		d.Providers = append(d.Providers, providerButton{Name: p.Config().Name, Display: p.Config().DisplayName})
	}
	if s.cfg.Hosts != nil && s.cfg.Hosts.Patterns() {
		d.HostField, d.DefaultHost = true, "this gateway's own mail server"
	}
	s.page(w, status, d)
}

func (s *Server) errorPage(w http.ResponseWriter, status int, msg string) {
	s.page(w, status, pageData{Fatal: msg})
}

func (s *Server) page(w http.ResponseWriter, status int, d pageData) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	// No form-action: Chrome applies it to the redirect that follows the
	// POST, which goes to the client.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(status)
	pageTemplate.Execute(w, d)
}
