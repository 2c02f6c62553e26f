package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
)

// hostPolicy is the DNS-rebinding protection: a web page on evil.example
// can make a browser resolve evil.example to 127.0.0.1 and send requests to
// a gateway listening there; those requests carry Host: evil.example. With
// a loopback bind only local names (and ALLOWED_HOSTS) are accepted. mcp-go
// has a similar check of its own, which the app turns off so that this one,
// with ALLOWED_HOSTS for a same-host reverse proxy, is the only rule.
type hostPolicy struct {
	loopback bool            // BIND_ADDRESS is loopback: local names only
	allowed  map[string]bool // lower-case host or host:port
}

func newHostPolicy(loopback bool, hosts []string) hostPolicy {
	p := hostPolicy{loopback: loopback, allowed: map[string]bool{}}
	for _, h := range hosts {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			p.allowed[h] = true
		}
	}
	return p
}

// allows reports whether a request with this Host header may reach /mcp.
func (p hostPolicy) allows(hostport string) bool {
	hostport = strings.ToLower(hostport)
	host := hostOnly(hostport)
	if isLocalName(host) {
		return true
	}
	if p.allowed[hostport] || p.allowed[host] {
		return true
	}
	// Without a loopback bind and without a list, any Host is accepted (a
	// container behind its own proxy); with a list, only the list.
	return !p.loopback && len(p.allowed) == 0
}

func (p hostPolicy) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.allows(r.Host) {
			httpError(w, http.StatusForbidden, "host not allowed: this gateway answers only to local host names; add the name to ALLOWED_HOSTS if a reverse proxy forwards it")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostOnly strips the port (and IPv6 brackets) from a Host header value.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// isLocalName reports whether host can only mean this machine: localhost,
// a name under .localhost (RFC 6761), or a loopback address.
func isLocalName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// isLocalOrigin reports whether a browser Origin is a page served from this
// machine.
func isLocalOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return isLocalName(u.Hostname())
}

// withClientAddr puts the client's address key into the request context
// for the per-address limits: its IP address, an IPv6 one by its first
// v6Bits bits (guard.AddressKey; 0: 64). X-Forwarded-For is believed only
// from a trusted proxy, and then its right-most address that is not
// itself a trusted proxy is the client (the left part can be forged by
// anyone).
func withClientAddr(trusted []netip.Prefix, v6Bits int, next http.Handler) http.Handler {
	if v6Bits == 0 {
		v6Bits = 64
	}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := remoteIP(r.RemoteAddr)
		if addr.IsValid() && isTrusted(addr) {
			hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
			for i := len(hops) - 1; i >= 0; i-- {
				a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
				if err != nil {
					break
				}
				addr = a.Unmap()
				if !isTrusted(addr) {
					break
				}
			}
		}
		if addr.IsValid() {
			r = r.WithContext(guard.WithClientAddr(r.Context(), guard.AddressKey(addr, v6Bits)))
		}
		next.ServeHTTP(w, r)
	})
}

func remoteIP(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := netip.ParseAddr(remote)
	return a.Unmap()
}
