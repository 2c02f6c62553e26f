package unsubscribe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/egress"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
)

// Bounds of a one-click POST.
const (
	DefaultTimeout = 10 * time.Second
	maxRedirects   = 5
	maxAnswer      = 64 << 10
)

// Config configures a Poster.
type Config struct {
	// Timeout bounds the whole POST, redirects included (0: 10 s).
	Timeout time.Duration
	// AllowPrivate lets it post to loopback and private addresses: for
	// tests only (EGRESS_ALLOW_PRIVATE).
	AllowPrivate bool
	// RootCAs, when set, replace the system's certificate authorities.
	RootCAs *x509.CertPool
	// Resolver resolves names (nil: the system's).
	Resolver *net.Resolver
	// Check, when set, replaces egress.Check for each address dialled
	// (tests that need one address allowed and another refused).
	Check func(network, address string) error
}

// Poster makes one-click POSTs; safe for concurrent use.
type Poster struct {
	client  *http.Client
	timeout time.Duration
}

// NewPoster makes a Poster.
func NewPoster(cfg Config) *Poster {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	c := egress.HTTPClient(egress.Options{Timeout: cfg.Timeout, Resolver: cfg.Resolver, AllowPrivate: cfg.AllowPrivate, RootCAs: cfg.RootCAs})
	if cfg.Check != nil {
		d := &net.Dialer{Timeout: cfg.Timeout, Resolver: cfg.Resolver,
			Control: func(network, address string, _ syscall.RawConn) error { return cfg.Check(network, address) }}
		c.Transport.(*http.Transport).DialContext = d.DialContext
	}
	c.Jar = nil // never a cookie
	return &Poster{client: c, timeout: cfg.Timeout}
}

// Posted is what a one-click POST did.
type Posted struct {
	URL       string `json:"url" desc:"the https link posted to"`
	Status    int    `json:"status" desc:"the HTTP status of the list's answer"`
	Redirects int    `json:"redirects,omitempty" desc:"redirects followed (each to https, each address checked again)"`
}

// OneClick POSTs "List-Unsubscribe=One-Click" to link (RFC 8058 section
// 3.1). A 307, 308, 301 or 302 redirect is followed with the same POST
// after its target passes the same checks (https, no credentials, a
// public address when dialled), at most five times; a 303 ("see other":
// the request was taken) ends it. Any 2xx or 303 is success; an error
// says what failed, and is a *mailerr.Error.
func (p *Poster) OneClick(ctx context.Context, link string) (*Posted, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	out := &Posted{URL: link}
	target, err := checkTarget(link)
	if err != nil {
		return nil, err
	}
	for {
		status, next, err := p.post(ctx, target)
		if err != nil {
			return nil, err
		}
		out.Status = status
		switch {
		case status >= 200 && status < 300, status == http.StatusSeeOther:
			return out, nil
		case next != nil:
			if out.Redirects++; out.Redirects > maxRedirects {
				return nil, mailerr.Newf(mailerr.Unavailable, "the unsubscribe link redirected more than %d times; nothing more was posted", maxRedirects)
			}
			if target, err = checkTarget(next.String()); err != nil {
				return nil, mailerr.Wrap(mailerr.KindOf(err), err, "the unsubscribe link redirected to a link that is not allowed: "+mailerr.Message(err))
			}
		default:
			return nil, mailerr.Newf(mailerr.Unavailable, "the list's server answered the unsubscribe request with HTTP %d", status)
		}
	}
}

// post makes one POST; next is the redirect target of a 301, 302, 307 or
// 308.
func (p *Poster) post(ctx context.Context, u *url.URL) (int, *url.URL, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(OneClickValue))
	if err != nil {
		return 0, nil, mailerr.Wrap(mailerr.BadInput, err, "the unsubscribe link is not a valid URL")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "mailbox-mcp (RFC 8058 one-click unsubscribe)")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, failure(ctx, u, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		loc, err := resp.Location()
		if err != nil {
			return resp.StatusCode, nil, mailerr.Newf(mailerr.Unavailable, "the list's server redirected (HTTP %d) without a usable Location", resp.StatusCode)
		}
		return resp.StatusCode, loc, nil
	}
	return resp.StatusCode, nil, nil
}

// checkTarget accepts an https URL without credentials.
func checkTarget(link string) (*url.URL, error) {
	u, err := url.Parse(link)
	switch {
	case err != nil || len(link) > maxURI:
		return nil, mailerr.New(mailerr.BadInput, "the unsubscribe link is not a valid URL")
	case !strings.EqualFold(u.Scheme, "https"):
		return nil, mailerr.Newf(mailerr.Forbidden, "only https links are posted to, and this one is %s", strings.ToLower(u.Scheme)+":")
	case u.User != nil:
		return nil, mailerr.New(mailerr.Forbidden, "the unsubscribe link carries credentials (user@host), which are never sent")
	case u.Host == "":
		return nil, mailerr.New(mailerr.BadInput, "the unsubscribe link names no host")
	}
	return u, nil
}

// failure classifies a failed POST.
func failure(ctx context.Context, u *url.URL, err error) error {
	host := u.Hostname()
	switch {
	case errors.Is(err, egress.ErrNotPublic):
		return mailerr.Wrap(mailerr.Forbidden, err, fmt.Sprintf("the unsubscribe link's host %s is at an address this gateway may not connect to (loopback, private or otherwise not public); nothing was posted", host))
	case ctx.Err() != nil:
		return mailerr.Wrap(mailerr.Timeout, err, fmt.Sprintf("the list's server %s did not answer the unsubscribe request in time", host))
	}
	var cert *tls.CertificateVerificationError
	if errors.As(err, &cert) {
		return mailerr.Wrap(mailerr.Unavailable, err, fmt.Sprintf("the list's server %s did not present a valid certificate; nothing was posted", host))
	}
	return mailerr.Wrap(mailerr.Unavailable, err, fmt.Sprintf("the list's server %s could not be reached", host))
}
