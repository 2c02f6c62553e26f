// Package rttproxy is a TCP proxy for tests and benchmarks that puts a
// network between a client and a server on one machine: it holds each chunk
// for half a round trip in each direction, and counts the round trips each
// connection used, so that a test can pin them and a benchmark can show
// what a remote mail server costs.
//
// A round trip is counted for each TCP connection (its handshake, which the
// proxy does not delay: the kernel answers it at once on loopback) and for
// each flight of the client: bytes the client sends after the proxy has
// handed it something from the server since its last bytes. Bytes a client
// writes before any answer arrived (pipelined commands, TLS Finished with the
// first command) are one flight. With a round trip of a few milliseconds or
// more the count does not depend on scheduling: a pipelined burst is written
// long before the answer to its first command could arrive.
package rttproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Counts is what crossed the proxy.
type Counts struct {
	Conns      int   // TCP connections accepted
	Flights    int   // client flights (see the package comment)
	BytesUp    int64 // client to server
	BytesDown  int64 // server to client
	RoundTrips int   // Conns + Flights
}

// Proxy forwards connections to one target. Its methods are safe for
// concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	rtt    atomic.Int64 // time.Duration

	mu     sync.Mutex
	counts Counts
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a loopback port and forwards each connection to target
// (host:port), delaying each direction by rtt/2.
func Start(target string, rtt time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.rtt.Store(int64(rtt))
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Host and Port are Addr's parts.
func (p *Proxy) Host() string { return p.ln.Addr().(*net.TCPAddr).IP.String() }
func (p *Proxy) Port() int    { return p.ln.Addr().(*net.TCPAddr).Port }

// SetRTT changes the round trip for chunks read from now on.
func (p *Proxy) SetRTT(rtt time.Duration) { p.rtt.Store(int64(rtt)) }

// Counts is what has crossed the proxy since it started or was last Reset.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts
	c.RoundTrips = c.Conns + c.Flights
	return c
}

// Reset returns Counts and starts counting again from zero.
func (p *Proxy) Reset() Counts {
	p.mu.Lock()
	c := p.counts
	p.counts = Counts{}
	p.mu.Unlock()
	c.RoundTrips = c.Conns + c.Flights
	return c
}

// Close stops listening and closes every connection through the proxy.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Add(1)
		go p.relay(client, server)
	}
}

// track registers a connection pair so that Close reaches it; false when
// the proxy is closing.
func (p *Proxy) track(client, server net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		client.Close()
		server.Close()
		return false
	}
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	p.counts.Conns++
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
		c.Close()
	}
}

// relay runs both directions of one connection until both have ended.
func (p *Proxy) relay(client, server net.Conn) {
	defer p.wg.Done()
	// answered: the proxy has handed the client server bytes since the
	// client's last bytes (the next client bytes are a new flight).
	var answered atomic.Bool
	answered.Store(true)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		p.pipe(client, server, func(n int) {
			p.mu.Lock()
			if answered.Swap(false) {
				p.counts.Flights++
			}
			p.counts.BytesUp += int64(n)
			p.mu.Unlock()
		}, nil)
	}()
	go func() {
		defer wg.Done()
		p.pipe(server, client, func(n int) {
			p.mu.Lock()
			p.counts.BytesDown += int64(n)
			p.mu.Unlock()
		}, func() { answered.Store(true) })
	}()
	wg.Wait()
	p.untrack(client, server)
}

type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst, each chunk held until half a round trip after it
// was read. read is told of each chunk as it is read, delivered as it is
// about to be written. When src ends, dst's write side is shut.
func (p *Proxy) pipe(src, dst net.Conn, read func(int), delivered func()) {
	// Buffered deeply enough that a reader never waits for the writer's
	// delay (the delay is latency, not a bandwidth limit).
	ch := make(chan chunk, 4096)
	go func() {
		defer close(ch)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				read(n)
				ch <- chunk{b: buf[:n], due: time.Now().Add(time.Duration(p.rtt.Load()) / 2)}
			}
			if err != nil {
				return
			}
		}
	}()
	failed := false
	for c := range ch {
		if failed {
			continue // drain, so the reader ends
		}
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
		}
		// Told before the write: a client that reads the bytes may
		// answer before Write returns here.
		if delivered != nil {
			delivered()
		}
		if _, err := dst.Write(c.b); err != nil {
			failed = true
			src.Close()
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok && !failed {
		if err := tc.CloseWrite(); err == nil {
			return
		}
	}
	dst.Close()
}
