package apiserver_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver/ratelimit"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// TestRedisOutageFallsBackToProcessLimits (F3): with the shared limiter unreachable, requests
// keep being served, limits still hold per process, and the fallback is logged and counted.
func TestRedisOutageFallsBackToProcessLimits(t *testing.T) {
	dead := testprocess.Addr(t) // nothing listens there
	rdb := redis.NewClient(&redis.Options{Addr: dead, DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	logs := &testprocess.Buffer{}
	limiter := ratelimit.NewFallback(ratelimit.NewRedis(rdb), ratelimit.NewMemory(), nil)
	s := newStack(t, stackOptions{limiter: limiter, logs: logs, metrics: true, noWorker: true})
	limiter.SetLogger(s.logger)
	tn := s.onboard(t, "acme", testfixture.WithRateLimit(3))
	awayFromMinuteEnd()
	for i := range 3 {
		if r := s.call(t, "production", "GET", "/v2/ping", tn.keys["production"], nil); r.status != 200 {
			t.Fatalf("request %d during the Redis outage: %d %s", i, r.status, r.raw)
		}
	}
	if r := s.call(t, "production", "GET", "/v2/ping", tn.keys["production"], nil); r.status != 429 {
		t.Fatalf("limit not enforced during the outage: %d", r.status)
	}
	if got := scrape(t, s.metricsURL)["codeport_rate_limiter_fallback_total{}"]; got < 4 {
		t.Fatalf("fallback counter %v", got)
	}
	if !strings.Contains(logs.String(), "shared rate limiter unavailable") {
		t.Fatal("the fallback was not logged")
	}
}

// TestSlowClientsCannotExhaustTheServer (F4): hundreds of connections that never finish their
// headers do not stop others from being served, and oversized headers are refused.
func TestSlowClientsCannotExhaustTheServer(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	addr := strings.TrimPrefix(s.baseURL["production"], "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 300 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /v2/ping HTTP/1.1\r\nHost: api\r\nx-api-key: %s\r\n", tn.keys["production"]) // never finished
		conns = append(conns, c)
	}
	if r := s.call(t, "production", "GET", "/v2/ping", tn.keys["production"], nil); r.status != 200 {
		t.Fatalf("served %d while slow clients hang", r.status)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v2/ping HTTP/1.1\r\nHost: api\r\nX-Padding: %s\r\n\r\n", strings.Repeat("a", 64<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Fatalf("oversized headers answered %d", resp.StatusCode)
		}
	}
	if r := s.call(t, "production", "GET", "/v2/ping", tn.keys["production"], nil); r.status != 200 {
		t.Fatalf("server unusable after oversized headers: %d", r.status)
	}
}

// TestForwardedForOnlyFromTrustedProxies (F6): X-Forwarded-For cannot talk a client into an
// allowlist unless the peer is a configured proxy.
func TestForwardedForOnlyFromTrustedProxies(t *testing.T) {
	only := func(p *v1alpha1.Partner) { p.Spec.IPWhitelist = []string{"198.51.100.7"} }
	direct := newStack(t, stackOptions{noWorker: true})
	tn := direct.onboard(t, "acme", only)
	ping := func(s *stack, xff ...string) int {
		req, _ := http.NewRequest(http.MethodGet, s.baseURL["production"]+"/v2/ping", http.NoBody)
		req.Header.Set("x-api-key", tn.keys["production"])
		for _, line := range xff {
			req.Header.Add("X-Forwarded-For", line)
		}
		resp, err := s.client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := ping(direct, "198.51.100.7"); got != 403 {
		t.Fatalf("spoofed X-Forwarded-For accepted from an untrusted peer: %d", got)
	}
	proxied := newStack(t, stackOptions{
		noWorker:       true,
		trustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	})
	if got := ping(proxied, "198.51.100.7"); got != 200 {
		t.Fatalf("client behind a trusted proxy refused: %d", got)
	}
	if got := ping(proxied, "198.51.100.7, 203.0.113.9"); got != 403 {
		t.Fatalf("rightmost untrusted hop must be the client: %d", got)
	}
	// A proxy that adds its own line (HAProxy's option forwardfor, several CDNs) leaves the
	// client's forged line first: the client is still the last line's hop.
	if got := ping(proxied, "198.51.100.7", "203.0.113.9"); got != 403 {
		t.Fatalf("a forged first X-Forwarded-For line passed the allowlist: %d", got)
	}
	if got := ping(proxied, "203.0.113.9", "198.51.100.7"); got != 200 {
		t.Fatalf("the client named in the proxy's own line refused: %d", got)
	}
}

// TestNoPlaintextKeysOrCodesInDatabase (F6): after a full order flow with a webhook, a dump of
// the database holds no API key, no delivered code and no webhook signing secret, as text or as
// the hex of a bytea column.
func TestNoPlaintextKeysOrCodesInDatabase(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	rcv := newReceiver(t, 0)
	s.setWebhook(t, tn, rcv.server.URL)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	placed := s.call(t, "sandbox", "POST", "/v2/orders", tn.keys["sandbox"],
		order("dump-1", line{"productCode": "99000000000001", "quantity": 3}))
	done := s.waitOrder(t, "sandbox", tn.keys["sandbox"], placed.str("orderId"))
	poll.UntilTrue(t, 10*time.Second, "the webhook delivered", func() bool { return len(rcv.deliveries()) == 1 })
	secrets := []string{webhookSecret}
	for _, k := range tn.keys {
		secrets = append(secrets, k)
	}
	for _, c := range done.body["products"].([]any)[0].(map[string]any)["codes"].([]any) {
		secrets = append(secrets, c.(map[string]any)["code"].(string))
	}
	pgDump := "pg_dump"
	if bindir, err := storetest.BinDir(context.Background()); err == nil {
		pgDump = filepath.Join(bindir, "pg_dump")
	}
	dump, err := exec.Command(pgDump, "--data-only", testDatabase).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	if len(dump) < 1000 {
		t.Fatalf("dump suspiciously small: %d bytes", len(dump))
	}
	for _, secret := range secrets {
		if strings.Contains(string(dump), secret) || strings.Contains(string(dump), hex.EncodeToString([]byte(secret))) {
			t.Fatalf("the database holds a secret in plaintext (%.12s…)", secret)
		}
	}
}

// TestTenantIsolationEveryEndpoint (F6): two partners with different catalogs and wallets see
// only their own data on every endpoint that returns partner data.
func TestTenantIsolationEveryEndpoint(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	a := s.onboard(t, "alpha", nil)
	// Beta gets a catalog of its own with a product alpha's catalog lacks.
	c, products := testCatalog(a.namespace)
	c.Name = "beta-only"
	extra := products[0]
	extra.ProductCode, extra.Name, extra.EAN = "20000000000001", "Beta Exclusive", "4000000000001"
	res, err := s.prov.ApplyCatalog(t.Context(), c, []v1alpha1.CatalogProduct{extra})
	if err != nil {
		t.Fatal(err)
	}
	b := s.onboard(t, "beta", nil)
	p := testfixture.Partner(b.name, testfixture.InNamespace(b.namespace), testfixture.WithAllowlist("127.0.0.1", "::1"))
	if _, err := s.prov.ApplyPartner(t.Context(), p, &res.ID, nil); err != nil {
		t.Fatal(err)
	}
	s.topUp(t, a, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "10.00"})
	s.topUp(t, b, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "GBP", Amount: "20.00"})
	ka, kb := a.keys["production"], b.keys["production"]

	poll.UntilTrue(t, time.Second, "beta's catalog in service", func() bool {
		return s.call(t, "production", "GET", "/v2/catalog/products/20000000000001", kb, nil).status == 200
	})
	expectError(t, s.call(t, "production", "GET", "/v2/catalog/products/20000000000001", ka, nil), 404,
		"Product 20000000000001 was not found in your catalog")
	if r := s.call(t, "production", "GET", "/v2/catalog/products?search=beta", ka, nil); r.body["count"] != float64(0) {
		t.Fatalf("alpha lists beta's product: %s", r.raw)
	}
	if r := s.call(t, "production", "GET", "/v2/catalog/products", kb, nil); r.body["count"] != float64(1) {
		t.Fatalf("beta's list: %s", r.raw)
	}
	r := s.call(t, "production", "POST", "/v2/orders", ka,
		order("iso-1", line{"productCode": "20000000000001", "quantity": 1}))
	expectError(t, r, 404, "Product 20000000000001 was not found in your catalog")
	wa := s.call(t, "production", "GET", "/v2/wallet", ka, nil)
	wb := s.call(t, "production", "GET", "/v2/wallet", kb, nil)
	if string(wa.raw) != `{"balances":{"EUR":10.00},"lowBalance":false,"threshold":0}` ||
		string(wb.raw) != `{"balances":{"GBP":20.00},"lowBalance":false,"threshold":0}` {
		t.Fatalf("wallets: %s / %s", wa.raw, wb.raw)
	}
	ca := s.call(t, "production", "GET", "/v1/catalog", "Bearer "+a.keys["bearer:production"], nil)
	cb := s.call(t, "production", "GET", "/v1/catalog", "Bearer "+b.keys["bearer:production"], nil)
	if ca.str("id") == cb.str("id") || cb.str("id") != res.ID.String() {
		t.Fatalf("v1 catalogs: %s / %s", ca.raw, cb.raw)
	}
	r = s.call(t, "production", "GET", "/v1/catalog/product?ean=4000000000001", "Bearer "+a.keys["bearer:production"], nil)
	expectError(t, r, 404, "Product with ean 4000000000001 was not found in your catalog")
}
