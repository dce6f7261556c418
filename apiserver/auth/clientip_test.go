package auth

import (
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, peer, xff, want string
	}{
		{"no header", "203.0.113.5", "", "203.0.113.5"},
		{"untrusted peer's header ignored", "203.0.113.5", "198.51.100.7", "203.0.113.5"},
		{"trusted proxy", "10.1.2.3", "198.51.100.7", "198.51.100.7"},
		{"chain of trusted proxies", "10.1.2.3", "198.51.100.7, 192.0.2.1, 10.9.9.9", "198.51.100.7"},
		{"spoofed left entries ignored", "10.1.2.3", "1.1.1.1, 198.51.100.7", "198.51.100.7"},
		{"garbage falls back to peer", "10.1.2.3", "not-an-ip", "10.1.2.3"},
		{"ipv6 client", "192.0.2.1", "2001:db8::1", "2001:db8::1"},
		{"all trusted", "10.1.2.3", "10.4.4.4", "10.1.2.3"},
	}
	for _, tc := range cases {
		got := ClientIP(netip.MustParseAddr(tc.peer), tc.xff, trusted)
		if got.String() != tc.want {
			t.Errorf("%s: ClientIP = %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, err := ParseTrustedProxies("10.0.0.0/8,bogus"); err == nil {
		t.Error("bogus proxy accepted")
	}
}
