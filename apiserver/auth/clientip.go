package auth

import (
	"fmt"
	"net/netip"
	"strings"
)

// ClientIP is the address a request comes from: the TCP peer, unless the peer is a trusted
// proxy, in which case the rightmost X-Forwarded-For entry that is not itself a trusted proxy.
// Entries further left are client-controlled and never trusted.
func ClientIP(peer netip.Addr, forwardedFor string, trusted []netip.Prefix) netip.Addr {
	if forwardedFor == "" || !contains(trusted, peer) {
		return peer
	}
	hops := strings.Split(forwardedFor, ",")
	for i := len(hops) - 1; i >= 0; i-- {
		ip, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer
		}
		ip = ip.Unmap()
		if !contains(trusted, ip) {
			return ip
		}
	}
	return peer
}

func contains(prefixes []netip.Prefix, ip netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ParseTrustedProxies parses a comma-separated list of IPs and CIDRs.
func ParseTrustedProxies(csv string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(csv, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p.Masked())
			continue
		}
		ip, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q is neither an IP nor a CIDR", item)
		}
		out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
	}
	return out, nil
}
