package apiserver_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// configTables are the tables provisioning writes.
var configTables = []string{"partners", "accounts", "api_keys", "catalogs", "catalog_products", "webhook_endpoints",
	"wallet_balances", "wallet_entries"}

// rowsTouchedSince counts, per table, the rows written or locked by a transaction newer than
// xid (a fresh test server's xids do not wrap), and the rows there are.
func rowsTouchedSince(t *testing.T, db *store.DB, xid int64) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range configTables {
		var touched, total int64
		err := db.Pool.QueryRow(context.Background(), `SELECT
			count(*) FILTER (WHERE xmin::text::bigint > $1 OR xmax::text::bigint > $1), count(*) FROM `+table, xid).
			Scan(&touched, &total)
		if err != nil {
			t.Fatal(err)
		}
		out[table] = fmt.Sprintf("%d touched of %d", touched, total)
	}
	return out
}

func currentXID(t *testing.T, db *store.DB) int64 {
	t.Helper()
	var xid int64
	err := db.Pool.QueryRow(context.Background(), `SELECT (pg_current_xact_id()::text::bigint) % 4294967296`).Scan(&xid)
	if err != nil {
		t.Fatal(err)
	}
	return xid
}

// configNotifications listens to the configuration channel on a connection of its own.
type configNotifications struct {
	conn *pgx.Conn
}

func listenConfig(t *testing.T, url string) *configNotifications {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(context.Background(), "LISTEN "+store.ChannelConfig); err != nil {
		t.Fatal(err)
	}
	return &configNotifications{conn: conn}
}

// until returns the payloads received before the marker, which it sends itself: everything
// committed before the marker was sent arrives before it.
func (n *configNotifications) until(t *testing.T, db *store.DB) []string {
	t.Helper()
	marker := fmt.Sprintf("webhook:marker-%d", time.Now().UnixNano())
	if _, err := db.Pool.Exec(context.Background(), `SELECT pg_notify($1, $2)`, store.ChannelConfig, marker); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		note, err := n.conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			t.Fatalf("waiting for the marker: %v (received %d before)", err, len(got))
		}
		if note.Payload == marker {
			return got
		}
		if strings.HasSuffix(note.Payload, ":"+markerCode) {
			continue // the test's own (see markers.await), not the system's
		}
		got = append(got, note.Payload)
	}
}

// TestIdleResyncWritesAndNotifiesNothing provisions 1,000 partners as the four reconcilers do
// (catalogs, partners with webhooks on some, two keys each, funded wallets) and applies the same
// resources again, as a resync does: no row is written or locked, no notification is sent, and a
// running key directory and catalog cache drop nothing. A change of one partner and of one
// product then writes one row each: the partner's key entry is dropped, and the product's
// catalog snapshot is patched with that product, not rebuilt.
func TestIdleResyncWritesAndNotifiesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	database := storetest.New(t)
	db, err := store.Open(ctx, database.URL, store.Options{MaxConns: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	prov := testfixture.Provisioner(t, db, sharedCipher(t))
	dir := auth.NewDirectory(db, string(tenancy.Production))
	catalogs := catalog.NewCache(db, tenancy.Production)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	handled := newMarkers()
	go func() { _ = dir.Run(runCtx, catalogs, handled) }()
	poll.UntilTrue(t, 10*time.Second, "directory subscribed", func() bool {
		_, flushes := dir.Invalidations()
		return flushes == 1
	})

	const partners, perCatalog = 1000, 10
	all := make([]partnerResources, partners)
	for i := range all {
		all[i] = newPartnerResources(t, i, perCatalog)
	}
	applyAllResources(ctx, t, prov, all, perCatalog)
	// The provisioning's notifications reach the directory well after the commits on a busy
	// machine: one landing after the lookups below would drop entries counted later, and one
	// landing after the counters are read would count as the resync's.
	handled.await(t, db)
	for i := 0; i < partners; i += 100 {
		if _, err := dir.Lookup(ctx, all[i].keys[1].Plaintext, tenancy.APIKey); err != nil {
			t.Fatal(err)
		}
	}
	notes := listenConfig(t, database.URL)
	targeted, flushes := dir.Invalidations()
	before := currentXID(t, db)
	began := time.Now()
	applyAllResources(ctx, t, prov, all, perCatalog)
	resync := time.Since(began)
	payloads := notes.until(t, db)
	for table, rows := range rowsTouchedSince(t, db, before) {
		if !strings.HasPrefix(rows, "0 touched") {
			t.Errorf("idle resync of %d partners: %s %s", partners, table, rows)
		}
	}
	if len(payloads) > 0 {
		t.Errorf("idle resync notified %d times, e.g. %q", len(payloads), payloads[0])
	}
	// Whatever the resync sent (nothing, said the test's own listener) has reached the directory
	// once the marker has.
	handled.await(t, db)
	if tg, fl := dir.Invalidations(); tg != targeted || fl != flushes {
		t.Errorf("idle resync invalidated keys: %d targeted, %d flushes", tg-targeted, fl-flushes)
	}
	t.Logf("idle resync of %d partners in %s: 0 rows written, 0 notifications, 0 invalidations",
		partners, resync.Round(time.Millisecond))

	// One partner's rate limit: one account row, one notification naming it.
	cached := dir.Len()
	p := all[500].partner.DeepCopy()
	p.Spec.RateLimit = &v1alpha1.RateLimitSpec{RequestsPerMinute: 60}
	before = currentXID(t, db)
	if err := applyResources(ctx, prov, p, all[500].webhooks, nil, nil); err != nil {
		t.Fatal(err)
	}
	payloads = notes.until(t, db)
	touched := rowsTouchedSince(t, db, before)
	if touched["accounts"] != "2 touched of 2000" && touched["accounts"] != "1 touched of 2000" || len(payloads) == 0 ||
		!allHavePrefix(payloads, "account:") {
		t.Fatalf("rate-limit change: %v, notifications %q", touched, payloads)
	}
	poll.UntilTrue(t, 10*time.Second, "directory dropped the account's entry only", func() bool {
		return dir.Len() == cached-1
	})

	// One product's price: one row, one catalog snapshot.
	catalogID, err := prov.CatalogID(ctx, "team-0", all[0].catalog.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catalogs.ForAccount(ctx, &auth.Account{CatalogID: &catalogID}); err != nil {
		t.Fatal(err)
	}
	catTargeted, catFlushes := catalogs.Invalidations()
	patches, rebuilds := catalogs.Builds()
	c := all[0].catalog
	products := append([]v1alpha1.CatalogProduct(nil), all[0].products...)
	products[0].Price = ptr(int64(2100))
	before = currentXID(t, db)
	if _, err := prov.ApplyCatalog(ctx, c, products); err != nil {
		t.Fatal(err)
	}
	payloads = notes.until(t, db)
	touched = rowsTouchedSince(t, db, before)
	want := fmt.Sprintf("catalog:%s:%s", catalogID, products[0].ProductCode)
	if touched["catalog_products"] != fmt.Sprintf("1 touched of %d", 5*partners/perCatalog) ||
		touched["catalogs"] != fmt.Sprintf("0 touched of %d", partners/perCatalog) || len(payloads) != 1 ||
		payloads[0] != want {
		t.Fatalf("price change: %v, notifications %q, want [%q]", touched, payloads, want)
	}
	poll.UntilTrue(t, 10*time.Second, "one catalog snapshot patched", func() bool {
		p, _ := catalogs.Builds()
		return p == patches+1
	})
	if tg, fl := catalogs.Invalidations(); tg != catTargeted || fl != catFlushes {
		t.Errorf("a price change invalidated catalogs: %d targeted, %d flushes", tg-catTargeted, fl-catFlushes)
	}
	if _, r := catalogs.Builds(); r != rebuilds {
		t.Errorf("a price change rebuilt %d catalogs", r-rebuilds)
	}
}

// markers is an auth.Dependent that records the catalogs named by product changes, which lets a
// test wait until a directory has handled everything sent so far: it sends a change of a product
// of a catalog that does not exist, which no cache holds, and waits for it to arrive. A listener
// handles notifications in commit order, so every notification committed before the marker has
// been applied by then.
type markers struct {
	mu   sync.Mutex
	seen map[uuid.UUID]bool
}

// markerCode is the product code of markers.
const markerCode = "marker"

func newMarkers() *markers { return &markers{seen: map[uuid.UUID]bool{}} }

func (m *markers) Invalidate()                 {}
func (m *markers) InvalidateCatalog(uuid.UUID) {}

func (m *markers) ProductsChanged(catalogID uuid.UUID, _ []string) {
	m.mu.Lock()
	m.seen[catalogID] = true
	m.mu.Unlock()
}

// await sends a marker and waits until the directory has passed it on to m. A reconnect of the
// directory's listener would lose the marker and fail the wait; it would flush the directory too,
// which the test reports as a failure anyway.
func (m *markers) await(t *testing.T, db *store.DB) {
	t.Helper()
	id := uuid.New()
	if _, err := db.Pool.Exec(context.Background(), `SELECT pg_notify($1, $2)`, store.ChannelConfig,
		"catalog:"+id.String()+":"+markerCode); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, 30*time.Second, "directory handled the notifications sent before a marker", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.seen[id]
	})
}

// partnerResources are the resources of one partner, as its reconcilers provision them.
type partnerResources struct {
	catalog  *v1alpha1.Catalog
	products []v1alpha1.CatalogProduct
	partner  *v1alpha1.Partner
	webhooks provisioning.Webhooks
	keys     []provisioning.Key
	wallet   *v1alpha1.Wallet
}

// newPartnerResources declares the i-th partner of a resync test: perCatalog partners share a
// namespace and its catalog, every tenth has webhooks, every twentieth a production endpoint of
// its own.
func newPartnerResources(t *testing.T, i, perCatalog int) partnerResources {
	t.Helper()
	ns := fmt.Sprintf("team-%d", i/perCatalog)
	c, products := testCatalog(ns)
	name := fmt.Sprintf("p%04d", i)
	r := partnerResources{
		catalog:  c,
		products: products,
		partner: testfixture.Partner(name, testfixture.InNamespace(ns), testfixture.WithCatalogRef(c.Name),
			testfixture.WithAllowlist("127.0.0.1", "10.0.0.0/8")),
		wallet: testfixture.Wallet(name, "production", testfixture.InNamespace(ns), testfixture.Named(name),
			testfixture.WithThreshold("10.00"), testfixture.WithTopUps(testfixture.TopUp("t1", "EUR", "100.00"))),
	}
	if i%10 == 0 {
		// One endpoint for both environments, or (every other one) production's own.
		w := &provisioning.Webhook{URL: "https://hooks.example/" + name, Secret: []byte("s3cret-" + name)}
		r.webhooks = provisioning.Webhooks{"sandbox": w, "production": w}
		if i%20 == 0 {
			r.webhooks["production"] = &provisioning.Webhook{
				URL:    "https://hooks.example/live/" + name,
				Secret: []byte("live-" + name),
				Events: []string{"order.failed"},
			}
		}
	}
	for _, env := range provisioning.Environments() {
		plain, err := auth.GenerateKey(env)
		if err != nil {
			t.Fatal(err)
		}
		r.keys = append(r.keys, provisioning.Key{
			Namespace:   ns,
			Partner:     name,
			Environment: env,
			Kind:        string(tenancy.APIKey),
			Source:      ns + "/" + name + "-" + env,
			Plaintext:   plain,
		})
	}
	return r
}

// applyAllResources applies every shared catalog, then every partner's resources from eight
// workers, as the reconcilers do in parallel.
func applyAllResources(
	ctx context.Context, t *testing.T, prov *provisioning.Provisioner, all []partnerResources, perCatalog int,
) {
	t.Helper()
	for i := 0; i < len(all); i += perCatalog {
		if res, err := prov.ApplyCatalog(ctx, all[i].catalog, all[i].products); err != nil || len(res.Invalid) > 0 {
			t.Fatalf("catalog %s: %v %v", all[i].catalog.Namespace, err, res.Invalid)
		}
	}
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(all); i += 8 {
				if err := applyResources(ctx, prov, all[i].partner, all[i].webhooks, all[i].keys, all[i].wallet); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatal(err)
	}
}

// applyResources provisions what the Partner, ApiKey and Wallet reconcilers would for one
// partner whose catalog is provisioned; a nil wallet is skipped.
func applyResources(
	ctx context.Context, prov *provisioning.Provisioner, p *v1alpha1.Partner, webhooks provisioning.Webhooks,
	keys []provisioning.Key, w *v1alpha1.Wallet,
) error {
	var catalogID *uuid.UUID
	if p.Spec.CatalogRef != nil {
		id, err := prov.CatalogID(ctx, p.Namespace, p.Spec.CatalogRef.Name)
		if err != nil {
			return fmt.Errorf("catalog of %s: %w", p.Name, err)
		}
		catalogID = &id
	}
	if _, err := prov.ApplyPartner(ctx, p, catalogID, webhooks); err != nil {
		return fmt.Errorf("partner %s: %w", p.Name, err)
	}
	for _, k := range keys {
		if _, err := prov.RegisterKey(ctx, k); err != nil {
			return fmt.Errorf("key %s: %w", k.Source, err)
		}
	}
	if w != nil {
		if _, err := prov.ApplyWallet(ctx, w); err != nil {
			return fmt.Errorf("wallet %s: %w", w.Name, err)
		}
	}
	return nil
}

func allHavePrefix(payloads []string, prefix string) bool {
	for _, p := range payloads {
		if !strings.HasPrefix(p, prefix) {
			return false
		}
	}
	return true
}
