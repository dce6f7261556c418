package auth

import (
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.0.2.1, 2001:db8:ffff::/48")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, peer string
		lines      []string
		want       string
	}{
		{"no header", "203.0.113.5", nil, "203.0.113.5"},
		{"untrusted peer's header ignored", "203.0.113.5", []string{"198.51.100.7"}, "203.0.113.5"},
		{"untrusted peer's lines ignored", "203.0.113.5", []string{"198.51.100.7", "10.1.1.1"}, "203.0.113.5"},
		{"trusted proxy", "10.1.2.3", []string{"198.51.100.7"}, "198.51.100.7"},
		{"chain of trusted proxies", "10.1.2.3", []string{"198.51.100.7, 192.0.2.1, 10.9.9.9"}, "198.51.100.7"},
		{"spoofed left entries ignored", "10.1.2.3", []string{"1.1.1.1, 198.51.100.7"}, "198.51.100.7"},
		{"proxy's own line after a forged one", "10.1.2.3", []string{"198.51.100.7", "203.0.113.9"}, "203.0.113.9"},
		{"forged line, then a trusted hop's line", "10.1.2.3",
			[]string{"198.51.100.7", "203.0.113.9", "10.8.8.8"}, "203.0.113.9"},
		{"commas and lines mixed", "10.1.2.3",
			[]string{"1.1.1.1, 2.2.2.2", "203.0.113.9, 10.7.7.7", "192.0.2.1"}, "203.0.113.9"},
		{"walk crosses lines to the client", "10.1.2.3",
			[]string{"1.1.1.1, 203.0.113.9", "10.7.7.7", "10.6.6.6, 192.0.2.1"}, "203.0.113.9"},
		{"more hops than trusted proxies", "10.1.2.3",
			[]string{"9.9.9.9, 8.8.8.8, 7.7.7.7, 203.0.113.9, 10.1.1.1"}, "203.0.113.9"},
		{"more hops than trusted proxies, over several lines", "10.1.2.3",
			[]string{"9.9.9.9, 8.8.8.8", "7.7.7.7", "203.0.113.9, 10.1.1.1", "192.0.2.1"}, "203.0.113.9"},
		{"garbage falls back to peer", "10.1.2.3", []string{"not-an-ip"}, "10.1.2.3"},
		{"garbage line right of the client ends the walk", "10.1.2.3", []string{"203.0.113.9", "unknown"}, "10.1.2.3"},
		{"garbage left of the client is never read", "10.1.2.3", []string{"not-an-ip, 203.0.113.9"}, "203.0.113.9"},
		{"garbage line left of the client is never read", "10.1.2.3", []string{"<script>", "203.0.113.9"}, "203.0.113.9"},
		{"garbage right of the client ends the walk", "10.1.2.3", []string{"203.0.113.9, nonsense"}, "10.1.2.3"},
		{"empty hop ends the walk", "10.1.2.3", []string{"203.0.113.9,,10.1.1.1"}, "10.1.2.3"},
		{"empty last line ends the walk", "10.1.2.3", []string{"203.0.113.9", ""}, "10.1.2.3"},
		{"ipv6 client", "192.0.2.1", []string{"2001:db8::1"}, "2001:db8::1"},
		{"ipv6 proxies and client", "2001:db8:ffff::1",
			[]string{"2001:db8::1, 2001:db8:ffff::2", "2001:db8:ffff::3"}, "2001:db8::1"},
		{"ipv6 proxy's own line after a forged one", "2001:db8:ffff::1",
			[]string{"2001:db8::1", "2001:db8::bad, 2001:db8:ffff::2"}, "2001:db8::bad"},
		{"ipv6 and ipv4 hops mixed over lines", "10.1.2.3",
			[]string{"198.51.100.7", "2001:db8::bad", "2001:db8:ffff::9, 10.2.2.2"}, "2001:db8::bad"},
		{"ipv4-mapped ipv6 hop", "10.1.2.3", []string{"::ffff:198.51.100.7"}, "198.51.100.7"},
		{"ipv4-mapped trusted hop skipped", "10.1.2.3", []string{"198.51.100.7, ::ffff:10.2.2.2"}, "198.51.100.7"},
		{"hop with a port", "10.1.2.3", []string{"198.51.100.7:4711"}, "198.51.100.7"},
		{"ipv6 hop with a port", "10.1.2.3", []string{"[2001:db8::1]:4711"}, "2001:db8::1"},
		{"all trusted", "10.1.2.3", []string{"10.4.4.4", "192.0.2.1"}, "10.1.2.3"},
	}
	for _, tc := range cases {
		var lines [][]byte
		for _, l := range tc.lines {
			lines = append(lines, []byte(l))
		}
		got := ClientIP(netip.MustParseAddr(tc.peer), lines, trusted)
		if got.String() != tc.want {
			t.Errorf("%s: ClientIP = %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, err := ParseTrustedProxies("10.0.0.0/8,bogus"); err == nil {
		t.Error("bogus proxy accepted")
	}
}
