package hosts_test

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/hosts"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

// TestSuggestStaysInMailHosts: a sign-in address whose domain is no host
// name ("u@evil.test#.probe.test", with "/", "?" or ":port#" likewise)
// must not make the autoconfig lookup leave MAIL_HOSTS: read as a URL,
// "autoconfig.evil.test#.probe.test" is a request to autoconfig.evil.test
// that matched *.probe.test by suffix. Nothing outside probe.test is
// looked up.
func TestSuggestStaysInMailHosts(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	zone := mailtest.Zone{
		// Were it asked, this would be dialled (and refused by egress).
		Addrs: map[string][]netip.Addr{"autoconfig.evil.test": {netip.MustParseAddr("127.0.0.1")}},
		Asked: func(name string) { mu.Lock(); asked = append(asked, name); mu.Unlock() },
	}
	h := hosts.New(hosts.Config{
		Default:  hosts.Server{IMAP: transport.Endpoint{Host: "imap.default.test", Port: 993, Security: transport.TLS}},
		Patterns: []hosts.Pattern{{Name: "*.probe.test"}},
		Resolver: mailtest.ZoneResolver(t, zone),
	})
	for _, address := range []string{"u@evil.test#.probe.test", "u@evil.test/.probe.test", "u@evil.test?.probe.test", "u@evil.test:443#.probe.test", "u@evil.test\\.probe.test"} {
		if got := h.Suggest(context.Background(), address); got != "" {
			t.Errorf("%s: suggested %q", address, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range asked {
		if !strings.HasSuffix(name, ".probe.test") {
			t.Errorf("looked up %q, outside MAIL_HOSTS", name)
		}
	}
}
