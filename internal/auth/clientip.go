package auth

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
)

// ClientIP is the address a request comes from: the TCP peer, unless the peer is a trusted
// proxy, in which case the rightmost X-Forwarded-For hop that is not itself a trusted proxy.
//
// forwardedFor holds every X-Forwarded-For line of the request in the order received. Proxies
// either append to the last line or add a line of their own, so the hops are read as one list:
// the lines in order, each line's comma-separated entries in order, walked from the right. Hops
// further left than the first untrusted one are client-controlled and never believed. A hop that
// is not an address (optionally with a port) ends the walk at the peer: a chain that cannot be
// read names no client.
func ClientIP(peer netip.Addr, forwardedFor [][]byte, trusted []netip.Prefix) netip.Addr {
	if len(forwardedFor) == 0 || !contains(trusted, peer) {
		return peer
	}
	for line := len(forwardedFor) - 1; line >= 0; line-- {
		rest := forwardedFor[line]
		for {
			hop := rest
			cut := bytes.LastIndexByte(rest, ',')
			if cut >= 0 {
				hop, rest = rest[cut+1:], rest[:cut]
			}
			ip, ok := parseHop(hop)
			if !ok {
				return peer
			}
			if !contains(trusted, ip) {
				return ip
			}
			if cut < 0 {
				break
			}
		}
	}
	return peer
}

// parseHop reads one X-Forwarded-For entry: an IPv4 or IPv6 address, or either with a port
// ("192.0.2.1:4711", "[2001:db8::1]:4711"), as some load balancers write it.
func parseHop(hop []byte) (netip.Addr, bool) {
	s := string(bytes.TrimSpace(hop))
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
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
