package tests

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-smtp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// introspector is a small RFC 7662 token-introspection endpoint, the one
// Dovecot's oauth2 passdb asks about every access token.
type introspector struct {
	mu     sync.Mutex
	tokens map[string]string // token -> user
	asked  int
}

func (i *introspector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/introspect" || r.ParseForm() != nil {
		http.NotFound(w, r)
		return
	}
	i.mu.Lock()
	user, ok := i.tokens[r.PostForm.Get("token")]
	i.asked++
	i.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	// An unknown token is 200 {"active":false}: anything else is an
	// internal error to Dovecot (NO [UNAVAILABLE], not a refusal).
	json.NewEncoder(w).Encode(map[string]any{"active": ok, "username": user})
}

func randomToken(t *testing.T) string {
	b := make([]byte, 24)
	rand.Read(b)
	return "ya29." + hex.EncodeToString(b)
}

// oauthStack starts a stack whose Dovecot (and Postfix through it) takes
// OAuth logins checked by a local introspection server; alice has a valid
// token.
func oauthStack(t *testing.T) (*mailtest.Stack, *introspector, string) {
	t.Helper()
	in := &introspector{tokens: map[string]string{}}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	good := randomToken(t)
	in.tokens[good] = alice
	s := mailtest.StartT(t, mailtest.Options{OAuthIntrospectionURL: srv.URL + "/introspect"})
	return s, in, good
}

// Against Dovecot's oauth2 passdb: a valid access token lists folders
// through the gateway (IMAP AUTHENTICATE) and sends mail (SMTP AUTH), an
// invalid one gets the auth error saying the token was refused, passwords
// keep working, and no token reaches the gateway's log.
func TestOAuthLoginAgainstDovecot(t *testing.T) {
	s, in, good := oauthStack(t)
	bad := randomToken(t)
	refused := []string{bad} // tokens the introspection server does not know

	t.Run("dovecot offers both mechanisms and refuses a bad token cleanly", func(t *testing.T) {
		for _, mech := range []string{credentials.MechOAuthBearer, credentials.MechXOAuth2} {
			for _, tc := range []struct {
				token string
				ok    bool
			}{{good, true}, {bad, false}} {
				c, err := imapclient.DialTLS(s.IMAPSAddr(), &imapclient.Options{TLSConfig: s.TLSConfig()})
				if err != nil {
					t.Fatal(err)
				}
				if !c.Caps().Has(imap.AuthCap(mech)) {
					t.Fatalf("Dovecot does not advertise AUTH=%s: %v", mech, c.Caps())
				}
				sc, _ := credentials.NewOAuth(alice, tc.token).OAuthSASL([]string{mech})
				start := time.Now()
				err = c.Authenticate(sc)
				var ie *imap.Error
				switch {
				case tc.ok && err != nil:
					t.Errorf("%s with a valid token: %v", mech, err)
				case !tc.ok && (!errors.As(err, &ie) || ie.Code != imap.ResponseCodeAuthenticationFailed):
					t.Errorf("%s with an invalid token: %v, want NO [AUTHENTICATIONFAILED]", mech, err)
				}
				if !tc.ok {
					// the connection must still answer (go-sasl's own client
					// leaves the error challenge unanswered and it hangs)
					if err := c.Noop().Wait(); err != nil {
						t.Errorf("%s: NOOP after the refusal: %v", mech, err)
					}
				}
				t.Logf("%s valid=%v: %v in %v", mech, tc.ok, err, time.Since(start).Round(time.Millisecond))
				c.Close()
			}
		}
		direct(t, s, bob) // password logins still work

		// Postfix asks Dovecot, so submission takes both mechanisms too.
		for _, mech := range []string{credentials.MechOAuthBearer, credentials.MechXOAuth2} {
			for _, tc := range []struct {
				token string
				code  int
			}{{good, 235}, {bad, 535}} {
				sc, err := smtp.DialTLS(net.JoinHostPort(s.Host, strconv.Itoa(s.SubmissionsPort)), s.TLSConfig())
				if err != nil {
					t.Fatal(err)
				}
				if err := sc.Hello("test.example"); err != nil {
					t.Fatal(err)
				}
				_, offered := sc.Extension("AUTH")
				client, _ := credentials.NewOAuth(alice, tc.token).OAuthSASL([]string{mech})
				err = sc.Auth(client)
				var se *smtp.SMTPError
				switch {
				case tc.code == 235 && err != nil:
					t.Errorf("SMTP AUTH %s with a valid token (offered: %s): %v", mech, offered, err)
				case tc.code != 235 && (!errors.As(err, &se) || se.Code != tc.code):
					t.Errorf("SMTP AUTH %s with an invalid token: %v, want %d", mech, err, tc.code)
				}
				t.Logf("SMTP AUTH %s valid=%v (offered: %s): %v", mech, tc.code == 235, offered, err)
				sc.Close()
			}
		}
	})

	g := startGateway(t, s, smtpEnv(s)...)
	gateways := []*gateway{g} // whose logs must hold no token
	oauthHeaders := func(token string) map[string]string {
		return map[string]string{"x-imap-user": alice, "x-imap-oauth-token": token}
	}

	t.Run("valid token lists folders", func(t *testing.T) {
		c := mailtest.MCPClient(t, g.URL, oauthHeaders(good), "")
		res := mailtest.Call(t, c, "imap_list_folders", nil)
		if res.IsError || !strings.Contains(mailtest.Text(res), "INBOX") {
			t.Fatalf("imap_list_folders with a valid token: %s", mailtest.Text(res))
		}
	})

	t.Run("invalid token gets the auth error", func(t *testing.T) {
		c := mailtest.MCPClient(t, g.URL, oauthHeaders(bad), "")
		res := mailtest.Call(t, c, "imap_list_folders", nil)
		text := mailtest.Text(res)
		if !res.IsError || !strings.Contains(text, "access token") || !strings.Contains(strings.ToLower(text), "auth") {
			t.Fatalf("imap_list_folders with an invalid token: error=%v %s", res.IsError, text)
		}
		t.Logf("answer: %s", text)
	})

	t.Run("send with the token over SMTP AUTH", func(t *testing.T) {
		c := mailtest.MCPClient(t, g.URL, oauthHeaders(good), "")
		res := sendCall(t, c, "smtp_send_email", map[string]any{
			"to": []any{bob}, "subject": "sent with an OAuth token", "text": "XOAUTH2 or OAUTHBEARER at Postfix",
		})
		if len(res.Accepted) != 1 || res.MessageID == "" || !res.SentCopy.Saved {
			t.Fatalf("result: %+v", res)
		}
		findByMessageID(t, direct(t, s, bob), "INBOX", res.MessageID)
		plog, err := os.ReadFile(filepath.Join(s.Dir, "log", "postfix.log"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(plog), "sasl_method=OAUTHBEARER, sasl_username="+alice) {
			t.Errorf("Postfix's log shows no OAUTHBEARER login by %s", alice)
		}

		bc := mailtest.MCPClient(t, g.URL, oauthHeaders(bad), "")
		out := mailtest.Call(t, bc, "smtp_send_email", map[string]any{"to": []any{bob}, "subject": "x", "text": "x"})
		text := mailtest.Text(out)
		if !out.IsError || !strings.Contains(text, "access token") {
			t.Fatalf("send with an invalid token: error=%v %s", out.IsError, text)
		}
		t.Logf("answer: %s", text)
		plog, _ = os.ReadFile(filepath.Join(s.Dir, "log", "postfix.log"))
		for _, line := range strings.Split(string(plog), "\n") {
			if _, warning, ok := strings.Cut(line, "warning: "); ok && strings.Contains(line, "authentication failed") {
				t.Logf("Postfix: %s", warning)
			}
		}
	})

	t.Run("header combinations", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			headers map[string]string
		}{
			{"token and password", map[string]string{"x-imap-user": alice, "x-imap-pass": s.Users[alice], "x-imap-oauth-token": good}},
			{"token without user", map[string]string{"x-imap-oauth-token": good}},
			{"token with a space", map[string]string{"x-imap-user": alice, "x-imap-oauth-token": "Bearer " + good}},
			{"token and mailbox token", map[string]string{"x-imap-oauth-token": good, "x-mailbox-token": "mbx1.x"}},
		} {
			req, _ := http.NewRequest("POST", g.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400", tc.name, resp.StatusCode)
			}
		}
	})

	t.Run("password and token logins of one account share no connection", func(t *testing.T) {
		// Every OAuth login asks the introspection server, so its count says
		// when the pool logged in afresh rather than reusing a connection.
		asked := func() int { in.mu.Lock(); defer in.mu.Unlock(); return in.asked }
		other := randomToken(t)
		in.mu.Lock()
		in.tokens[other] = alice
		in.mu.Unlock()
		g2 := startGateway(t, s)
		gateways = append(gateways, g2)
		list := func(h map[string]string) {
			t.Helper()
			c := mailtest.MCPClient(t, g2.URL, h, "")
			if res := mailtest.Call(t, c, "imap_list_folders", nil); res.IsError {
				t.Fatal(mailtest.Text(res))
			}
		}
		for _, step := range []struct {
			name    string
			headers map[string]string
			logins  int // new OAuth logins expected
		}{
			{"password", userHeaders(s, alice), 0},
			{"token after a pooled password connection", oauthHeaders(good), 1},
			{"same token again (reused)", oauthHeaders(good), 0},
			{"another token of the same account", oauthHeaders(other), 1},
			{"password again (reused)", userHeaders(s, alice), 0},
		} {
			before := asked()
			list(step.headers)
			if got := asked() - before; got != step.logins {
				t.Errorf("%s: %d new OAuth logins, want %d", step.name, got, step.logins)
			}
		}
	})

	t.Run("refused tokens count toward the login back-off", func(t *testing.T) {
		asked := func() int { in.mu.Lock(); defer in.mu.Unlock(); return in.asked }
		g3 := startGateway(t, s, "LOGIN_BACKOFF_FAILURES=3", "LOGIN_BACKOFF_DELAY=30s", "LOGIN_BACKOFF_MAX=30s")
		gateways = append(gateways, g3)
		unknown := randomToken(t)
		refused = append(refused, unknown)
		c := mailtest.MCPClient(t, g3.URL, oauthHeaders(unknown), "")
		before, held := asked(), 0
		for i := 0; i < 6; i++ {
			res := mailtest.Call(t, c, "imap_list_folders", nil)
			if !res.IsError {
				t.Fatal("an unknown token logged in")
			}
			if strings.Contains(mailtest.Text(res), "too many failed logins") {
				held++
			}
		}
		if tried := asked() - before; tried != 3 || held != 3 {
			t.Errorf("%d tokens reached the server and %d were held back, want 3 and 3", tried, held)
		}
	})

	t.Run("no token in the gateway log", func(t *testing.T) {
		in.mu.Lock()
		defer in.mu.Unlock()
		for i, g := range gateways {
			logs := g.Logs.String() // LOG_LEVEL=debug
			if !strings.Contains(logs, alice) {
				t.Fatalf("gateway %d: the log does not name the user: the check proves nothing", i)
			}
			for tok := range in.tokens {
				if strings.Contains(logs, strings.TrimPrefix(tok, "ya29.")) {
					t.Errorf("gateway %d: the log holds an access token", i)
				}
			}
			for _, tok := range refused {
				if strings.Contains(logs, strings.TrimPrefix(tok, "ya29.")) {
					t.Errorf("gateway %d: the log holds a refused token", i)
				}
			}
		}
	})
}
