package faultproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/faultproxy"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// lineServer answers each line "X" with "ok X" and records what it got.
type lineServer struct {
	mu  sync.Mutex
	got []string
}

func (s *lineServer) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return
		}
		l = strings.TrimRight(l, "\r\n")
		s.mu.Lock()
		s.got = append(s.got, l)
		s.mu.Unlock()
		if l == "big" {
			c.Write([]byte("ok " + strings.Repeat("b", 1000) + "\r\n"))
			continue
		}
		c.Write([]byte("ok " + l + "\r\n"))
	}
}

func (s *lineServer) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func start(t *testing.T) (*lineServer, *faultproxy.Proxy) {
	t.Helper()
	ls := &lineServer{}
	host, port := mailtest.Listen(t, ls.serve)
	p, err := faultproxy.Start(faultproxy.Config{Target: net.JoinHostPort(host, strconv.Itoa(port))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return ls, p
}

func is(cmd string) func([]byte) bool {
	return func(l []byte) bool { return string(l) == cmd+"\r\n" }
}

func dial(t *testing.T, p *faultproxy.Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c, bufio.NewReader(c)
}

// Lines pass both ways until a fault's line: LoseAnswer lets the server
// act on it and the client gets a reset instead of the answer.
func TestLoseAnswer(t *testing.T) {
	ls, p := start(t)
	fired := p.Arm(faultproxy.Fault{Match: is("store"), Action: faultproxy.LoseAnswer})
	c, r := dial(t, p)
	c.Write([]byte("hello\r\n"))
	if l, err := r.ReadString('\n'); err != nil || l != "ok hello\r\n" {
		t.Fatalf("before the fault: %q %v", l, err)
	}
	c.Write([]byte("store\r\n"))
	_, err := r.ReadString('\n')
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after the lost answer: %v, want a reset", err)
	}
	<-fired
	if got := ls.received(); len(got) != 2 || got[1] != "store" {
		t.Fatalf("the server got %q, want hello and store", got)
	}
	// One shot: the next connection passes the same line.
	c2, r2 := dial(t, p)
	c2.Write([]byte("store\r\n"))
	if l, err := r2.ReadString('\n'); err != nil || l != "ok store\r\n" {
		t.Fatalf("a fired fault fired again: %q %v", l, err)
	}
}

// ResetBefore resets without forwarding the line.
func TestResetBefore(t *testing.T) {
	ls, p := start(t)
	p.Arm(faultproxy.Fault{Match: is("data"), Action: faultproxy.ResetBefore})
	c, r := dial(t, p)
	c.Write([]byte("data\r\n"))
	if _, err := r.ReadString('\n'); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%v, want a reset", err)
	}
	time.Sleep(50 * time.Millisecond)
	if got := ls.received(); len(got) != 0 {
		t.Fatalf("the server got %q", got)
	}
}

// StallAnswer lets Bytes of the answer through and then nothing, with the
// connection open; the client's close ends it.
func TestStallAnswer(t *testing.T) {
	_, p := start(t)
	p.Arm(faultproxy.Fault{Match: is("big"), Action: faultproxy.StallAnswer, Bytes: 10})
	c, _ := dial(t, p)
	c.Write([]byte("big\r\n"))
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	b, err := io.ReadAll(c)
	if !errors.Is(err, os.ErrDeadlineExceeded) || string(b) != "ok bbbbbbb" {
		t.Fatalf("read %q, %v; want the first 10 bytes and then silence", b, err)
	}
	if p.Open() != 1 {
		t.Fatalf("%d connections open during the stall, want 1", p.Open())
	}
	c.Close()
	for deadline := time.Now().Add(2 * time.Second); p.Open() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stalled connection was not closed after the client left")
		}
	}
}

// A server that ends the connection ends the client's too (not left
// hanging open).
func TestServerCloseReachesTheClient(t *testing.T) {
	host, port := mailtest.Listen(t, func(c net.Conn) { c.Write([]byte("bye\r\n")); c.Close() })
	p, err := faultproxy.Start(faultproxy.Config{Target: net.JoinHostPort(host, strconv.Itoa(port))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, r := dial(t, p)
	if l, err := r.ReadString('\n'); err != nil || l != "bye\r\n" {
		t.Fatalf("%q %v", l, err)
	}
	if _, err := r.ReadString('\n'); err != io.EOF {
		t.Fatalf("after the server closed: %v, want EOF", err)
	}
}
