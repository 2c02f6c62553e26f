package egress_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailbox-mcp/mailbox-mcp/internal/egress"
	"github.com/mailbox-mcp/mailbox-mcp/internal/mailtest"
)

// TestCheckSpellings judges addresses without dialling any: every
// loopback, private, link-local and otherwise non-global spelling is
// refused, including IPv4 inside each IPv6 form that carries one, and
// public addresses pass in every form.
func TestCheckSpellings(t *testing.T) {
	refused := []string{
		// loopback
		"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "::ffff:7f00:1", "::127.0.0.1", "::7f00:1",
		"64:ff9b::127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::", "2002:7f00:0001:abcd::1",
		// unspecified, this network
		"0.0.0.0", "0.1.2.3", "::", "::ffff:0.0.0.0",
		// private
		"10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1", "::ffff:10.1.2.3", "::10.1.2.3",
		"64:ff9b::a01:203", "2002:c0a8:101::1", "fc00::1", "fd12:3456::1",
		// link-local and cloud metadata
		"169.254.169.254", "::ffff:169.254.169.254", "::169.254.169.254", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::",
		"fe80::1", "fe80::1%eth0", "febf::1",
		// shared address space, benchmarking, documentation, IETF, 6to4 relay
		"100.64.0.1", "100.127.255.254", "198.18.0.1", "198.19.255.255", "192.0.2.1", "198.51.100.7", "203.0.113.9",
		"192.0.0.8", "192.88.99.1", "2001:db8::1", "3fff::1", "2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
		"2001:10::1", "2001:20::1", "5f00::1",
		// multicast, reserved, broadcast
		"224.0.0.1", "239.255.255.250", "ff02::1", "ff0e::1", "240.0.0.1", "255.255.255.255", "::ffff:224.0.0.1",
		// discard-only, NAT64 local use, site-local
		"100::1", "64:ff9b:1::a00:1", "64:ff9b:1:ffff::8.8.8.8", "fec0::1",
	}
	for _, s := range refused {
		a := netip.MustParseAddr(s)
		if err := egress.Check(a); !errors.Is(err, egress.ErrNotPublic) {
			t.Errorf("%s: got %v, want refused", s, err)
		}
	}
	allowed := []string{
		"1.1.1.1", "8.8.8.8", "93.184.216.34", "::ffff:8.8.8.8", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e",
		"64:ff9b::808:808", // NAT64 of 8.8.8.8
		"2002:808:808::1",  // 6to4 of 8.8.8.8
		"100.63.255.255",   // just below shared address space
		"100.128.0.0",      // just above
		"198.17.255.255",   // just below benchmarking
		"198.20.0.0",       // just above
		"172.15.255.255",   // just below 172.16/12
		"172.32.0.0",       // just above
		"2001:200::1",      // just above 2001::/23
		"3fff:1000::1",     // just above 3fff::/20
	}
	for _, s := range allowed {
		if err := egress.Check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: refused (%v), want allowed", s, err)
		}
	}
}

// TestNamesResolvingToLoopbackReachNothing: names that a resolver maps to
// this machine, in every spelling, are refused at the dial, and nothing
// reaches the listener; the same resolver without the check does reach it,
// so the test would see a leak.
func TestNamesResolvingToLoopbackReachNothing(t *testing.T) {
	var accepted atomic.Int32
	ln4, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln4.Close()
	port := ln4.Addr().(*net.TCPAddr).Port
	serve := func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			c.Close()
		}
	}
	go serve(ln4)
	if ln6, err := net.Listen("tcp", "[::1]:"+strconv.Itoa(port)); err == nil {
		defer ln6.Close()
		go serve(ln6)
	}
	zone := map[string][]netip.Addr{
		"loop4.test":   {netip.MustParseAddr("127.0.0.1")},
		"loop6.test":   {netip.MustParseAddr("::1")},
		"mapped.test":  {netip.MustParseAddr("::ffff:127.0.0.1")},
		"compat.test":  {netip.MustParseAddr("::127.0.0.1")},
		"nat64.test":   {netip.MustParseAddr("64:ff9b::7f00:1")},
		"sixfour.test": {netip.MustParseAddr("2002:7f00:1::1")},
		"mixed.test":   {netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("::ffff:127.0.0.1"), netip.MustParseAddr("127.0.0.1")},
	}
	res := mailtest.Resolver(t, zone)
	client := egress.HTTPClient(egress.Options{Timeout: 2 * time.Second, Resolver: res})
	for name := range zone {
		_, err := client.Get("http://" + name + ":" + strconv.Itoa(port) + "/")
		if !errors.Is(err, egress.ErrNotPublic) {
			t.Errorf("%s: got %v, want a refusal", name, err)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached the loopback listener through the egress client", n)
	}
	// The control: the same resolver, no check.
	plain := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: (&net.Dialer{Resolver: res}).DialContext}}
	if resp, err := plain.Get("http://loop4.test:" + strconv.Itoa(port) + "/"); err == nil {
		resp.Body.Close() // (the listener may hang up before the request is read: only the connection counts)
	}
	if accepted.Load() == 0 {
		t.Fatal("the control request did not reach the listener: the test cannot see a leak")
	}
}
