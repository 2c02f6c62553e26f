package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// SMTP_FROM_POLICY: under the default (login) a user may send only as the
// login's own address (any display name) or an address the operator lists;
// a foreign from is refused with a sentence naming the policy and nothing
// reaches the mail server. Under any, the mail server decides (this test
// stack's Postfix lets alice send as bob).
func TestSenderPolicy(t *testing.T) {
	s := mailtest.Shared(t)
	send := func(t *testing.T, g *gateway, from, subject string) (bool, string) {
		t.Helper()
		c := mailtest.MCPClient(t, g.URL, userHeaders(s, mailtest.Alice), "")
		res := mailtest.Call(t, c, "smtp_send_email", map[string]any{
			"from": from, "to": []any{mailtest.Bob}, "subject": subject, "text": "sender policy test",
		})
		return !res.IsError, mailtest.Text(res)
	}
	arrived := func(t *testing.T, subject string) bool {
		t.Helper()
		c := direct(t, s, mailtest.Bob)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if uids := searchSubject(t, c, subject); len(uids) > 0 {
				return true
			}
			time.Sleep(100 * time.Millisecond)
		}
		return false
	}
	stamp := time.Now().Format("150405.000000")

	login := startGateway(t, s, smtpEnv(s)...)
	for _, from := range []string{"Bob <" + mailtest.Bob + ">", "ceo@outside.example"} {
		subject := "refused " + from + " " + stamp
		ok, text := send(t, login, from, subject)
		if ok || !strings.Contains(text, "SMTP_FROM_POLICY=login") || !strings.Contains(text, "does not let you send as") {
			t.Fatalf("from %q under the default policy: ok=%v %q", from, ok, text)
		}
		if strings.Contains(login.Logs.String(), "message submitted") {
			t.Fatalf("from %q: something was submitted", from)
		}
	}
	subject := "display name is free " + stamp
	if ok, text := send(t, login, "The Boss <"+strings.ToUpper(mailtest.Alice)+">", subject); !ok || !arrived(t, subject) {
		t.Fatalf("own address with another display name and case: ok=%v %q", ok, text)
	}

	listed := startGateway(t, s, smtpEnv(s, "SMTP_ALLOWED_FROM=@example.test")...)
	subject = "allowed domain " + stamp
	if ok, text := send(t, listed, mailtest.Bob, subject); !ok || !arrived(t, subject) {
		t.Fatalf("a listed domain: ok=%v %q", ok, text)
	}

	anyone := startGateway(t, s, smtpEnv(s, "SMTP_FROM_POLICY=any")...)
	subject = "policy any " + stamp
	if ok, text := send(t, anyone, "Bob <"+mailtest.Bob+">", subject); !ok || !arrived(t, subject) {
		t.Fatalf("under any: ok=%v %q", ok, text)
	}
	// The refused ones never arrived.
	for _, from := range []string{"Bob <" + mailtest.Bob + ">", "ceo@outside.example"} {
		if uids := searchSubject(t, direct(t, s, mailtest.Bob), "refused "+from+" "+stamp); len(uids) != 0 {
			t.Fatalf("a refused message from %q arrived", from)
		}
	}
}

// searchSubject returns the UIDs of INBOX messages whose subject contains
// subject, with a bare IMAP client.
func searchSubject(t *testing.T, c *imapclient.Client, subject string) []imap.UID {
	t.Helper()
	if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	res, err := c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: subject}}}, nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	return res.AllUIDs()
}
