// Package demo runs an in-process IMAP and SMTP server on loopback, seeded
// with a realistic mailbox, for the one-command demo (`mailbox-mcp demo`) and
// for fast tests. It is not a mail server for real use: everything lives in
// memory, the passwords are fixed and published, and both protocols speak
// plain text without TLS, which is why it refuses to listen on anything but a
// loopback address.
//
// The package owns the demo accounts, their seeded content and the two
// listeners. It must not import anything else from this repository, so that
// the gateway is exercised exactly as it would be against an outside server.
//
// # Accounts
//
// Two users exist, with fixed passwords so that a demo can be scripted:
//
//	alice@demo.test  demo-alice   (several dozen messages in eight folders)
//	bob@demo.test    demo-bob     (a handful of messages)
//
// # IMAP
//
// go-imap's imapserver with the imapmemserver backend, wrapped by a session
// that adds what imapmemserver lacks: special-use attributes (RFC 6154, also
// through CREATE ... USE), \HasChildren/\HasNoChildren, LIST RECURSIVEMATCH,
// refusal to modify a mailbox opened with EXAMINE, hierarchy-aware
// CREATE/DELETE/RENAME and an APPENDLIMIT. See [Capabilities].
//
// What remains of imapmemserver's limits: every flag is stored and sent in
// lower case (FLAGS (\seen)); imapclient restores the case of system flags
// and well-known keywords such as $Forwarded, other keywords arrive in lower
// case. \Recent is always 0. There is no CONDSTORE, QRESYNC, SORT or THREAD.
// IDLE outside a selected mailbox never reports anything. SEARCH is a
// case-insensitive substring match over decoded headers and text parts, with
// only US-ASCII and UTF-8 as SEARCH CHARSET. EXPUNGE after EXAMINE answers OK
// and removes nothing (CLOSE goes through the same call and must succeed).
// RENAME INBOX is refused. Everything is lost at Close.
//
// # Seed
//
// Built in code, the same bytes every run except for the dates, which count
// back from the start time so that "newest first" looks right. Alice has plain
// text, three threads (Message-ID, In-Reply-To, References; replies in Sent),
// HTML-only newsletters with links, tables, <script>, <style> and a tracking
// pixel, multipart/alternative, a calendar invitation, PDF and PNG
// attachments, an RFC 2231 and an RFC 2047 non-ASCII file name,
// ISO-8859-1 quoted-printable, Shift_JIS base64, KOI8-R 8bit, windows-1252,
// UTF-8 quoted-printable and 8bit with emoji, an empty subject, a mailing-list
// message, an auto-reply, a long text, and a phishing message with prompt
// injection, hidden HTML and a bidi-spoofed attachment name; some unread,
// flagged, answered or drafts, over about six months. [Server.Messages]
// describes each message and the Tag constants name the interesting ones.
//
// # SMTP
//
// go-smtp on the submission model: AUTH PLAIN is required before MAIL FROM.
// Every envelope recipient that is a demo user gets the message, with
// Return-Path and Received prepended, in its INBOX; other demo.test addresses
// are refused with 550; addresses outside demo.test are accepted and dropped
// (and logged). Nothing is copied to Sent: like a real submission server, that
// is the client's job.
package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/emersion/go-imap/v2/imapserver"
	// imapmemserver's SEARCH parses messages with go-message, which only
	// decodes legacy charsets (ISO-8859-1, Shift_JIS, KOI8-R in the seed)
	// once this package has registered them. Imported here so that search
	// behaves like a real server's whatever else the binary links.
	_ "github.com/emersion/go-message/charset"
	"github.com/emersion/go-smtp"
)

// Demo accounts. The passwords are fixed on purpose: the demo prints them and
// tests use them.
const (
	Domain        = "demo.test"
	AliceAddress  = "alice@demo.test"
	AlicePassword = "demo-alice"
	BobAddress    = "bob@demo.test"
	BobPassword   = "demo-bob"
)

// AuthServID is the authserv-id of the demo's "receiving server": the
// Authentication-Results fields the seeded messages carry under this name
// are what a real receiving server would have added (the demo runs the
// gateway with AUTHSERV_ID set to it); one message carries a forged field
// under another name too.
const AuthServID = "mx.demo.test"

// Folder names, as the IMAP client sees them after modified UTF-7 decoding.
// The hierarchy delimiter is "/".
const (
	FolderInbox    = "INBOX"
	FolderSent     = "Sent"    // \Sent
	FolderDrafts   = "Drafts"  // \Drafts
	FolderTrash    = "Trash"   // \Trash
	FolderArchive  = "Archive" // \Archive
	FolderProjects = "Projekte"
	FolderOverview = "Projekte/Übersicht"  // non-ASCII name below a parent
	FolderReceipts = "Rechnungen & Belege" // "&" must be escaped as "&-" in modified UTF-7
)

// MaxMessageBytes caps both an SMTP DATA and an IMAP APPEND.
const MaxMessageBytes = 25 << 20

// User is a demo account. Address is also the IMAP and SMTP login name.
type User struct{ Address, Password string }

// Options configures Start. The zero value is ready to use.
type Options struct {
	// Logger receives connection, delivery and authentication events. Nil
	// discards them.
	Logger *slog.Logger
	// IMAPAddr and SMTPAddr are host:port to listen on. "" means
	// 127.0.0.1:0 (a free port). The host must be a loopback address or
	// "localhost".
	IMAPAddr, SMTPAddr string
}

// Server is a running demo mail server. Close it when done.
type Server struct {
	IMAPAddr string // host:port, plain IMAP on 127.0.0.1 (no TLS: loopback only)
	SMTPAddr string // host:port, plain SMTP submission on 127.0.0.1, AUTH PLAIN required
	Users    []User // alice@demo.test / demo-alice and bob@demo.test / demo-bob

	log      *slog.Logger
	accounts map[string]*account // by lower-case address
	seeded   map[string][]Message

	imapSrv   *imapserver.Server
	smtpSrv   *smtp.Server
	imapLn    *trackedListener
	smtpLn    *trackedListener
	imapConns *tracker
	smtpConns *tracker
	serving   sync.WaitGroup // the two accept loops

	deliveryID atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

// Start seeds the demo accounts and starts the IMAP and SMTP servers. ctx
// bounds only the start-up (listening); the servers then run until Close.
func Start(ctx context.Context, opts Options) (*Server, error) {
	imapAddr, err := loopbackAddr(opts.IMAPAddr)
	if err != nil {
		return nil, err
	}
	smtpAddr, err := loopbackAddr(opts.SMTPAddr)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "demo")

	s := &Server{
		log:       log,
		accounts:  make(map[string]*account),
		seeded:    make(map[string][]Message),
		imapConns: newTracker(true),
		smtpConns: newTracker(false),
	}
	if err := s.seed(); err != nil {
		return nil, fmt.Errorf("demo: seeding mailboxes: %w", err)
	}

	var lc net.ListenConfig
	imapRaw, err := lc.Listen(ctx, "tcp", imapAddr)
	if err != nil {
		return nil, fmt.Errorf("demo: IMAP listener: %w", err)
	}
	smtpRaw, err := lc.Listen(ctx, "tcp", smtpAddr)
	if err != nil {
		imapRaw.Close()
		return nil, fmt.Errorf("demo: SMTP listener: %w", err)
	}
	s.imapLn = &trackedListener{Listener: imapRaw, t: s.imapConns}
	s.smtpLn = &trackedListener{Listener: smtpRaw, t: s.smtpConns}
	s.IMAPAddr = imapRaw.Addr().String()
	s.SMTPAddr = smtpRaw.Addr().String()

	s.imapSrv = s.newIMAPServer()
	s.smtpSrv = s.newSMTPServer()

	s.serving.Add(2)
	go func() {
		defer s.serving.Done()
		if err := s.imapSrv.Serve(s.imapLn); err != nil && !errors.Is(err, net.ErrClosed) {
			s.log.Error("IMAP server stopped", "err", err)
		}
	}()
	go func() {
		defer s.serving.Done()
		if err := s.smtpSrv.Serve(s.smtpLn); err != nil && !errors.Is(err, net.ErrClosed) {
			s.log.Error("SMTP server stopped", "err", err)
		}
	}()
	s.log.Info("demo mail server started", "imap", s.IMAPAddr, "smtp", s.SMTPAddr)
	return s, nil
}

// Close stops both servers: it closes the listeners and every open
// connection, and returns once every goroutine the server started has
// finished. Calling it again returns the first result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	// Stop accepting, and wait for both accept loops, so that no connection
	// can appear after the next step.
	errs := []error{s.imapLn.Close(), s.smtpLn.Close()}
	s.serving.Wait()

	s.imapConns.closeAll()
	s.smtpConns.closeAll()

	// imapserver does not wait for its connection goroutines; the tracker
	// does (see trackedConn). go-smtp's Shutdown does wait for its own.
	s.imapConns.wg.Wait()
	errs = append(errs, s.smtpSrv.Shutdown(context.Background()))
	// The IMAP server has no listener and no connection left; this only
	// marks it closed.
	errs = append(errs, s.imapSrv.Close())
	s.log.Info("demo mail server stopped")
	return errors.Join(errs...)
}

// Seeded returns how many messages Start put in a user's folder (0 for an
// unknown user or folder). Later deliveries and IMAP changes are not counted.
func (s *Server) Seeded(user, folder string) int {
	n := 0
	for _, m := range s.seeded[strings.ToLower(user)] {
		if m.Folder == folder {
			n++
		}
	}
	return n
}

// Messages describes the messages Start put in a user's mailbox, folder by
// folder in the order of [Folders], and within a folder in UID order (oldest
// first). The slice is a copy.
func (s *Server) Messages(user string) []Message {
	out := slices.Clone(s.seeded[strings.ToLower(user)])
	for i := range out {
		out[i].Flags = slices.Clone(out[i].Flags)
	}
	return out
}

// Folders lists the folders every demo account starts with, parents before
// children.
func Folders() []string {
	out := make([]string, len(folderSpecs))
	for i, f := range folderSpecs {
		out[i] = f.name
	}
	return out
}

// loopbackAddr checks that addr is host:port on a loopback address. An empty
// addr means 127.0.0.1 on a free port.
func loopbackAddr(addr string) (string, error) {
	if addr == "" {
		return "127.0.0.1:0", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("demo: listen address %q: %w", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("demo: listen address %q is not loopback: the demo server has fixed passwords and no TLS", addr)
	}
	return net.JoinHostPort(host, port), nil
}

// printfLogger adapts slog to the Printf-style loggers of imapserver and
// go-smtp, which only report unexpected conditions.
type printfLogger struct{ l *slog.Logger }

func (p printfLogger) Printf(format string, v ...any) {
	p.l.Warn(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

func (p printfLogger) Println(v ...any) {
	p.l.Warn(strings.TrimSpace(fmt.Sprintln(v...)))
}

// tracker keeps the connections a listener accepted, so that Close can cut
// them and wait for the goroutines serving them.
//
// go-smtp's Server.Shutdown waits for its connection goroutines, but
// imapserver's Close does not. For IMAP (waitSessions), each connection
// counts in wg until the serving goroutine's last act: imapserver's serve
// loop closes the session, then, as its final deferred call, the net.Conn. So
// the first Close after the session has been closed is that final one,
// provided nobody else closes the wrapper meanwhile: Server.close cuts
// connections through the raw conn and only calls imapserver.Server.Close
// once no connection is left.
type tracker struct {
	waitSessions bool
	wg           sync.WaitGroup

	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

func newTracker(waitSessions bool) *tracker {
	return &tracker{waitSessions: waitSessions, conns: make(map[*trackedConn]struct{})}
}

func (t *tracker) add(c net.Conn) *trackedConn {
	tc := &trackedConn{Conn: c, t: t}
	t.mu.Lock()
	t.conns[tc] = struct{}{}
	t.mu.Unlock()
	if t.waitSessions {
		t.wg.Add(1)
	}
	return tc
}

// closeAll cuts every connection; the serving goroutines then fail their
// next read and return.
func (t *tracker) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c := range t.conns {
		c.Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	t           *tracker
	sessionDone atomic.Bool
	once        sync.Once
}

// endSession records that the IMAP session on this connection is closed.
func (c *trackedConn) endSession() { c.sessionDone.Store(true) }

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	if !c.t.waitSessions || c.sessionDone.Load() {
		c.once.Do(func() {
			c.t.mu.Lock()
			delete(c.t.conns, c)
			c.t.mu.Unlock()
			if c.t.waitSessions {
				c.t.wg.Done()
			}
		})
	}
	return err
}

type trackedListener struct {
	net.Listener
	t         *tracker
	closeOnce sync.Once
	closeErr  error
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.t.add(c), nil
}

// Close is idempotent: go-smtp's Shutdown closes the listener again.
func (l *trackedListener) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.Listener.Close() })
	return l.closeErr
}
