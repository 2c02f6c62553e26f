// Package hosts decides which mail hosts the gateway serves and how each
// is reached: the default (IMAP_HOST, SMTP_HOST), the hosts of the sign-in
// providers, and the names MAIL_HOSTS allows (exact names and *.domain
// patterns). Any other name is refused with a sentence before a connection
// is made, and so is an allowed name that resolves to a loopback, private
// or link-local address, unless the operator allows that; the dial of such
// a name is checked again on the address actually dialled (egress). It
// also suggests a host for a mail address (RFC 6186 SRV records, then
// Thunderbird's autoconfig), only within what is allowed. It keeps nothing
// about anyone.
package hosts

import (
	"context"
	"crypto/tls"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/egress"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// Server is one mail host's IMAP and SMTP endpoints (SMTP's Host is ""
// when sending is off for it).
type Server struct {
	IMAP, SMTP transport.Endpoint
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
	// Named are fixed hosts (the providers'), by lower-case IMAP host
	// name; the operator configured them, so they may be anywhere.
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
		named[strings.ToLower(k)] = v
	}
	cfg.Named = named
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	return &Hosts{cfg: cfg}
}

// Lookup returns the server of host ("" the default), or a Forbidden
// error saying it is not served here. It does no I/O: Check does the
// resolution a pattern host needs.
func (h *Hosts) Lookup(host string) (Server, error) {
	name := strings.ToLower(strings.TrimSpace(host))
	if name == "" || name == strings.ToLower(h.cfg.Default.IMAP.Host) {
		return h.cfg.Default, nil
	}
	if s, ok := h.cfg.Named[name]; ok {
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
	return Server{}, mailerr.Newf(mailerr.Forbidden, "this gateway does not serve mailboxes at %q (the operator allows %s)", host, h.allowed())
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

// allowed says in words which hosts are served.
func (h *Hosts) allowed() string {
	names := []string{h.cfg.Default.IMAP.Host}
	for _, p := range h.cfg.Patterns {
		names = append(names, p.Name)
	}
	for n := range h.cfg.Named {
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}

// Check makes sure host may be connected to: served here, and for a
// MAIL_HOSTS name, resolving only to public addresses (unless allowed).
// Nothing is dialled.
func (h *Hosts) Check(ctx context.Context, host string) error {
	s, err := h.Lookup(host)
	if err != nil || !s.IMAP.PublicOnly {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := h.cfg.Resolver.LookupNetIP(ctx, "ip", s.IMAP.Host)
	if err != nil || len(addrs) == 0 {
		return mailerr.Wrap(mailerr.Unavailable, err, fmt.Sprintf("the mail host %q cannot be found (DNS)", host))
	}
	for _, a := range addrs {
		if err := egress.Check(a); err != nil {
			return mailerr.Wrap(mailerr.Forbidden, err, fmt.Sprintf("the mail host %q resolves to an address this gateway may not connect to (%s)", host, describe(a)))
		}
	}
	return nil
}

func describe(a netip.Addr) string {
	switch a = a.Unmap(); {
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "a private network"
	case a.IsLinkLocalUnicast():
		return "link-local"
	}
	return "not a public address"
}

// Suggest is the host to use for a mail address, when its domain says
// (RFC 6186 _imaps._tcp SRV record, then autoconfig.<domain>) and that
// host is served here; "" otherwise. It takes at most a few seconds.
func (h *Hosts) Suggest(ctx context.Context, address string) string {
	_, domain, ok := strings.Cut(strings.ToLower(strings.TrimSpace(address)), "@")
	if !ok || domain == "" || len(h.cfg.Patterns) == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	served := func(name string) bool {
		name = strings.TrimSuffix(strings.ToLower(name), ".")
		if _, err := h.Lookup(name); err != nil || name == "" {
			return false
		}
		return h.Check(ctx, name) == nil
	}
	if _, srvs, err := h.cfg.Resolver.LookupSRV(ctx, "imaps", "tcp", domain); err == nil {
		for _, s := range srvs {
			if served(s.Target) {
				return strings.TrimSuffix(strings.ToLower(s.Target), ".")
			}
		}
	}
	if name := autoconfig(ctx, h, domain, address); name != "" && served(name) {
		return name
	}
	return ""
}

// autoconfig reads the IMAP host from https://autoconfig.<domain>, only
// when that name is itself served here (so the request goes nowhere the
// operator has not allowed) and through the egress check.
func autoconfig(ctx context.Context, h *Hosts, domain, address string) string {
	name := "autoconfig." + domain
	if _, err := h.Lookup(name); err != nil {
		return ""
	}
	client := egress.HTTPClient(egress.Options{Timeout: 3 * time.Second, Resolver: h.cfg.Resolver})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+name+"/mail/config-v1.1.xml?emailaddress="+address, nil)
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
