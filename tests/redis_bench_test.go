package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// BenchmarkRedisAdds measures, end to end over HTTP on loopback, what the
// shared memory adds to the flows that consult it: a gateway with its
// in-process memory against the same gateway with REDIS_URL (a
// redis-server on loopback), against one Dovecot and Postfix:
//
//		go test -run '^$' -bench RedisAdds -benchtime 1x -timeout 20m ./tests
//
//	  - token_exchange: a code redeemed at /token (the sign-in limits by
//	    address and by account, the code used and the sign-in started);
//	  - token_refresh: a refresh at /token (the two limits, the generation);
//	  - approval_ask: a destructive call under APPROVAL=destructive that
//	    makes an approval link (the pending count, the link's slot; the
//	    folder's preview reads IMAP);
//	  - approval_answer: the person's answer on the page (the link used
//	    once, its slot freed);
//	  - first_login: a user's first call (a new IMAP connection: the
//	    back-off read, two logins in progress, the proof recorded).
//
// Each flow runs n times one at a time; the p50 and p99 of each are
// reported per store.
func BenchmarkRedisAdds(b *testing.B) {
	const n = 300
	users := map[string]string{}
	for i := range n {
		users[fmt.Sprintf("bench%d@example.test", i)] = "bench-pw"
	}
	s := mailtest.StartT(b, mailtest.Options{Users: users})
	redis := mailtest.StartRedis(b, mailtest.RedisOptions{})
	if out, err := s.Doveadm("mailbox", "create", "-u", mailtest.Alice, "Kept"); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	type result struct{ p50, p99 time.Duration }
	results := map[string]map[string]result{}
	flows := []string{"token_exchange", "token_refresh", "approval_ask", "approval_answer", "first_login"}
	for _, mode := range []struct {
		name string
		env  []string
	}{{"in-process", nil}, {"redis", []string{"REDIS_URL=" + redis.URL(0)}}} {
		b.Run(mode.name, func(b *testing.B) {
			g := startOAuthGateway(b, s, append(smtpEnv(s, "APPROVAL=destructive", "MAILBOX_ACCESS=full", "APPROVAL_MAX_PENDING=10000",
				"OAUTH_RATE_PER_ACCOUNT=1000000", "OAUTH_RATE_PER_ADDRESS=1000000", "LOG_LEVEL=warn"), mode.env...)...)
			took := map[string][]time.Duration{}
			timed := func(flow string, f func()) {
				start := time.Now()
				f()
				took[flow] = append(took[flow], time.Since(start))
			}

			// /token: codes sealed as the sign-in page seals them, one
			// account each (an account's share holds its codes for a
			// minute).
			k, _ := hex.DecodeString(g.Key)
			sealer, err := credentials.NewSealer(k)
			if err != nil {
				b.Fatal(err)
			}
			verifier := strings.Repeat("v", 43)
			sum := sha256.Sum256([]byte(verifier))
			hc := &http.Client{Timeout: 10 * time.Second}
			token := func(form url.Values) map[string]any {
				resp, err := hc.PostForm(g.Base+"/token", form)
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				var out map[string]any
				json.NewDecoder(resp.Body).Decode(&out)
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("/token: %d %v", resp.StatusCode, out["error_description"])
				}
				return out
			}
			var refresh string
			for i := range n {
				code, err := sealer.SealGrant(credentials.KindCode, credentials.Grant{ID: credentials.NewGrantID(),
					Creds: credentials.New(fmt.Sprintf("token%d@example.test", i), "x"), ClientID: "bench", RedirectURI: "http://127.0.0.1:9/cb",
					Challenge: base64.RawURLEncoding.EncodeToString(sum[:]), Audience: g.Base + "/mcp", Expires: time.Now().Add(time.Minute)})
				if err != nil {
					b.Fatal(err)
				}
				timed("token_exchange", func() {
					out := token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {"bench"}, "code_verifier": {verifier}})
					refresh, _ = out["refresh_token"].(string)
				})
			}
			for range n {
				timed("token_refresh", func() {
					refresh, _ = token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {"bench"}})["refresh_token"].(string)
				})
			}

			// Approvals: alice asks to delete a folder; the person,
			// signed in on the page once, rejects each.
			alice := mailtest.MCPClient(b, g.Base+"/mcp", userHeaders(s, mailtest.Alice), mcp.ProtocolVersion20250618)
			ask := func() string {
				var link string
				timed("approval_ask", func() {
					link = linkOf(b, mailtest.Call(b, alice, "imap_delete_folder", map[string]any{"folder": "Kept"}))
				})
				return link
			}
			person := signInAs(b, ask(), mailtest.Alice, s.Users[mailtest.Alice])
			csrfOf := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
			for i := range n {
				link := person.link
				if i > 0 {
					link = ask()
				}
				resp, err := person.hc.Get(link)
				if err != nil {
					b.Fatal(err)
				}
				page, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				m := csrfOf.FindSubmatch(page)
				if m == nil {
					b.Fatalf("the page: %d %.300s", resp.StatusCode, page)
				}
				timed("approval_answer", func() {
					resp, err := person.hc.PostForm(link, url.Values{"action": {"reject"}, "csrf": {string(m[1])}})
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("reject: %d", resp.StatusCode)
					}
				})
			}

			// A user's first call: a login, never proven before (each mode
			// its own users: the proof of a login is remembered).
			for i := range n / 2 {
				user := fmt.Sprintf("bench%d@example.test", i)
				if mode.name == "redis" {
					user = fmt.Sprintf("bench%d@example.test", n/2+i)
				}
				body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"imap_list_folders","arguments":{}}}`)
				req, _ := http.NewRequest(http.MethodPost, g.Base+"/mcp", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("MCP-Protocol-Version", "2025-06-18")
				req.Header.Set("x-imap-user", user)
				req.Header.Set("x-imap-pass", "bench-pw")
				timed("first_login", func() {
					resp, err := hc.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					out, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || bytes.Contains(out, []byte(`"isError":true`)) {
						b.Fatalf("first call of %s: %d %.300s", user, resp.StatusCode, out)
					}
				})
			}

			results[mode.name] = map[string]result{}
			for _, f := range flows {
				d := took[f]
				slices.Sort(d)
				r := result{d[len(d)/2], d[len(d)*99/100]}
				results[mode.name][f] = r
				b.ReportMetric(float64(r.p50.Microseconds()), f+"-p50-µs")
				b.ReportMetric(float64(r.p99.Microseconds()), f+"-p99-µs")
			}
		})
	}
	if len(results) == 2 {
		var t strings.Builder
		fmt.Fprintf(&t, "| flow | in-process p50 / p99 | Redis p50 / p99 | added at p50 |\n|---|---|---|---|\n")
		ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
		for _, f := range flows {
			l, r := results["in-process"][f], results["redis"][f]
			fmt.Fprintf(&t, "| %s | %s / %s | %s / %s | %s |\n", f, ms(l.p50), ms(l.p99), ms(r.p50), ms(r.p99), ms(r.p50-l.p50))
		}
		b.Logf("end to end, %d each (first_login %d):\n%s", n, n/2, t.String())
	}
}
