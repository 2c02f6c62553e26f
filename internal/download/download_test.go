package download

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/demo"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/pool"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

func TestSafeType(t *testing.T) {
	for in, want := range map[string]string{
		"application/pdf":               "application/pdf",
		"IMAGE/PNG":                     "image/png",
		"text/plain":                    "text/plain",
		"video/mp4":                     "video/mp4",
		"audio/ogg":                     "audio/ogg",
		"text/html":                     "application/octet-stream",
		"image/svg+xml":                 "application/octet-stream",
		"application/xhtml+xml":         "application/octet-stream",
		"text/xml":                      "application/octet-stream",
		"application/javascript":        "application/octet-stream",
		"message/rfc822":                "application/octet-stream",
		"multipart/related":             "application/octet-stream",
		"application/x-shockwave-flash": "application/octet-stream",
		"video/mp4\r\nX-Evil: 1":        "application/octet-stream",
		"":                              "application/octet-stream",
	} {
		if got := safeType(in); got != want {
			t.Errorf("safeType(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDisposition(t *testing.T) {
	for in, want := range map[string]string{
		"report.pdf":            `attachment; filename="report.pdf"; filename*=UTF-8''report.pdf`,
		"Protokoll März.txt":    `attachment; filename="Protokoll M_rz.txt"; filename*=UTF-8''Protokoll%20M%C3%A4rz.txt`,
		`a"b\c;d%e.txt`:         `attachment; filename="a_b_c_d_e.txt"; filename*=UTF-8''a%22b%5Cc%3Bd%25e.txt`,
		"":                      `attachment; filename="attachment"; filename*=UTF-8''attachment`,
		"\u202Efdp.exe":         `attachment; filename="_fdp.exe"; filename*=UTF-8''%E2%80%AEfdp.exe`,
		"line\r\nX-Injected: 1": `attachment; filename="line__X-Injected: 1"; filename*=UTF-8''line%0D%0AX-Injected%3A%201`,
	} {
		if got := disposition(in); got != want {
			t.Errorf("disposition(%q) =\n %s\nwant\n %s", in, got, want)
		}
	}
}

type fixture struct {
	srv     *demo.Server
	user    demo.User
	sealer  *credentials.Sealer
	handler *Handler
	ts      *httptest.Server
	uid     uint32
	uv      uint32
}

func newFixture(t *testing.T, g *guard.Guard) *fixture {
	t.Helper()
	srv, err := demo.Start(context.Background(), demo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	host, port, _ := net.SplitHostPort(srv.IMAPAddr)
	p, _ := strconv.Atoi(port)
	log := slog.New(slog.DiscardHandler)
	mb := mailbox.New(mailbox.Config{Host: host, Port: p, Security: transport.Plain, AllowPlaintextAuth: true, Timeout: 10 * time.Second},
		pool.Config{MaxTotal: 4, MaxPerGroup: 2}, log)
	t.Cleanup(func() { mb.Close(context.Background()) })
	sealer, _ := credentials.NewSealer(bytes.Repeat([]byte{1}, credentials.KeyLength))
	f := &fixture{srv: srv, user: srv.Users[0], sealer: sealer, handler: New(sealer, mb, g, log)}
	mux := http.NewServeMux()
	mux.Handle(Prefix, f.handler)
	f.ts = httptest.NewServer(mux)
	t.Cleanup(f.ts.Close)
	var n uint32
	for _, m := range srv.Messages(f.user.Address) {
		if m.Folder == demo.FolderInbox {
			n++
			if m.Tag == demo.TagPDF {
				f.uid = n
			}
		}
	}
	got, err := mb.Attachment(context.Background(), credentials.New(f.user.Address, f.user.Password), "INBOX", f.uid, "2", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	f.uv = got.UIDValidity
	return f
}

func (f *fixture) url(t *testing.T, sealer *credentials.Sealer, uv uint32, part string, now time.Time) string {
	t.Helper()
	u, _, err := NewURL(sealer, f.ts.URL+"/", credentials.New(f.user.Address, f.user.Password), "INBOX", f.uid, uv, part, "Service Agreement.pdf", now)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func get(t *testing.T, method, url string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func TestDownload(t *testing.T) {
	f := newFixture(t, nil)
	u := f.url(t, f.sealer, f.uv, "2", time.Now())
	if !strings.HasPrefix(u, f.ts.URL+"/attachments/att1.") || !strings.HasSuffix(u, "/Service%20Agreement.pdf") {
		t.Fatalf("url %s", u)
	}
	resp, body := get(t, http.MethodGet, u)
	if resp.StatusCode != 200 || !bytes.HasPrefix(body, []byte("%PDF-")) {
		t.Fatalf("%s: %q", resp.Status, body[:min(len(body), 80)])
	}
	for k, want := range map[string]string{
		"Content-Type": "application/pdf", "X-Content-Type-Options": "nosniff", "Cache-Control": "private, no-store",
		"Content-Disposition": `attachment; filename="Service-Agreement-signed.pdf"; filename*=UTF-8''Service-Agreement-signed.pdf`,
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	// Without the file name segment too, and HEAD.
	if resp, body2 := get(t, http.MethodGet, u[:strings.LastIndexByte(u, '/')]); resp.StatusCode != 200 || !bytes.Equal(body2, body) {
		t.Fatalf("without the name: %s, %d bytes", resp.Status, len(body2))
	}
	if resp, b := get(t, http.MethodHead, u); resp.StatusCode != 200 || len(b) != 0 || resp.Header.Get("Content-Type") != "application/pdf" {
		t.Fatalf("HEAD: %s, %d bytes, %v", resp.Status, len(b), resp.Header)
	}
	if resp, _ := get(t, http.MethodPost, u); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %s", resp.Status)
	}
}

func TestDownloadRefusals(t *testing.T) {
	f := newFixture(t, nil)
	other, _ := credentials.NewSealer(bytes.Repeat([]byte{2}, credentials.KeyLength))
	good := f.url(t, f.sealer, f.uv, "2", time.Now())
	link := strings.TrimPrefix(good, f.ts.URL+Prefix)
	link = link[:strings.IndexByte(link, '/')]
	flip := func(i int) string {
		c := byte('A')
		if link[i] == 'A' {
			c = 'B'
		}
		return f.ts.URL + Prefix + link[:i] + string(c) + link[i+1:]
	}
	tok, _ := f.sealer.Seal(credentials.New(f.user.Address, f.user.Password))
	for _, tc := range []struct {
		name, url string
		status    int
		says      string
	}{
		{"expired", f.url(t, f.sealer, f.uv, "2", time.Now().Add(-TTL-time.Second)), 403, "expired"},
		{"one character altered", flip(len(link) / 2), 403, "altered"},
		{"last character altered", flip(len(link) - 1), 403, ""},
		{"another server's key", f.url(t, other, f.uv, "2", time.Now()), 403, "another server"},
		{"a credentials token", f.ts.URL + Prefix + tok, 403, "not a valid download link"},
		{"nothing", f.ts.URL + Prefix, 403, "not a valid download link"},
		{"a part that is not an attachment", f.url(t, f.sealer, f.uv, "1", time.Now()), 404, "no longer there"},
		{"a rebuilt folder", f.url(t, f.sealer, f.uv+1, "2", time.Now()), 404, "no longer there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, http.MethodGet, tc.url)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.says) {
				t.Fatalf("%s: %q", resp.Status, body)
			}
			if strings.Contains(string(body), "alice") || strings.Contains(string(body), "demo.test") || resp.Header.Get("Content-Disposition") != "" {
				t.Fatalf("the refusal tells too much: %v %q", resp.Header, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}

	// The message deleted after the link was made.
	c, err := imapclient.DialInsecure(f.srv.IMAPAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(f.user.Address, f.user.Password).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	set := imap.UIDSetNum(imap.UID(f.uid))
	if err := c.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.UIDExpunge(set).Close(); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(t, http.MethodGet, good); resp.StatusCode != 404 {
		t.Fatalf("deleted message: %s %q", resp.Status, body)
	}
}

func TestDownloadRateLimit(t *testing.T) {
	f := newFixture(t, guard.New(guard.Config{RatePerMinute: 1, Burst: 1}))
	u := f.url(t, f.sealer, f.uv, "2", time.Now())
	if resp, _ := get(t, http.MethodGet, u); resp.StatusCode != 200 {
		t.Fatalf("first: %s", resp.Status)
	}
	if resp, body := get(t, http.MethodGet, u); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second: %s %q", resp.Status, body)
	}
}

// Every write to the client gets writeTimeout to finish: a client that
// stops reading is dropped then (net/http fails the blocked write).
func TestWritesHaveADeadline(t *testing.T) {
	rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	w := &deadlineWriter{w: rec, rc: http.NewResponseController(rec)}
	for range 3 {
		before := time.Now()
		if _, err := w.Write([]byte("data")); err != nil {
			t.Fatal(err)
		}
		if d := rec.deadline.Sub(before); d < writeTimeout || d > writeTimeout+time.Second {
			t.Fatalf("write deadline %v ahead, want %v", d, writeTimeout)
		}
	}
	if !w.wrote || rec.Body.String() != "datadatadata" {
		t.Fatalf("wrote %v: %q", w.wrote, rec.Body.String())
	}
}

type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadline time.Time
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	d.deadline = t
	return nil
}
