package guard

import "net/netip"

// AddressKey is the key a client address is counted under by the
// per-address limits: an IPv4 address by itself (a /32), an IPv6 address
// by its first v6Bits bits, as a prefix ("2001:db8:1:2::/64"). A host is
// handed a whole /64 (and often more), and takes any address in it at
// will: counted by the full address, one host counted as 2^64 clients.
// An IPv4 address inside IPv6 (::ffff:a.b.c.d) counts as the IPv4 one.
func AddressKey(a netip.Addr, v6Bits int) string {
	a = a.Unmap().WithZone("")
	if !a.Is6() || v6Bits <= 0 || v6Bits >= 128 {
		return a.String()
	}
	p, err := a.Prefix(v6Bits)
	if err != nil {
		return a.String()
	}
	return p.String()
}
