package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/guard"
)

func TestHostPolicy(t *testing.T) {
	loop := newHostPolicy(true, []string{"mcp.example.com", "Other.Example:8443"})
	open := newHostPolicy(false, nil)
	listed := newHostPolicy(false, []string{"mcp.example.com"})
	for _, tc := range []struct {
		p    hostPolicy
		host string
		want bool
	}{
		{loop, "localhost:3000", true},
		{loop, "LOCALHOST", true},
		{loop, "app.localhost:3000", true},
		{loop, "127.0.0.2:3000", true},
		{loop, "[::1]:3000", true},
		{loop, "[::ffff:127.0.0.1]:3000", true},
		{loop, "mcp.example.com", true},
		{loop, "mcp.example.com:443", true},
		{loop, "other.example:8443", true},
		{loop, "other.example", false}, // listed with a port: only that port
		{loop, "evil.example", false},
		{loop, "localhost.evil.example", false},
		{loop, "127.0.0.1.evil.example", false},
		{loop, "10.0.0.1:3000", false},
		{loop, "", false},
		{open, "anything.example", true},
		{listed, "anything.example", false},
		{listed, "mcp.example.com", true},
		{listed, "localhost:3000", true},
	} {
		if got := tc.p.allows(tc.host); got != tc.want {
			t.Errorf("loopback=%v allowed=%v: allows(%q) = %v, want %v", tc.p.loopback, tc.p.allowed, tc.host, got, tc.want)
		}
	}
}

func TestOriginPolicyLoopback(t *testing.T) {
	p := newOriginPolicy([]string{"*", "https://app.example.com"})
	p.localOnly = true
	for origin, want := range map[string]bool{
		"http://localhost:5173":      true,
		"http://127.0.0.1":           true,
		"http://[::1]:8080":          true,
		"https://app.example.com":    true,
		"https://app.example.com/":   true,
		"https://evil.example":       false,
		"http://localhost.evil.test": false,
		"null":                       false,
		"file://":                    false,
	} {
		if got := p.allows(origin); got != want {
			t.Errorf("allows(%q) = %v, want %v", origin, got, want)
		}
	}
	p.localOnly = false
	if !p.allows("https://evil.example") {
		t.Error("without a loopback bind, * allows any origin")
	}
}

func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"direct", "192.0.2.7:5000", nil, "192.0.2.7"},
		{"untrusted peer's header ignored", "192.0.2.7:5000", []string{"198.51.100.1"}, "192.0.2.7"},
		{"trusted proxy", "127.0.0.1:5000", []string{"198.51.100.1"}, "198.51.100.1"},
		{"forged left part ignored", "127.0.0.1:5000", []string{"203.0.113.9, 198.51.100.1"}, "198.51.100.1"},
		{"chain of trusted proxies", "127.0.0.1:5000", []string{"198.51.100.1, 10.1.2.3", "10.9.9.9"}, "198.51.100.1"},
		{"garbage stops the walk", "127.0.0.1:5000", []string{"198.51.100.1, not-an-ip"}, "127.0.0.1"},
		{"ipv6 mapped", "[::ffff:192.0.2.8]:1", nil, "192.0.2.8"},
		// An IPv6 client counts by its /64: one host may take any address
		// in it.
		{"ipv6 by its /64", "[2001:db8:1:2::a]:1", nil, "2001:db8:1:2::/64"},
		{"another address of that /64", "[2001:db8:1:2:ffff:1:2:3]:1", nil, "2001:db8:1:2::/64"},
		{"the next /64", "[2001:db8:1:3::a]:1", nil, "2001:db8:1:3::/64"},
		{"ipv6 through a proxy", "127.0.0.1:5000", []string{"2001:db8:9:9::1"}, "2001:db8:9:9::/64"},
		{"ipv6 with a zone", "[fe80::1%eth0]:1", nil, "fe80::/64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			h := withClientAddr(trusted, 64, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = guard.ClientAddr(r.Context())
			}))
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			if got != tc.want {
				t.Fatalf("client %q, want %q", got, tc.want)
			}
		})
	}
}
