// Package egress decides which addresses the gateway may connect to when
// someone else's input picks the destination (the URL of a client metadata
// document, and the discovery and token endpoints of sign-in providers):
// public unicast addresses only. The check runs in the dialer's Control
// hook, on the address actually dialled after DNS, so a name that resolves
// to a private address is refused like the address itself; IPv4 is
// unwrapped from every IPv6 form that carries one (mapped, compatible,
// NAT64, 6to4) before it is judged. It knows nothing of OAuth or mail.
package egress

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// Ranges that are not globally reachable (IANA's special-purpose address
// registries, RFC 6890 and its updates), and a reason for each.
var blocked4 = []struct {
	p   netip.Prefix
	why string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (carrier-grade NAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast (deprecated)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (and broadcast)"},
}

var (
	// global6 is IPv6 global unicast; everything outside it is refused
	// (loopback, unspecified, unique-local, link-local, multicast,
	// discard-only, and the IPv4 forms unwrapped before).
	global6 = netip.MustParsePrefix("2000::/3")
	// Inside global6 but not global.
	blocked6 = []struct {
		p   netip.Prefix
		why string
	}{
		{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments (Teredo, ORCHID, benchmarking)"},
		{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
		{netip.MustParsePrefix("3fff::/20"), "documentation"},
		{netip.MustParsePrefix("5f00::/16"), "segment routing (SRv6) identifiers"},
	}
	mapped4   = netip.MustParsePrefix("::ffff:0:0/96")
	compat4   = netip.MustParsePrefix("::/96")          // IPv4-compatible (deprecated)
	nat64     = netip.MustParsePrefix("64:ff9b::/96")   // NAT64 well-known prefix
	nat64Loc  = netip.MustParsePrefix("64:ff9b:1::/48") // NAT64 local use: where the IPv4 sits is the operator's choice
	sixToFour = netip.MustParsePrefix("2002::/16")      // 6to4: the IPv4 is bits 16 to 47
)

// ErrNotPublic is wrapped by Check's errors.
var ErrNotPublic = errors.New("not a public address")

// Check returns nil when a is a public unicast address, and otherwise an
// error wrapping ErrNotPublic that names the range.
func Check(a netip.Addr) error {
	orig := a
	a = a.WithZone("")
	if a.Is6() {
		b := a.As16()
		v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]}) }
		switch {
		case mapped4.Contains(a):
			a = a.Unmap()
		case nat64.Contains(a):
			a = v4(12)
		case compat4.Contains(a):
			a = v4(12)
		case sixToFour.Contains(a):
			a = v4(2)
		case nat64Loc.Contains(a):
			return refuse(orig, "NAT64 local-use prefix")
		case !global6.Contains(a):
			return refuse(orig, "not IPv6 global unicast")
		default:
			for _, r := range blocked6 {
				if r.p.Contains(a) {
					return refuse(orig, r.why)
				}
			}
			return nil
		}
	}
	if !a.Is4() {
		return refuse(orig, "not an IP address")
	}
	for _, r := range blocked4 {
		if r.p.Contains(a) {
			if a != orig {
				return refuse(orig, r.why+", as "+a.String())
			}
			return refuse(orig, r.why)
		}
	}
	return nil
}

func refuse(a netip.Addr, why string) error {
	return fmt.Errorf("%w: %s (%s)", ErrNotPublic, a, why)
}

// Control is a net.Dialer Control hook that refuses every address Check
// refuses. It sees the address being dialled, after name resolution.
func Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is not an address and port", ErrNotPublic, address)
	}
	return Check(ap.Addr())
}

// Options configures HTTPClient.
type Options struct {
	// Timeout bounds each request, connection included (0: 5 s).
	Timeout time.Duration
	// Resolver resolves names (nil: the system's); tests point it at a
	// local DNS server.
	Resolver *net.Resolver
	// AllowPrivate turns the address check off: for tests against
	// servers on loopback only, never in production.
	AllowPrivate bool
	// RootCAs, when set, are the certificate authorities trusted instead
	// of the system's.
	RootCAs *x509.CertPool
}

// HTTPClient returns a client that connects only to public addresses: no
// proxy (which would dial for it), no redirects followed (each hop would
// need the same judgement, and callers have no use for one).
func HTTPClient(o Options) *http.Client {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	d := &net.Dialer{Timeout: o.Timeout, Resolver: o.Resolver, Control: Control}
	if o.AllowPrivate {
		d.Control = nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = d.DialContext
	tr.Proxy = nil
	if o.RootCAs != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
