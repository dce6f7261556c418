package apiserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// TestCacheInvalidationMetrics checks that /metrics shows what a change notification dropped:
// a partner's rate-limit change and a catalog price change each drop their own entries, and
// nothing is flushed whole.
func TestCacheInvalidationMetrics(t *testing.T) {
	// The partners exist before the API starts: a notification of their provisioning still on its
	// way to the API would drop the lookups counted below (or move the counters after the first
	// scrape) when it lands.
	op := newProvisioner(t)
	acme := op.onboard(t, "acme", nil)
	globex := op.onboard(t, "globex", nil)
	s := newStack(t, stackOptions{metrics: true})
	s.waitSubscribed(t)
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
	p := partnerOf(acme.namespace, acme.name, testfixture.WithCatalogRef("eu"), testfixture.WithRateLimit(99999))
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
	// The partner and its catalog exist before the replicas start: a notification of their
	// provisioning landing after a replica's first request would refresh the snapshot counted
	// below, or merge into the price change's refresh and make it a rebuild.
	op := newProvisioner(t)
	acme := op.onboard(t, "acme", nil)
	replicas := []*stack{newStack(t, stackOptions{metrics: true, noWorker: true}),
		newStack(t, stackOptions{metrics: true, noWorker: true})}
	for _, s := range replicas {
		s.waitSubscribed(t)
	}
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
	if err := op.db.Pool.QueryRow(ctx, `SELECT valid_from FROM catalogs WHERE namespace = $1`,
		acme.namespace).Scan(&c.Spec.ValidFrom.Time); err != nil {
		t.Fatal(err)
	}
	products[0].Price = ptr(int64(2100))
	if _, err := op.prov.ApplyCatalog(ctx, c, products); err != nil {
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

// newProvisioner is the operator's side alone: provisioning on the package's database, with no
// API running. A test that counts what change notifications do to an API's caches provisions its
// partners through it before starting the API, whose listener then never receives their
// notifications: they were sent before it subscribed.
func newProvisioner(t *testing.T) *stack {
	t.Helper()
	db, err := store.Open(context.Background(), testDatabase, store.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	cipher := sharedCipher(t)
	prov := testfixture.Provisioner(t, db, cipher)
	return &stack{db: db, prov: prov, cipher: cipher, baseURL: map[string]string{}}
}

// waitSubscribed waits until the production API of s (started with metrics) listens for change
// notifications. The data plane reports ready before its listener has connected, and the
// listener's subscription flushes every cache (notifications before it were missed): a snapshot
// or lookup cached before that is dropped or rebuilt then, so a test counting what one change
// does must not fill the caches earlier. The catalogs' flush follows the keys' (see
// auth.Directory.Run), so it marks both. Connecting may take a retry (backoff up to 5 s) on a
// busy machine, hence the bound.
func (s *stack) waitSubscribed(t *testing.T) {
	t.Helper()
	const flushes = `codeport_cache_invalidations_total{cache=catalogs,environment=production,scope=all}`
	poll.Until(t, 30*time.Second, "production caches subscribed to change notifications", func() (bool, string) {
		got := scrape(t, s.metricsURL)[flushes]
		return got >= 1, fmt.Sprintf("%s = %v", flushes, got)
	})
}
