package hydra

import (
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The login and consent app: Hydra sends the browser to /login and
// /consent with a challenge; the app asks Hydra's admin API about it,
// decides, and sends the browser back to the redirect Hydra names.
//
//	GET  /login?login_challenge=C    AutoLogin set: signs that user in at once;
//	                                 otherwise the form (login_hint prefilled)
//	POST /login                      the form: login_challenge, email,
//	                                 password, action=login|deny; a wrong
//	                                 password shows the form again (200)
//	GET  /consent?consent_challenge=C  Options.Consent decides; no page
//	GET  /logout?logout_challenge=C  accepts
//	GET  /error                      Hydra's error page: 400 with the error
//
// Form fields have ids email, password, login and deny, for browsers.
func (s *Server) startApp() error {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("hydra: login app: %w", err)
	}
	s.AppURL = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.loginForm)
	mux.HandleFunc("GET /consent", s.consent)
	mux.HandleFunc("GET /logout", s.logout)
	mux.HandleFunc("GET /logged-out", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "signed out") })
	mux.HandleFunc("GET /error", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		http.Error(w, "error: "+q.Get("error")+": "+q.Get("error_description")+" "+q.Get("error_hint"), http.StatusBadRequest)
	})
	s.app = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.app.Serve(ln)
	return nil
}

var loginTmpl = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in - test provider</title></head>
<body>
<h1>Sign in to the test provider</h1>
<p>{{.Client}} wants to use your mailbox.</p>
{{if .Error}}<p id="error" role="alert">{{.Error}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="login_challenge" value="{{.Challenge}}">
<p><label>Email <input id="email" name="email" type="email" value="{{.Email}}" autocomplete="username"></label></p>
<p><label>Password <input id="password" name="password" type="password" autocomplete="current-password"></label></p>
<p><button id="login" type="submit" name="action" value="login">Sign in</button>
<button id="deny" type="submit" name="action" value="deny">Cancel</button></p>
</form>
</body></html>
`))

type loginView struct {
	Challenge, Client, Email, Error string
}

func (s *Server) showLogin(w http.ResponseWriter, v loginView) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	loginTmpl.Execute(w, v)
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	challenge := r.URL.Query().Get("login_challenge")
	var lr loginRequest
	if err := s.getJSON(r.Context(), s.flowURL("login", "", challenge), &lr); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	s.mu.Lock()
	auto := s.autoLogin
	s.mu.Unlock()
	switch {
	case lr.Skip: // Hydra already knows who this is
		s.finishLogin(w, r, challenge, lr.Subject)
	case auto != "":
		s.finishLogin(w, r, challenge, auto)
	default:
		s.showLogin(w, loginView{Challenge: challenge, Client: clientName(lr), Email: lr.OIDC.LoginHint})
	}
}

func (s *Server) loginForm(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	challenge := r.PostForm.Get("login_challenge")
	if r.PostForm.Get("action") == "deny" {
		to, err := s.rejectFlow(r.Context(), "login", challenge, "access_denied", "The user cancelled the sign-in.")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		http.Redirect(w, r, to, http.StatusFound)
		return
	}
	user := strings.ToLower(strings.TrimSpace(r.PostForm.Get("email")))
	if pw, ok := s.users[user]; !ok || pw != r.PostForm.Get("password") {
		var lr loginRequest
		if err := s.getJSON(r.Context(), s.flowURL("login", "", challenge), &lr); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		s.showLogin(w, loginView{Challenge: challenge, Client: clientName(lr), Email: user, Error: "Wrong email address or password."})
		return
	}
	s.finishLogin(w, r, challenge, user)
}

func (s *Server) finishLogin(w http.ResponseWriter, r *http.Request, challenge, subject string) {
	to, err := s.acceptLogin(r.Context(), challenge, subject)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	http.Redirect(w, r, to, http.StatusFound)
}

func (s *Server) consent(w http.ResponseWriter, r *http.Request) {
	challenge := r.URL.Query().Get("consent_challenge")
	var cr struct {
		ConsentRequest
		Client struct {
			ID string `json:"client_id"`
		} `json:"client"`
	}
	if err := s.getJSON(r.Context(), s.flowURL("consent", "", challenge), &cr); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req := cr.ConsentRequest
	req.ClientID = cr.Client.ID
	grant, refusal := slices.Clone(req.Scopes), error(nil)
	if s.opts.Consent != nil {
		grant, refusal = s.opts.Consent(req)
	}
	var to string
	var err error
	if refusal != nil {
		to, err = s.rejectFlow(r.Context(), "consent", challenge, "access_denied", refusal.Error())
	} else {
		if grant == nil {
			grant = []string{}
		}
		req.Granted = grant
		to, err = s.acceptConsent(r.Context(), challenge, req.Subject, req, grant)
	}
	s.mu.Lock()
	s.consents = append(s.consents, req)
	s.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	http.Redirect(w, r, to, http.StatusFound)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	challenge := r.URL.Query().Get("logout_challenge")
	var rd redirect
	u := s.AdminURL + "/admin/oauth2/auth/requests/logout/accept?" + url.Values{"logout_challenge": {challenge}}.Encode()
	if err := s.do(r.Context(), http.MethodPut, u, map[string]any{}, http.StatusOK, &rd); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	http.Redirect(w, r, rd.To, http.StatusFound)
}

func clientName(lr loginRequest) string {
	if lr.Client.Name != "" {
		return lr.Client.Name
	}
	return "The client " + lr.Client.ID
}
