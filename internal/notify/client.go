package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrNonPublicAddress refuses a webhook connection to an address that is not on the public
// internet: the partner-supplied URL must not reach the service's own network (SSRF).
var ErrNonPublicAddress = errors.New("webhook address is not public")

// nonPublic are the ranges, beyond what netip.Addr classifies itself, that are never a partner's
// public endpoint: "this network", carrier-grade NAT (often a cluster's pod or service range),
// IETF protocol assignments, benchmarking, reserved and broadcast, and NAT64.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// public says whether ip may receive webhooks: not loopback, link-local (cloud metadata
// services live there), private (RFC 1918, IPv6 unique-local: where clusters put pods and
// services), multicast, unspecified, or one of nonPublic.
func public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsPrivate() || ip.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// refuseNonPublic is a dialer's Control: it runs on the address actually connected to, after
// name resolution, so a host name that resolves (or later re-resolves) inward is refused too.
func refuseNonPublic(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrNonPublicAddress, address)
	}
	if !public(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrNonPublicAddress, ap.Addr())
	}
	return nil
}

// newWebhookClient is the HTTP client of deliveries. It never follows a redirect: a 3xx is
// answered to the POST, and the attempt fails and is retried like any other non-2xx (following
// it would turn the POST into a GET whose 2xx marks the event delivered). Unless
// allowPrivateNetworks, it connects only to public addresses. It ignores proxy settings of the
// environment: the address checked must be the receiver's.
func newWebhookClient(timeout time.Duration, allowPrivateNetworks bool) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivateNetworks {
		dialer.Control = refuseNonPublic
	}
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{
		Transport:     transport,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
