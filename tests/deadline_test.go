package tests

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// stallingSMTP is a submission server that logs anyone in and then never
// answers MAIL FROM.
type stallingSMTP struct{ release chan struct{} }

func (b *stallingSMTP) NewSession(*smtp.Conn) (smtp.Session, error) { return &stallSession{b}, nil }

type stallSession struct{ b *stallingSMTP }

func (s *stallSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *stallSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, user, pass string) error { return nil }), nil
}
func (s *stallSession) Mail(string, *smtp.MailOptions) error { <-s.b.release; return nil }
func (s *stallSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *stallSession) Data(io.Reader) error                 { return nil }
func (s *stallSession) Reset()                               {}
func (s *stallSession) Logout() error                        { return nil }

// The overall deadline (TOOL_TIMEOUT) bounds a whole call, whatever the
// per-protocol timeouts say, and the error names the step that ran out:
// imap_read_email against an IMAP server that stalls after login, and
// smtp_reply_email against an SMTP server that stalls after AUTH.
func TestToolTimeoutNamesTheStep(t *testing.T) {
	s := mailtest.Shared(t)
	const limit = 3 * time.Second
	user := mailtest.Alice
	uid := deliverOne(t, s, user, "deadline test "+strconv.FormatInt(time.Now().UnixNano(), 36))

	t.Run("imap_read_email_stalled_at_fetch", func(t *testing.T) {
		proxy := startStallProxy(t, s.IMAPAddr(), "FETCH")
		g := startGateway(t, s, "IMAP_PORT="+strconv.Itoa(proxy.port()), "IMAP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true",
			"MAIL_CA_FILE=", "IMAP_TIMEOUT=120s", "TOOL_TIMEOUT=3s")
		c := mailtest.MCPClient(t, g.URL, userHeaders(s, user), "")
		start := time.Now()
		res := mailtest.Call(t, c, "imap_read_email", map[string]any{"uid": uid})
		took := time.Since(start)
		text := mailtest.Text(res)
		t.Logf("failed after %v: %s", took.Round(time.Millisecond), text)
		if !res.IsError || took > limit+time.Second || took < limit-500*time.Millisecond {
			t.Fatalf("after %v (limit %v): isError=%v %q", took, limit, res.IsError, text)
		}
		for _, want := range []string{"TOOL_TIMEOUT", "3s", "it ran out while reading the message"} {
			if !strings.Contains(text, want) {
				t.Errorf("the error does not say %q: %q", want, text)
			}
		}
	})

	t.Run("smtp_reply_email_stalled_after_auth", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		be := &stallingSMTP{release: make(chan struct{})}
		srv := smtp.NewServer(be)
		srv.AllowInsecureAuth = true
		srv.Domain = "stall.test"
		go srv.Serve(ln)
		t.Cleanup(func() {
			close(be.release)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
		})
		g := startGateway(t, s, "SMTP_HOST=127.0.0.1", "SMTP_PORT="+strconv.Itoa(ln.Addr().(*net.TCPAddr).Port),
			"SMTP_SECURITY=plain", "ALLOW_PLAINTEXT_AUTH=true", "SMTP_TIMEOUT=120s", "TOOL_TIMEOUT=3s")
		c := mailtest.MCPClient(t, g.URL, userHeaders(s, user), "")
		before, err := s.MessageCount(user, "Sent")
		if err != nil {
			before = 0
		}
		start := time.Now()
		res := mailtest.Call(t, c, "smtp_reply_email", map[string]any{"uid": uid, "text": "never sent"})
		took := time.Since(start)
		text := mailtest.Text(res)
		t.Logf("failed after %v: %s", took.Round(time.Millisecond), text)
		if !res.IsError || took > limit+time.Second || took < limit-500*time.Millisecond {
			t.Fatalf("after %v (limit %v): isError=%v %q", took, limit, res.IsError, text)
		}
		for _, want := range []string{"TOOL_TIMEOUT", "it ran out while sending the envelope", "nothing was sent"} {
			if !strings.Contains(text, want) {
				t.Errorf("the error does not say %q: %q", want, text)
			}
		}
		if after, _ := s.MessageCount(user, "Sent"); after != before {
			t.Errorf("a Sent copy was filed for a message that was not sent (%d -> %d)", before, after)
		}
	})
}

// deliverOne delivers a message with subject to user through Postfix and
// returns its UID in INBOX, found with a bare IMAP client.
func deliverOne(t *testing.T, s *mailtest.Stack, user, subject string) uint32 {
	t.Helper()
	raw := "From: Carol <carol@example.test>\r\nTo: " + user + "\r\nSubject: " + subject +
		"\r\nMessage-ID: <" + strconv.FormatInt(time.Now().UnixNano(), 36) + "@example.test>\r\n\r\nHello.\r\n"
	c := direct(t, s, user)
	for range 100 {
		if uids := searchSubject(t, c, subject); len(uids) > 0 {
			return uint32(uids[len(uids)-1])
		}
		if raw != "" {
			if err := s.Deliver("carol@example.test", []string{user}, []byte(raw)); err != nil {
				t.Fatal(err)
			}
			raw = ""
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the message %q never arrived", subject)
	return 0
}
