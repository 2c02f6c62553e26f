package hosts_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/mailbox-mcp/mailbox-mcp/internal/hosts"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailerr"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
	"github.com/mailbox-mcp/mailbox-mcp/internal/transport"
)

func testHosts(t *testing.T, allowPrivate bool) *hosts.Hosts {
	zone := mailtest.Zone{
		Addrs: map[string][]netip.Addr{
			"mail.public.test":       {netip.MustParseAddr("93.184.216.34")},
			"imap.customer.example":  {netip.MustParseAddr("93.184.216.35")},
			"loop.customer.example":  {netip.MustParseAddr("127.0.0.1")},
			"lan.customer.example":   {netip.MustParseAddr("10.0.0.1")},
			"mixed.customer.example": {netip.MustParseAddr("93.184.216.36"), netip.MustParseAddr("::ffff:192.168.1.1")},
		},
		SRV: map[string][]net.SRV{
			"_imaps._tcp.customer.example": {{Target: "imap.customer.example.", Port: 993}},
			"_imaps._tcp.evil.example":     {{Target: "imap.elsewhere.example.", Port: 993}},
		},
	}
	tlsConf := &tls.Config{ServerName: "imap.default.test"}
	return hosts.New(hosts.Config{
		Default: hosts.Server{
			IMAP: transport.Endpoint{Host: "imap.default.test", Port: 993, Security: transport.TLS, TLS: tlsConf},
			SMTP: transport.Endpoint{Host: "smtp.default.test", Port: 587, Security: transport.StartTLS, TLS: tlsConf},
		},
		Named:        map[string]hosts.Server{"outlook.office365.com": {IMAP: transport.Endpoint{Host: "outlook.office365.com", Port: 993}}},
		Patterns:     []hosts.Pattern{{Name: "*.customer.example"}, {Name: "mail.public.test", Port: 1993}},
		AllowPrivate: allowPrivate,
		Resolver:     mailtest.ZoneResolver(t, zone),
	})
}

func TestLookup(t *testing.T) {
	h := testHosts(t, false)
	for host, want := range map[string]string{
		"":                      "imap.default.test:993",
		"IMAP.default.test":     "imap.default.test:993",
		"outlook.office365.com": "outlook.office365.com:993",
		"imap.customer.example": "imap.customer.example:993",
		"mail.public.test":      "mail.public.test:1993",
	} {
		s, err := h.Lookup(host)
		if err != nil || s.IMAP.Addr() != want {
			t.Errorf("%q: %v %v, want %s", host, s.IMAP.Addr(), err, want)
		}
	}
	s, _ := h.Lookup("imap.customer.example")
	if !s.IMAP.PublicOnly || s.IMAP.TLS.ServerName != "imap.customer.example" || s.SMTP.Host != "imap.customer.example" || s.SMTP.Port != 587 || !s.SMTP.PublicOnly {
		t.Errorf("a pattern host: %+v", s)
	}
	if d, _ := h.Lookup(""); d.IMAP.PublicOnly {
		t.Error("the operator's default host is dialled as a caller's")
	}
	for _, host := range []string{"customer.example", "imap.customer.example.evil.test", "evil.test", "mail.public.test.evil"} {
		_, err := h.Lookup(host)
		if mailerr.KindOf(err) != mailerr.Forbidden || !strings.Contains(mailerr.Message(err), "does not serve mailboxes at") {
			t.Errorf("%q: %v", host, err)
		}
	}
}

func TestCheck(t *testing.T) {
	h := testHosts(t, false)
	ctx := context.Background()
	if err := h.Check(ctx, "imap.customer.example"); err != nil {
		t.Fatalf("a public host: %v", err)
	}
	for host, want := range map[string]string{
		"loop.customer.example":     "loopback",
		"lan.customer.example":      "a private network",
		"mixed.customer.example":    "a private network",
		"nxdomain.customer.example": "cannot be found",
		"elsewhere.test":            "does not serve",
	} {
		if err := h.Check(ctx, host); err == nil || !strings.Contains(mailerr.Message(err), want) {
			t.Errorf("%s: %v, want %q", host, err, want)
		}
	}
	if err := testHosts(t, true).Check(ctx, "loop.customer.example"); err != nil {
		t.Fatalf("MAIL_HOSTS_PRIVATE: %v", err)
	}
}

func TestSuggest(t *testing.T) {
	h := testHosts(t, false)
	if got := h.Suggest(context.Background(), "Ann@Customer.example"); got != "imap.customer.example" {
		t.Fatalf("SRV suggestion: %q", got)
	}
	// An SRV record naming a host that is not served suggests nothing.
	if got := h.Suggest(context.Background(), "x@evil.example"); got != "" {
		t.Fatalf("a foreign SRV target was suggested: %q", got)
	}
}
