package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
)

func TestParseResourceURI(t *testing.T) {
	good := []struct {
		uri  string
		want resourceRef
	}{
		{"mailbox://INBOX/12", resourceRef{Folder: "INBOX", UID: 12}},
		{"mailbox://Archive%2F2024/7", resourceRef{Folder: "Archive/2024", UID: 7}},
		{"mailbox://f%C3%A9%20x/1", resourceRef{Folder: "fé x", UID: 1}},
		{"mailbox://INBOX/12/attachments/2", resourceRef{Folder: "INBOX", UID: 12, PartID: "2"}},
		{"mailbox://INBOX/4294967295/attachments/1.2.10", resourceRef{Folder: "INBOX", UID: 4294967295, PartID: "1.2.10"}},
		{"mailbox://INBOX/12?include_hidden=true", resourceRef{Folder: "INBOX", UID: 12, IncludeHidden: true}},
		{"mailbox://INBOX/12?include_hidden=false", resourceRef{Folder: "INBOX", UID: 12}},
	}
	for _, c := range good {
		got, err := parseResourceURI(c.uri)
		if err != nil || got != c.want {
			t.Errorf("%s: got %+v, %v; want %+v", c.uri, got, err, c.want)
		}
	}
	bad := map[string]string{
		"test://static-text":     "the scheme must be mailbox://",
		"mailbox://INBOX":        "the path must be",
		"mailbox://INBOX/12/13":  "the path must be",
		"mailbox://INBOX/12?x=1": "the only query a message takes",
		"mailbox://INBOX/12/attachments/2?include_hidden=true": "an attachment takes no query",
		"mailbox://INBOX/12/attach/1":                          "the path must be",
		"mailbox://INBOX/12/attachments/1/2":                   "the path must be",
		"mailbox://a/b/12":                                     "the path must be",
		"mailbox:///12":                                        "the folder must be",
		"mailbox://%20/12":                                     "the folder must be",
		"mailbox://IN BOX/12":                                  "the folder must be",
		"mailbox://IN%2/12":                                    "the folder must be",
		"mailbox://IN%/12":                                     "the folder must be",
		"mailbox://%FF/12":                                     "the folder must be",
		"mailbox://INBOX/0":                                    "the uid must be",
		"mailbox://INBOX/012":                                  "the uid must be",
		"mailbox://INBOX/-1":                                   "the uid must be",
		"mailbox://INBOX/+1":                                   "the uid must be",
		"mailbox://INBOX/4294967296":                           "the uid must be",
		"mailbox://INBOX/x":                                    "the uid must be",
		"mailbox://INBOX/":                                     "the uid must be",
		"mailbox://INBOX/1/attachments/0":                      "the part_id must be",
		"mailbox://INBOX/1/attachments/1..2":                   "the part_id must be",
		"mailbox://INBOX/1/attachments/":                       "the part_id must be",
		"mailbox://INBOX/1/attachments/1.02":                   "the part_id must be",
		"mailbox://INBOX/1/attachments/1%2E2":                  "the part_id must be",
		"mailbox://INBOX/1/attachments/HEADER":                 "the part_id must be",
	}
	for uri, want := range bad {
		_, err := parseResourceURI(uri)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "is not a resource of this gateway") {
			t.Errorf("%s: got %v, want an error saying %q", uri, err, want)
		}
	}
}

// Every URI the gateway gives matches exactly one of its templates (mcp-go
// picks among matching templates in map order) and reads back the same.
func TestResourceURIRoundTrip(t *testing.T) {
	msg, att := mcp.NewResourceTemplate(messageTemplate, "m"), mcp.NewResourceTemplate(attachmentTemplate, "a")
	for _, ref := range []resourceRef{
		{Folder: "INBOX", UID: 1},
		{Folder: "Archive/2024/Q1", UID: 99},
		{Folder: "Entwürfe & Notizen (alt)", UID: 5, PartID: "1.2"},
		{Folder: "a%2Fb+c,d;e=f?g#h", UID: 4294967295, PartID: "3"},
		{Folder: "日本語", UID: 7},
	} {
		uri := ref.String()
		back, err := parseResourceURI(uri)
		if err != nil || back != ref {
			t.Errorf("%+v -> %s -> %+v, %v", ref, uri, back, err)
		}
		m, a := msg.URITemplate.Regexp().MatchString(uri), att.URITemplate.Regexp().MatchString(uri)
		if m == a || m != (ref.PartID == "") {
			t.Errorf("%s: matches the message template %v, the attachment template %v", uri, m, a)
		}
	}
}

func TestMediaType(t *testing.T) {
	for in, want := range map[string]string{
		"application/pdf": "application/pdf", "IMAGE/PNG": "image/png", " text/plain ": "text/plain",
		"application/vnd.openxmlformats-officedocument.wordprocessingml.document": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
		"": "application/octet-stream", "pdf": "application/octet-stream", "text/plain; charset=utf-8": "application/octet-stream",
		"a/b/c": "application/octet-stream", "text/\u202ehtml": "application/octet-stream",
	} {
		if got := mediaType(in); got != want {
			t.Errorf("mediaType(%q) = %q, want %q", in, got, want)
		}
	}
}

// resourceServer serves the resources and prompts as the gateway wires
// them, with credentials taken from x-test-user/x-test-pass.
func resourceServer(t *testing.T, d *Deps) string {
	t.Helper()
	hooks := &server.Hooks{}
	s := server.NewMCPServer("test", "1", server.WithHooks(hooks))
	RegisterResources(s, hooks, d)
	RegisterPrompts(s, d)
	h := RPCErrors(server.NewStreamableHTTPServer(s, server.WithStateLess(true), server.WithDisableStreaming(true),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			if u := r.Header.Get("x-test-user"); u != "" {
				ctx = credentials.NewContext(ctx, credentials.New(u, r.Header.Get("x-test-pass")))
			}
			return ctx
		})))
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// rpcReply is one JSON-RPC answer and its HTTP status.
type rpcReply struct {
	Status int
	Result map[string]any
	Error  *struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	}
}

// rpc posts one request, in the 2026-07-28 form (per-request _meta and
// the standard headers) when modern, else as a 2025-06-18 client.
func rpc(t *testing.T, url string, modern bool, method string, params map[string]any, headers map[string]string) rpcReply {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	version := mcp.ProtocolVersion20250618
	if modern {
		version = mcp.ProtocolVersion20260728
		params["_meta"] = map[string]any{
			mcp.MetaKeyProtocolVersion:    version,
			mcp.MetaKeyClientInfo:         map[string]any{"name": "test", "version": "1"},
			mcp.MetaKeyClientCapabilities: map[string]any{},
		}
		req.Header.Set(mcp.HeaderMethod, method)
		if name, ok := params["uri"].(string); ok {
			req.Header.Set(mcp.HeaderName, name)
		}
		if name, ok := params["name"].(string); ok {
			req.Header.Set(mcp.HeaderName, name)
		}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	req.Body = httpBody(body)
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, version)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r rpcReply
	var raw struct {
		ID     any            `json:"id"`
		Result map[string]any `json:"result"`
		Error  json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatalf("%s: status %d, not JSON: %v", method, resp.StatusCode, err)
	}
	if raw.ID != 7.0 {
		t.Errorf("%s: answered id %v, want 7", method, raw.ID)
	}
	r.Status, r.Result = resp.StatusCode, raw.Result
	if len(raw.Error) > 0 {
		json.Unmarshal(raw.Error, &r.Error)
	}
	return r
}

func httpBody(b []byte) *readCloser { return &readCloser{bytes.NewReader(b)} }

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// Resources on the demo mail server, through mcp-go's HTTP server as the
// gateway mounts it: the list, a message read (fenced, \Seen unchanged),
// and the errors with the code and data each protocol era asks for.
func TestResourcesOnDemo(t *testing.T) {
	d, srv := demoDeps(t)
	url := resourceServer(t, d)
	bob := srv.Users[1]
	who := map[string]string{"x-test-user": bob.Address, "x-test-pass": bob.Password}
	creds := credentials.New(bob.Address, bob.Password)
	page, err := d.Mailbox.ListEmails(context.Background(), creds, mailbox.ListOptions{Folder: "INBOX", Limit: recentCount})
	if err != nil || len(page.Messages) == 0 {
		t.Fatalf("the demo INBOX: %v", err)
	}

	for _, modern := range []bool{false, true} {
		era := map[bool]string{false: "2025-06-18", true: "2026-07-28"}[modern]
		t.Run(era, func(t *testing.T) {
			t.Run("list_without_credentials_is_empty", func(t *testing.T) {
				r := rpc(t, url, modern, "resources/list", nil, nil)
				if r.Error != nil || len(r.Result["resources"].([]any)) != 0 {
					t.Fatalf("got %+v", r)
				}
			})
			t.Run("list_with_a_wrong_password_is_an_error", func(t *testing.T) {
				r := rpc(t, url, modern, "resources/list", nil, map[string]string{"x-test-user": bob.Address, "x-test-pass": "wrong"})
				if r.Error == nil || r.Error.Code != mcp.INTERNAL_ERROR || len(r.Result) != 0 || !strings.Contains(r.Error.Message, "rejected the user name or password") {
					t.Fatalf("got %+v %+v", r.Result, r.Error)
				}
			})
			t.Run("list_shows_the_newest_messages", func(t *testing.T) {
				r := rpc(t, url, modern, "resources/list", nil, who)
				if r.Error != nil {
					t.Fatalf("error %+v", r.Error)
				}
				res := r.Result["resources"].([]any)
				if len(res) != len(page.Messages) {
					t.Fatalf("%d resources, the INBOX's newest are %d", len(res), len(page.Messages))
				}
				for i, x := range res {
					m, want := x.(map[string]any), page.Messages[i]
					if m["uri"] != (resourceRef{Folder: "INBOX", UID: want.UID}).String() || m["mimeType"] != "text/plain" || m["size"] != float64(want.Size) || m["name"] == "" {
						t.Errorf("resource %d: %v, want uid %d %q", i, m, want.UID, want.Subject)
					}
				}
				if hinted := r.Result["ttlMs"] != nil; hinted != modern || modern && (r.Result["ttlMs"] != 30000.0 || r.Result["cacheScope"] != "private") {
					t.Errorf("cache hints: ttlMs %v, cacheScope %v", r.Result["ttlMs"], r.Result["cacheScope"])
				}
			})
			t.Run("read_gives_the_fenced_text_and_leaves_it_unread", func(t *testing.T) {
				m := page.Messages[0]
				uri := resourceRef{Folder: "INBOX", UID: m.UID}.String()
				r := rpc(t, url, modern, "resources/read", map[string]any{"uri": uri}, who)
				if r.Error != nil {
					t.Fatalf("error %+v", r.Error)
				}
				c := r.Result["contents"].([]any)[0].(map[string]any)
				text, _ := c["text"].(string)
				if c["uri"] != uri || c["mimeType"] != "text/plain" || !strings.Contains(text, UntrustedNote) || !strings.Contains(text, "Subject: "+m.Subject) {
					t.Fatalf("contents %v", c)
				}
				after, _ := d.Mailbox.ListEmails(context.Background(), creds, mailbox.ListOptions{Folder: "INBOX", Limit: recentCount})
				if after.Messages[0].UID != m.UID || after.Messages[0].Flags.Seen != m.Flags.Seen {
					t.Errorf("reading changed \\Seen: %v -> %v", m.Flags.Seen, after.Messages[0].Flags.Seen)
				}
			})
			notFound, status := mcp.RESOURCE_NOT_FOUND, http.StatusOK
			if modern {
				notFound, status = mcp.INVALID_PARAMS, http.StatusBadRequest
			}
			for _, c := range []struct {
				name, uri string
				code      int
				says      string
			}{
				{"missing_message", "mailbox://INBOX/999999", notFound, "no message with UID 999999"},
				{"missing_folder", "mailbox://No%2FSuch/1", notFound, "No/Such"},
				{"unknown_scheme", "test://nonexistent-resource-for-conformance-testing", notFound, "the scheme must be mailbox://"},
				{"bad_path", "mailbox://INBOX", notFound, "the path must be"},
				{"bad_uid", "mailbox://INBOX/0", mcp.INVALID_PARAMS, "the uid must be"},
				{"not_an_attachment", (resourceRef{Folder: "INBOX", UID: page.Messages[0].UID, PartID: "9"}).String(), mcp.INVALID_PARAMS, "is not an attachment"},
			} {
				t.Run("read_"+c.name, func(t *testing.T) {
					r := rpc(t, url, modern, "resources/read", map[string]any{"uri": c.uri}, who)
					if r.Error == nil || r.Error.Code != c.code || r.Error.Data["uri"] != c.uri || !strings.Contains(r.Error.Message, c.says) {
						t.Fatalf("got %+v %+v, want code %d with data.uri and %q", r.Result, r.Error, c.code, c.says)
					}
					want := http.StatusOK
					if modern && c.code == mcp.INVALID_PARAMS {
						want = status
					}
					if r.Status != want {
						t.Errorf("HTTP status %d, want %d", r.Status, want)
					}
				})
			}
			t.Run("read_without_credentials", func(t *testing.T) {
				r := rpc(t, url, modern, "resources/read", map[string]any{"uri": "mailbox://INBOX/1"}, nil)
				if r.Error == nil || r.Error.Code != mcp.INTERNAL_ERROR || !strings.Contains(r.Error.Message, "no mailbox credentials") {
					t.Fatalf("got %+v", r.Error)
				}
			})
			t.Run("templates_list", func(t *testing.T) {
				r := rpc(t, url, modern, "resources/templates/list", nil, nil)
				var got []string
				for _, x := range r.Result["resourceTemplates"].([]any) {
					got = append(got, x.(map[string]any)["uriTemplate"].(string))
				}
				if strings.Join(got, " ") != attachmentTemplate+" "+messageTemplate {
					t.Errorf("templates %v", got)
				}
				if modern && (r.Result["ttlMs"] != 300000.0 || r.Result["cacheScope"] != "public") {
					t.Errorf("cache hints: ttlMs %v, cacheScope %v", r.Result["ttlMs"], r.Result["cacheScope"])
				}
			})
		})
	}
}
