package submission

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// dataServer is a plain SMTP server that takes every command and, after
// the DATA's 354, reads the message up to its final dot and then does
// what end says (answer, reset, stay silent). It records whether it saw
// the whole message.
type dataServer struct {
	end      func(c net.Conn)
	pipeline bool
	// midData, when set, replaces reading the message: what the server
	// does right after its 354 (read a little and reset, stall).
	midData func(c net.Conn, r *bufio.Reader)

	mu       sync.Mutex
	complete int // messages read up to their final dot
}

func (d *dataServer) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	c.Write([]byte("220 fake ESMTP\r\n"))
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"):
			ext := "250-fake\r\n"
			if d.pipeline {
				ext += "250-PIPELINING\r\n"
			}
			c.Write([]byte(ext + "250 AUTH PLAIN\r\n"))
		case strings.HasPrefix(cmd, "AUTH"):
			c.Write([]byte("235 2.7.0 ok\r\n"))
		case strings.HasPrefix(cmd, "MAIL"), strings.HasPrefix(cmd, "RCPT"):
			c.Write([]byte("250 2.1.0 ok\r\n"))
		case cmd == "DATA":
			c.Write([]byte("354 go ahead\r\n"))
			if d.midData != nil {
				d.midData(c, r)
				return
			}
			var msg bytes.Buffer
			for !bytes.HasSuffix(msg.Bytes(), []byte("\r\n.\r\n")) {
				b, err := r.ReadByte()
				if err != nil {
					return
				}
				msg.WriteByte(b)
			}
			d.mu.Lock()
			d.complete++
			d.mu.Unlock()
			d.end(c)
			return
		case cmd == "QUIT":
			c.Write([]byte("221 bye\r\n"))
			return
		}
	}
}

func (d *dataServer) completed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.complete
}

// failDot is a connection whose write of the final dot fails with a
// reset, as when the server resets the connection just before it; every
// write before it goes through.
type failDot struct {
	net.Conn
}

func (f *failDot) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("\r\n.\r\n")) {
		f.Conn.Close()
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return f.Conn.Write(b)
}

func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// Only a lost answer after the whole message, final dot included, was
// written makes a send ambiguous ("may have been sent"). A write of the
// final dot that fails means the server never had the end of the DATA, so
// nothing was sent; and the sentence states facts only: no advice to try
// again, which the tools layer adds once, where it is safe.
func TestOnlyALostAnswerIsAmbiguous(t *testing.T) {
	creds := credentials.New("u@fake.test", "pw")
	msg := "From: u@fake.test\r\nTo: x@fake.test\r\nSubject: dot\r\n\r\nbody\r\n"
	for _, tc := range []struct {
		name      string
		end       func(net.Conn)
		failDot   bool
		timeout   time.Duration
		kind      mailerr.Kind
		want      string
		completed int
	}{
		// The server resets the connection as the dot is written: the
		// write fails, the server cannot have the message.
		{"write of the dot fails", func(c net.Conn) {}, true, 5 * time.Second, mailerr.Unavailable, "nothing was sent", 0},
		// The server read the dot, then reset without answering.
		{"reset after the dot", resetConn, false, 5 * time.Second, mailerr.Unavailable, "the whole message had been transmitted, so it may have been sent", 1},
		// The server read the dot and never answers.
		{"silence after the dot", func(c net.Conn) { time.Sleep(3 * time.Second) }, false, time.Second, mailerr.Timeout, "the whole message had been transmitted, so it may have been sent", 1},
		// The server refuses the message after the dot: nothing was sent.
		{"451 after the dot", func(c net.Conn) { c.Write([]byte("451 4.3.0 queue full\r\n")) }, false, 5 * time.Second, mailerr.Temporary, "temporary failure (451 4.3.0 queue full); nothing was sent", 1},
	} {
		for _, pipelined := range []bool{false, true} {
			name := tc.name
			if pipelined {
				name += ", pipelined"
			}
			t.Run(name, func(t *testing.T) {
				d := &dataServer{end: tc.end, pipeline: pipelined}
				host, port := mailtest.Listen(t, d.serve)
				c := New(Config{Host: host, Port: port, Security: transport.Plain, AllowPlaintextAuth: true, Timeout: tc.timeout}, nil)
				if tc.failDot {
					c.cfg.dial = func(ctx context.Context, ep transport.Endpoint) (net.Conn, error) {
						conn, err := transport.Dial(ctx, ep)
						if err != nil {
							return nil, err
						}
						return &failDot{Conn: conn}, nil
					}
				}
				_, err := c.Send(context.Background(), creds, "u@fake.test", []string{"x@fake.test"}, strings.NewReader(msg))
				if mailerr.KindOf(err) != tc.kind {
					t.Errorf("kind %v, want %v: %v", mailerr.KindOf(err), tc.kind, err)
				}
				text := mailerr.Message(err)
				if !strings.Contains(text, tc.want) {
					t.Errorf("message %q does not say %q", text, tc.want)
				}
				if tc.want == "nothing was sent" && strings.Contains(text, "may have been sent") {
					t.Errorf("message %q calls a send ambiguous whose final dot never left", text)
				}
				for _, advice := range []string{"try again", "retry", "check before"} {
					if strings.Contains(text, advice) {
						t.Errorf("message %q gives advice (%q): the submission layer states facts", text, advice)
					}
				}
				time.Sleep(20 * time.Millisecond)
				if got := d.completed(); got != tc.completed {
					t.Errorf("the server read %d whole messages, want %d", got, tc.completed)
				}
			})
		}
	}
}

// A write that fails in the middle of the message (the server resets the
// connection during DATA) is "nothing was sent", and so is the call's end
// while the message was still being written.
func TestBrokenDuringDataSentNothing(t *testing.T) {
	creds := credentials.New("u@fake.test", "pw")
	// The server reads 1 KB of a 4 MB message and resets.
	resetEarly := (&dataServer{midData: func(c net.Conn, r *bufio.Reader) {
		r.Read(make([]byte, 1024))
		resetConn(c)
	}}).serve
	// The server takes the DATA and then reads nothing more.
	stall := (&dataServer{midData: func(net.Conn, *bufio.Reader) { time.Sleep(3 * time.Second) }}).serve
	big := "Subject: big\r\n\r\n" + strings.Repeat(strings.Repeat("x", 998)+"\r\n", 4<<10)
	for _, tc := range []struct {
		name  string
		serve func(net.Conn)
		kind  mailerr.Kind
	}{
		{"reset during DATA", resetEarly, mailerr.Unavailable},
		{"server stops reading during DATA", stall, mailerr.Timeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, port := mailtest.Listen(t, tc.serve)
			c := New(Config{Host: host, Port: port, Security: transport.Plain, AllowPlaintextAuth: true, Timeout: time.Second}, nil)
			_, err := c.Send(context.Background(), creds, "u@fake.test", []string{"x@fake.test"}, strings.NewReader(big))
			text := mailerr.Message(err)
			if mailerr.KindOf(err) != tc.kind || !strings.HasSuffix(text, "; nothing was sent") || strings.Contains(text, "may have been sent") {
				t.Errorf("%v %q, want %v ending in \"; nothing was sent\"", mailerr.KindOf(err), text, tc.kind)
			}
		})
	}
}

// A connection reset or ended during the TLS handshake (implicit TLS, or
// after STARTTLS) is a broken connection, with nothing sent: never a
// certificate or protocol mismatch, nor a server without STARTTLS.
func TestBrokenHandshakeIsAConnectionFailure(t *testing.T) {
	creds := credentials.New("u@fake.test", "pw")
	closeIt := func(c net.Conn) { c.Close() }
	handshake := func(end func(net.Conn)) func(net.Conn) {
		return func(c net.Conn) { c.Read(make([]byte, 4096)); end(c) }
	}
	afterStartTLS := func(end func(net.Conn)) func(net.Conn) {
		return func(c net.Conn) {
			r := bufio.NewReader(c)
			c.Write([]byte("220 fake ESMTP\r\n"))
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				switch cmd := strings.ToUpper(strings.TrimSpace(line)); {
				case strings.HasPrefix(cmd, "EHLO"):
					c.Write([]byte("250-fake\r\n250 STARTTLS\r\n"))
				case cmd == "STARTTLS":
					c.Write([]byte("220 2.0.0 ready\r\n"))
					r.Read(make([]byte, 4096)) // the ClientHello
					end(c)
					return
				}
			}
		}
	}
	for _, tc := range []struct {
		name  string
		sec   transport.Security
		serve func(net.Conn)
	}{
		{"tls, reset", transport.TLS, handshake(resetConn)},
		{"tls, eof", transport.TLS, handshake(closeIt)},
		{"starttls, reset", transport.StartTLS, afterStartTLS(resetConn)},
		{"starttls, eof", transport.StartTLS, afterStartTLS(closeIt)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, port := mailtest.Listen(t, tc.serve)
			c := New(Config{Host: host, Port: port, Security: tc.sec, Timeout: 5 * time.Second}, nil)
			_, err := c.Send(context.Background(), creds, "u@fake.test", []string{"x@fake.test"}, strings.NewReader("Subject: x\r\n\r\nx\r\n"))
			text := mailerr.Message(err)
			if mailerr.KindOf(err) != mailerr.Unavailable || mailerr.Cause(err) != "closed" {
				t.Errorf("kind %v cause %q, want unavailable, closed: %v", mailerr.KindOf(err), mailerr.Cause(err), err)
			}
			if want := "the connection to the SMTP server broke while starting TLS with the SMTP server"; !strings.Contains(text, want) {
				t.Errorf("message %q does not say %q", text, want)
			}
			if !strings.HasSuffix(text, "; nothing was sent") {
				t.Errorf("message %q does not say that nothing was sent", text)
			}
			for _, wrong := range []string{"certificate", "mismatch", "does not offer STARTTLS"} {
				if strings.Contains(text, wrong) {
					t.Errorf("message %q blames the settings (%q) for a broken connection", text, wrong)
				}
			}
		})
	}
}
