package httpapi

import (
	"net/http"
	"strconv"
	"strings"
)

// maxSizedResponse is the largest JSON answer held back to be sent with a
// Content-Length; a larger one (an inline attachment of a megabyte or
// more) goes out as it is written, chunked, as before.
const maxSizedResponse = 1 << 20

// sized sends an MCP POST's JSON answer with a Content-Length instead of
// chunked. mcp-go writes the answer in one piece (json.Encoder.Encode);
// net/http sends anything past its 2 KB chunking buffer chunked, and
// flushes what passes its 4 KB connection buffer before the final empty
// chunk. A client that reads only the JSON value and then closes the body,
// as mcp-go's own client does (json.Decoder.Decode), never sees that
// final chunk, so net/http's client transport drops the connection: every
// call with an answer over about 4 KB (a list, an attachment) then paid a
// new TCP connection (and, over TLS, a handshake). With the length known
// the client's body reader reports the end with the last byte, and the
// connection is kept. SSE (text/event-stream), a flush and anything that
// is not application/json go through unchanged, as they are written.
func sized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &sizedWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		sw.finish()
	})
}

// sizedWriter holds a JSON answer until the handler returns (finish), as
// long as it stays within maxSizedResponse and nobody flushes.
type sizedWriter struct {
	http.ResponseWriter
	status  int    // the status held back; 0 before WriteHeader
	held    []byte // the body held back
	through bool   // passing everything through: not held (any more)
}

func (w *sizedWriter) WriteHeader(code int) {
	if w.through || w.status != 0 {
		w.ResponseWriter.WriteHeader(code) // net/http warns about a second call, as it would have
		return
	}
	if code < 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") || w.Header().Get("Content-Length") != "" {
		// Informational answers, SSE, errors in text, and answers whose
		// length is known already pass as they are.
		w.through = code >= 200
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.status = code
}

func (w *sizedWriter) Write(p []byte) (int, error) {
	if !w.through && w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.through {
		return w.ResponseWriter.Write(p)
	}
	if len(w.held)+len(p) > maxSizedResponse {
		if err := w.release(); err != nil {
			return 0, err
		}
		return w.ResponseWriter.Write(p)
	}
	if w.held == nil {
		// Usually the whole answer comes in this one write.
		w.held = make([]byte, 0, len(p))
	}
	w.held = append(w.held, p...)
	return len(p), nil
}

// release sends the held status and body without a length and passes
// everything after them through.
func (w *sizedWriter) release() error {
	w.through = true
	if w.status == 0 {
		return nil
	}
	w.ResponseWriter.WriteHeader(w.status)
	held := w.held
	w.held = nil
	if len(held) == 0 {
		return nil
	}
	_, err := w.ResponseWriter.Write(held)
	return err
}

// Flush sends what is held and streams from then on (SSE).
func (w *sizedWriter) Flush() {
	if !w.through {
		if w.release() != nil {
			return
		}
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer (write
// deadlines); a flush through it would skip what is held, but mcp-go
// flushes through Flush.
func (w *sizedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish sends the held answer with its length.
func (w *sizedWriter) finish() {
	if w.through || w.status == 0 {
		return
	}
	if len(w.held) > 0 {
		w.Header().Set("Content-Length", strconv.Itoa(len(w.held)))
	}
	w.ResponseWriter.WriteHeader(w.status)
	if len(w.held) == 0 {
		return
	}
	w.ResponseWriter.Write(w.held)
	// Out now, with its length set: the request's log line and the
	// handlers' unwinding need not come before its last bytes (net/http
	// would send what its buffers hold only once the handler returns).
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
