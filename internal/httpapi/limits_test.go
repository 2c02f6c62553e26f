package httpapi

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawPost opens a connection to addr and sends a POST declaring length
// bytes of body, of which it sends only send bytes, in the background (the
// server may stop reading or close).
func rawPost(t *testing.T, addr string, length, send int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", length)
	if send > 0 {
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		go c.Write(bytes.Repeat([]byte(" "), send))
	}
	return c
}

// readResponse reads one HTTP response from c within d.
func readResponse(t *testing.T, c net.Conn, d time.Duration) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response within %v: %v", d, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d", len(b))
	})
}

// The budget bounds the body bytes all requests hold together: a second
// large body is refused at once with 503 and Retry-After while the first
// holds the budget, small calls still pass, and everything comes back when
// the requests end.
func TestBodyBudget(t *testing.T) {
	const max, total = 1 << 20, 2 << 20
	budget := newByteBudget(total)
	srv := httptest.NewServer(readBody(max, budget, 5*time.Second, echo()))
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	holder := rawPost(t, addr, max, max-10)
	waitFor(t, 5*time.Second, "the first body to use the budget", func() bool { return budget.free.Load() <= total-(max-freeBodyBytes) })

	start := time.Now()
	second := rawPost(t, addr, max, max-10)
	resp, body := readResponse(t, second, 2*time.Second)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !resp.Close {
		t.Fatalf("second large body: %d %q Retry-After=%q close=%v, want 503 with Retry-After, closing", resp.StatusCode, body, resp.Header.Get("Retry-After"), resp.Close)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the refusal took %v", d)
	}

	// A small call needs nothing from the budget.
	small := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	r, err := http.Post(srv.URL, "application/json", strings.NewReader(small))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || string(b) != fmt.Sprint(len(small)) {
		t.Fatalf("small call while the budget is used up: %d %s", r.StatusCode, b)
	}

	// The first body completes; its bytes come back when it ends.
	holder.Write(bytes.Repeat([]byte(" "), 10))
	resp, body = readResponse(t, holder, 5*time.Second)
	if resp.StatusCode != 200 || body != fmt.Sprint(max) {
		t.Fatalf("first body: %d %s", resp.StatusCode, body)
	}
	waitFor(t, 2*time.Second, "the budget to be given back", func() bool { return budget.free.Load() == total })

	r, err = http.Post(srv.URL, "application/json", bytes.NewReader(make([]byte, max)))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("a full-size body after the budget came back: %d", r.StatusCode)
	}
	waitFor(t, 2*time.Second, "the budget to be given back", func() bool { return budget.free.Load() == total })
}

func TestBodyReaderAccounting(t *testing.T) {
	for _, tc := range []struct {
		name          string
		size, declare int64
	}{
		{"empty", 0, 0},
		{"small", 1000, 1000},
		{"just over the free part", freeBodyBytes + 1, freeBodyBytes + 1},
		{"large", 700 << 10, 700 << 10},
		{"large, chunked", 700 << 10, -1},
		{"at the limit, chunked", 1 << 20, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			budget := newByteBudget(4 << 20)
			br := &bodyReader{budget: budget, max: 1 << 20}
			body, err := br.read(bytes.NewReader(make([]byte, tc.size)), tc.declare)
			if err != nil || int64(len(body)) != tc.size {
				t.Fatalf("read %d bytes, %v", len(body), err)
			}
			held := max(0, int64(cap(body))-freeBodyBytes)
			if used := 4<<20 - budget.free.Load(); used != held {
				t.Fatalf("budget used %d, the buffer holds %d beyond the free part", used, held)
			}
			if tc.declare >= 0 && int64(cap(body)) > tc.declare+1 {
				t.Fatalf("buffer of %d for a declared %d", cap(body), tc.declare)
			}
			br.release()
			if budget.free.Load() != 4<<20 {
				t.Fatalf("after release %d", budget.free.Load())
			}
		})
	}
	// Over the limit, chunked: refused, and nothing stays taken.
	budget := newByteBudget(4 << 20)
	br := &bodyReader{budget: budget, max: 1 << 20}
	if _, err := br.read(bytes.NewReader(make([]byte, 1<<20+1)), -1); err != errTooLarge {
		t.Fatalf("over the limit: %v", err)
	}
	br.release()
	if budget.free.Load() != 4<<20 {
		t.Fatalf("after release %d", budget.free.Load())
	}
}

// A body that does not arrive in time gets 408 and a closed connection;
// the deadline ends with the body, so a long call after it is not cut.
func TestBodyReadTimeout(t *testing.T) {
	var mu sync.Mutex
	var ctxErr error
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
		mu.Lock()
		ctxErr = r.Context().Err()
		mu.Unlock()
		w.Write([]byte("done"))
	})
	budget := newByteBudget(1 << 20)
	srv := httptest.NewServer(readBody(1<<20, budget, 300*time.Millisecond, slow))
	defer srv.Close()

	start := time.Now()
	c := rawPost(t, srv.Listener.Addr().String(), 100_000, 50_000)
	resp, _ := readResponse(t, c, 3*time.Second)
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Fatalf("stalled body: %d close=%v, want 408 and close", resp.StatusCode, resp.Close)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("dropped after %v", d)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection not closed after 408: %v", err)
	}
	waitFor(t, 2*time.Second, "the budget to be given back", func() bool { return budget.free.Load() == 1<<20 })

	for _, body := range []string{`{}`, ``} {
		r, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		mu.Lock()
		if r.StatusCode != 200 || string(b) != "done" || ctxErr != nil {
			t.Fatalf("a call with body %q running past the body deadline: %d %q, context %v", body, r.StatusCode, b, ctxErr)
		}
		mu.Unlock()
	}
}

func TestInflightLimit(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	h := limitInflight(2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if r, err := http.Get(srv.URL); err == nil {
				r.Body.Close()
			}
		})
	}
	<-entered
	<-entered
	r, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") != retryAfter || !r.Close {
		t.Fatalf("third request: %d Retry-After=%q close=%v", r.StatusCode, r.Header.Get("Retry-After"), r.Close)
	}
	close(release)
	wg.Wait()
	r, err = http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("after the others ended: %d", r.StatusCode)
	}
}

// Idle keep-alive connections count; a connection over the cap gets a 503
// and is closed instead of waiting; a closed connection frees its place.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitListener(inner, 2, "v-test").(*limitListener)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })}
	go srv.Serve(ln)
	defer srv.Close()
	addr := inner.Addr().String()

	get := func(c net.Conn) *http.Response {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
		resp, _ := readResponse(t, c, 2*time.Second)
		return resp
	}
	var idle []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if resp := get(c); resp.StatusCode != 200 || resp.Close {
			t.Fatalf("connection under the cap: %d close=%v", resp.StatusCode, resp.Close)
		}
		idle = append(idle, c)
	}
	if n := ln.Open(); n != 2 {
		t.Fatalf("%d open, want 2 idle keep-alive connections", n)
	}

	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp := get(c)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !resp.Close {
		t.Fatalf("over the cap: %d Retry-After=%q close=%v", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("refused connection not closed: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("refusal took %v", d)
	}

	// A health check over the cap is still answered.
	for _, method := range []string{"GET", "HEAD"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "%s /health HTTP/1.1\r\nHost: localhost\r\n\r\n", method)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%s /health over the cap: %v", method, err)
		}
		body, _ := io.ReadAll(resp.Body)
		wantBody := `{"service":"mailbox-mcp","status":"ok","version":"v-test"}`
		if method == "HEAD" {
			wantBody = ""
		}
		if resp.StatusCode != 200 || string(body) != wantBody || !resp.Close {
			t.Fatalf("%s /health over the cap: %d %q close=%v", method, resp.StatusCode, body, resp.Close)
		}
	}
	if n := ln.Open(); n != 2 {
		t.Fatalf("%d open after refusals, want 2", n)
	}

	idle[0].Close()
	waitFor(t, 2*time.Second, "the closed connection to free its place", func() bool { return ln.Open() == 1 })
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if resp := get(c2); resp.StatusCode != 200 {
		t.Fatalf("after a connection closed: %d", resp.StatusCode)
	}
}

// /health answers while every /mcp slot is taken.
func TestHealthWhileMCPFull(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	mcp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	})
	h := New(Options{MaxRequestBytes: 1 << 20, MaxInflightRequests: 1, MaxBufferedBytes: 1 << 20,
		BodyReadTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)}, mcp)
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer close(release) // before Close, which waits for the handler
	go func() {
		if r, err := http.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`)); err == nil {
			r.Body.Close()
		}
	}()
	<-entered
	r, err := http.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/mcp over the cap: %d", r.StatusCode)
	}
	r, err = http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("/health while /mcp is full: %d", r.StatusCode)
	}
}
