package metrics

import (
	"net/http"
	"strconv"
)

// HTTP wraps next so that every response it writes is counted by status
// code. A nil *Metrics returns next unchanged.
func (m *Metrics) HTTP(next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			code := sw.code
			if v := recover(); v != nil {
				// Counted as what the server answers a panic with, then
				// passed on to whatever recovers it.
				if code == 0 {
					code = http.StatusInternalServerError
				}
				m.httpResponses.WithLabelValues(statusLabel(code)).Inc()
				panic(v)
			}
			if code == 0 {
				code = http.StatusOK
			}
			m.httpResponses.WithLabelValues(statusLabel(code)).Inc()
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusLabel is the code as a label; a code outside 100-599 (a bug) is
// "other".
func statusLabel(code int) string {
	if code < 100 || code > 599 {
		return other
	}
	return strconv.Itoa(code)
}

// statusWriter notes the first status written. Unwrap lets
// http.ResponseController reach the Flusher and deadlines underneath.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
