package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/mailbox-mcp/mailbox-mcp/internal/approval"
)

const headerSessionID = "Mcp-Session-Id"

// withElicitSession remembers, without storing anything, that a client of
// a protocol before 2026-07-28 declared in initialize that it can show
// its user a form (approval/session.go): such an initialize is answered
// with a sealed Mcp-Session-Id bound to the caller's account, and a later
// request carrying it (from the same account) is marked as able to ask.
// Any other Mcp-Session-Id is dropped before mcp-go sees it, so that no
// one can make a request share another client's session. With approvals
// nil (approval off) it changes nothing but the dropping.
func withElicitSession(a *approval.Approvals, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(headerSessionID)
		if id != "" {
			account := ""
			if a != nil {
				account = a.Account(r.Context())
			}
			modes, ok := approval.Modes{}, false
			if a != nil && approval.IsSession(id) {
				modes, ok = a.OpenSession(id, account)
			}
			if ok {
				r = r.WithContext(approval.WithElicit(r.Context(), modes))
			} else {
				r.Header.Del(headerSessionID)
			}
		}
		if modes := initializeElicitation(r); a != nil && id == "" && modes.Any() {
			if account := a.Account(r.Context()); account != "" {
				if sid, err := a.NewSession(account, modes); err == nil {
					w = &sessionWriter{ResponseWriter: w, id: sid}
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// initializeElicitation is what r's body (buffered by readBody) declares
// the client can show its user, when it is an initialize request: an
// empty elicitation capability means a form (as before modes existed).
func initializeElicitation(r *http.Request) approval.Modes {
	b, ok := r.Body.(*bytesBody)
	if !ok {
		return approval.Modes{}
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Capabilities struct {
				Elicitation *struct {
					Form *json.RawMessage `json:"form"`
					URL  *json.RawMessage `json:"url"`
				} `json:"elicitation"`
			} `json:"capabilities"`
		} `json:"params"`
	}
	if json.Unmarshal(b.b, &msg) != nil || msg.Method != "initialize" || msg.Params.Capabilities.Elicitation == nil {
		return approval.Modes{}
	}
	e := msg.Params.Capabilities.Elicitation
	return approval.Modes{Form: e.Form != nil || e.URL == nil, URL: e.URL != nil}
}

// sessionWriter adds the session id to a successful answer.
type sessionWriter struct {
	http.ResponseWriter
	id    string
	wrote bool
}

func (w *sessionWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if code == http.StatusOK {
			w.Header().Set(headerSessionID, w.id)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *sessionWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *sessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
