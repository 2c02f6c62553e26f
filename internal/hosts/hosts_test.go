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
		Named:        map[string]hosts.Server{"outlook.office365.com": {IMAP: transport.Endpoint{Host: "outlook.office365.com", Port: 993}, Provider: "microsoft"}},
		Patterns:     []hosts.Pattern{{Name: "*.customer.example"}, {Name: "mail.public.test", Port: 1993}},
		AllowPrivate: allowPrivate,
		Resolver:     mailtest.ZoneResolver(t, zone),
	})
}

func TestLookup(t *testing.T) {
	h := testHosts(t, false)
	for host, want := range map[string]string{
		"":                               "imap.default.test:993",
		"IMAP.default.test":              "imap.default.test:993",
		" imap.default.test. ":           "imap.default.test:993",
		"imap.customer.example":          "imap.customer.example:993",
		"IMAP.Customer.Example.":         "imap.customer.example:993",
		"mail.public.test":               "mail.public.test:1993",
		"bücher.customer.example":        "xn--bcher-kva.customer.example:993",
		"xn--bcher-kva.customer.example": "xn--bcher-kva.customer.example:993",
	} {
		s, err := h.Lookup(host, "")
		if err != nil || s.IMAP.Addr() != want {
			t.Errorf("%q: %v %v, want %s", host, s.IMAP.Addr(), err, want)
		}
	}
	s, _ := h.Lookup("imap.customer.example", "")
	if !s.IMAP.PublicOnly || s.IMAP.TLS.ServerName != "imap.customer.example" || s.SMTP.Host != "imap.customer.example" || s.SMTP.Port != 587 || !s.SMTP.PublicOnly {
		t.Errorf("a pattern host: %+v", s)
	}
	if d, _ := h.Lookup("", ""); d.IMAP.PublicOnly {
		t.Error("the operator's default host is dialled as a caller's")
	}
	// What is no host name is refused, however a URL parser would read
	// it; so are names outside the patterns.
	for _, host := range []string{"customer.example", "imap.customer.example.evil.test", "evil.test", "mail.public.test.evil",
		"evil.test#.customer.example", "evil.test/.customer.example", "evil.test?.customer.example", "evil.test:993#.customer.example",
		"u@evil.test.customer.example", "a b.customer.example", "_imaps.customer.example", "a..customer.example", "-a.customer.example", "[::1]"} {
		_, err := h.Lookup(host, "")
		if mailerr.KindOf(err) != mailerr.Forbidden || !strings.Contains(mailerr.Message(err), "does not serve mailboxes at") {
			t.Errorf("%q: %v", host, err)
		}
	}
}

// TestProviderHostOnlyForItsSignIns: a provider's configured host serves
// that provider's sign-ins, and nobody else's logins (a password, a token
// of another provider), unless MAIL_HOSTS allows it as well.
func TestProviderHostOnlyForItsSignIns(t *testing.T) {
	h := testHosts(t, false)
	if s, err := h.Lookup("outlook.office365.com", "microsoft"); err != nil || s.IMAP.Addr() != "outlook.office365.com:993" {
		t.Fatalf("the provider's sign-in: %+v %v", s, err)
	}
	for _, provider := range []string{"", "google"} {
		if _, err := h.Lookup("outlook.office365.com", provider); mailerr.KindOf(err) != mailerr.Forbidden {
			t.Errorf("a login of %q at the provider's host: %v", provider, err)
		}
	}
	if err := h.Check(context.Background(), "outlook.office365.com"); mailerr.KindOf(err) != mailerr.Forbidden {
		t.Errorf("a caller naming the provider's host: %v", err)
	}
	if strings.Contains(mailerr.Message(h.Check(context.Background(), "elsewhere.test")), "outlook") {
		t.Error("the refusal lists the provider's host as one a caller may name")
	}
}

// TestCanonical: the default host however it is spelt is "", so that
// every per-account key names one account once; other names are their
// host name.
func TestCanonical(t *testing.T) {
	h := testHosts(t, false)
	for host, want := range map[string]string{
		"": "", "imap.default.test": "", "IMAP.Default.Test.": "", "  imap.default.test ": "",
		"imap.customer.example": "imap.customer.example", "IMAP.customer.example.": "imap.customer.example",
		"bücher.customer.example": "xn--bcher-kva.customer.example",
	} {
		if got := h.Canonical(host); got != want {
			t.Errorf("%q: %q, want %q", host, got, want)
		}
	}
}

// TestCheckOneSentence: every host a caller may not use gets the same
// sentence and the same kind (one HTTP status), whether it is not allowed,
// does not resolve, or resolves to a loopback or private address: the
// refusal is no DNS oracle.
func TestCheckOneSentence(t *testing.T) {
	h := testHosts(t, false)
	ctx := context.Background()
	if err := h.Check(ctx, "imap.customer.example"); err != nil {
		t.Fatalf("a public host: %v", err)
	}
	want := func(host string) string {
		return `this gateway does not serve mailboxes at "` + host + `": it serves imap.default.test, *.customer.example, mail.public.test (names that resolve to public addresses)`
	}
	for _, host := range []string{"loop.customer.example", "lan.customer.example", "mixed.customer.example", "nxdomain.customer.example", "elsewhere.test", "evil.test#.customer.example"} {
		err := h.Check(ctx, host)
		if mailerr.KindOf(err) != mailerr.Forbidden || mailerr.Message(err) != want(host) {
			t.Errorf("%s: %v (kind %v), want %q", host, err, mailerr.KindOf(err), want(host))
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
