package httpapi

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The limits in this file bound what anyone, before any credential check,
// can make the gateway hold: connections (LimitListener), requests in
// flight (limitInflight) and buffered request bodies (byteBudget, readBody).
// Each refusal is a quick 503 with Retry-After and a closed connection, so
// an attacker's load never waits in a queue that legitimate calls share.

// retryAfter is what every 503 here tells a client to wait, in seconds.
const retryAfter = "1"

// rawResponse is an HTTP/1.1 response written straight to a connection
// refused at accept: net/http never sees that connection.
func rawResponse(status string, extra string, body []byte, head bool) []byte {
	b := []byte("HTTP/1.1 " + status + "\r\n" +
		"Content-Type: application/json\r\n" + extra +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	if !head {
		b = append(b, body...)
	}
	return b
}

var busyResponse = rawResponse("503 Service Unavailable", "Retry-After: "+retryAfter+"\r\n",
	[]byte(`{"error":"the gateway has too many open connections; retry in a second"}`+"\n"), false)

// maxRefusing bounds the goroutines that answer refused connections; past
// it a refused connection is closed without an answer.
const maxRefusing = 64

// LimitListener returns ln limited to max open connections (0 means no
// limit). A connection counts from Accept until it is closed, idle
// keep-alive connections included. Over the limit a new connection gets a
// 503 and is closed at once, instead of waiting in the accept queue; only
// a health check (GET or HEAD /health) is still answered, as the mux
// would answer it for this version, so that a flood of connections does
// not make a liveness probe restart the gateway. (That answer leaves the
// dependencies out: it is made once, and only says the process is alive.)
func LimitListener(ln net.Listener, max int, version string) net.Listener {
	if max <= 0 {
		return ln
	}
	body := healthBody(version, nil)
	return &limitListener{Listener: ln, max: int64(max), refusing: make(chan struct{}, maxRefusing),
		healthGet:  rawResponse("200 OK", "Cache-Control: no-store\r\n", body, false),
		healthHead: rawResponse("200 OK", "Cache-Control: no-store\r\n", body, true)}
}

type limitListener struct {
	net.Listener
	max                   int64
	open                  atomic.Int64
	refusing              chan struct{}
	healthGet, healthHead []byte
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &countedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refuse(c)
	}
}

// refuse answers c with a 503 (or a health check with 200) and closes
// it, off the accept loop. The half-close and the short drain let the
// client read the answer instead of a reset.
func (l *limitListener) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		answer := busyResponse
		line, _ := bufio.NewReaderSize(io.LimitReader(c, 512), 512).ReadSlice('\n')
		switch {
		case bytes.HasPrefix(line, []byte("GET /health ")):
			answer = l.healthGet
		case bytes.HasPrefix(line, []byte("HEAD /health ")):
			answer = l.healthHead
		}
		if _, err := c.Write(answer); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.CopyN(io.Discard, c, 64<<10)
	}()
}

// Open reports the connections open now (for tests and metrics).
func (l *limitListener) Open() int64 { return l.open.Load() }

type countedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

// CloseWrite lets net/http half-close a connection it is about to drop
// with an unread body, so the client reads the answer instead of a reset.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// limitInflight answers 503 when max requests are already being served
// (0 means no limit).
func limitInflight(max int, next http.Handler) http.Handler {
	if max <= 0 {
		return next
	}
	slots := make(chan struct{}, max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		default:
			busy(w, "the gateway is serving too many requests; retry in a second")
			return
		}
		defer func() { <-slots }()
		next.ServeHTTP(w, r)
	})
}

// busy answers 503 and closes the connection: a client that is refused
// must not keep a connection slot while it waits.
func busy(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", retryAfter)
	w.Header().Set("Connection", "close")
	httpError(w, http.StatusServiceUnavailable, msg)
}

// byteBudget is the number of request-body bytes all requests together may
// hold in memory. Bytes are taken before they are read and given back when
// the request ends.
type byteBudget struct {
	free atomic.Int64
}

func newByteBudget(n int64) *byteBudget {
	b := &byteBudget{}
	b.free.Store(n)
	return b
}

func (b *byteBudget) take(n int64) bool {
	for {
		free := b.free.Load()
		if free < n {
			return false
		}
		if b.free.CompareAndSwap(free, free-n) {
			return true
		}
	}
}

func (b *byteBudget) give(n int64) { b.free.Add(n) }

// Body reading sizes. Every request may hold freeBodyBytes without touching
// the budget, so small calls (nearly all of them: a tools/call is about a
// kilobyte) are served even while large bodies have used the budget up; at
// most MAX_INFLIGHT_REQUESTS × freeBodyBytes is held that way.
const (
	freeBodyBytes  = 16 << 10
	firstBodyChunk = 4 << 10
)

var (
	errTooLarge     = errors.New("request body too large")
	errBudget       = errors.New("request body budget exhausted")
	errBodyTimeout  = errors.New("request body read timed out")
	errBodyReadFail = errors.New("could not read the request body")
)

// bodyReader reads one request body into memory under the global budget.
type bodyReader struct {
	budget *byteBudget
	max    int64
	held   int64 // bytes taken from the budget
}

// read returns the whole body of r, at most max bytes. The buffer grows by
// doubling (capped at a declared Content-Length and at max+1, which is how
// an over-long chunked body is noticed); each growth is taken from the
// budget before the bytes are read into it. The caller must call release.
func (b *bodyReader) read(r io.Reader, contentLength int64) ([]byte, error) {
	limit := b.max + 1
	if contentLength >= 0 {
		limit = contentLength + 1 // one more byte shows the end (EOF)
	}
	buf := make([]byte, 0, min(firstBodyChunk, limit))
	if err := b.hold(int64(cap(buf))); err != nil {
		return nil, err
	}
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > b.max {
				return nil, errTooLarge
			}
			n := min(int64(2*cap(buf)), limit)
			if n <= int64(cap(buf)) {
				return nil, errTooLarge // longer than its Content-Length
			}
			if err := b.hold(n); err != nil {
				return nil, err
			}
			grown := make([]byte, len(buf), n)
			copy(grown, buf)
			b.drop(int64(cap(buf)))
			buf = grown
		}
		k, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			if int64(len(buf)) > b.max {
				return nil, errTooLarge
			}
			return buf, nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				return nil, errTooLarge
			case errors.Is(err, os.ErrDeadlineExceeded):
				return nil, errBodyTimeout
			}
			return nil, errBodyReadFail
		}
	}
}

// hold accounts n more bytes: the first freeBodyBytes are free, the rest
// come from the budget.
func (b *bodyReader) hold(n int64) error {
	over := max(0, b.held+n-freeBodyBytes) - max(0, b.held-freeBodyBytes)
	if over > 0 && !b.budget.take(over) {
		return errBudget
	}
	b.held += n
	return nil
}

func (b *bodyReader) drop(n int64) {
	back := max(0, b.held-freeBodyBytes) - max(0, b.held-n-freeBodyBytes)
	b.held -= n
	b.budget.give(back)
}

// release gives back everything still held.
func (b *bodyReader) release() { b.drop(b.held) }

// readBody reads a POST body into memory before the handler runs: at most
// max bytes, within timeout, under the global budget. A declared
// Content-Length over the limit is refused before anything is read; a
// chunked body as soon as it passes the limit. The buffered bytes go back
// to the budget when the request ends. A body that is valid JSON with a
// duplicated object key is refused with a JSON-RPC parse error.
func readBody(max int64, budget *byteBudget, timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			w.Header().Set("Connection", "close")
			httpError(w, http.StatusRequestEntityTooLarge, "request body too large")
			return
		}
		if r.Body == nil || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if timeout > 0 && r.ContentLength != 0 {
			// Cleared by net/http once the body has been read to its end,
			// so it never cuts a long call short. (Without a body net/http
			// is already waiting in a background read, which a deadline
			// would end by cancelling the request.)
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
		}
		br := &bodyReader{budget: budget, max: max}
		defer br.release()
		body, err := br.read(http.MaxBytesReader(w, r.Body, max), r.ContentLength)
		switch err {
		case nil:
		case errTooLarge:
			w.Header().Set("Connection", "close")
			httpError(w, http.StatusRequestEntityTooLarge, "request body too large")
			return
		case errBudget:
			busy(w, "the gateway is buffering too many request bodies; retry in a second")
			return
		case errBodyTimeout:
			w.Header().Set("Connection", "close")
			httpError(w, http.StatusRequestTimeout, "the request body did not arrive in time")
			return
		default:
			w.Header().Set("Connection", "close")
			httpError(w, http.StatusBadRequest, "could not read the request body")
			return
		}
		if key, dup := duplicateKey(body); dup {
			jsonRPCParseError(w, "duplicate key "+quoteKey(key)+" in the request: every key may appear only once in an object (keys that differ only in letter case count as the same)")
			return
		}
		r.Body = &bytesBody{b: body}
		next.ServeHTTP(w, r)
	})
}

// bytesBody is the buffered body handed on to mcp-go.
type bytesBody struct {
	b []byte
	i int
}

func (b *bytesBody) Read(p []byte) (int, error) {
	if b.i >= len(b.b) {
		return 0, io.EOF
	}
	n := copy(p, b.b[b.i:])
	b.i += n
	return n, nil
}

func (b *bytesBody) Close() error { return nil }
