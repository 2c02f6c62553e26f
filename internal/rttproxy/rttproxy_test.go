package rttproxy_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/rttproxy"
)

// lineEcho answers each line with the line, like a command and its reply.
func lineEcho(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if _, err := c.Write([]byte(line)); err != nil {
			return
		}
	}
}

func start(t *testing.T, serve func(net.Conn), rtt time.Duration) *rttproxy.Proxy {
	t.Helper()
	host, port := mailtest.Listen(t, serve)
	p, err := rttproxy.Start(net.JoinHostPort(host, strconv.Itoa(port)), rtt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestRoundTripsAndDelay(t *testing.T) {
	const rtt = 40 * time.Millisecond
	p := start(t, lineEcho, rtt)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	ask := func(lines ...string) time.Duration {
		begin := time.Now()
		for _, l := range lines { // one write each: still one flight
			if _, err := c.Write([]byte(l + "\n")); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range lines {
			got, err := r.ReadString('\n')
			if err != nil || got != l+"\n" {
				t.Fatalf("got %q, %v; want %q", got, err, l)
			}
		}
		return time.Since(begin)
	}
	// Two commands one after the other: two flights, each a full round trip.
	for _, l := range []string{"a", "b"} {
		if d := ask(l); d < rtt || d > rtt+30*time.Millisecond {
			t.Errorf("a request and its answer took %v, want about %v", d, rtt)
		}
	}
	if got := p.Counts(); got.Conns != 1 || got.Flights != 2 || got.RoundTrips != 3 {
		t.Errorf("after two exchanges: %+v, want 1 connection and 2 flights", got)
	}
	// Three pipelined commands: one flight, one round trip of time.
	p.Reset()
	if d := ask("c", "d", "e"); d > rtt+30*time.Millisecond {
		t.Errorf("three pipelined commands took %v, want about one round trip (%v)", d, rtt)
	}
	if got := p.Counts(); got.Conns != 0 || got.Flights != 1 || got.BytesUp != 6 || got.BytesDown != 6 {
		t.Errorf("after a pipelined exchange: %+v, want one flight of 6 bytes each way", got)
	}
}

// TestLargeTransferAndHalfClose: bytes arrive intact and in order, and a
// client's half-close reaches the server (an upload, then the answer).
func TestLargeTransferAndHalfClose(t *testing.T) {
	sum := func(c net.Conn) { // reads to EOF, then answers the length
		n, _ := io.Copy(io.Discard, c)
		c.Write([]byte(strconv.Itoa(int(n))))
		c.Close()
	}
	p := start(t, sum, 10*time.Millisecond)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	payload := make([]byte, 3<<20+17)
	rand.Read(payload)
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != strconv.Itoa(len(payload)) {
		t.Fatalf("server saw %q bytes (%v), want %d", got, err, len(payload))
	}
	echo := start(t, func(c net.Conn) { io.Copy(c, c); c.Close() }, 10*time.Millisecond)
	e, err := net.Dial("tcp", echo.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	go func() { e.Write(payload); e.(*net.TCPConn).CloseWrite() }()
	back, err := io.ReadAll(e)
	if err != nil || !bytes.Equal(back, payload) {
		t.Fatalf("echoed %d bytes (%v), want the %d sent, equal", len(back), err, len(payload))
	}
}

func TestCloseEndsConnections(t *testing.T) {
	p := start(t, lineEcho, 0)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read after Close: %v, want the connection closed", err)
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("the proxy still accepts after Close")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
