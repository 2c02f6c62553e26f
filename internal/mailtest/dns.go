// A local DNS resolver for tests of what the gateway dials by name: it
// answers only the names it is given, without leaving the machine.

package mailtest

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// Resolver returns a resolver that answers A and AAAA queries for the
// names in zone (without the final dot) with its addresses, and NXDOMAIN
// for every other name. It needs no listener: Go's resolver talks to it
// over an in-memory connection (DNS over TCP framing).
func Resolver(t testing.TB, zone map[string][]netip.Addr) *net.Resolver {
	return ZoneResolver(t, Zone{Addrs: zone})
}

// Zone is what a ZoneResolver answers: addresses (A, AAAA) and SRV
// records (by the full query name, "_imaps._tcp.example.test").
type Zone struct {
	Addrs map[string][]netip.Addr
	SRV   map[string][]net.SRV
	// Asked, when set, is told every name asked (lower case, no final
	// dot), answered or not: what the code under test looked up.
	Asked func(name string)
}

// ZoneResolver is Resolver with SRV records too.
func ZoneResolver(t testing.TB, zone Zone) *net.Resolver {
	t.Helper()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		client, server := net.Pipe()
		go serveDNS(server, zone)
		return client, nil
	}}
}

func serveDNS(c net.Conn, zone Zone) {
	defer c.Close()
	for {
		var n uint16
		if err := binary.Read(c, binary.BigEndian, &n); err != nil {
			return
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		var q dnsmessage.Message
		if err := q.Unpack(buf); err != nil || len(q.Questions) != 1 {
			return
		}
		qn := q.Questions[0]
		name := strings.TrimSuffix(strings.ToLower(qn.Name.String()), ".")
		if zone.Asked != nil {
			zone.Asked(name)
		}
		addrs, known := zone.Addrs[name]
		srvs, knownSRV := zone.SRV[name]
		ans := dnsmessage.Message{Header: dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true}, Questions: q.Questions}
		if !known && !knownSRV {
			ans.RCode = dnsmessage.RCodeNameError
		}
		for _, r := range srvs {
			if qn.Type != dnsmessage.TypeSRV {
				break
			}
			target, err := dnsmessage.NewName(strings.TrimSuffix(r.Target, ".") + ".")
			if err != nil {
				return
			}
			h := dnsmessage.ResourceHeader{Name: qn.Name, Type: dnsmessage.TypeSRV, Class: dnsmessage.ClassINET, TTL: 60}
			ans.Answers = append(ans.Answers, dnsmessage.Resource{Header: h, Body: &dnsmessage.SRVResource{Priority: r.Priority, Weight: r.Weight, Port: r.Port, Target: target}})
		}
		for _, a := range addrs {
			h := dnsmessage.ResourceHeader{Name: qn.Name, Class: dnsmessage.ClassINET, TTL: 60}
			switch {
			case qn.Type == dnsmessage.TypeA && a.Is4():
				h.Type = dnsmessage.TypeA
				ans.Answers = append(ans.Answers, dnsmessage.Resource{Header: h, Body: &dnsmessage.AResource{A: a.As4()}})
			case qn.Type == dnsmessage.TypeAAAA && a.Is6():
				h.Type = dnsmessage.TypeAAAA
				ans.Answers = append(ans.Answers, dnsmessage.Resource{Header: h, Body: &dnsmessage.AAAAResource{AAAA: a.As16()}})
			}
		}
		out, err := ans.Pack()
		if err != nil {
			return
		}
		if err := binary.Write(c, binary.BigEndian, uint16(len(out))); err != nil {
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}
