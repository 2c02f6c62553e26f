package tests

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/app"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// The REST mirror (/v1/) end to end: a real gateway on Dovecot and
// Postfix, plain HTTP requests, answers checked against what Dovecot holds.

// restBase is the gateway's base URL (without /mcp).
func (g *gateway) restBase() string { return strings.TrimSuffix(g.URL, "/mcp") }

type restAnswer struct {
	status int
	header http.Header
	body   []byte
}

func restCall(t *testing.T, g *gateway, method, path string, h map[string]string, body any) restAnswer {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = strings.NewReader(string(b))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, g.restBase()+path, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return restAnswer{resp.StatusCode, resp.Header, b}
}

func (a restAnswer) decode(t *testing.T, v any) {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("not JSON (%v): %s", err, a.body)
	}
}

// failure asserts the error JSON with status and code and returns its
// message.
func (a restAnswer) failure(t *testing.T, status int, code string) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(a.body, &e); err != nil || a.status != status || e.Error.Code != code || e.Error.Message == "" {
		t.Fatalf("got %d %s, want %d with code %s", a.status, a.body, status, code)
	}
	return e.Error.Message
}

// hasTool reports whether the gateway lists the tool; skips the test with
// the reason when it does not.
func requireTool(t *testing.T, g *gateway, name string) {
	t.Helper()
	if _, ok := toolNames(t, g.URL, nil)[name]; !ok {
		t.Skipf("%s is not listed by this gateway yet: its REST route answers 404 until it lands", name)
	}
}

const restSeed = 30

func TestRESTMirror(t *testing.T) {
	s := sendStack(t)
	if err := s.Seed(alice, restSeed, "INBOX"); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, s, smtpEnv(s)...)
	login := userHeaders(s, alice)

	t.Run("list is Dovecot's newest 20", func(t *testing.T) {
		want := newest20(t, s, alice)
		var page mailbox.Page
		restCall(t, g, "GET", "/v1/emails", login, nil).decode(t, &page)
		if len(page.Messages) != len(want) || page.Total != restSeed || page.Folder != "INBOX" {
			t.Fatalf("folder %q total %d with %d messages, want INBOX %d with %d", page.Folder, page.Total, len(page.Messages), restSeed, len(want))
		}
		for i, m := range page.Messages {
			if m.UID != want[i].UID || m.Subject != want[i].Subject {
				t.Errorf("message %d: uid %d %q, Dovecot has uid %d %q", i, m.UID, m.Subject, want[i].UID, want[i].Subject)
			}
		}
		// The next page through the cursor, as query parameters.
		var next mailbox.Page
		q := url.Values{"cursor": {page.NextCursor}, "limit": {"100"}}
		restCall(t, g, "GET", "/v1/emails?"+q.Encode(), login, nil).decode(t, &next)
		if len(next.Messages) != restSeed-20 || next.Messages[0].UID >= page.Messages[19].UID {
			t.Fatalf("second page: %d messages, first uid %d after %d", len(next.Messages), next.Messages[0].UID, page.Messages[19].UID)
		}
	})

	t.Run("read by uid in the path", func(t *testing.T) {
		want := newest20(t, s, alice)[3]
		d := direct(t, s, alice)
		if _, err := d.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
			t.Fatal(err)
		}
		seen := fetchStored(t, d, imap.UID(want.UID)).has(imap.FlagSeen)
		var msg mailbox.Message
		restCall(t, g, "GET", fmt.Sprintf("/v1/emails/%d?folder=INBOX", want.UID), login, nil).decode(t, &msg)
		if msg.UID != want.UID || msg.Subject != want.Subject || msg.MessageID != want.MessageID || msg.Flags.Seen != seen {
			t.Fatalf("read uid %d %q <%s> seen=%v, Dovecot has uid %d %q <%s> seen=%v", msg.UID, msg.Subject, msg.MessageID, msg.Flags.Seen, want.UID, want.Subject, want.MessageID, seen)
		}
		d.Noop().Wait()
		if after := fetchStored(t, d, imap.UID(want.UID)).has(imap.FlagSeen); after != seen {
			t.Fatalf("reading over REST changed \\Seen from %v to %v", seen, after)
		}
	})

	t.Run("search when criteria are given", func(t *testing.T) {
		d := direct(t, s, alice)
		if _, err := d.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
			t.Fatal(err)
		}
		sd, err := d.UIDSearch(&imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}}, nil).Wait()
		if err != nil {
			t.Fatal(err)
		}
		var page mailbox.Page
		restCall(t, g, "GET", "/v1/emails?seen=false&limit=100", login, nil).decode(t, &page)
		var got []imap.UID
		for _, m := range page.Messages {
			got = append(got, imap.UID(m.UID))
		}
		slices.Sort(got)
		if page.Matched == nil || !slices.Equal(got, sd.AllUIDs()) {
			t.Fatalf("seen=false gave %v (matched %v), Dovecot's UNSEEN is %v", got, page.Matched, sd.AllUIDs())
		}
	})

	t.Run("format=text", func(t *testing.T) {
		a := restCall(t, g, "GET", "/v1/emails?limit=2&format=text", login, nil)
		want := fmt.Sprintf("INBOX: %d messages,", restSeed)
		if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") || !strings.HasPrefix(string(a.body), want) {
			t.Fatalf("%d %s: %s", a.status, a.header.Get("Content-Type"), a.body)
		}
	})

	t.Run("bearer token", func(t *testing.T) {
		key, _ := hex.DecodeString(g.Key)
		sealer, err := credentials.NewSealer(key)
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := sealer.Seal(credentials.New(alice, s.Users[alice]))
		var page mailbox.Page
		restCall(t, g, "GET", "/v1/emails?limit=1", map[string]string{"Authorization": "Bearer " + tok}, nil).decode(t, &page)
		if page.Total != restSeed {
			t.Fatalf("total %d, want %d", page.Total, restSeed)
		}
		restCall(t, g, "GET", "/v1/emails", map[string]string{"Authorization": "Bearer mbx1.AAAA"}, nil).failure(t, 400, "bad_input")
	})

	t.Run("errors and their statuses", func(t *testing.T) {
		msg := restCall(t, g, "GET", "/v1/emails?limit=500", login, nil).failure(t, 400, "bad_input")
		if msg != "limit must be between 1 and 100 (got 500)" {
			t.Errorf("bad argument: %q", msg)
		}
		a := restCall(t, g, "GET", "/v1/emails", nil, nil)
		a.failure(t, 401, "no_credentials")
		restCall(t, g, "GET", "/v1/emails", map[string]string{"x-imap-user": alice, "x-imap-pass": "wrong"}, nil).failure(t, 401, "auth_failed")
		msg = restCall(t, g, "GET", "/v1/emails/999999", login, nil).failure(t, 404, "not_found")
		if !strings.Contains(msg, "999999") {
			t.Errorf("unknown uid: %q", msg)
		}
		restCall(t, g, "GET", "/v1/emails?folder=NoSuchFolder", login, nil).failure(t, 404, "not_found")
		restCall(t, g, "GET", "/v1/no-such-route", login, nil).failure(t, 404, "not_found")
		restCall(t, g, "DELETE", "/v1/emails", login, nil).failure(t, 405, "method_not_allowed")
	})

	t.Run("send arrives", func(t *testing.T) {
		subject := fmt.Sprintf("REST send %d", time.Now().UnixNano())
		var res struct {
			MessageID string   `json:"message_id"`
			Accepted  []string `json:"accepted"`
		}
		restCall(t, g, "POST", "/v1/send", login, map[string]any{
			"to": []string{mailtest.Bob}, "subject": subject, "text": "sent over the REST mirror", "tags": []string{"rest-test"},
		}).decode(t, &res)
		if res.MessageID == "" || !slices.Equal(res.Accepted, []string{mailtest.Bob}) {
			t.Fatalf("send result %+v", res)
		}
		got := findByMessageID(t, direct(t, s, mailtest.Bob), "INBOX", res.MessageID)
		if got.hdr.Get("Subject") != subject || !strings.Contains(got.hdr.Get("X-Mailbox-Tags"), "rest-test") {
			t.Fatalf("delivered: Subject %q, X-Mailbox-Tags %q", got.hdr.Get("Subject"), got.hdr.Get("X-Mailbox-Tags"))
		}
		text, _, _ := parts(t, got.raw)
		if !strings.Contains(text, "sent over the REST mirror") {
			t.Fatalf("delivered text %q", text)
		}
		restCall(t, g, "POST", "/v1/send", login, map[string]any{"subject": "x", "text": "no recipient"}).failure(t, 400, "bad_input")
	})

	t.Run("peek counts Dovecot's unread", func(t *testing.T) {
		requireTool(t, g, "imap_peek_inbox")
		st, err := direct(t, s, alice).Status("INBOX", &imap.StatusOptions{NumUnseen: true, NumMessages: true}).Wait()
		if err != nil {
			t.Fatal(err)
		}
		var peek struct {
			Folder string
			Unread uint32
			Total  uint32
		}
		restCall(t, g, "GET", "/v1/peek", login, nil).decode(t, &peek)
		if peek.Unread != *st.NumUnseen || peek.Total != *st.NumMessages {
			t.Fatalf("peek: unread %d total %d, Dovecot: %d of %d", peek.Unread, peek.Total, *st.NumUnseen, *st.NumMessages)
		}
	})

	t.Run("check-inbox takes each message once", func(t *testing.T) {
		requireTool(t, g, "imap_check_inbox")
		type checked struct {
			Messages []struct{ UID uint32 }
		}
		var first, second checked
		restCall(t, g, "POST", "/v1/check-inbox", login, map[string]any{"limit": 3}).decode(t, &first)
		if len(first.Messages) == 0 || len(first.Messages) > 3 {
			t.Fatalf("first check returned %d messages", len(first.Messages))
		}
		d := direct(t, s, alice)
		if _, err := d.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
			t.Fatal(err)
		}
		for _, m := range first.Messages {
			if !fetchStored(t, d, imap.UID(m.UID)).has(imap.FlagSeen) {
				t.Errorf("uid %d was returned but is not \\Seen in Dovecot", m.UID)
			}
		}
		restCall(t, g, "POST", "/v1/check-inbox", login, map[string]any{"limit": 50}).decode(t, &second)
		for _, m := range second.Messages {
			if slices.ContainsFunc(first.Messages, func(f struct{ UID uint32 }) bool { return f.UID == m.UID }) {
				t.Errorf("uid %d returned by two checks", m.UID)
			}
		}
	})

	t.Run("wait times out, then returns the tagged message", func(t *testing.T) {
		requireTool(t, g, "imap_wait_for_email")
		bob := userHeaders(s, mailtest.Bob)
		var idle struct {
			Messages []json.RawMessage
			TimedOut bool `json:"timed_out"`
		}
		start := time.Now()
		restCall(t, g, "GET", "/v1/wait?timeout_s=1&tag=rest-wait", bob, nil).decode(t, &idle)
		if len(idle.Messages) != 0 || !idle.TimedOut || time.Since(start) > 30*time.Second {
			t.Fatalf("empty wait: %+v after %v", idle, time.Since(start))
		}
		// The cursor from peek: what arrives after it counts, even if it
		// lands before the wait has started.
		var peek struct {
			NextSinceUID uint32 `json:"next_since_uid"`
		}
		restCall(t, g, "GET", "/v1/peek", bob, nil).decode(t, &peek)
		subject := fmt.Sprintf("REST wait %d", time.Now().UnixNano())
		done := make(chan restAnswer, 1)
		go func() {
			done <- restCall(t, g, "GET", fmt.Sprintf("/v1/wait?timeout_s=60&tag=rest-wait&since_uid=%d", peek.NextSinceUID), bob, nil)
		}()
		time.Sleep(500 * time.Millisecond)
		restCall(t, g, "POST", "/v1/send", login, map[string]any{
			"to": []string{mailtest.Bob}, "subject": subject, "text": "wake up", "tags": []string{"rest-wait"},
		}).decode(t, new(map[string]any))
		var woke struct {
			Messages []struct{ Subject string }
		}
		a := <-done
		a.decode(t, &woke)
		if len(woke.Messages) == 0 || woke.Messages[0].Subject != subject {
			listed := restCall(t, g, "GET", "/v1/emails?tag=rest-wait&format=text", bob, nil)
			t.Fatalf("wait (since_uid=%d) returned %s, want %q; bob's list by the tag:\n%s", peek.NextSinceUID, a.body, subject, listed.body)
		}
	})
}

// The OpenAPI document is valid for a real validator, lists every route
// whose tool the gateway offers, and the validator does catch a broken
// document.
func TestRESTOpenAPIValid(t *testing.T) {
	dir := clientsDir(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@seriousme", "openapi-schema-validator", "package.json")); err != nil {
		t.Fatalf("tests/clients lacks @seriousme/openapi-schema-validator: run `npm ci` there")
	}
	s := mailtest.Shared(t)
	g := startGateway(t, s, smtpEnv(s)...)
	var doc map[string]any
	restCall(t, g, "GET", "/v1/openapi.json", nil, nil).decode(t, &doc)

	type result struct {
		Version string
		Paths   map[string][]string
		Schemas int
		Errors  []string
	}
	var res result
	runNode(t, dir, "openapi.mjs", doc, &res)
	if len(res.Errors) > 0 || res.Version != "3.1" {
		t.Fatalf("version %q, errors:\n%s", res.Version, strings.Join(res.Errors, "\n"))
	}
	offered := toolNames(t, g.URL, nil)
	n := 0
	for _, r := range app.RESTRoutes() {
		if _, ok := offered[r.Tools[0]]; !ok {
			if slices.Contains(res.Paths[r.Path], r.Method) {
				t.Errorf("%s %s documented without its tool %s", r.Method, r.Path, r.Tools[0])
			}
			continue
		}
		n++
		if !slices.Contains(res.Paths[r.Path], r.Method) {
			t.Errorf("%s %s is not in the document (it has %v)", r.Method, r.Path, res.Paths)
		}
	}
	if n < 6 {
		t.Fatalf("only %d routes have their tool on this gateway", n)
	}
	t.Logf("valid OpenAPI %s: %d routes, %d schemas checked", res.Version, n, res.Schemas)

	// The same validator refuses a document with a bad schema and a
	// dangling reference.
	op := doc["paths"].(map[string]any)["/v1/emails"].(map[string]any)["get"].(map[string]any)
	op["parameters"].([]any)[0].(map[string]any)["schema"] = map[string]any{"type": "integr"}
	op["responses"].(map[string]any)["418"] = map[string]any{"$ref": "#/components/responses/Teapot"}
	var broken result
	runNode(t, dir, "openapi.mjs", doc, &broken)
	if len(broken.Errors) < 2 {
		t.Fatalf("the validator accepted a broken document: %v", broken.Errors)
	}
}
