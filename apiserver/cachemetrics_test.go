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
