package apiserver_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/poll"
)

// TestCacheInvalidationMetrics checks that /metrics shows what a change notification dropped:
// a partner's rate-limit change and a catalog price change each drop their own entries, and
// nothing is flushed whole.
func TestCacheInvalidationMetrics(t *testing.T) {
	s := newStack(t, stackOptions{metrics: true})
	acme := s.onboard(t, "acme", nil)
	globex := s.onboard(t, "globex", nil)
	for _, tn := range []*tenant{acme, globex} {
		s.call(t, "production", "GET", "/v2/ping", tn.keys["production"], nil)
		s.call(t, "production", "GET", "/v2/products", tn.keys["production"], nil)
	}
	const (
		entries      = `codeport_key_cache_entries{environment=production}`
		keysEntry    = `codeport_cache_invalidations_total{cache=keys,environment=production,scope=entry}`
		keysAll      = `codeport_cache_invalidations_total{cache=keys,environment=production,scope=all}`
		catalogEntry = `codeport_cache_invalidations_total{cache=catalogs,environment=production,scope=entry}`
		catalogAll   = `codeport_cache_invalidations_total{cache=catalogs,environment=production,scope=all}`
	)
	before := scrape(t, s.metricsURL)
	if before[entries] < 2 {
		t.Fatalf("%s = %v after two partners' requests", entries, before[entries])
	}

	ctx := context.Background()
	c, products := testCatalog(acme.namespace)
	catalog, err := s.prov.ApplyCatalog(ctx, c, products)
	if err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.Partner{ObjectMeta: metav1.ObjectMeta{Namespace: acme.namespace, Name: acme.name},
		Spec: v1alpha1.PartnerSpec{DisplayName: acme.name, ContactEmail: acme.name + "@example.com",
			CatalogRef: &v1alpha1.LocalObjectReference{Name: "eu"},
			AccessPolicy: v1alpha1.AccessPolicy{IPWhitelist: []string{"127.0.0.1", "::1"},
				RateLimit: &v1alpha1.RateLimitSpec{RequestsPerMinute: 99999}}}}
	if _, err := s.prov.ApplyPartner(ctx, p, &catalog.ID, nil); err != nil {
		t.Fatal(err)
	}
	products[0].Price = ptr(*products[0].Price + 1)
	if _, err := s.prov.ApplyCatalog(ctx, c, products); err != nil {
		t.Fatal(err)
	}

	var after map[string]float64
	poll.UntilTrue(t, 10*time.Second, "both changes seen", func() bool {
		after = scrape(t, s.metricsURL)
		return after[keysEntry] > before[keysEntry] && after[catalogEntry] > before[catalogEntry]
	})
	if after[keysAll] != before[keysAll] || after[catalogAll] != before[catalogAll] {
		t.Errorf("a change to one partner and one catalog flushed whole caches: keys %v -> %v, catalogs %v -> %v",
			before[keysAll], after[keysAll], before[catalogAll], after[catalogAll])
	}
	if after[entries] < 1 {
		t.Errorf("globex's cached lookup was dropped with acme's: %s = %v", entries, after[entries])
	}
}

// TestPriceChangePatchesEveryReplica: two replicas (data planes on one database) serve a catalog;
// a price change reaches GET /v2/catalog/products/{code} on both, and their metrics show the
// snapshot patched with the product's row, not rebuilt.
func TestPriceChangePatchesEveryReplica(t *testing.T) {
	replicas := []*stack{newStack(t, stackOptions{metrics: true, noWorker: true}),
		newStack(t, stackOptions{metrics: true, noWorker: true})}
	acme := replicas[0].onboard(t, "acme", nil)
	const (
		code    = "10000000000001"
		patch   = `codeport_catalog_snapshot_builds_total{environment=production,kind=patch}`
		rebuild = `codeport_catalog_snapshot_builds_total{environment=production,kind=rebuild}`
	)
	price := func(s *stack) float64 {
		r := s.call(t, "production", "GET", "/v2/catalog/products/"+code, acme.keys["production"], nil)
		if r.status != 200 {
			t.Fatalf("product: %d %s", r.status, r.raw)
		}
		p, _ := r.body["price"].(float64)
		return p
	}
	before := make([]map[string]float64, len(replicas))
	for i, s := range replicas {
		if p := price(s); p != 2000 {
			t.Fatalf("replica %d: price %v before the change", i, p)
		}
		before[i] = scrape(t, s.metricsURL)
	}

	// The same catalog, but for one price.
	ctx := context.Background()
	c, products := testCatalog(acme.namespace)
	if err := replicas[0].db.Pool.QueryRow(ctx, `SELECT valid_from FROM catalogs WHERE namespace = $1`,
		acme.namespace).Scan(&c.Spec.ValidFrom.Time); err != nil {
		t.Fatal(err)
	}
	products[0].Price = ptr(int64(2100))
	if _, err := replicas[0].prov.ApplyCatalog(ctx, c, products); err != nil {
		t.Fatal(err)
	}
	for i, s := range replicas {
		poll.UntilTrue(t, 10*time.Second, "new price served", func() bool { return price(s) == 2100 })
		after := scrape(t, s.metricsURL)
		if after[patch] != before[i][patch]+1 || after[rebuild] != before[i][rebuild] {
			t.Errorf("replica %d: patches %v -> %v, rebuilds %v -> %v, want one patch and no rebuild", i,
				before[i][patch], after[patch], before[i][rebuild], after[rebuild])
		}
	}
}
