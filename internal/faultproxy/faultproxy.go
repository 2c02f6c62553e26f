// Package faultproxy is a protocol-aware TCP proxy for tests: it puts a
// fault at an exact step of an IMAP or SMTP conversation, which a
// byte-level fault injector (toxiproxy) cannot aim at: lose the answer to
// one STORE after the server applied it, reset the connection after the
// final dot of a DATA once the server has taken the message, stall in the
// middle of an answer.
//
// It terminates TLS with the test server's own certificate (so the client
// still verifies a real chain) and speaks TLS to the real server, reading
// the commands in between line by line. It knows no more of either
// protocol than "a command is a line": a fault is armed by a function that
// recognises the line, and fires once.
//
// It is for tests and the fault suite only: it runs on loopback and keeps
// nothing.
package faultproxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// Config says what the proxy forwards to and how.
type Config struct {
	// Target is the real server, host:port.
	Target string
	// ServerTLS, when set, terminates TLS from the client with it (its
	// certificate is the real server's, so the client's checks hold).
	ServerTLS *tls.Config
	// ClientTLS, when set, speaks TLS to Target with it.
	ClientTLS *tls.Config
}

// Action is what a fault does once its command has been seen.
type Action int

const (
	// LoseAnswer forwards the command, waits for the server's first
	// answer bytes (so the server has acted on it), drops them and resets
	// the client's connection: the server did it, the client cannot know.
	LoseAnswer Action = iota
	// ResetBefore resets the client's connection instead of forwarding
	// the command: the server never sees it.
	ResetBefore
	// StallAnswer forwards the command and then Bytes bytes of the
	// server's answer, and nothing more: the server goes silent mid-answer
	// while the connection stays open.
	StallAnswer
)

// Fault is one fault at one step: the first command line (CRLF included)
// for which Match is true, on any connection, triggers Action there.
type Fault struct {
	Match  func(line []byte) bool
	Action Action
	// Bytes is how much of the answer StallAnswer lets through.
	Bytes int
}

// Proxy forwards connections to one server. Its methods are safe for
// concurrent use.
type Proxy struct {
	cfg Config
	ln  net.Listener

	mu     sync.Mutex
	faults []*armed
	conns  map[*conn]struct{}
	total  int
	closed bool
	wg     sync.WaitGroup
}

type armed struct {
	Fault
	fired chan struct{}
	once  sync.Once
}

// Start listens on a loopback port.
func Start(cfg Config) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, ln: ln, conns: map[*conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port; Host and Port are its parts.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }
func (p *Proxy) Host() string { return p.ln.Addr().(*net.TCPAddr).IP.String() }
func (p *Proxy) Port() int    { return p.ln.Addr().(*net.TCPAddr).Port }

// Arm adds a fault; the channel it returns is closed once it has fired.
func (p *Proxy) Arm(f Fault) <-chan struct{} {
	a := &armed{Fault: f, fired: make(chan struct{})}
	p.mu.Lock()
	p.faults = append(p.faults, a)
	p.mu.Unlock()
	return a.fired
}

// Open is the number of client connections open now; Total the number
// accepted since Start.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (p *Proxy) Total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// Close stops listening, ends every connection and waits for them.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.kill()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// take returns the first armed fault whose Match is true for line, and
// disarms it.
func (p *Proxy) take(line []byte) *armed {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, a := range p.faults {
		if a.Match(line) {
			p.faults = append(p.faults[:i], p.faults[i+1:]...)
			return a
		}
	}
	return nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		raw, err := p.ln.Accept()
		if err != nil {
			return
		}
		c := &conn{client: raw, stalled: make(chan struct{}), dead: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			raw.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.total++
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			p.serve(c)
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
		}()
	}
}

// conn is one proxied connection.
type conn struct {
	client, server net.Conn // as accepted and dialled (TCP)
	cl, sv         net.Conn // what is read and written (TLS when set)

	mu sync.Mutex
	// drop: the server's answers are no longer forwarded; gotAnswer is
	// closed when the first bytes arrive after drop was set.
	drop      bool
	gotAnswer chan struct{}
	// stallAfter: forward this many more bytes of the server's, then none.
	stallAfter int
	stalling   bool
	stalled    chan struct{} // closed when the stall begins
	dead       chan struct{} // closed by kill
	killOnce   sync.Once
}

// kill resets the client's connection and closes the server's.
func (c *conn) kill() {
	c.killOnce.Do(func() {
		close(c.dead)
		if tc, ok := c.client.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.client.Close()
		if c.server != nil {
			c.server.Close()
		}
	})
}

// hangUp closes the client's connection the way a server that ends it
// does (a TLS close_notify, then FIN), and the server's.
func (c *conn) hangUp() {
	c.killOnce.Do(func() {
		close(c.dead)
		c.cl.Close()
		c.client.Close()
		if c.server != nil {
			c.server.Close()
		}
	})
}

func (p *Proxy) serve(c *conn) {
	defer c.kill()
	c.cl = c.client
	if p.cfg.ServerTLS != nil {
		tc := tls.Server(c.client, p.cfg.ServerTLS)
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			return
		}
		tc.SetDeadline(time.Time{})
		c.cl = tc
	}
	server, err := net.DialTimeout("tcp", p.cfg.Target, 10*time.Second)
	if err != nil {
		return
	}
	c.mu.Lock()
	c.server = server
	c.mu.Unlock()
	c.sv = server
	if p.cfg.ClientTLS != nil {
		tc := tls.Client(server, p.cfg.ClientTLS)
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			return
		}
		tc.SetDeadline(time.Time{})
		c.sv = tc
	}
	down := make(chan struct{})
	go func() {
		defer close(down)
		c.downstream()
		// The server ended the connection (or a fault did): so does the
		// client's side, politely, as the server did.
		c.hangUp()
	}()
	p.upstream(c)
	c.kill()
	<-down
}

// upstream forwards the client's lines to the server, firing a fault at
// the line it is armed for.
func (p *Proxy) upstream(c *conn) {
	r := bufio.NewReaderSize(c.cl, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			err = nil // a long line (a literal): forwarded in parts
		}
		if len(line) > 0 {
			if a := p.take(line); a != nil {
				p.fire(c, a, line)
				return
			}
			if _, werr := c.sv.Write(line); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// fire carries out a's action for line on c. It returns when the client's
// side is done with (reset, or closed by the client during a stall).
func (p *Proxy) fire(c *conn, a *armed, line []byte) {
	defer a.once.Do(func() { close(a.fired) })
	switch a.Action {
	case ResetBefore:
		return // the caller resets
	case LoseAnswer:
		c.mu.Lock()
		c.drop, c.gotAnswer = true, make(chan struct{})
		got := c.gotAnswer
		c.mu.Unlock()
		if _, err := c.sv.Write(line); err != nil {
			return
		}
		select {
		case <-got:
		case <-c.dead:
		case <-time.After(10 * time.Second):
		}
	case StallAnswer:
		c.mu.Lock()
		c.stallAfter, c.stalling = a.Bytes, true
		c.mu.Unlock()
		if _, err := c.sv.Write(line); err != nil {
			return
		}
		select {
		case <-c.stalled:
		case <-c.dead:
			return
		}
		a.once.Do(func() { close(a.fired) })
		// Silent until the client gives up: read (and drop) what it
		// sends, so that its close is seen.
		buf := make([]byte, 4096)
		for {
			if _, err := c.cl.Read(buf); err != nil {
				return
			}
		}
	}
}

// downstream forwards the server's bytes to the client, unless a fault
// drops or stalls them.
func (c *conn) downstream() {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.sv.Read(buf)
		if n > 0 {
			b := buf[:n]
			c.mu.Lock()
			drop, stalling := c.drop, c.stalling
			if drop && c.gotAnswer != nil {
				close(c.gotAnswer)
				c.gotAnswer = nil
			}
			var stallNow bool
			if stalling {
				if len(b) >= c.stallAfter {
					b, stallNow = b[:c.stallAfter], true
					c.stalling = false
				} else {
					c.stallAfter -= len(b)
				}
			}
			c.mu.Unlock()
			if !drop && len(b) > 0 {
				if _, werr := c.cl.Write(b); werr != nil {
					return
				}
			}
			if stallNow {
				close(c.stalled)
				// Hold the server's side open and forward nothing more.
				for {
					if _, err := c.sv.Read(buf); err != nil {
						return
					}
				}
			}
		}
		if err != nil {
			return
		}
	}
}
