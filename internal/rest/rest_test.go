package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/app"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/httpapi"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/outbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/rest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/submission"
	"github.com/mailbox-mcp/mailbox-mcp/internal/tools"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// The mirror against the in-process demo mail server, behind the real
// httpapi middleware (credential headers, body limits), with the gateway's
// own route table plus one route whose tool does not exist.

const missingRoute = "/v1/test-missing"

type mirror struct {
	url    string
	srv    *demo.Server
	sealer *credentials.Sealer
	alice  demo.User
	bob    demo.User
	tools  []tools.Tool
	h      *rest.Handler
}

func startMirror(t *testing.T) *mirror {
	t.Helper()
	srv, err := demo.Start(context.Background(), demo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	log := slog.New(slog.DiscardHandler)
	ih, ip, _ := net.SplitHostPort(srv.IMAPAddr)
	iport, _ := strconv.Atoi(ip)
	mb := mailbox.New(mailbox.Config{Host: ih, Port: iport, Security: transport.Plain, AllowPlaintextAuth: true, Timeout: 20 * time.Second},
		pool.Config{MaxTotal: 8, MaxPerGroup: 4}, log)
	t.Cleanup(func() { mb.Close(context.Background()) })
	sh, sp, _ := net.SplitHostPort(srv.SMTPAddr)
	sport, _ := strconv.Atoi(sp)
	sub := submission.New(submission.Config{Host: sh, Port: sport, Security: transport.Plain, AllowPlaintextAuth: true}, log)
	sealer, err := credentials.NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	deps := &tools.Deps{Sealer: sealer, Mailbox: mb, Log: log, MaxRequestBytes: 1 << 20,
		Outbox: outbox.New(outbox.Config{MaxRecipients: 5}, mb, sub, log)}
	toolset := tools.All(deps)
	routes := append(app.RESTRoutes(), rest.Route{Method: http.MethodGet, Path: missingRoute, Tools: []string{"imap_no_such_tool"}})
	h, err := rest.New(routes, toolset, "test")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(httpapi.New(httpapi.Options{Logger: log, MaxRequestBytes: 1 << 20, REST: h}, http.NotFoundHandler()))
	t.Cleanup(hs.Close)
	m := &mirror{url: hs.URL, srv: srv, sealer: sealer, tools: toolset, h: h}
	for _, u := range srv.Users {
		switch {
		case strings.HasPrefix(u.Address, "alice@"):
			m.alice = u
		case strings.HasPrefix(u.Address, "bob@"):
			m.bob = u
		}
	}
	return m
}

func login(u demo.User) http.Header {
	return http.Header{"X-Imap-User": {u.Address}, "X-Imap-Pass": {u.Password}}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("answer is not JSON (%v): %s", err, a.body)
	}
}

// failure checks that a is the error JSON with status and code, and
// returns its message.
func (a answer) failure(t *testing.T, status int, code string) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	a.json(t, &e)
	if a.status != status || e.Error.Code != code || e.Error.Message == "" {
		t.Fatalf("got %d %s, want %d with code %s", a.status, a.body, status, code)
	}
	return e.Error.Message
}

func (m *mirror) do(t *testing.T, method, path string, h http.Header, body string) answer {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, m.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

type page struct {
	Folder   string
	Total    int
	Unread   int
	Matched  *int
	Messages []struct {
		UID     uint32
		Subject string
		Flags   struct{ Seen bool }
	}
}

func TestRESTListSearchRead(t *testing.T) {
	m := startMirror(t)
	a := m.do(t, "GET", "/v1/emails?limit=3", login(m.alice), "")
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Fatalf("list: %d %s", a.status, a.body)
	}
	var list page
	a.json(t, &list)
	want := m.srv.Seeded(m.alice.Address, "INBOX")
	if list.Folder != "INBOX" || list.Total != want || len(list.Messages) != 3 || list.Matched != nil {
		t.Fatalf("list: folder %q total %d (seeded %d), %d messages, matched %v", list.Folder, list.Total, want, len(list.Messages), list.Matched)
	}
	if !(list.Messages[0].UID > list.Messages[1].UID && list.Messages[1].UID > list.Messages[2].UID) {
		t.Fatalf("list is not newest first: %+v", list.Messages)
	}

	// A search criterion turns the listing into a search.
	a = m.do(t, "GET", "/v1/emails?subject=roadmap&limit=50", login(m.alice), "")
	var found page
	a.json(t, &found)
	if a.status != 200 || found.Matched == nil || *found.Matched == 0 || len(found.Messages) != *found.Matched {
		t.Fatalf("search: %d %s", a.status, a.body)
	}
	for _, msg := range found.Messages {
		if !strings.Contains(strings.ToLower(msg.Subject), "roadmap") {
			t.Errorf("search for subject roadmap returned %q", msg.Subject)
		}
	}
	// seen=false converts to the boolean false: only unread messages.
	a = m.do(t, "GET", "/v1/emails?seen=false&limit=100", login(m.alice), "")
	var unread page
	a.json(t, &unread)
	if a.status != 200 || len(unread.Messages) == 0 || len(unread.Messages) != unread.Unread {
		t.Fatalf("seen=false: %d, %d messages for %d unread: %s", a.status, len(unread.Messages), unread.Unread, a.body)
	}
	for _, msg := range unread.Messages {
		if msg.Flags.Seen {
			t.Errorf("seen=false returned the read message %d", msg.UID)
		}
	}

	// The UID comes from the path.
	first := list.Messages[0]
	a = m.do(t, "GET", fmt.Sprintf("/v1/emails/%d?folder=INBOX&max_chars=50", first.UID), login(m.alice), "")
	var msg struct {
		UID     uint32
		Subject string
		Text    string
	}
	a.json(t, &msg)
	if a.status != 200 || msg.UID != first.UID || msg.Subject != first.Subject || len([]rune(msg.Text)) > 50 {
		t.Fatalf("read %d: %d %s", first.UID, a.status, a.body)
	}
}

// A path argument and a list in the query: the thread of a demo reply
// holds the messages it answers, oldest first.
func TestRESTThread(t *testing.T) {
	m := startMirror(t)
	var found page
	m.do(t, "GET", "/v1/emails?subject=roadmap&limit=50", login(m.alice), "").json(t, &found)
	if len(found.Messages) < 2 {
		t.Fatalf("the demo has %d roadmap messages", len(found.Messages))
	}
	newest := found.Messages[0]
	a := m.do(t, "GET", fmt.Sprintf("/v1/emails/%d/thread?also_folders=Archive,Drafts", newest.UID), login(m.alice), "")
	var th struct {
		Messages []struct {
			Subject string
			Date    time.Time
		}
		Folders []string
	}
	a.json(t, &th)
	if a.status != 200 || len(th.Messages) < 2 || !slices.Contains(th.Folders, "Archive") || !slices.Contains(th.Folders, "Drafts") {
		t.Fatalf("thread: %d %s", a.status, a.body)
	}
	for i := 1; i < len(th.Messages); i++ {
		if th.Messages[i].Date.Before(th.Messages[i-1].Date) {
			t.Errorf("thread not oldest first: %v before %v", th.Messages[i-1].Date, th.Messages[i].Date)
		}
	}
	if last := th.Messages[len(th.Messages)-1]; !strings.Contains(last.Subject, "roadmap") {
		t.Errorf("thread ends with %q", last.Subject)
	}
}

func TestRESTArgumentErrors(t *testing.T) {
	m := startMirror(t)
	tests := []struct {
		name, path string
		want       string // in the sentence
	}{
		{"not a number", "/v1/emails?limit=abc", `limit must be a whole number (got "abc")`},
		{"out of range", "/v1/emails?limit=0", "limit must be between 1 and 100 (got 0)"},
		{"unknown parameter", "/v1/emails?limitt=2", `unknown argument "limitt"; did you mean "limit"?`},
		{"not a boolean", "/v1/emails?seen=maybe", `seen must be true or false (got "maybe")`},
		{"repeated string", "/v1/emails?folder=INBOX&folder=Sent", "folder must be a string (got a list)"},
		{"uid in the path and the query", "/v1/emails/3?uid=4", "uid is given in the path"},
		{"bad uid in the path", "/v1/emails/abc", `uid must be a whole number (got "abc")`},
		{"credentials in the URL", "/v1/emails?credentials=mbx1.x", "must not be sent in the URL"},
		{"bad format", "/v1/emails?format=xml", `format must be one of json, text, both (got "xml")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := m.do(t, "GET", tt.path, login(m.alice), "").failure(t, 400, "bad_input")
			if !strings.Contains(msg, tt.want) {
				t.Fatalf("message %q lacks %q", msg, tt.want)
			}
		})
	}
}

func TestRESTErrorStatuses(t *testing.T) {
	m := startMirror(t)
	t.Run("no credentials", func(t *testing.T) {
		a := m.do(t, "GET", "/v1/emails", nil, "")
		a.failure(t, 401, "no_credentials")
		if !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("401 without WWW-Authenticate: %v", a.header)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		m.do(t, "GET", "/v1/emails", login(demo.User{Address: m.alice.Address, Password: "wrong"}), "").failure(t, 401, "auth_failed")
	})
	t.Run("unknown uid", func(t *testing.T) {
		msg := m.do(t, "GET", "/v1/emails/999999", login(m.alice), "").failure(t, 404, "not_found")
		if !strings.Contains(msg, "999999") {
			t.Fatalf("message %q does not name the UID", msg)
		}
	})
	t.Run("unknown folder", func(t *testing.T) {
		m.do(t, "GET", "/v1/emails?folder=NoSuchFolder", login(m.alice), "").failure(t, 404, "not_found")
	})
	t.Run("unknown route", func(t *testing.T) {
		msg := m.do(t, "GET", "/v1/nope", login(m.alice), "").failure(t, 404, "not_found")
		if !strings.Contains(msg, "/v1/openapi.json") {
			t.Fatalf("message %q does not point at the document", msg)
		}
	})
	t.Run("tool not offered", func(t *testing.T) {
		msg := m.do(t, "GET", missingRoute, login(m.alice), "").failure(t, 404, "not_found")
		if !strings.Contains(msg, "is not available on this gateway") || !strings.Contains(msg, "imap_no_such_tool") {
			t.Fatalf("message %q", msg)
		}
	})
	t.Run("wrong method", func(t *testing.T) {
		a := m.do(t, "POST", "/v1/emails", login(m.alice), "")
		a.failure(t, 405, "method_not_allowed")
		if a.header.Get("Allow") != "GET" {
			t.Fatalf("Allow: %q", a.header.Get("Allow"))
		}
	})
	t.Run("body not JSON", func(t *testing.T) {
		h := login(m.alice)
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		m.do(t, "POST", "/v1/send", h, "to=x").failure(t, 415, "bad_input")
		m.do(t, "POST", "/v1/send", login(m.alice), "{").failure(t, 400, "bad_input")
		m.do(t, "POST", "/v1/send", login(m.alice), "[1]").failure(t, 400, "bad_input")
		m.do(t, "POST", "/v1/send", login(m.alice), "{} {}").failure(t, 400, "bad_input")
	})
	t.Run("argument in the URL and the body", func(t *testing.T) {
		msg := m.do(t, "POST", "/v1/send?subject=a", login(m.alice), `{"subject":"b"}`).failure(t, 400, "bad_input")
		if !strings.Contains(msg, "subject is given twice") {
			t.Fatalf("message %q", msg)
		}
	})
}

// Every kind has its status; the ones a client retries on are 429/5xx.
func TestRESTStatusOfEveryKind(t *testing.T) {
	want := map[mailerr.Kind]int{
		mailerr.BadInput: 400, mailerr.NoCredentials: 401, mailerr.Auth: 401, mailerr.Forbidden: 403,
		mailerr.NotFound: 404, mailerr.TooLarge: 413, mailerr.RateLimited: 429, mailerr.Busy: 503,
		mailerr.Timeout: 504, mailerr.Unavailable: 502, mailerr.Temporary: 503, mailerr.Permanent: 422,
		mailerr.Internal: 500,
	}
	for k := mailerr.Kind(0); k.String() != ""; k++ {
		w, ok := want[k]
		if !ok {
			t.Errorf("kind %s has no expected status in this test: add it", k)
			continue
		}
		if got := rest.Status(k); got != w {
			t.Errorf("Status(%s) = %d, want %d", k, got, w)
		}
	}
}

func TestRESTBearerToken(t *testing.T) {
	m := startMirror(t)
	tok, err := m.sealer.Seal(credentials.New(m.alice.Address, m.alice.Password))
	if err != nil {
		t.Fatal(err)
	}
	bearer := http.Header{"Authorization": {"Bearer " + tok}}
	a := m.do(t, "GET", "/v1/emails?limit=1", bearer, "")
	var p page
	a.json(t, &p)
	if a.status != 200 || p.Total != m.srv.Seeded(m.alice.Address, "INBOX") {
		t.Fatalf("bearer: %d %s", a.status, a.body)
	}
	// The token opens to alice: bob's login in the token header gives bob's
	// INBOX, so the two answers differ.
	bobTok, _ := m.sealer.Seal(credentials.New(m.bob.Address, m.bob.Password))
	a = m.do(t, "GET", "/v1/emails?limit=1", http.Header{"X-Mailbox-Token": {bobTok}}, "")
	var pb page
	a.json(t, &pb)
	if a.status != 200 || pb.Total != m.srv.Seeded(m.bob.Address, "INBOX") || pb.Total == p.Total {
		t.Fatalf("x-mailbox-token: %d %s (alice has %d)", a.status, a.body, p.Total)
	}

	both := login(m.alice)
	both.Set("Authorization", "Bearer "+tok)
	m.do(t, "GET", "/v1/emails", both, "").failure(t, 400, "bad_input")
	m.do(t, "GET", "/v1/emails", http.Header{"Authorization": {"Basic YTpi"}}, "").failure(t, 400, "bad_input")
	msg := m.do(t, "GET", "/v1/emails", http.Header{"Authorization": {"Bearer mbx1.garbage"}}, "").failure(t, 400, "bad_input")
	if !strings.Contains(msg, "token") {
		t.Fatalf("bad token: %q", msg)
	}
}

func TestRESTFormats(t *testing.T) {
	m := startMirror(t)
	var structured page
	m.do(t, "GET", "/v1/emails?limit=2", login(m.alice), "").json(t, &structured)
	wantHead := fmt.Sprintf("INBOX: %d messages, %d unread", structured.Total, structured.Unread)

	text := m.do(t, "GET", "/v1/emails?limit=2&format=text", login(m.alice), "")
	if text.status != 200 || !strings.HasPrefix(text.header.Get("Content-Type"), "text/plain") || !strings.HasPrefix(string(text.body), wantHead) {
		t.Fatalf("format=text: %d %q %s", text.status, text.header.Get("Content-Type"), text.body)
	}
	h := login(m.alice)
	h.Set("Accept", "application/json;q=0.5, text/plain")
	if a := m.do(t, "GET", "/v1/emails?limit=2", h, ""); !strings.HasPrefix(string(a.body), wantHead) {
		t.Fatalf("Accept: text/plain preferred: %s", a.body)
	}
	h.Set("Accept", "text/plain;q=0.2, application/json")
	if a := m.do(t, "GET", "/v1/emails?limit=2", h, ""); !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Fatalf("Accept: JSON preferred: %s", a.body)
	}
	var both struct {
		Result page
		Text   string
	}
	m.do(t, "GET", "/v1/emails?limit=2&format=both", login(m.alice), "").json(t, &both)
	if both.Result.Total != structured.Total || len(both.Result.Messages) != 2 || !strings.HasPrefix(both.Text, wantHead) {
		t.Fatalf("format=both: %+v", both)
	}
}

// Sending through POST /v1/send reaches bob's INBOX in the demo server.
func TestRESTSend(t *testing.T) {
	m := startMirror(t)
	before := bobTotal(t, m)
	subject := fmt.Sprintf("rest send %d", time.Now().UnixNano())
	body, _ := json.Marshal(map[string]any{"to": []string{m.bob.Address}, "subject": subject, "text": "hello over REST"})
	a := m.do(t, "POST", "/v1/send", login(m.alice), string(body))
	var res struct {
		MessageID string `json:"message_id"`
		Accepted  []string
	}
	a.json(t, &res)
	if a.status != 200 || res.MessageID == "" {
		t.Fatalf("send: %d %s", a.status, a.body)
	}
	if got := bobTotal(t, m); got != before+1 {
		t.Fatalf("bob's INBOX went from %d to %d messages", before, got)
	}
	var found page
	m.do(t, "GET", "/v1/emails?subject="+url.QueryEscape(subject), login(m.bob), "").json(t, &found)
	if len(found.Messages) != 1 || found.Messages[0].Subject != subject {
		t.Fatalf("bob does not have the message: %+v", found)
	}
	// A recipient list in the query: comma-separated converts to a list.
	q := url.Values{"to": {m.bob.Address + "," + m.bob.Address}, "subject": {subject + " 2"}, "text": {"x"}}
	if a := m.do(t, "POST", "/v1/send?"+q.Encode(), login(m.alice), ""); a.status != 200 {
		t.Fatalf("send with query arguments: %d %s", a.status, a.body)
	}
	m.do(t, "POST", "/v1/send", login(m.alice), `{"subject":"no recipient","text":"x"}`).failure(t, 400, "bad_input")
}

func bobTotal(t *testing.T, m *mirror) int {
	t.Helper()
	var p page
	m.do(t, "GET", "/v1/emails?limit=1", login(m.bob), "").json(t, &p)
	return p.Total
}

// The document lists every route whose tool is offered, with the tool's
// schemas; routes whose tool is not offered are left out.
func TestRESTOpenAPIDocument(t *testing.T) {
	m := startMirror(t)
	a := m.do(t, "GET", rest.DocumentPath, nil, "")
	if a.status != 200 {
		t.Fatalf("%s: %d %s", rest.DocumentPath, a.status, a.body)
	}
	var doc struct {
		OpenAPI string
		Paths   map[string]map[string]struct {
			OperationID string
			Parameters  []struct {
				Name, In string
				Required bool
				Schema   map[string]any
			}
			RequestBody *struct {
				Content map[string]struct{ Schema map[string]any }
			}
			Responses map[string]struct {
				Content map[string]struct{ Schema json.RawMessage }
				Ref     string `json:"$ref"`
			}
			Tools []string `json:"x-mcp-tools"`
		}
		Components struct {
			SecuritySchemes map[string]any
		}
	}
	a.json(t, &doc)
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	offered := map[string]tools.Tool{}
	for _, tl := range m.tools {
		offered[tl.Def.Name] = tl
	}
	served := 0
	for _, r := range app.RESTRoutes() {
		op, ok := doc.Paths[r.Path][strings.ToLower(r.Method)]
		if _, has := offered[r.Tools[0]]; !has {
			if ok {
				t.Errorf("%s %s is documented, but its tool %s is not offered", r.Method, r.Path, r.Tools[0])
			}
			continue
		}
		served++
		if !ok {
			t.Errorf("%s %s is missing from the document", r.Method, r.Path)
			continue
		}
		if !slices.Equal(op.Tools, r.Tools) {
			t.Errorf("%s %s: x-mcp-tools %v, want %v", r.Method, r.Path, op.Tools, r.Tools)
		}
		tl := offered[r.Tools[0]]
		got := op.Responses["200"].Content["application/json"].Schema
		if !jsonEqual(t, got, tl.Def.RawOutputSchema) {
			t.Errorf("%s %s: the 200 schema is not %s's output schema", r.Method, r.Path, tl.Def.Name)
		}
		for _, code := range []string{"400", "401", "404", "500", "503"} {
			if _, ok := op.Responses[code]; !ok {
				t.Errorf("%s %s: no %s response", r.Method, r.Path, code)
			}
		}
		var in struct {
			Properties map[string]map[string]any
			Required   []string
		}
		json.Unmarshal(tl.Def.RawInputSchema, &in)
		switch r.Method {
		case http.MethodGet:
			params := map[string]string{}
			for _, p := range op.Parameters {
				params[p.Name] = p.In
				if s, ok := in.Properties[p.Name]; ok && p.Schema["type"] != s["type"] {
					t.Errorf("%s %s: parameter %s has type %v, the argument %v", r.Method, r.Path, p.Name, p.Schema["type"], s["type"])
				}
			}
			for name := range in.Properties {
				want := "query"
				if strings.Contains(r.Path, "{"+name+"}") {
					want = "path"
				}
				if name == "credentials" {
					want = ""
				}
				if params[name] != want {
					t.Errorf("%s %s: argument %s is a %q parameter, want %q", r.Method, r.Path, name, params[name], want)
				}
			}
		case http.MethodPost:
			if op.RequestBody == nil {
				t.Errorf("%s %s: no request body", r.Method, r.Path)
				continue
			}
			props, _ := op.RequestBody.Content["application/json"].Schema["properties"].(map[string]any)
			inPath := map[string]bool{}
			for _, p := range op.Parameters {
				if p.In == "path" {
					inPath[p.Name] = true
				}
			}
			for name := range in.Properties {
				_, inBody := props[name]
				switch {
				case strings.Contains(r.Path, "{"+name+"}") && (inBody || !inPath[name]):
					t.Errorf("%s %s: argument %s belongs in the path only", r.Method, r.Path, name)
				case !strings.Contains(r.Path, "{"+name+"}") && !inBody:
					t.Errorf("%s %s: the body lacks argument %s", r.Method, r.Path, name)
				}
			}
		}
	}
	if served < 5 {
		t.Fatalf("only %d routes have a tool here: the test proves little", served)
	}
	if _, ok := doc.Paths[missingRoute]; ok {
		t.Errorf("%s has no tool and must not be documented", missingRoute)
	}
	for _, s := range []string{"bearerToken", "mailboxToken", "imapUser", "imapPass"} {
		if doc.Components.SecuritySchemes[s] == nil {
			t.Errorf("no security scheme %s", s)
		}
	}
	if string(a.body) != string(m.h.Document()) {
		t.Errorf("the served document differs from Document()")
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

func TestRESTRouteTableChecks(t *testing.T) {
	toolset := tools.DocTools()
	bad := []struct {
		name  string
		route rest.Route
		want  string
	}{
		{"method", rest.Route{Method: "PUT", Path: "/v1/x", Tools: []string{"imap_read_email"}}, "GET or POST"},
		{"prefix", rest.Route{Method: "GET", Path: "/x", Tools: []string{"imap_read_email"}}, "must start with /v1/"},
		{"trailing slash", rest.Route{Method: "GET", Path: "/v1/x/", Tools: []string{"imap_read_email"}}, "not end with /"},
		{"no tool", rest.Route{Method: "GET", Path: "/v1/x"}, "no tool"},
		{"path argument the tool lacks", rest.Route{Method: "GET", Path: "/v1/x/{nope}", Tools: []string{"imap_read_email"}}, `takes no argument "nope"`},
		{"twice", rest.Route{Method: "GET", Path: "/v1/emails/{id}", Tools: []string{"imap_list_folders"}}, "listed twice"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			routes := append(app.RESTRoutes(), tt.route)
			_, err := rest.New(routes, toolset, "test")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := rest.New(app.RESTRoutes(), toolset, "test"); err != nil {
		t.Fatalf("the gateway's table: %v", err)
	}
}
