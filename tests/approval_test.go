package tests

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/approval"
	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// approvalStack is a real stack, and a gateway that sends through its
// Postfix under APPROVAL=all.
func approvalStack(t *testing.T) (*mailtest.Stack, *gateway) {
	t.Helper()
	s := mailtest.StartT(t, mailtest.Options{})
	return s, startGateway(t, s, smtpEnv(s, "APPROVAL=all", "MAILBOX_ACCESS=full")...)
}

// withSubject counts the messages of user's folder whose subject holds
// token, asking Dovecot itself.
func withSubject(t *testing.T, s *mailtest.Stack, user, folder, token string) int {
	t.Helper()
	out, err := s.Doveadm("search", "-u", user, "mailbox", folder, "subject", token)
	if err != nil {
		t.Fatal(err)
	}
	return len(strings.Fields(out)) / 2 // "mailbox-guid uid" per message
}

// delivered waits (up to 10 s) until user's INBOX holds want messages with
// token, or for 2 s when want is 0 (Postfix delivers within a second), and
// returns how many there are.
func delivered(t *testing.T, s *mailtest.Stack, user, token string, want int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	if want == 0 {
		deadline = time.Now().Add(2 * time.Second)
	}
	n := 0
	for time.Now().Before(deadline) {
		if n = withSubject(t, s, user, "INBOX", token); n > 0 && n >= want {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
	return n
}

func v2Dir(t *testing.T) string {
	dir := filepath.Join(clientsDir(t), "v2")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "client")); err != nil {
		skipOrFail(t, "tests/clients/v2 has no @modelcontextprotocol/client: run `npm ci` there (scripts/test.sh does)")
	}
	return dir
}

type clientAnswer struct {
	Shown  []string  `json:"shown"`
	Result sdkResult `json:"result"`
	Replay *sdkResult
}

// TestApprovalClientV2: the official client of the 2026-07-28 protocol
// with an elicitation handler. Accept sends once, to exactly the shown
// recipients; decline sends nothing; a retry with an altered, expired or
// replayed requestState, another user's credentials, or another recipient
// is refused and sends nothing.
func TestApprovalClientV2(t *testing.T) {
	t.Parallel() // its own stack (and provider): waits, mostly, beside the other parallel tests
	dir := v2Dir(t)
	s, g := approvalStack(t)
	alice, bob := userHeaders(s, mailtest.Alice), userHeaders(s, mailtest.Bob)
	args := func(token string) map[string]any {
		return map[string]any{"to": []any{mailtest.Bob}, "subject": "Contract " + token, "text": "Please sign the attached.\nRegards"}
	}
	run := func(t *testing.T, in map[string]any) clientAnswer {
		var out clientAnswer
		runNode(t, dir, "approve.mjs", in, &out)
		return out
	}
	t.Run("accept", func(t *testing.T) {
		token := fmt.Sprint("v2accept", time.Now().UnixNano())
		out := run(t, map[string]any{"url": g.URL, "headers": alice, "tool": "smtp_send_email", "args": args(token), "action": "accept"})
		if len(out.Shown) != 1 || !strings.Contains(out.Shown[0], "To: "+mailtest.Bob) || !strings.Contains(out.Shown[0], "Subject: Contract "+token) || !strings.Contains(out.Shown[0], "Please sign the attached.") {
			t.Fatalf("shown: %q", out.Shown)
		}
		out.Result.ok(t, "send after accept", nil)
		if n := delivered(t, s, mailtest.Bob, token, 1); n != 1 {
			t.Fatalf("%d delivered, want 1", n)
		}
		if n := withSubject(t, s, mailtest.Alice, "Sent", token); n != 1 {
			t.Fatalf("%d in Sent", n)
		}
	})
	t.Run("decline", func(t *testing.T) {
		token := fmt.Sprint("v2decline", time.Now().UnixNano())
		out := run(t, map[string]any{"url": g.URL, "headers": alice, "tool": "smtp_send_email", "args": args(token), "action": "decline"})
		if len(out.Shown) != 1 || !out.Result.IsError || !strings.Contains(out.Result.Text, "declined: nothing was sent") {
			t.Fatalf("%+v", out)
		}
		if n := delivered(t, s, mailtest.Bob, token, 0) + withSubject(t, s, mailtest.Alice, "Sent", token); n != 0 {
			t.Fatalf("%d copies after a decline", n)
		}
	})
	k, _ := hex.DecodeString(g.Key)
	sealer, _ := credentials.NewSealer(k)
	for _, tamper := range []string{"state", "arguments", "user", "expired"} {
		t.Run("refused "+tamper, func(t *testing.T) {
			token := fmt.Sprint("v2", tamper, time.Now().UnixNano())
			in := map[string]any{"url": g.URL, "headers": alice, "tool": "smtp_send_email", "args": args(token), "action": "accept", "tamper": tamper}
			switch tamper {
			case "arguments":
				other := args(token)
				other["to"] = []any{"mallory@example.net"}
				in["otherArgs"] = other
			case "user":
				in["otherHeaders"] = bob
			case "expired":
				// A state this gateway made (same key) ten minutes ago.
				var a map[string]any
				b, _ := json.Marshal(args(token))
				json.Unmarshal(b, &a)
				past := approval.New(sealer, approval.Options{Now: func() time.Time { return time.Now().Add(-10 * time.Minute) }})
				st, err := past.NewState(context.Background(), approval.CallerOf(credentials.New(mailtest.Alice, "")), "smtp_send_email", a, approval.Binding{})
				if err != nil {
					t.Fatal(err)
				}
				in["expiredState"] = st
			}
			out := run(t, in)
			want := "does not belong to this call"
			if tamper == "expired" {
				want = "has expired"
			}
			if !out.Result.IsError || !strings.Contains(out.Result.Text, want) || !strings.Contains(out.Result.Text, "nothing was done") {
				t.Fatalf("got %+v", out.Result)
			}
			if n := delivered(t, s, mailtest.Bob, token, 0) + withSubject(t, s, mailtest.Alice, "Sent", token); n != 0 {
				t.Fatalf("%d copies", n)
			}
		})
	}
	t.Run("refused replay", func(t *testing.T) {
		token := fmt.Sprint("v2replay", time.Now().UnixNano())
		out := run(t, map[string]any{"url": g.URL, "headers": alice, "tool": "smtp_send_email", "args": args(token), "action": "accept", "tamper": "replay"})
		out.Result.ok(t, "the first send", nil)
		if out.Replay == nil || !out.Replay.IsError || !strings.Contains(out.Replay.Text, "already used") {
			t.Fatalf("replay: %+v", out.Replay)
		}
		if n := delivered(t, s, mailtest.Bob, token, 1); n != 1 {
			t.Fatalf("%d delivered, want exactly 1", n)
		}
		time.Sleep(time.Second)
		if n := withSubject(t, s, mailtest.Bob, "INBOX", token); n != 1 {
			t.Fatalf("%d delivered after the replay, want exactly 1", n)
		}
	})
}

// TestApprovalSDKLegacy: the TypeScript SDK 1.32.2 on the earlier protocol,
// with the elicitation capability: the form reaches it through mcp-go's
// bridge (a server-initiated elicitation/create), which needs the sealed
// session id the gateway gave it at initialize.
func TestApprovalSDKLegacy(t *testing.T) {
	t.Parallel() // its own stack (and provider): waits, mostly, beside the other parallel tests
	dir := clientsDir(t)
	s, g := approvalStack(t)
	for _, action := range []string{"accept", "decline"} {
		t.Run(action, func(t *testing.T) {
			token := fmt.Sprint("legacy", action, time.Now().UnixNano())
			var out struct {
				Shown     []string
				Result    sdkResult
				SessionID string
			}
			runNode(t, dir, "approve-legacy.mjs", map[string]any{"url": g.URL, "headers": userHeaders(s, mailtest.Alice), "tool": "smtp_send_email",
				"args": map[string]any{"to": []any{mailtest.Bob}, "subject": "Legacy " + token, "text": "hello"}, "action": action}, &out)
			if !strings.HasPrefix(out.SessionID, "apc1.") || len(out.Shown) != 1 || !strings.Contains(out.Shown[0], "Subject: Legacy "+token) {
				t.Fatalf("session %q, shown %q", out.SessionID, out.Shown)
			}
			want := 0
			if action == "accept" {
				want = 1
				out.Result.ok(t, "send after accept", nil)
			} else if !out.Result.IsError || !strings.Contains(out.Result.Text, "nothing was sent") {
				t.Fatalf("decline: %+v", out.Result)
			}
			if n := delivered(t, s, mailtest.Bob, token, want); n != want {
				t.Fatalf("%d delivered, want %d", n, want)
			}
		})
	}
}

// TestApprovalPage: mcp-remote, as Claude Desktop runs it (no
// elicitation): the result carries the approval link; headless Chromium
// opens it, sees the recipients and the text, and approves: the message
// is delivered once (the form submitted twice) and filed in Sent; a second
// run rejects, and the held draft is gone. An expired link and a used one
// are refused, and the page holds like the sign-in page.
func TestApprovalPage(t *testing.T) {
	t.Parallel() // its own stack (and provider): waits, mostly, beside the other parallel tests
	dir := clientsDir(t)
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		skipOrFail(t, "no /usr/bin/chromium: apt-get install -y --no-install-recommends chromium (scripts/test.sh does)")
	}
	s, g := approvalStack(t)
	entry := serverEntry(t, fill(snippets(t)["claude-desktop"], g.URL, mailtest.Alice, s.Users[mailtest.Alice]))
	var links []string
	for _, action := range []string{"approve", "reject"} {
		t.Run(action, func(t *testing.T) {
			token := fmt.Sprint("page", action, time.Now().UnixNano())
			var out struct {
				Result                                             sdkResult
				Model, SignIn, Page, Done, Again                   string
				ModelStatus, ForgedStatus, DoneStatus, AgainStatus int
			}
			runNode(t, dir, "approve-page.mjs", map[string]any{"server": entry, "tool": "smtp_send_email", "chromium": chromium, "action": action,
				"user": mailtest.Alice, "password": s.Users[mailtest.Alice],
				"args": map[string]any{"to": []any{mailtest.Bob}, "cc": []any{mailtest.Alice}, "subject": "<b>Invoice</b> " + token, "text": "Amount due: 1,250 EUR <script>x</script>"}}, &out)
			// The model, with the link and HTTP only: a sign-in form, nothing
			// of the message, and its forged answer refused.
			if out.ModelStatus != 200 || !strings.Contains(out.Model, "Sign in") || strings.Contains(out.Model, token) || strings.Contains(out.Model, "1,250") ||
				out.ForgedStatus != http.StatusForbidden || strings.Contains(out.SignIn, token) {
				t.Fatalf("the model read %d %q; its forged answer got %d; the person saw before signing in %q", out.ModelStatus, out.Model, out.ForgedStatus, out.SignIn)
			}
			var res struct {
				Approval struct {
					URL      string
					DraftUID uint32 `json:"draft_uid"`
				}
			}
			json.Unmarshal(out.Result.Structured, &res)
			links = append(links, res.Approval.URL)
			for _, want := range []string{mailtest.Bob, mailtest.Alice, "<b>Invoice</b> " + token, "Amount due: 1,250 EUR <script>x</script>"} {
				if !strings.Contains(out.Page, want) {
					t.Errorf("the page does not show %q:\n%s", want, out.Page)
				}
			}
			if out.DoneStatus != 200 || out.AgainStatus != http.StatusGone || !strings.Contains(out.Again, "already used") {
				t.Fatalf("answer %d %q; again %d %q", out.DoneStatus, out.Done, out.AgainStatus, out.Again)
			}
			want := 0
			if action == "approve" {
				want = 1
				if !strings.Contains(out.Done, "Sent") {
					t.Errorf("after approving: %q", out.Done)
				}
			}
			if n := delivered(t, s, mailtest.Bob, token, want); n != want {
				t.Fatalf("%d delivered, want %d", n, want)
			}
			if n := withSubject(t, s, mailtest.Alice, "Sent", token); n != want {
				t.Fatalf("%d in Sent, want %d", n, want)
			}
			if n := withSubject(t, s, mailtest.Alice, "Drafts", token); n != 0 {
				t.Fatalf("%d held drafts left", n)
			}
		})
	}
	get := func(link string) (int, string, http.Header) {
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b), resp.Header
	}
	t.Run("used link", func(t *testing.T) {
		for _, l := range links {
			if st, body, _ := get(l); st != http.StatusGone || !strings.Contains(body, "already used") {
				t.Errorf("%d %.200s", st, body)
			}
		}
	})
	k, _ := hex.DecodeString(g.Key)
	sealer, _ := credentials.NewSealer(k)
	base := strings.TrimSuffix(g.URL, "/mcp")
	link := func(now time.Time) string {
		a := approval.New(sealer, approval.Options{Now: func() time.Time { return now }})
		m, err := a.NewLink(context.Background(), approval.Link{Creds: credentials.New(mailtest.Alice, s.Users[mailtest.Alice]), Tool: "imap_delete_folder", Args: json.RawMessage(`{"folder":"Kept"}`)}, 30*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return base + approval.Prefix + m.Token
	}
	t.Run("expired link", func(t *testing.T) {
		if st, body, _ := get(link(time.Now().Add(-31 * time.Minute))); st != http.StatusGone || !strings.Contains(body, "expired") {
			t.Fatalf("%d %.300s", st, body)
		}
	})
	t.Run("page protections", func(t *testing.T) {
		if _, err := s.Doveadm("mailbox", "create", "-u", mailtest.Alice, "Kept"); err != nil {
			t.Fatal(err)
		}
		l := link(time.Now())
		st, body, h := get(l)
		// The link alone: a sign-in form, nothing of what it is about.
		if st != 200 || !strings.Contains(body, `id="signin"`) || strings.Contains(body, "Kept") {
			t.Fatalf("%d %.300s", st, body)
		}
		if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
			!strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") || strings.Contains(body, "<script") {
			t.Errorf("headers %v", h)
		}
		// A form posted from elsewhere: no sign-in.
		resp, err := http.PostForm(l, map[string][]string{"csrf": {"x"}, "action": {"approve"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a forged post: %d", resp.StatusCode)
		}
		if out, _ := s.Doveadm("mailbox", "list", "-u", mailtest.Alice); !strings.Contains(out, "Kept") {
			t.Fatalf("the folder was deleted by a forged post:\n%s", out)
		}
	})
}

// TestApprovalURLMode: the official 2026-07-28 client declaring URL-mode
// elicitation (MCP 2025-11-25 mode "url"). The gateway gives the client
// the approval page's link to open for its user, and the tool's result,
// which is what the model reads, holds no link. The person signs in on
// the page and approves: the message goes once. A person who will not
// open the page ends the link and the held draft.
func TestApprovalURLMode(t *testing.T) {
	t.Parallel() // its own stack
	dir := v2Dir(t)
	s, g := approvalStack(t)
	alice := userHeaders(s, mailtest.Alice)
	type asked struct {
		Mode, URL string
	}
	var out struct {
		Asked  []asked
		Result sdkResult
	}
	run := func(t *testing.T, token, action string) {
		out.Asked = nil
		runNode(t, dir, "approve.mjs", map[string]any{"url": g.URL, "headers": alice, "tool": "smtp_send_email", "mode": "url", "action": action,
			"args": map[string]any{"to": []any{mailtest.Bob}, "subject": "URL mode " + token, "text": "hello"}}, &out)
		if len(out.Asked) != 1 || out.Asked[0].Mode != "url" || !strings.Contains(out.Asked[0].URL, approval.Prefix) {
			t.Fatalf("the client was asked %+v", out.Asked)
		}
		if strings.Contains(out.Result.Text, approval.Prefix) || strings.Contains(string(out.Result.Structured), approval.Prefix) || strings.Contains(out.Result.Text, "apl1.") {
			t.Fatalf("the model's result holds the link: %s %s", out.Result.Text, out.Result.Structured)
		}
	}
	t.Run("accept", func(t *testing.T) {
		token := fmt.Sprint("urlaccept", time.Now().UnixNano())
		run(t, token, "accept")
		if out.Result.IsError || !strings.Contains(out.Result.Text, "approval page was opened for the person") {
			t.Fatalf("result %+v", out.Result)
		}
		if n := delivered(t, s, mailtest.Bob, token, 0); n != 0 {
			t.Fatalf("%d delivered before the person approved", n)
		}
		p := signInAs(t, out.Asked[0].URL, mailtest.Alice, s.Users[mailtest.Alice])
		if !strings.Contains(p.page, "URL mode "+token) {
			t.Fatalf("the page: %s", p.page)
		}
		if status, body := p.answer(t, "approve"); status != 200 {
			t.Fatalf("approve: %d %s", status, body)
		}
		if n := delivered(t, s, mailtest.Bob, token, 1); n != 1 {
			t.Fatalf("%d delivered, want 1", n)
		}
	})
	t.Run("decline", func(t *testing.T) {
		token := fmt.Sprint("urldecline", time.Now().UnixNano())
		run(t, token, "decline")
		if !out.Result.IsError || !strings.Contains(out.Result.Text, "declined to open the approval page") {
			t.Fatalf("result %+v", out.Result)
		}
		resp, err := http.Get(out.Asked[0].URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusGone || withSubject(t, s, mailtest.Alice, "Drafts", token) != 0 || delivered(t, s, mailtest.Bob, token, 0) != 0 {
			t.Fatalf("after a decline: link %d, drafts %d", resp.StatusCode, withSubject(t, s, mailtest.Alice, "Drafts", token))
		}
	})
}

// TestApprovalProviderSignIn: the person signs in on the approval page
// with "Continue with" the mailbox's provider (Ory Hydra), in Chromium: the
// way back crosses the provider's site, so the SameSite=Strict sign-in
// cookie comes along only because the gateway's own page goes on to the
// approval. The caller signed in through the same provider (a bearer
// token of the gateway carrying Hydra's access token). When the provider
// says the person is another mailbox, nothing is shown or done.
func TestApprovalProviderSignIn(t *testing.T) {
	t.Parallel() // its own stack and provider
	chromium := "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		skipOrFail(t, "no /usr/bin/chromium: apt-get install -y --no-install-recommends chromium (scripts/test.sh does)")
	}
	dir := clientsDir(t)
	ctx := context.Background()
	h := mailtest.StartHydra(t, mailtest.HydraOptions{Scopes: []string{"mail"}, AutoLogin: mailtest.Alice})
	s := mailtest.OAuthStack(t, h, mailtest.Options{OAuthScope: "mail"})
	g, client, key := providerGateway(t, h, s, "APPROVAL=send")
	tok, err := h.Login(ctx, client, mailtest.Alice, "openid", "email", "offline_access", "mail")
	if err != nil {
		t.Fatal(err)
	}
	// What the gateway's sign-in with the provider would have issued.
	creds := credentials.NewOAuth(mailtest.Alice, tok.AccessToken)
	creds.Host = "127.0.0.1"
	bearer, err := sealerOf(t, key).SealGrant(credentials.KindAccess, credentials.Grant{ID: credentials.NewGrantID(), Creds: creds,
		ClientID: "test", Audience: g.base() + "/mcp", Expires: time.Now().Add(time.Hour), Provider: "oidc-hydra"})
	if err != nil {
		t.Fatal(err)
	}
	c := mailtest.MCPClient(t, g.base()+"/mcp", map[string]string{"Authorization": "Bearer " + bearer}, mcp.ProtocolVersion20250618)
	send := func(token string) string {
		return linkOf(t, mailtest.Call(t, c, "smtp_send_email", map[string]any{"to": []any{mailtest.Bob}, "subject": "Provider approval " + token, "text": "hello"}))
	}
	var out struct {
		SignIn, Landed, Page, Done string
		DoneStatus                 int
		Visited                    []string
	}
	t.Run("the mailbox's person", func(t *testing.T) {
		token := fmt.Sprint("prov", time.Now().UnixNano())
		runNode(t, dir, "approve-provider.mjs", map[string]any{"link": send(token), "provider": "provider:oidc-hydra", "action": "approve", "chromium": chromium}, &out)
		if strings.Contains(out.SignIn, token) || !strings.HasPrefix(out.Landed, approval.Prefix) || !strings.Contains(out.Page, "Provider approval "+token) || out.DoneStatus != 200 {
			t.Fatalf("before %q; through %q landed on %s showing %q; answered %d %q", out.SignIn, out.Visited, out.Landed, out.Page, out.DoneStatus, out.Done)
		}
		if n := delivered(t, s, mailtest.Bob, token, 1); n != 1 {
			t.Fatalf("%d delivered, want 1", n)
		}
	})
	t.Run("another mailbox at the provider", func(t *testing.T) {
		token := fmt.Sprint("provbob", time.Now().UnixNano())
		link := send(token)
		h.SetAutoLogin(mailtest.Bob)
		defer h.SetAutoLogin(mailtest.Alice)
		runNode(t, dir, "approve-provider.mjs", map[string]any{"link": link, "provider": "provider:oidc-hydra", "action": "approve", "chromium": chromium}, &out)
		if strings.Contains(out.Page, token) || !strings.Contains(out.Page, "another mailbox") {
			t.Fatalf("signed in at the provider as bob: %q", out.Page)
		}
		if n := delivered(t, s, mailtest.Bob, token, 0); n != 0 {
			t.Fatalf("%d delivered", n)
		}
	})
}
