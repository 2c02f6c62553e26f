package mailbox

// Whether commands may ride behind a LOGIN: a server difference.
//
// RFC 9051 5.5 lets a client send commands without waiting for the answer
// to the one before, and the gateway's cold calls save a round trip or two
// by sending the call's opening (opening.go) behind the LOGIN. Not every
// server keeps what follows a LOGIN: Courier's imaplogin hands the
// connection to imapd once the LOGIN succeeds and drops whatever the
// client sent behind it, so a command pipelined there is never answered.
// Dovecot (its login process passes its buffer on to imap) and Cyrus keep
// them.
//
// So nothing goes behind a LOGIN until the server is known to keep it:
//
//   - by its identity: the greeting's text or the name it gives to ID
//     (RFC 2971). Courier says "Courier-IMAP ready" and never gets them;
//     Dovecot and Cyrus do;
//   - else by a probe: while the host is not known, a LOGIN carries one
//     NOOP behind it, and once the LOGIN is answered a second NOOP is
//     waited for. A server that keeps commands answers the first NOOP
//     before the second; one that drops them never answers it. (The
//     dropped NOOP stays pending in go-imap until the connection closes;
//     nothing waits for it.)
//
// The first connection to a host therefore waits for its LOGIN's answer,
// and sends its opening one round trip later; every later connection to
// a host known to keep them sends the opening with the LOGIN. What is
// learned is recorded in the Server (Server.afterLogin), once per host.

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// afterLogin is what is known about commands sent behind a LOGIN on a
// server, and how it was learned (for the log and the tests).
type afterLogin struct {
	keeps bool
	// by: "greeting", "ID" or "probe".
	by string
}

// probeGrace is how long a probe waits, once the second NOOP is answered,
// for the go-imap goroutine that saw the first one's answer to say so. A
// server that kept the first NOOP answered it before the second, so only
// a scheduling delay is waited for; a server that drops it costs this
// once, on its first connection.
const probeGrace = 100 * time.Millisecond

// keepsAfterLogin says whether commands may be sent behind a LOGIN on the
// server s describes: only when it is known to keep them.
func (s *Server) keepsAfterLogin() bool {
	if s == nil {
		return false
	}
	v := s.afterLogin.Load()
	return v != nil && v.keeps
}

// afterLoginKnown says whether s knows what the server does with commands
// behind a LOGIN.
func (s *Server) afterLoginKnown() bool { return s != nil && s.afterLogin.Load() != nil }

// noteAfterLogin records v for s unless something is known already.
func (s *Server) noteAfterLogin(v *afterLogin) {
	if s != nil && v != nil {
		s.afterLogin.CompareAndSwap(nil, v)
	}
}

// afterLoginOf is what a server that calls itself name (its greeting's
// text, or its name in ID) does with commands behind a LOGIN; nil when the
// name says nothing.
func afterLoginOf(name, by string) *afterLogin {
	switch n := strings.ToLower(name); {
	case strings.Contains(n, "courier"):
		return &afterLogin{keeps: false, by: by}
	case strings.Contains(n, "dovecot"), strings.Contains(n, "cyrus"):
		return &afterLogin{keeps: true, by: by}
	}
	return nil
}

// loginProbe is the NOOP sent behind a LOGIN on a server not known yet.
type loginProbe struct {
	done chan struct{} // closed once the NOOP has ended
	err  error         // how it ended: read after done
}

// startProbe sends the probe's NOOP, behind a LOGIN already sent.
func startProbe(c *imapclient.Client) *loginProbe {
	p := &loginProbe{done: make(chan struct{})}
	noop := c.Noop()
	go func() {
		// Returns when the server answers, or when the connection
		// closes (a server that dropped the NOOP never answers it).
		p.err = noop.Wait()
		close(p.done)
	}()
	return p
}

// judged says what the server did with the probe's NOOP, once a command
// sent after it has been answered: a server that keeps commands behind a
// LOGIN answered the NOOP first. nil when the connection closed first.
func (p *loginProbe) judged() *afterLogin {
	t := time.NewTimer(probeGrace)
	defer t.Stop()
	select {
	case <-p.done:
		if p.err != nil && !asIMAP(p.err, new(*imap.Error)) {
			return nil
		}
		return &afterLogin{keeps: true, by: "probe"}
	case <-t.C:
		return &afterLogin{keeps: false, by: "probe"}
	}
}

// settleLogin finishes learning on conn, a logged-in connection, before an
// operation uses it: the server itself (learn) when this host has not been
// learned yet, so that every later connection knows what it may send
// behind its LOGIN; else what the server does with commands behind a
// LOGIN, when that is still unknown and a probe went behind this
// connection's LOGIN (a NOOP waited for judges it). Both happen once per
// host, not per call.
func (c *Client) settleLogin(conn *Conn) error {
	srv := conn.host.server()
	if srv == nil {
		_, err := c.learn(conn)
		return err
	}
	p := conn.probe
	if p == nil {
		return nil
	}
	conn.probe = nil
	if srv.afterLoginKnown() {
		return nil
	}
	if err := conn.client().Noop().Wait(); err != nil {
		return imapError(err, "")
	}
	srv.noteAfterLogin(p.judged())
	return nil
}

// afterLoginOn is what conn tells of its server's handling of commands
// behind a LOGIN, after at least one command sent after its LOGIN was
// answered: its greeting, else its probe (nil when neither tells).
func (conn *Conn) afterLoginOn() *afterLogin {
	if v := afterLoginOf(conn.greet.greeting(), "greeting"); v != nil {
		return v
	}
	if p := conn.probe; p != nil {
		conn.probe = nil
		return p.judged()
	}
	return nil
}

// greetingConn is a connection that keeps the first line the server sends
// (its greeting), at most maxGreeting bytes: go-imap does not hand out the
// greeting's text.
type greetingConn struct {
	net.Conn
	mu   sync.Mutex
	line []byte
	done bool
}

const maxGreeting = 1024

func (g *greetingConn) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if n > 0 {
		g.mu.Lock()
		if !g.done {
			b := p[:n]
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				b, g.done = b[:i], true
			}
			g.line = append(g.line, b[:min(len(b), maxGreeting-len(g.line))]...)
			if len(g.line) >= maxGreeting {
				g.done = true
			}
		}
		g.mu.Unlock()
	}
	return n, err
}

// greeting is the greeting's text as far as it has arrived.
func (g *greetingConn) greeting() string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return strings.TrimRight(string(g.line), "\r")
}

// logAfterLogin says, once a server is learned, what new connections to
// it send behind a LOGIN.
func (c *Client) logAfterLogin(s *Server) {
	switch v := s.afterLogin.Load(); {
	case v == nil:
		c.log.Info("not known yet whether the mail server keeps commands sent behind LOGIN; new connections wait for the LOGIN's answer")
	case !v.keeps:
		c.log.Info("the mail server drops commands sent behind LOGIN (as Courier's imaplogin does); new connections wait for the LOGIN's answer", "learned_from", v.by)
	default:
		c.log.Debug("the mail server keeps commands sent behind LOGIN; new connections send a call's first commands with it", "learned_from", v.by)
	}
}
