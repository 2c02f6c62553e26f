// Package download serves attachment download links, GET
// /attachments/{link}[/{filename}]: it opens the sealed, expiring link
// (credentials.Link), applies the per-user rate limit, and streams the
// attachment's decoded bytes from IMAP (mailbox.StreamAttachment) with
// headers that make a browser save the file rather than run it. It also
// makes those links (NewURL), and carries the gateway's public base URL
// from the HTTP layer to the tools that hand links out (WithBase,
// BaseFrom). It never reads credentials from request headers: the link is
// the only authority, and no answer says whose mailbox a link is for.
package download

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/credentials"
	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailbox"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/reqlog"
)

// Prefix is the path the handler is mounted at.
const Prefix = "/attachments/"

// TTL is how long a link works after it is made.
const TTL = 10 * time.Minute

// Limits on one download. A download holds a pooled IMAP connection only
// while it fetches a chunk (mailbox.StreamAttachment), so a slow client
// costs a goroutine and a buffer, not a mail connection; still, a client
// that stops reading is dropped after writeTimeout, and no download lasts
// longer than maxDuration.
var (
	writeTimeout = time.Minute // a variable for tests
	maxDuration  = time.Hour
)

// Handler serves /attachments/.
type Handler struct {
	sealer  *credentials.Sealer
	mailbox *mailbox.Client
	guard   *guard.Guard
	log     *slog.Logger
	now     func() time.Time
}

// New makes the handler. guard may be nil (no rate limit).
func New(sealer *credentials.Sealer, mb *mailbox.Client, g *guard.Guard, log *slog.Logger) *Handler {
	return &Handler{sealer: sealer, mailbox: mb, guard: g, log: log.With("component", "download"), now: time.Now}
}

// NewURL makes the download URL of one attachment for creds under base
// (the gateway's external URL, as BaseFrom gives it), valid for TTL from
// now, and never past the expiry of creds. filename only names the file in the URL, for the browser; the link
// decides what is served.
func NewURL(sealer *credentials.Sealer, base string, creds credentials.Credentials, folder string, uid, uidValidity uint32, partID, filename string, now time.Time) (string, time.Time, error) {
	expires := now.Add(TTL).Truncate(time.Second)
	if !creds.Expires.IsZero() && creds.Expires.Before(expires) {
		// A link made from a sign-in dies with it.
		expires = creds.Expires.Truncate(time.Second)
	}
	link, err := sealer.SealLink(credentials.Link{Creds: creds, Folder: folder, UID: uid, UIDValidity: uidValidity, PartID: partID, Expires: expires})
	if err != nil {
		return "", time.Time{}, err
	}
	u := strings.TrimRight(base, "/") + Prefix + link
	if filename != "" {
		u += "/" + url.PathEscape(filename)
	}
	return u, expires, nil
}

type baseKey struct{}

// WithBase returns ctx carrying the gateway's external base URL for this
// request (scheme and host, and a path prefix if any, without a final /).
func WithBase(ctx context.Context, base string) context.Context {
	return context.WithValue(ctx, baseKey{}, base)
}

// BaseFrom returns the base URL WithBase put in ctx, or "".
func BaseFrom(ctx context.Context) string {
	s, _ := ctx.Value(baseKey{}).(string)
	return s
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := reqlog.FromContext(r.Context())
	rec.SetTool("attachment download")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		refuse(w, http.StatusMethodNotAllowed, "use GET")
		return
	}
	// The link is the first segment; a file name may follow it.
	link, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, Prefix), "/")
	l, err := h.sealer.OpenLink(link, h.now())
	if err != nil {
		rec.SetOutcome("forbidden")
		refuse(w, http.StatusForbidden, err.Error())
		return
	}
	rec.SetUser(l.Creds.User)
	if err := h.guard.AllowCall(r.Context(), l.Creds.AccountKey()); err != nil {
		rec.SetOutcome(mailerr.KindOf(err).String())
		if mailerr.KindOf(err) != mailerr.RateLimited {
			// The limit could not be checked (REDIS_FAIL=closed).
			w.Header().Set("Retry-After", "5")
			refuse(w, http.StatusServiceUnavailable, "the gateway cannot check its limits just now; retry shortly")
			return
		}
		w.Header().Set("Retry-After", "10")
		refuse(w, http.StatusTooManyRequests, "too many requests for this mailbox; retry shortly")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), maxDuration)
	defer cancel()
	out := &deadlineWriter{w: w, rc: http.NewResponseController(w)}
	_, err = h.mailbox.StreamAttachment(ctx, l.Creds, l.Folder, l.UID, l.UIDValidity, l.PartID, func(a mailbox.Attachment) io.Writer {
		setHeaders(w.Header(), a)
		if r.Method == http.MethodHead {
			return nil
		}
		return out
	})
	switch {
	case err == nil:
		rec.SetOutcome("ok")
	case !out.wrote:
		// Nothing sent yet: the client gets a status of its own.
		for _, k := range []string{"Content-Disposition", "Content-Security-Policy"} {
			w.Header().Del(k)
		}
		rec.SetOutcome(mailerr.KindOf(err).String())
		rec.SetCause(mailerr.Cause(err))
		h.log.DebugContext(r.Context(), "download refused", "err", err)
		status, msg := failure(err)
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
		refuse(w, status, msg)
	default:
		// Part of the file is out: end the connection without the final
		// chunk, so the client sees a broken download, never a short file.
		rec.SetOutcome("aborted")
		if out.err == nil {
			rec.SetCause(mailerr.Cause(err))
			h.log.WarnContext(r.Context(), "download broken off", "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// failure is the status and sentence for a download that failed before
// its first byte. They say what happened, never whose mailbox it is.
func failure(err error) (int, string) {
	switch mailerr.KindOf(err) {
	case mailerr.NotFound, mailerr.BadInput:
		return http.StatusNotFound, "the attachment is no longer there: the message was moved or deleted, or its folder was rebuilt"
	case mailerr.Auth:
		return http.StatusForbidden, "the mail server no longer accepts the login this link was made with"
	case mailerr.RateLimited:
		return http.StatusTooManyRequests, "too many requests for this mailbox; retry shortly"
	case mailerr.Busy, mailerr.Unavailable, mailerr.Temporary, mailerr.Timeout:
		return http.StatusServiceUnavailable, "the mail server could not be reached or is busy; retry shortly"
	}
	return http.StatusInternalServerError, "internal error"
}

// refuse answers with a short plain-text sentence.
func refuse(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

// setHeaders describes the file so that a browser saves it and never
// renders or runs it: a content type it cannot execute, no sniffing, an
// attachment disposition, a sandboxing CSP should it render anyway, and no
// caching anywhere (the URL is a credential for ten minutes).
func setHeaders(h http.Header, a mailbox.Attachment) {
	h.Set("Content-Type", safeType(a.ContentType))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", disposition(a.Filename))
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, no-store")
	h.Set("Referrer-Policy", "no-referrer")
	// The write deadline set for the body stays on the connection.
	h.Set("Connection", "close")
}

// inertTypes are media types a browser shows (at most) but does not run;
// any other type is served as application/octet-stream. An allow-list:
// text/html, image/svg+xml, XML, JavaScript, message/rfc822 (MHTML) and
// types not known here can all carry script.
var inertTypes = map[string]bool{
	"application/pdf": true, "application/zip": true, "application/gzip": true, "application/json": true,
	"application/msword": true, "application/vnd.ms-excel": true, "application/vnd.ms-powerpoint": true,
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document":   true,
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":         true,
	"application/vnd.openxmlformats-officedocument.presentationml.presentation": true,
	"application/vnd.oasis.opendocument.text":                                   true,
	"application/vnd.oasis.opendocument.spreadsheet":                            true,
	"text/plain": true, "text/csv": true, "text/calendar": true,
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true, "image/bmp": true,
	"image/tiff": true, "image/heic": true, "image/avif": true,
}

func safeType(ct string) string {
	ct = strings.ToLower(strings.TrimSpace(ct))
	top, _, _ := strings.Cut(ct, "/")
	if inertTypes[ct] || ((top == "audio" || top == "video") && token(ct)) {
		return ct
	}
	return "application/octet-stream"
}

// token says whether a media type is only letters, digits and the few
// punctuation marks type names use (nothing that could end the header).
func token(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("/.+-_", c) >= 0) {
			return false
		}
	}
	return true
}

// disposition is "attachment" with the file name twice: as RFC 5987
// UTF-8 (filename*, which browsers prefer) and as a plain ASCII fallback.
// The name is already sanitised and without directories
// (mailbox.Attachment); here it only has to be encoded.
func disposition(name string) string {
	name = strings.TrimSpace(name)
	if name == "" {
		name = "attachment"
	}
	var ascii, ext strings.Builder
	for _, r := range name {
		switch {
		case r < 0x20 || r == 0x7f || r > 0x7e || r == '"' || r == '\\' || r == '/' || r == ';' || r == '%':
			ascii.WriteByte('_')
		default:
			ascii.WriteRune(r)
		}
	}
	for _, b := range []byte(name) {
		if 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte("!#$&+-.^_`|~", b) >= 0 {
			ext.WriteByte(b)
		} else {
			ext.WriteString("%" + strings.ToUpper(hex2(b)))
		}
	}
	return `attachment; filename="` + ascii.String() + `"; filename*=UTF-8''` + ext.String()
}

func hex2(b byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]})
}

// deadlineWriter gives every write to the client writeTimeout to finish,
// and remembers whether anything was written and whether writing failed.
type deadlineWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	wrote bool
	err   error
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	// Not every ResponseWriter supports deadlines (tests): then none.
	_ = d.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	d.wrote = true
	n, err := d.w.Write(p)
	if err != nil && d.err == nil {
		d.err = err
	}
	return n, err
}
