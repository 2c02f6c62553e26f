package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// sizedServer serves New around answer, counting the TCP connections
// clients open.
func sizedServer(t *testing.T, answer http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	h := New(Options{MaxRequestBytes: 1 << 20, MaxInflightRequests: 8, MaxBufferedBytes: 4 << 20,
		BodyReadTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)}, answer)
	srv := httptest.NewUnstartedServer(h)
	var conns atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func postTo(t *testing.T, c *http.Client, url string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(listBody))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A JSON answer of more than net/http's buffers goes out with its length,
// byte for byte as written, so that a client that reads only the JSON
// value (mcp-go's: json.Decoder, then Close) keeps its connection; before,
// such answers were chunked and every call opened a new connection.
func TestSizedAnswerKeepsConnection(t *testing.T) {
	var want bytes.Buffer
	big := map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"blob": strings.Repeat("QUJD", 8000)}}
	json.NewEncoder(&want).Encode(big)
	srv, conns := sizedServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		json.NewEncoder(w).Encode(big) // as mcp-go writes an answer
	})
	c := srv.Client()
	for i := range 5 {
		resp := postTo(t, c, srv.URL)
		var got json.RawMessage
		err := json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d: %v, status %d", i, err, resp.StatusCode)
		}
		if resp.ContentLength != int64(want.Len()) || len(resp.TransferEncoding) != 0 {
			t.Fatalf("call %d: Content-Length %d, Transfer-Encoding %v; want %d, none", i, resp.ContentLength, resp.TransferEncoding, want.Len())
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 calls opened %d connections, want 1", n)
	}
	resp := postTo(t, c, srv.URL)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(body, want.Bytes()) {
		t.Errorf("the answer changed on the way: %d bytes, want %d", len(body), want.Len())
	}
}

// Status and headers are kept; an answer over maxSizedResponse, or one
// that is not JSON, goes out as it is written, as before.
func TestSizedAnswerShapes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		ctype     string
		size      int
		wantSized bool
	}{
		{"small error", http.StatusBadRequest, "application/json", 100, true},
		{"large", http.StatusOK, "application/json", 8 << 10, true},
		{"over the cap", http.StatusOK, "application/json", maxSizedResponse + 1, false},
		{"text", http.StatusNotFound, "text/plain; charset=utf-8", 8 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := bytes.Repeat([]byte("x"), tc.size)
			srv, _ := sizedServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.Header().Set("X-Kept", "yes")
				w.WriteHeader(tc.status)
				w.Write(body[:tc.size/2]) // in two writes
				w.Write(body[tc.size/2:])
			})
			resp := postTo(t, srv.Client(), srv.URL)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || resp.Header.Get("X-Kept") != "yes" || !bytes.Equal(got, body) {
				t.Fatalf("status %d, X-Kept %q, %d bytes; want %d, yes, %d", resp.StatusCode, resp.Header.Get("X-Kept"), len(got), tc.status, tc.size)
			}
			if sized := resp.ContentLength == int64(tc.size); sized != tc.wantSized {
				t.Errorf("Content-Length %d (%v), want it set: %v", resp.ContentLength, resp.TransferEncoding, tc.wantSized)
			}
		})
	}
}

// An SSE answer streams: its first event reaches the client before the
// handler returns.
func TestSizedLetsSSEThrough(t *testing.T) {
	read := make(chan struct{})
	srv, _ := sizedServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "event: message\ndata: {\"a\":1}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-time.After(5 * time.Second):
		}
		io.WriteString(w, "event: message\ndata: {\"b\":2}\n\n")
	})
	resp := postTo(t, srv.Client(), srv.URL)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "event: message\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(read)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), `{"b":2}`) {
		t.Fatalf("rest %q", rest)
	}
}

// A JSON answer whose handler flushes (mcp-go upgrading to SSE after it
// chose JSON never does; a flush must still send what was held at once).
func TestSizedFlushSendsHeld(t *testing.T) {
	read := make(chan struct{})
	srv, _ := sizedServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{\"a\":1}\n")
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-time.After(5 * time.Second):
		}
		io.WriteString(w, "{\"b\":2}\n")
	})
	resp := postTo(t, srv.Client(), srv.URL)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "{\"a\":1}\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(read)
	if rest, _ := io.ReadAll(br); string(rest) != "{\"b\":2}\n" {
		t.Fatalf("rest %q", rest)
	}
}
