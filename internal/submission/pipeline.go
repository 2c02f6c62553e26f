package submission

// PIPELINING (RFC 2920): MAIL, every RCPT and DATA leave in one flight, and
// QUIT is not waited for, so that a send at a round trip of 20 ms does not
// spend 40 ms more than it must on the envelope and 20 on the goodbye.
//
// go-smtp has no pipelining: each command waits for its answer. It is used
// as it is, over a connection that already carries the commands: the
// session writes them ahead in one Write (pipe.ahead), then calls go-smtp's
// Mail, Rcpt and Data as before; each writes its own command, which the
// connection drops (the same bytes are on the wire already), and reads its
// answer, so that go-smtp's parsing of answers and its errors serve as
// before. A command that is not the one written ahead is refused: go-smtp
// and the session would no longer agree on what the server answers.
//
// This works where the session owns the connection under go-smtp: implicit
// TLS and plain. After STARTTLS go-smtp owns the TLS connection, and the
// commands go one at a time.

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/emersion/go-smtp"
)

// pipe is the connection go-smtp writes to.
type pipe struct {
	net.Conn
	mu    sync.Mutex
	queue [][]byte // commands on the wire that go-smtp has not written yet
}

var errPipelineMismatch = errors.New("the SMTP client sent a command other than the one pipelined ahead of it")

func (p *pipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	if len(p.queue) > 0 {
		next := p.queue[0]
		if !bytes.Equal(next, b) {
			p.mu.Unlock()
			return 0, errPipelineMismatch
		}
		p.queue = p.queue[1:]
		p.mu.Unlock()
		return len(b), nil
	}
	p.mu.Unlock()
	return p.Conn.Write(b)
}

// ahead writes lines (commands without CRLF) in one flight; go-smtp's own
// writes of them are then dropped, in order.
func (p *pipe) ahead(lines []string) error {
	var all bytes.Buffer
	p.mu.Lock()
	for _, l := range lines {
		cmd := []byte(l + "\r\n")
		p.queue = append(p.queue, cmd)
		all.Write(cmd)
	}
	p.mu.Unlock()
	_, err := p.Conn.Write(all.Bytes())
	return err
}

// pending says how many commands went ahead that go-smtp has not written.
func (p *pipe) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// quit says QUIT without waiting for the answer: the message is accepted,
// and nothing the server says now changes anything.
func (p *pipe) quit() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		p.Conn.Write([]byte("QUIT\r\n"))
	}
}

// mailCommand is the MAIL command go-smtp's Mail writes for from and a
// message of size bytes (0: unknown) on sc: nothing but BODY=8BITMIME and
// SIZE, as the server offers them (MailOptions carries nothing else here).
func mailCommand(sc *smtp.Client, from string, size int64) string {
	cmd := "MAIL FROM:<" + from + ">"
	if ok, _ := sc.Extension("8BITMIME"); ok {
		cmd += " BODY=8BITMIME"
	}
	if ok, _ := sc.Extension("SIZE"); ok && size != 0 {
		cmd += fmt.Sprintf(" SIZE=%v", size)
	}
	return cmd
}
