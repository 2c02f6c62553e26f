package httpapi

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/download"
)

// The base URL that tools make download links under: PUBLIC_URL when set,
// else this request's scheme and Host, with X-Forwarded-Proto believed
// only from a trusted proxy.
func TestBaseURL(t *testing.T) {
	proxy := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		name, public, remote, host, proto string
		tls                               bool
		want                              string
	}{
		{"from the Host", "", "192.0.2.1:5000", "mail.example.test:8080", "", false, "http://mail.example.test:8080"},
		{"TLS", "", "192.0.2.1:5000", "mail.example.test", "", true, "https://mail.example.test"},
		{"PUBLIC_URL wins", "https://mcp.example.com/mail/", "192.0.2.1:5000", "internal:8080", "http", false, "https://mcp.example.com/mail"},
		{"proto from a trusted proxy", "", "10.1.2.3:5000", "mcp.example.com", "https", false, "https://mcp.example.com"},
		{"its right-most value", "", "10.1.2.3:5000", "mcp.example.com", "http, https", false, "https://mcp.example.com"},
		{"proto from anyone else ignored", "", "192.0.2.1:5000", "mcp.example.com", "https", false, "http://mcp.example.com"},
		{"nonsense proto ignored", "", "10.1.2.3:5000", "mcp.example.com", "javascript", false, "http://mcp.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			h := withBase(tc.public, proxy, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = download.BaseFrom(r.Context()) }))
			r := httptest.NewRequest(http.MethodPost, "http://x/mcp", nil)
			r.RemoteAddr, r.Host = tc.remote, tc.host
			if tc.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tc.proto)
			}
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			if got != tc.want {
				t.Fatalf("base %q, want %q", got, tc.want)
			}
		})
	}
}

// /attachments/ reaches its handler behind the Host rule, without the
// credential headers, and its link never reaches the log.
func TestAttachmentsRoute(t *testing.T) {
	var logs bytes.Buffer
	var reached bool
	var hadCreds bool
	att := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		_, hadCreds = credentials.FromContext(r.Context())
		w.Write([]byte("file"))
	})
	mcp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := New(Options{MaxRequestBytes: 1 << 20, Loopback: true, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Attachments: att}, mcp)

	r := httptest.NewRequest(http.MethodGet, "http://localhost/attachments/att1.SECRETLINK/report.pdf", nil)
	r.Header.Set(HeaderUser, "alice")
	r.Header.Set(HeaderPass, "pw")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if !reached || w.Body.String() != "file" || hadCreds {
		t.Fatalf("reached %v, credentials %v, %d %q", reached, hadCreds, w.Code, w.Body.String())
	}
	if strings.Contains(logs.String(), "SECRETLINK") || !strings.Contains(logs.String(), `"path":"/attachments/…"`) {
		t.Fatalf("log: %s", logs.String())
	}

	reached = false
	r = httptest.NewRequest(http.MethodGet, "http://evil.example/attachments/att1.x", nil)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if reached || w.Code != http.StatusForbidden {
		t.Fatalf("a foreign Host on a loopback bind: %d, reached %v", w.Code, reached)
	}
}
