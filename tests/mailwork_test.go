package tests

// Unsubscribe and sender verification end to end, on Dovecot and Postfix:
// a one-click POST reaching a local HTTPS server exactly once (and refused
// without EGRESS_ALLOW_PRIVATE), the mailto path delivered, and
// Authentication-Results trusted only under the operator's authserv-id.

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/senderauth"
	"github.com/mailbox-mcp/mailbox-mcp/internal/unsubscribe"
)

// stackAuthServID is the test stack's host name: its receiving server.
const stackAuthServID = "mail.example.test"

// unsubscribeServer is a list's one-click endpoint on loopback, serving
// the stack's own certificate (MAIL_CA_FILE trusts it): /start redirects
// (307) to /unsubscribe, which records each request.
type unsubscribeServer struct {
	URL  string
	mu   sync.Mutex
	hits []string // "METHOD content-type body cookie=..." of /unsubscribe
	all  int
}

func startUnsubscribeServer(t *testing.T, s *mailtest.Stack) *unsubscribeServer {
	t.Helper()
	dir := filepath.Dir(s.CAFile)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	u := &unsubscribeServer{URL: "https://" + ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.all++
		u.mu.Unlock()
		if r.URL.Path == "/start" {
			http.SetCookie(w, &http.Cookie{Name: "tracking", Value: "x"})
			http.Redirect(w, r, "/unsubscribe?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
			return
		}
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.hits = append(u.hits, fmt.Sprintf("%s %s %s cookie=%q", r.Method, r.Header.Get("Content-Type"), b, r.Header.Get("Cookie")))
		u.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "You are unsubscribed.")
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return u
}

func (u *unsubscribeServer) counts() (final []string, all int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.hits...), u.all
}

// listMessage is a newsletter with the list headers given, and the
// Authentication-Results and DKIM-Signature its receiving server saw.
func listMessage(id, from, listUnsub, post, authres, dkimDomain string) []byte {
	var b strings.Builder
	if authres != "" {
		b.WriteString("Authentication-Results: " + authres + "\r\n")
	}
	if dkimDomain != "" {
		b.WriteString("DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=" + dkimDomain + "; s=s1;\r\n\th=from:to:subject:date:message-id:list-unsubscribe:\r\n\tlist-unsubscribe-post; bh=AAAA; b=BBBB\r\n")
	}
	b.WriteString("From: Weekly <" + from + ">\r\nTo: " + alice + "\r\nSubject: Weekly news " + id + "\r\nDate: " + time.Now().Format(time.RFC1123Z) +
		"\r\nMessage-ID: <" + id + "@lists.example.test>\r\nList-Id: Weekly <weekly.lists.example.test>\r\n")
	if listUnsub != "" {
		b.WriteString("List-Unsubscribe: " + listUnsub + "\r\n")
	}
	if post != "" {
		b.WriteString("List-Unsubscribe-Post: " + post + "\r\n")
	}
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\nThis week's news.\r\n")
	return []byte(b.String())
}

type unsubResult struct {
	Method string `json:"method"`
	Done   bool   `json:"done"`
	URL    string `json:"url"`
	Status int    `json:"status"`
}

func TestUnsubscribe(t *testing.T) {
	s := sendStack(t)
	srv := startUnsubscribeServer(t, s)
	da := direct(t, s, alice)
	token := fmt.Sprint(time.Now().UnixNano())
	trusted := stackAuthServID + "; dkim=pass (2048-bit key) header.d=lists.example.test; spf=pass smtp.mailfrom=lists.example.test; dmarc=pass header.from=lists.example.test"
	forged := "mx.attacker.example; dkim=pass header.d=lists.example.test; spf=pass smtp.mailfrom=lists.example.test; dmarc=pass header.from=lists.example.test"
	link := "<" + srv.URL + "/start?u=alice-" + token + ">"
	uids := map[string]imap.UID{}
	for name, raw := range map[string][]byte{
		"one-click":      listMessage("oneclick-"+token, "news@lists.example.test", link, unsubscribe.OneClickValue, trusted, "lists.example.test"),
		"forged":         listMessage("forged-"+token, "news@lists.example.test", link, unsubscribe.OneClickValue, forged, "lists.example.test"),
		"unsigned":       listMessage("unsigned-"+token, "news@lists.example.test", link, unsubscribe.OneClickValue, trusted, ""),
		"mailto":         listMessage("mailto-"+token, "news@lists.example.test", "<mailto:"+mailtest.Bob+"?subject=unsubscribe%20weekly-"+token+">, "+link, "", trusted, "lists.example.test"),
		"no list header": listMessage("none-"+token, "news@lists.example.test", "", "", trusted, ""),
	} {
		uids[name] = appendUID(t, da, "INBOX", raw, nil, time.Time{})
	}

	// Without EGRESS_ALLOW_PRIVATE (production): loopback is refused
	// before anything is sent, and no warning is logged.
	t.Run("loopback refused without EGRESS_ALLOW_PRIVATE", func(t *testing.T) {
		g := startGateway(t, s, smtpEnv(s, "AUTHSERV_ID="+stackAuthServID)...)
		c := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")
		res := mailtest.Call(t, c, "mail_unsubscribe", map[string]any{"uid": int(uids["one-click"])})
		if !res.IsError || !strings.Contains(mailtest.Text(res), "may not connect") {
			t.Fatalf("got %v %q", res.IsError, mailtest.Text(res))
		}
		if _, all := srv.counts(); all != 0 {
			t.Fatalf("%d requests reached the server", all)
		}
		if strings.Contains(g.Logs.String(), "EGRESS_ALLOW_PRIVATE") {
			t.Error("a warning about EGRESS_ALLOW_PRIVATE without it")
		}
	})

	g := startGateway(t, s, smtpEnv(s, "AUTHSERV_ID="+stackAuthServID, "EGRESS_ALLOW_PRIVATE=true")...)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")
	if !strings.Contains(g.Logs.String(), `"level":"WARN","msg":"EGRESS_ALLOW_PRIVATE=true`) {
		t.Errorf("no start-up warning for EGRESS_ALLOW_PRIVATE:\n%s", tail(g.Logs.String(), 2000))
	}
	var read struct {
		Unsubscribe *unsubscribe.Options `json:"unsubscribe"`
	}
	t.Run("read shows one-click only under a trusted signature", func(t *testing.T) {
		for name, want := range map[string]bool{"one-click": true, "forged": false, "unsigned": false, "mailto": false} {
			read.Unsubscribe = nil
			mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": int(uids[name])}), &read)
			if read.Unsubscribe == nil || read.Unsubscribe.OneClick != want {
				t.Errorf("%s: %+v, want one_click %v", name, read.Unsubscribe, want)
			}
		}
		read.Unsubscribe = nil
		mailtest.Decode(t, mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": int(uids["no list header"])}), &read)
		if read.Unsubscribe != nil {
			t.Errorf("options without List-Unsubscribe: %+v", read.Unsubscribe)
		}
	})
	t.Run("one-click POST reaches the list once", func(t *testing.T) {
		var r unsubResult
		mailtest.Decode(t, mailtest.Call(t, c, "mail_unsubscribe", map[string]any{"uid": int(uids["one-click"])}), &r)
		hits, all := srv.counts()
		if r.Method != unsubscribe.OneClickPost || !r.Done || r.Status != 200 {
			t.Errorf("result %+v", r)
		}
		if len(hits) != 1 || all != 2 || hits[0] != `POST application/x-www-form-urlencoded List-Unsubscribe=One-Click cookie=""` {
			t.Errorf("the list saw %d requests (%d with the redirect): %q", len(hits), all, hits)
		}
	})
	t.Run("never a link that is not one-click", func(t *testing.T) {
		for _, name := range []string{"forged", "unsigned"} {
			var r unsubResult
			mailtest.Decode(t, mailtest.Call(t, c, "mail_unsubscribe", map[string]any{"uid": int(uids[name])}), &r)
			if r.Method != unsubscribe.OpenLink || r.Done || !strings.HasPrefix(r.URL, srv.URL) {
				t.Errorf("%s: %+v", name, r)
			}
		}
		if hits, all := srv.counts(); len(hits) != 1 || all != 2 {
			t.Errorf("a non-one-click link was fetched: %d, %d", len(hits), all)
		}
	})
	t.Run("mailto", func(t *testing.T) {
		var r struct {
			unsubResult
			Sent struct {
				MessageID string `json:"message_id"`
			} `json:"sent"`
		}
		mailtest.Decode(t, mailtest.Call(t, c, "mail_unsubscribe", map[string]any{"uid": int(uids["mailto"])}), &r)
		if r.Method != unsubscribe.SendMail || !r.Done {
			t.Fatalf("%+v", r)
		}
		if n := delivered(t, s, mailtest.Bob, "unsubscribe weekly-"+token, 1); n != 1 {
			t.Errorf("%d unsubscribe messages delivered", n)
		}
		findByMessageID(t, da, "Sent", r.Sent.MessageID)
	})
	t.Run("no list header", func(t *testing.T) {
		res := mailtest.Call(t, c, "mail_unsubscribe", map[string]any{"uid": int(uids["no list header"])})
		if !res.IsError || !strings.Contains(mailtest.Text(res), "offers no way to unsubscribe") {
			t.Errorf("%v %q", res.IsError, mailtest.Text(res))
		}
	})
}

// Authentication-Results count only under the operator's authserv-id:
// the same pass under another name is ignored; the verdict is said before
// the untrusted block.
func TestSenderVerification(t *testing.T) {
	s := mailtest.StartT(t, mailtest.Options{})
	da := direct(t, s, alice)
	msg := func(id, from string, fields ...string) []byte {
		var b strings.Builder
		for _, f := range fields {
			b.WriteString("Authentication-Results: " + f + "\r\n")
		}
		b.WriteString("From: " + from + "\r\nTo: " + alice + "\r\nSubject: verify " + id + "\r\nMessage-ID: <" + id + "@example.test>\r\n\r\nPlease pay the invoice.\r\n")
		return []byte(b.String())
	}
	bankPass := "dkim=pass header.d=bank.example; spf=pass smtp.mailfrom=bank.example; dmarc=pass header.from=bank.example"
	cases := []struct {
		name, from string
		fields     []string
		verdict    string
		ignored    int
		note       string
	}{
		{"trusted pass", "Bank <billing@bank.example>", []string{stackAuthServID + "; " + bankPass}, senderauth.Pass, 0, "vouch"},
		{"forged authserv-id", "Bank <billing@bank.example>", []string{"mx.bank.example; " + bankPass}, senderauth.Unknown, 1, "No Authentication-Results from " + stackAuthServID},
		{"forged field below the real one", "Bank <billing@bank.example>", []string{stackAuthServID + "; spf=fail smtp.mailfrom=bank.example; dkim=none; dmarc=fail header.from=bank.example", stackAuthServID + "; " + bankPass}, senderauth.Fail, 0, "DMARC failed"},
		{"unaligned", "Bank <billing@bank.example>", []string{stackAuthServID + "; dkim=pass header.d=mailer.example; spf=pass smtp.mailfrom=mailer.example; dmarc=none header.from=bank.example"}, senderauth.None, 0, "the sender is unverified"},
	}
	for i := range cases {
		appendUID(t, da, "INBOX", msg(fmt.Sprint("auth-", i), cases[i].from, cases[i].fields...), nil, time.Time{})
	}
	uids := searchUIDs(t, da, "INBOX", &imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "verify auth-"}}})
	g := startGateway(t, s, "AUTHSERV_ID="+stackAuthServID)
	c := mailtest.MCPClient(t, g.URL, userHeaders(s, alice), "")
	bare := startGateway(t, s) // no AUTHSERV_ID
	cb := mailtest.MCPClient(t, bare.URL, userHeaders(s, alice), "")
	for i, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			res := mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": int(uids[i])})
			var r struct {
				Authentication senderauth.Result `json:"authentication"`
			}
			mailtest.Decode(t, res, &r)
			a := r.Authentication
			if a.Verdict != cs.verdict || a.Ignored != cs.ignored || !strings.Contains(a.Note, cs.note) {
				t.Errorf("verdict %s ignored %d note %q; want %s %d %q", a.Verdict, a.Ignored, a.Note, cs.verdict, cs.ignored, cs.note)
			}
			text := mailtest.Text(res)
			line := "Sender verification: " + cs.verdict + "."
			if i := strings.Index(text, line); i < 0 || i > strings.Index(text, "<<<UNTRUSTED MAIL CONTENT BEGIN") {
				t.Errorf("the verdict is not said before the untrusted block:\n%s", text)
			}
			mailtest.Decode(t, mailtest.Call(t, cb, "imap_read_email", map[string]any{"uid": int(uids[i])}), &r)
			if r.Authentication.Verdict != senderauth.Unknown || !strings.Contains(r.Authentication.Note, "AUTHSERV_ID") {
				t.Errorf("without AUTHSERV_ID: %+v", r.Authentication)
			}
		})
	}
}
