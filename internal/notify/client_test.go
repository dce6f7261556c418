package notify

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPublicAddresses(t *testing.T) {
	cases := []struct {
		addr   string
		public bool
	}{
		{"203.0.113.7", true},
		{"8.8.8.8", true},
		{"2001:4860:4860::8888", true},
		{"127.0.0.1", false},
		{"127.255.0.9", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"169.254.169.254", false}, // cloud metadata
		{"fe80::1", false},
		{"10.96.0.1", false}, // a cluster's service range
		{"172.16.5.4", false},
		{"192.168.1.1", false},
		{"fd00::1", false},
		{"100.64.0.10", false}, // carrier-grade NAT, a common pod range
		{"0.0.0.0", false},
		{"::", false},
		{"0.1.2.3", false},
		{"224.0.0.1", false},
		{"ff02::1", false},
		{"255.255.255.255", false},
		{"198.18.0.1", false},
		{"64:ff9b::7f00:1", false}, // NAT64 of 127.0.0.1
	}
	for _, tc := range cases {
		if got := public(netip.MustParseAddr(tc.addr)); got != tc.public {
			t.Errorf("public(%s) = %v, want %v", tc.addr, got, tc.public)
		}
	}
}

func TestWebhookClientRefusesNonPublicAddresses(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	// A host name resolving to loopback is refused as its address is.
	byName := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	for _, url := range []string{srv.URL, byName} {
		resp, err := newWebhookClient(time.Second, false).Post(url, "application/json", strings.NewReader("{}"))
		if err == nil {
			_ = resp.Body.Close()
		}
		if !errors.Is(err, ErrNonPublicAddress) {
			t.Fatalf("POST %s: %v, want %v", url, err, ErrNonPublicAddress)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server was called %d times", n)
	}
	resp, err := newWebhookClient(time.Second, true).Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("allowed private networks: %v", err)
	}
	_ = resp.Body.Close()
	if hits.Load() != 1 {
		t.Fatal("allowed private networks: the server was not called")
	}
}

func TestWebhookClientDoesNotFollowRedirects(t *testing.T) {
	var targetHits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { targetHits.Add(1) }))
	t.Cleanup(target.Close)
	for _, status := range []int{301, 302, 303, 307, 308} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, status)
		}))
		resp, err := newWebhookClient(time.Second, true).Post(redirector.URL, "application/json", strings.NewReader("{}"))
		redirector.Close()
		if err != nil {
			t.Fatalf("%d: %v", status, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != status {
			t.Fatalf("answered %d, want the redirect's own %d", resp.StatusCode, status)
		}
	}
	if n := targetHits.Load(); n != 0 {
		t.Fatalf("a redirect was followed %d times", n)
	}
}
