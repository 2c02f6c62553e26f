// Package hosts decides which mail hosts the gateway serves and how each
// is reached: the default (IMAP_HOST, SMTP_HOST), the hosts of the sign-in
// providers (each only for its own provider's sign-ins), and the names
// MAIL_HOSTS allows (exact names and *.domain patterns). A name is read as
// a host name first (IDNA, letters, digits and hyphens in labels, nothing
// else), so that no part of it can become a URL's fragment, path or port.
// Any other name is refused with one sentence, before a connection is
// made, and so is an allowed name that does not resolve or resolves to a
// loopback, private or link-local address (unless the operator allows
// that): the refusal says the same whatever the reason, so that it tells
// no one which names exist. The dial of such a name is checked again on
// the address actually dialled (egress). It also suggests a host for a
// mail address (RFC 6186 SRV records, then Thunderbird's autoconfig), only
// within what is allowed, and names the canonical form of a host (the
// default however it is spelt is ""). It keeps nothing about anyone.
package hosts

import (
	"context"
	"crypto/tls"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/idna"

	"github.com/mailbox-mcp/mailbox-mcp/internal/egress"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// Server is one mail host's IMAP and SMTP endpoints (SMTP's Host is ""
// when sending is off for it).
type Server struct {
	IMAP, SMTP transport.Endpoint
	// Provider names the sign-in provider whose logins a Named host
	// serves; no other login reaches it (unless MAIL_HOSTS allows it).
	Provider string
}

// Pattern is one MAIL_HOSTS entry: a name or *.domain, and the IMAP port
// (0: the default's).
type Pattern struct {
	Name string
	Port int
}

// Config is what the operator allows.
type Config struct {
	// Default serves credentials that name no host.
	Default Server
	// Named are fixed hosts (the providers'), by IMAP host name; the
	// operator configured them, so they may be anywhere, and each serves
	// only the logins of its Server.Provider.
	Named map[string]Server
	// Patterns are MAIL_HOSTS. Their IMAP uses Default's security and TLS
	// settings on their own or Default's port; their SMTP the same host
	// on Default's SMTP port and security (none when Default has none).
	Patterns []Pattern
	// AllowPrivate lets pattern hosts resolve to non-public addresses.
	AllowPrivate bool
	// Resolver looks names up (nil: the system's); tests use their own.
	Resolver *net.Resolver
}

// Hosts answers which server a credential's host is.
type Hosts struct {
	cfg Config
}

// New makes the hosts of cfg.
func New(cfg Config) *Hosts {
	named := make(map[string]Server, len(cfg.Named))
	for k, v := range cfg.Named {
		named[spelling(k)] = v
	}
	cfg.Named = named
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	return &Hosts{cfg: cfg}
}

// Name reads host as a host name: blanks and one final dot dropped,
// Unicode labels in their ASCII (punycode) form, lower case; each label 1
// to 63 letters, digits and inner hyphens, 253 characters in all. Anything
// else (a "#", "/", "?", ":", "@", "_", a blank inside, an empty label) is
// an error: such a string is no host name, whatever a URL parser would
// make of it.
func Name(host string) (string, error) {
	s := strings.TrimSuffix(strings.TrimSpace(host), ".")
	bad := errors.New("not a host name")
	if s == "" {
		return "", bad
	}
	a, err := idna.Lookup.ToASCII(s)
	if err != nil || len(a) > 253 {
		return "", bad
	}
	for _, l := range strings.Split(a, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", bad
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return "", bad
			}
		}
	}
	return a, nil
}

// spelling is host as it is compared: its Name, or for what is no host
// name (an IPv6 literal IMAP_HOST) trimmed and lower-cased.
func spelling(host string) string {
	if n, err := Name(host); err == nil {
		return n
	}
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(host)), ".")
}

// Canonical is host as every per-account key names it: "" for the
// default host however it is spelt (letter case, a final dot, blanks,
// Unicode or punycode), else its Name (or, for what is no host name, its
// trimmed lower-case spelling: refused wherever it is used).
func (h *Hosts) Canonical(host string) string {
	if strings.TrimSpace(host) == "" {
		return ""
	}
	s := spelling(host)
	if s == spelling(h.cfg.Default.IMAP.Host) {
		return ""
	}
	return s
}

// Lookup returns the server of host ("" the default) for a login of
// provider ("" for a password or a token not from a provider's sign-in),
// or a Forbidden error saying it is not served here. A provider's host
// serves only that provider's logins, unless MAIL_HOSTS allows it too. It
// does no I/O: Check does the resolution a pattern host needs.
func (h *Hosts) Lookup(host, provider string) (Server, error) {
	if strings.TrimSpace(host) == "" || h.Canonical(host) == "" {
		return h.cfg.Default, nil
	}
	name, err := Name(host)
	if err != nil {
		return Server{}, h.refusal(host, err)
	}
	if s, ok := h.cfg.Named[name]; ok && provider != "" && s.Provider == provider {
		return s, nil
	}
	for _, p := range h.cfg.Patterns {
		if !p.matches(name) {
			continue
		}
		s := Server{IMAP: h.cfg.Default.IMAP, SMTP: h.cfg.Default.SMTP}
		s.IMAP.Host, s.IMAP.PublicOnly = name, !h.cfg.AllowPrivate
		s.IMAP.TLS = serverName(s.IMAP.TLS, name)
		if p.Port != 0 {
			s.IMAP.Port = p.Port
		}
		if s.SMTP.Host != "" {
			s.SMTP.Host, s.SMTP.PublicOnly = name, !h.cfg.AllowPrivate
			s.SMTP.TLS = serverName(s.SMTP.TLS, name)
		}
		return s, nil
	}
	return Server{}, h.refusal(host, errors.New("not allowed"))
}

// refusal is the one sentence for every host a caller may not use: not
// a host name, not allowed, not found in DNS, or not a public address. It
// is the same for all, so that it tells no one which names exist; the
// reason goes to the log (Err).
func (h *Hosts) refusal(host string, cause error) error {
	if len(host) > 100 {
		host = host[:100] + "…"
	}
	where := "names that resolve to public addresses"
	if h.cfg.AllowPrivate {
		where = "names that resolve"
	}
	return mailerr.Wrap(mailerr.Forbidden, cause, fmt.Sprintf("this gateway does not serve mailboxes at %q: it serves %s (%s)", host, h.allowed(), where))
}

// serverName is t for a connection to name: the certificate must be name's.
func serverName(t *tls.Config, name string) *tls.Config {
	if t == nil {
		return nil
	}
	c := t.Clone()
	c.ServerName = name
	return c
}

func (p Pattern) matches(name string) bool {
	if d, ok := strings.CutPrefix(p.Name, "*."); ok {
		return strings.HasSuffix(name, "."+d)
	}
	return name == p.Name
}

// Patterns reports whether MAIL_HOSTS lets people name other hosts.
func (h *Hosts) Patterns() bool { return len(h.cfg.Patterns) > 0 }

// allowed says in words which hosts a caller may name: the default and
// MAIL_HOSTS (a provider's host is for its own sign-ins).
func (h *Hosts) allowed() string {
	names := []string{h.cfg.Default.IMAP.Host}
	for _, p := range h.cfg.Patterns {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

// Check makes sure a host a caller names (x-imap-host, the sign-in page's
// host field, the host a token is sealed for) may be connected to: the
// default, or a MAIL_HOSTS name that resolves only to public addresses
// (unless allowed otherwise). A provider's host is not for such logins.
// Every refusal is the same sentence (refusal). Nothing is dialled.
func (h *Hosts) Check(ctx context.Context, host string) error {
	s, err := h.Lookup(host, "")
	if err != nil || !s.IMAP.PublicOnly {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := h.cfg.Resolver.LookupNetIP(ctx, "ip", s.IMAP.Host)
	if err != nil || len(addrs) == 0 {
		return h.refusal(host, fmt.Errorf("DNS: %v", err))
	}
	for _, a := range addrs {
		if err := egress.Check(a); err != nil {
			return h.refusal(host, err)
		}
	}
	return nil
}

// Suggest is the host to use for a mail address, when its domain says
// (RFC 6186 _imaps._tcp SRV record, then autoconfig.<domain>) and that
// host is served here; "" otherwise. The domain must be a host name
// (Name) before anything is looked up. It takes at most a few seconds.
func (h *Hosts) Suggest(ctx context.Context, address string) string {
	at := strings.LastIndex(address, "@")
	if at < 0 || len(h.cfg.Patterns) == 0 {
		return ""
	}
	domain, err := Name(address[at+1:])
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	served := func(host string) string {
		name, err := Name(host)
		if err != nil || h.Check(ctx, name) != nil {
			return ""
		}
		return name
	}
	if _, srvs, err := h.cfg.Resolver.LookupSRV(ctx, "imaps", "tcp", domain); err == nil {
		for _, s := range srvs {
			if name := served(s.Target); name != "" {
				return name
			}
		}
	}
	if name := autoconfig(ctx, h, domain, strings.TrimSpace(address)); name != "" {
		return served(name)
	}
	return ""
}

// autoconfig reads the IMAP host from https://autoconfig.<domain>, only
// when that name is itself served here (so the request goes nowhere the
// operator has not allowed: domain is a checked host name, and the URL is
// built from parts, the address only in its query) and through the
// egress check.
func autoconfig(ctx context.Context, h *Hosts, domain, address string) string {
	name := "autoconfig." + domain
	if _, err := h.Lookup(name, ""); err != nil {
		return ""
	}
	client := egress.HTTPClient(egress.Options{Timeout: 3 * time.Second, Resolver: h.cfg.Resolver})
	u := url.URL{Scheme: "https", Host: name, Path: "/mail/config-v1.1.xml", RawQuery: url.Values{"emailaddress": {address}}.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return ""
	}
	resp, err := client.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var doc struct {
		Servers []struct {
			Type     string `xml:"type,attr"`
			Hostname string `xml:"hostname"`
		} `xml:"emailProvider>incomingServer"`
	}
	if resp.StatusCode != http.StatusOK || xml.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&doc) != nil {
		return ""
	}
	for _, s := range doc.Servers {
		if s.Type == "imap" && s.Hostname != "" {
			return s.Hostname
		}
	}
	return ""
}
