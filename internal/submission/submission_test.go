package submission_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailmsg"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/submission"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

func TestMain(m *testing.M) { mailtest.Main(m) }

var (
	alice = credentials.New(mailtest.Alice, mailtest.AlicePassword)
	bob   = mailtest.Bob
)

func message(t testing.TB, from string, to ...string) *bytes.Reader {
	t.Helper()
	msg, _ := messageWithID(t, from, to...)
	return msg
}

func messageWithID(t testing.TB, from string, to ...string) (*bytes.Reader, string) {
	t.Helper()
	d := mailmsg.Draft{
		From:    mailmsg.Address{Name: "Alice", Email: from},
		Subject: fmt.Sprintf("%s — Grüße ✓", t.Name()),
		Text:    "Hello from " + t.Name() + "\n.\n..\nbye\n",
	}
	for _, r := range to {
		d.To = append(d.To, mailmsg.Address{Email: r})
	}
	raw, id, err := mailmsg.Compose(d)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(raw), id
}

func wantKind(t *testing.T, err error, kind mailerr.Kind, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", kind)
	}
	var me *mailerr.Error
	if !errors.As(err, &me) {
		t.Fatalf("error %T %v is not a *mailerr.Error", err, err)
	}
	if me.Kind != kind {
		t.Errorf("kind %v, want %v: %v", me.Kind, kind, err)
	}
	for _, s := range contains {
		if !strings.Contains(me.Msg, s) {
			t.Errorf("message %q does not contain %q", me.Msg, s)
		}
	}
}

// --- against Postfix from the shared mail stack ---

func stackClient(t *testing.T, st *mailtest.Stack, sec transport.Security) *submission.Client {
	t.Helper()
	cfg := submission.Config{Host: st.Host, Security: sec, TLS: st.TLSConfig(), Timeout: 30 * time.Second}
	switch sec {
	case transport.StartTLS:
		cfg.Port = st.SubmissionPort
		// ServerName from Host: the stack's certificate covers 127.0.0.1.
		cfg.TLS.ServerName = ""
	case transport.TLS:
		cfg.Port = st.SubmissionsPort // ServerName "localhost" from TLSConfig
	}
	return submission.New(cfg, nil)
}

func inboxCount(t *testing.T, st *mailtest.Stack, user string) int {
	t.Helper()
	n, err := st.MessageCount(user, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPostfixSend(t *testing.T) {
	st := mailtest.Shared(t)
	for _, sec := range []transport.Security{transport.StartTLS, transport.TLS} {
		t.Run(string(sec), func(t *testing.T) {
			c := stackClient(t, st, sec)
			before := inboxCount(t, st, bob)
			msg, id := messageWithID(t, mailtest.Alice, bob)
			res, err := c.Send(context.Background(), alice, mailtest.Alice, []string{bob}, msg)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if len(res.Accepted) != 1 || res.Accepted[0] != bob || len(res.Rejected) != 0 {
				t.Errorf("result %+v", res)
			}
			if _, err := st.WaitMessages(bob, "INBOX", before+1, 20*time.Second); err != nil {
				t.Fatal(err)
			}
			// It is this message, whole: found by its Message-ID, with the
			// dot-stuffed lines of the body intact.
			out, err := st.Doveadm("fetch", "-u", bob, "body", "mailbox", "INBOX", "header", "Message-ID", id)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "Hello from "+t.Name()+"\n.\n..\nbye") {
				t.Errorf("message %s in bob's INBOX has body %q", id, out)
			}
		})
	}
}

func TestPostfixWrongPassword(t *testing.T) {
	st := mailtest.Shared(t)
	const secret = "not-alices-password"
	for _, sec := range []transport.Security{transport.StartTLS, transport.TLS} {
		t.Run(string(sec), func(t *testing.T) {
			c := stackClient(t, st, sec)
			_, err := c.Send(context.Background(), credentials.New(mailtest.Alice, secret), mailtest.Alice, []string{bob}, message(t, mailtest.Alice, bob))
			wantKind(t, err, mailerr.Auth, "authentication failed: the mail server rejected the user name or password")
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

func TestPostfixUnknownRecipient(t *testing.T) {
	st := mailtest.Shared(t)
	c := stackClient(t, st, transport.StartTLS)
	_, err := c.Send(context.Background(), alice, mailtest.Alice, []string{"nobody@example.test"}, message(t, mailtest.Alice, "nobody@example.test"))
	wantKind(t, err, mailerr.Permanent, "nobody@example.test", "550 5.1.1", "nothing was sent")
	t.Logf("message: %s", mailerr.Message(err))
}

func TestPostfixSomeRecipientsRejected(t *testing.T) {
	st := mailtest.Shared(t)
	c := stackClient(t, st, transport.TLS)
	before := inboxCount(t, st, bob)
	rcpts := []string{"nobody@example.test", bob}
	res, err := c.Send(context.Background(), alice, mailtest.Alice, rcpts, message(t, mailtest.Alice, rcpts...))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if len(res.Accepted) != 1 || res.Accepted[0] != bob {
		t.Errorf("accepted %q", res.Accepted)
	}
	if len(res.Rejected) != 1 || res.Rejected[0].Address != "nobody@example.test" || res.Rejected[0].Code != 550 ||
		!strings.HasPrefix(res.Rejected[0].Message, "5.1.1 ") {
		t.Errorf("rejected %+v", res.Rejected)
	}
	if _, err := st.WaitMessages(bob, "INBOX", before+1, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestPostfixUntrustedCertificate(t *testing.T) {
	st := mailtest.Shared(t)
	for _, sec := range []transport.Security{transport.StartTLS, transport.TLS} {
		t.Run(string(sec), func(t *testing.T) {
			port := st.SubmissionPort
			if sec == transport.TLS {
				port = st.SubmissionsPort
			}
			// System roots only: the stack's self-signed certificate fails.
			c := submission.New(submission.Config{Host: st.Host, Port: port, Security: sec, Timeout: 10 * time.Second}, nil)
			_, err := c.Send(context.Background(), alice, mailtest.Alice, []string{bob}, message(t, mailtest.Alice, bob))
			wantKind(t, err, mailerr.Unavailable, "certificate")
		})
	}
}

func TestPostfixWrongHostName(t *testing.T) {
	st := mailtest.Shared(t)
	tc := st.TLSConfig()
	tc.ServerName = "smtp.elsewhere.example"
	c := submission.New(submission.Config{Host: st.Host, Port: st.SubmissionsPort, Security: transport.TLS, TLS: tc}, nil)
	_, err := c.Send(context.Background(), alice, mailtest.Alice, []string{bob}, message(t, mailtest.Alice, bob))
	wantKind(t, err, mailerr.Unavailable, "not valid for its host name")
}

// --- against go-smtp's own server, in process ---

// fakeServer is a go-smtp server whose behaviour a test sets, and which
// records what clients did.
type fakeServer struct {
	Addr string

	mechs    []string // AUTH mechanisms; default PLAIN
	rcptErr  map[string]*smtp.SMTPError
	mailErr  *smtp.SMTPError
	dataErr  *smtp.SMTPError
	dataHang chan struct{} // Data blocks until closed

	mu    sync.Mutex
	conns int
	auths []string // "MECH user password"
	mails []smtp.MailOptions
	rcpts []string
	data  [][]byte
}

type fakeOpts func(*fakeServer, *smtp.Server)

func startFake(t *testing.T, opts ...fakeOpts) *fakeServer {
	t.Helper()
	fs := &fakeServer{mechs: []string{sasl.Plain}}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		fs.mu.Lock()
		fs.conns++
		fs.mu.Unlock()
		return &fakeSession{fs: fs}, nil
	}))
	srv.Domain = "fake.test"
	srv.AllowInsecureAuth = true
	srv.EnableSMTPUTF8 = true
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	for _, o := range opts {
		o(fs, srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs.Addr = ln.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		if fs.dataHang != nil {
			select {
			case <-fs.dataHang:
			default:
				close(fs.dataHang)
			}
		}
		srv.Close()
		ln.Close() // Serve may not have registered it with srv yet
		<-done
	})
	return fs
}

func (fs *fakeServer) config(sec transport.Security) submission.Config {
	host, port, _ := net.SplitHostPort(fs.Addr)
	var p int
	fmt.Sscan(port, &p)
	return submission.Config{Host: host, Port: p, Security: sec, AllowPlaintextAuth: sec == transport.Plain, Timeout: 10 * time.Second}
}

func (fs *fakeServer) snapshot() (conns int, auths, rcpts []string, mails []smtp.MailOptions, data [][]byte) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.conns, append([]string(nil), fs.auths...), append([]string(nil), fs.rcpts...),
		append([]smtp.MailOptions(nil), fs.mails...), append([][]byte(nil), fs.data...)
}

type fakeSession struct {
	fs     *fakeServer
	authed bool
}

func (s *fakeSession) AuthMechanisms() []string { return s.fs.mechs }

func (s *fakeSession) Auth(mech string) (sasl.Server, error) {
	check := func(user, pass string) error {
		s.fs.mu.Lock()
		s.fs.auths = append(s.fs.auths, mech+" "+user+" "+pass)
		s.fs.mu.Unlock()
		if user != mailtest.Alice || pass != mailtest.AlicePassword {
			return smtp.ErrAuthFailed
		}
		s.authed = true
		return nil
	}
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(_, user, pass string) error { return check(user, pass) }), nil
	case sasl.Login:
		return &loginServer{check: check}, nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

// loginServer is the server side of AUTH LOGIN, with the usual prompts.
type loginServer struct {
	check func(user, pass string) error
	step  int
	user  string
}

func (l *loginServer) Next(resp []byte) ([]byte, bool, error) {
	l.step++
	switch l.step {
	case 1:
		if resp != nil {
			return nil, false, errors.New("no initial response expected")
		}
		return []byte("Username:"), false, nil
	case 2:
		l.user = string(resp)
		return []byte("Password:"), false, nil
	default:
		return nil, true, l.check(l.user, string(resp))
	}
}

func (s *fakeSession) Mail(from string, opts *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	s.fs.mu.Lock()
	s.fs.mails = append(s.fs.mails, *opts)
	s.fs.mu.Unlock()
	if s.fs.mailErr != nil {
		return s.fs.mailErr
	}
	return nil
}

func (s *fakeSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if e := s.fs.rcptErr[to]; e != nil {
		return e
	}
	s.fs.mu.Lock()
	s.fs.rcpts = append(s.fs.rcpts, to)
	s.fs.mu.Unlock()
	return nil
}

func (s *fakeSession) Data(r io.Reader) error {
	if s.fs.dataHang != nil {
		<-s.fs.dataHang
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if s.fs.dataErr != nil {
		return s.fs.dataErr
	}
	s.fs.mu.Lock()
	s.fs.data = append(s.fs.data, b)
	s.fs.mu.Unlock()
	return nil
}

func (s *fakeSession) Reset()        {}
func (s *fakeSession) Logout() error { return nil }

func TestFakeSend(t *testing.T) {
	fs := startFake(t)
	c := submission.New(fs.config(transport.Plain), nil)
	msg := message(t, mailtest.Alice, "x@fake.test")
	want, _ := io.ReadAll(msg)
	msg.Seek(0, io.SeekStart)
	res, err := c.Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test", "y@fake.test", "X@FAKE.TEST"}, msg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Accepted, " ") != "x@fake.test y@fake.test" {
		t.Errorf("accepted %q (duplicates are sent once)", res.Accepted)
	}
	_, auths, rcpts, mails, data := fs.snapshot()
	if len(auths) != 1 || auths[0] != "PLAIN "+mailtest.Alice+" "+mailtest.AlicePassword {
		t.Errorf("auths %q", auths)
	}
	if strings.Join(rcpts, " ") != "x@fake.test y@fake.test" {
		t.Errorf("server got RCPT %q", rcpts)
	}
	if len(mails) != 1 || mails[0].UTF8 || mails[0].Size != int64(len(want)) {
		t.Errorf("MAIL options %+v: want no SMTPUTF8 (the server offers it) and SIZE=%d", mails, len(want))
	}
	if len(data) != 1 || !bytes.Equal(data[0], want) {
		t.Errorf("server got %d messages; the first differs from what was sent", len(data))
	}
}

func TestFakeLoginFallback(t *testing.T) {
	fs := startFake(t, func(fs *fakeServer, _ *smtp.Server) { fs.mechs = []string{"CRAM-MD5", sasl.Login} })
	c := submission.New(fs.config(transport.Plain), nil)
	if _, err := c.Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, message(t, mailtest.Alice, "x@fake.test")); err != nil {
		t.Fatal(err)
	}
	if _, auths, _, _, _ := fs.snapshot(); len(auths) != 1 || !strings.HasPrefix(auths[0], "LOGIN "+mailtest.Alice+" ") {
		t.Errorf("auths %q", auths)
	}

	wrong := credentials.New(mailtest.Alice, "wrong")
	_, err := c.Send(context.Background(), wrong, mailtest.Alice, []string{"x@fake.test"}, message(t, mailtest.Alice, "x@fake.test"))
	wantKind(t, err, mailerr.Auth, "authentication failed")
}

func TestFakeNoUsableMechanism(t *testing.T) {
	fs := startFake(t, func(fs *fakeServer, _ *smtp.Server) { fs.mechs = []string{"CRAM-MD5"} })
	c := submission.New(fs.config(transport.Plain), nil)
	_, err := c.Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, message(t, mailtest.Alice, "x@fake.test"))
	wantKind(t, err, mailerr.Unavailable, "PLAIN or LOGIN", "CRAM-MD5")
}

func TestFakeServerAnswers(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*fakeServer)
		rcpts []string
		kind  mailerr.Kind
		msg   []string
	}{
		{"one recipient refused", func(fs *fakeServer) {
			fs.rcptErr = map[string]*smtp.SMTPError{"bad@fake.test": {Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "<bad@fake.test>: no such user"}}
		}, []string{"bad@fake.test"}, mailerr.Permanent, []string{"refused the recipient bad@fake.test (550 5.1.1 no such user); nothing was sent"}},
		{"all refused, one temporarily", func(fs *fakeServer) {
			fs.rcptErr = map[string]*smtp.SMTPError{
				"a@fake.test": {Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"},
				"b@fake.test": {Code: 450, EnhancedCode: smtp.EnhancedCode{4, 2, 1}, Message: "mailbox busy"},
			}
		}, []string{"a@fake.test", "b@fake.test"}, mailerr.Temporary, []string{"temporary failure (", "a@fake.test (550 5.1.1 no such user)", "b@fake.test (450 4.2.1 mailbox busy)"}},
		{"sender refused", func(fs *fakeServer) {
			fs.mailErr = &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Sender address rejected: not owned by user"}
		}, nil, mailerr.Permanent, []string{"refused the sender address " + mailtest.Alice, "553 5.7.1 Sender address rejected"}},
		{"sender deferred", func(fs *fakeServer) {
			fs.mailErr = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again"}
		}, nil, mailerr.Temporary, []string{"temporary failure (451 4.3.0 try again); nothing was sent"}},
		{"message too big", func(fs *fakeServer) { fs.dataErr = smtp.ErrDataTooLarge }, nil, mailerr.TooLarge, []string{"too large", "552 5.3.4"}},
		{"552 without enhanced code", func(fs *fakeServer) {
			fs.dataErr = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.NoEnhancedCode, Message: "Too much mail data"}
		}, nil, mailerr.TooLarge, []string{"too large"}},
		{"552 mailbox full is not size", func(fs *fakeServer) {
			fs.dataErr = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 2, 2}, Message: "Mailbox full"}
		}, nil, mailerr.Permanent, []string{"refused the message (552 5.2.2 Mailbox full)"}},
		{"message refused", func(fs *fakeServer) {
			fs.dataErr = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Spam detected\x1b[31m"}
		}, nil, mailerr.Permanent, []string{"refused the message (554 5.7.1 Spam detected [31m)"}},
		{"multi-line reason: first line only", func(fs *fakeServer) {
			fs.dataErr = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "first line\nsecond line"}
		}, nil, mailerr.Permanent, []string{"refused the message (554 first line)"}},
		{"message deferred", func(fs *fakeServer) {
			fs.dataErr = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "greylisted"}
		}, nil, mailerr.Temporary, []string{"temporary failure (451 4.7.1 greylisted); nothing was sent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := startFake(t)
			tt.setup(fs)
			rcpts := tt.rcpts
			if rcpts == nil {
				rcpts = []string{"x@fake.test"}
			}
			c := submission.New(fs.config(transport.Plain), nil)
			res, err := c.Send(context.Background(), alice, mailtest.Alice, rcpts, message(t, mailtest.Alice, rcpts...))
			if res != nil {
				t.Errorf("result %+v with an error", res)
			}
			wantKind(t, err, tt.kind, tt.msg...)
		})
	}
}

func TestFakeSizeLimitBeforeSending(t *testing.T) {
	fs := startFake(t, func(_ *fakeServer, srv *smtp.Server) { srv.MaxMessageBytes = 100 })
	c := submission.New(fs.config(transport.Plain), nil)
	_, err := c.Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, message(t, mailtest.Alice, "x@fake.test"))
	wantKind(t, err, mailerr.TooLarge, "at most 100")
	if _, _, _, mails, _ := fs.snapshot(); len(mails) != 0 {
		t.Errorf("MAIL FROM was sent: %+v", mails)
	}
}

func TestPlainRefusedWithoutPermission(t *testing.T) {
	fs := startFake(t)
	cfg := fs.config(transport.Plain)
	cfg.AllowPlaintextAuth = false
	_, err := submission.New(cfg, nil).Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, message(t, mailtest.Alice, "x@fake.test"))
	wantKind(t, err, mailerr.Internal, "unencrypted")
	if conns, auths, _, _, _ := fs.snapshot(); conns != 0 || len(auths) != 0 {
		t.Errorf("%d connections, AUTH %q: nothing may reach the server", conns, auths)
	}
}

func TestStartTLSNotOffered(t *testing.T) {
	fs := startFake(t) // no TLSConfig: no STARTTLS
	for _, allow := range []bool{false, true} {
		cfg := fs.config(transport.StartTLS)
		cfg.AllowPlaintextAuth = allow // never a reason to fall back
		_, err := submission.New(cfg, nil).Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, message(t, mailtest.Alice, "x@fake.test"))
		wantKind(t, err, mailerr.Unavailable, "does not offer STARTTLS")
	}
	if conns, auths, _, mails, _ := fs.snapshot(); conns == 0 || len(auths) != 0 || len(mails) != 0 {
		t.Errorf("%d connections, AUTH %q, MAIL %v: no AUTH or MAIL may follow", conns, auths, mails)
	}
}

func TestImplicitTLSAgainstPlainServer(t *testing.T) {
	fs := startFake(t)
	_, err := submission.New(fs.config(transport.TLS), nil).Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, message(t, mailtest.Alice, "x@fake.test"))
	wantKind(t, err, mailerr.Unavailable, "does not speak TLS")
	if _, auths, _, _, _ := fs.snapshot(); len(auths) != 0 {
		t.Errorf("AUTH %q", auths)
	}
}

func TestBadInput(t *testing.T) {
	fs := startFake(t)
	c := submission.New(fs.config(transport.Plain), nil)
	tests := []struct {
		name  string
		creds credentials.Credentials
		from  string
		rcpts []string
		kind  mailerr.Kind
		msg   string
	}{
		{"no recipients", alice, mailtest.Alice, nil, mailerr.BadInput, "no recipients"},
		{"CRLF in recipient", alice, mailtest.Alice, []string{"x@fake.test\r\nRCPT TO:y@fake.test"}, mailerr.BadInput, "line break"},
		{"bracket in recipient", alice, mailtest.Alice, []string{"x@fake.test> NOTIFY=NEVER"}, mailerr.BadInput, "angle brackets"},
		{"non-ASCII recipient", alice, mailtest.Alice, []string{"jürgen@fake.test"}, mailerr.BadInput, "SMTPUTF8"},
		{"CRLF in sender", alice, "a@fake.test\r\nRSET", []string{"x@fake.test"}, mailerr.BadInput, "sender address"},
		{"empty sender", alice, "", []string{"x@fake.test"}, mailerr.BadInput, "sender address is empty"},
		{"no credentials", credentials.Credentials{}, mailtest.Alice, []string{"x@fake.test"}, mailerr.NoCredentials, "credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Send(context.Background(), tt.creds, tt.from, tt.rcpts, strings.NewReader("Subject: x\r\n\r\nx\r\n"))
			wantKind(t, err, tt.kind, tt.msg)
		})
	}
	if conns, _, _, _, _ := fs.snapshot(); conns != 0 {
		t.Errorf("%d connections for bad input", conns)
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []submission.Config{
		{Host: "127.0.0.1", Port: 25},
		{Host: "127.0.0.1", Port: 25, Security: "ssl"},
	} {
		_, err := submission.New(cfg, nil).Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, strings.NewReader("x"))
		wantKind(t, err, mailerr.Internal)
	}
	// No host of its own (only providers' hosts send): refused as such.
	_, err := submission.New(submission.Config{Port: 25, Security: transport.TLS}, nil).Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, strings.NewReader("x"))
	wantKind(t, err, mailerr.Forbidden)
}

// silentListener accepts connections and never writes a byte.
func silentListener(t *testing.T) (host string, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	a := ln.Addr().(*net.TCPAddr)
	return a.IP.String(), a.Port
}

// wantStep checks the step a timeout names, in the error and its message.
func wantStep(t *testing.T, err error, step string) {
	t.Helper()
	if got := mailerr.StepOf(err); got != step {
		t.Errorf("step %q, want %q", got, step)
	}
	if !strings.Contains(mailerr.Message(err), "while "+step) {
		t.Errorf("message %q does not name the step %q", mailerr.Message(err), step)
	}
}

func TestSilentServerTimesOut(t *testing.T) {
	host, port := silentListener(t)
	const timeout = time.Second
	for sec, step := range map[transport.Security]string{
		transport.StartTLS: "connecting to the SMTP server", // no greeting yet
		transport.TLS:      "starting TLS with the SMTP server",
		transport.Plain:    "connecting to the SMTP server",
	} {
		t.Run(string(sec), func(t *testing.T) {
			c := submission.New(submission.Config{Host: host, Port: port, Security: sec, AllowPlaintextAuth: true, Timeout: timeout}, nil)
			start := time.Now()
			_, err := c.Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, strings.NewReader("x"))
			took := time.Since(start)
			wantKind(t, err, mailerr.Timeout, "the mail server did not answer in time", "nothing was sent")
			wantStep(t, err, step)
			if took < timeout || took > timeout+time.Second {
				t.Errorf("took %v, want about %v", took, timeout)
			}
		})
	}
}

// A server that greets and then stops answering times out at the step it
// stopped at.
func TestServerStopsAnsweringNamesTheStep(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	// Greets, answers EHLO (offering STARTTLS when the client's name says
	// so), then reads and never answers again.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.Write([]byte("220 fake ESMTP\r\n"))
				buf := make([]byte, 512)
				n, _ := c.Read(buf)
				if strings.HasPrefix(string(buf[:n]), "EHLO") {
					c.Write([]byte("250-fake\r\n250-STARTTLS\r\n250 AUTH PLAIN\r\n"))
				}
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	for sec, step := range map[transport.Security]string{
		transport.StartTLS: "starting TLS with the SMTP server",
		transport.Plain:    "logging in to the SMTP server",
	} {
		t.Run(string(sec), func(t *testing.T) {
			c := submission.New(submission.Config{Host: "127.0.0.1", Port: port, Security: sec, AllowPlaintextAuth: true, Timeout: 500 * time.Millisecond}, nil)
			_, err := c.Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, strings.NewReader("x"))
			wantKind(t, err, mailerr.Timeout, "did not answer in time", "nothing was sent")
			wantStep(t, err, step)
		})
	}
}

func TestCallerContextBoundsSend(t *testing.T) {
	host, port := silentListener(t)
	c := submission.New(submission.Config{Host: host, Port: port, Security: transport.StartTLS, Timeout: time.Minute}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Send(ctx, alice, mailtest.Alice, []string{"x@fake.test"}, strings.NewReader("x"))
	wantKind(t, err, mailerr.Timeout)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v", took)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err = c.Send(ctx, alice, mailtest.Alice, []string{"x@fake.test"}, strings.NewReader("x"))
	wantKind(t, err, mailerr.Timeout, "cancelled", "nothing was sent")
	wantStep(t, err, "connecting to the SMTP server")
}

func TestNoAnswerAfterData(t *testing.T) {
	fs := startFake(t, func(fs *fakeServer, _ *smtp.Server) { fs.dataHang = make(chan struct{}) })
	cfg := fs.config(transport.Plain)
	cfg.Timeout = time.Second
	_, err := submission.New(cfg, nil).Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, message(t, mailtest.Alice, "x@fake.test"))
	wantKind(t, err, mailerr.Timeout, "did not answer in time", "may have been sent")
	wantStep(t, err, "waiting for the SMTP server to confirm the message")
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n > 0 {
		f.n--
		return copy(p, "Subject: x\r\n"), nil
	}
	return 0, errors.New("disk on fire")
}

func TestMessageReadError(t *testing.T) {
	fs := startFake(t)
	_, err := submission.New(fs.config(transport.Plain), nil).Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, &failingReader{n: 3})
	wantKind(t, err, mailerr.Internal, "nothing was sent")
	time.Sleep(50 * time.Millisecond)
	if _, _, _, _, data := fs.snapshot(); len(data) != 0 {
		t.Errorf("a truncated message was delivered: %q", data)
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c := submission.New(submission.Config{Host: "127.0.0.1", Port: port, Security: transport.TLS}, nil)
	_, err = c.Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, strings.NewReader("x"))
	wantKind(t, err, mailerr.Unavailable, "could not be reached")

	c = submission.New(submission.Config{Host: "no-such-host.invalid", Port: 465, Security: transport.TLS}, nil)
	_, err = c.Send(context.Background(), alice, mailtest.Alice, []string{"x@fake.test"}, strings.NewReader("x"))
	wantKind(t, err, mailerr.Unavailable)
}

// --- against the demo server (plain SMTP on loopback) ---

func TestDemoServer(t *testing.T) {
	srv, err := demo.Start(context.Background(), demo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.SMTPAddr)
	var p int
	fmt.Sscan(port, &p)
	cfg := submission.Config{Host: host, Port: p, Security: transport.Plain, AllowPlaintextAuth: true}
	creds := credentials.New(demo.AliceAddress, demo.AlicePassword)
	rcpts := []string{demo.BobAddress, "nobody@demo.test"}
	res, err := submission.New(cfg, nil).Send(context.Background(), creds, demo.AliceAddress, rcpts, message(t, demo.AliceAddress, rcpts...))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Accepted) != 1 || res.Accepted[0] != demo.BobAddress || len(res.Rejected) != 1 ||
		res.Rejected[0].Address != "nobody@demo.test" || res.Rejected[0].Code != 550 {
		t.Errorf("result %+v", res)
	}

	// An unencrypted connection needs permission even when the server
	// would take the password.
	cfg.AllowPlaintextAuth = false
	_, err = submission.New(cfg, nil).Send(context.Background(), creds, demo.AliceAddress, rcpts, message(t, demo.AliceAddress, rcpts...))
	wantKind(t, err, mailerr.Internal, "unencrypted")
}

// Verify against Postfix: the right login passes and nothing is sent;
// a wrong password is the usual auth error.
func TestPostfixVerify(t *testing.T) {
	st := mailtest.Shared(t)
	c := stackClient(t, st, transport.StartTLS)
	before := inboxCount(t, st, bob)
	if err := c.Verify(context.Background(), alice); err != nil {
		t.Fatalf("Verify with alice's login: %v", err)
	}
	err := c.Verify(context.Background(), credentials.New(mailtest.Alice, "not-alices-password"))
	wantKind(t, err, mailerr.Auth, "authentication failed: the mail server rejected the user name or password")
	time.Sleep(500 * time.Millisecond)
	if n := inboxCount(t, st, bob); n != before {
		t.Errorf("Verify delivered something: bob's INBOX went from %d to %d", before, n)
	}
}
