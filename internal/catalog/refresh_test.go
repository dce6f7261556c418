package catalog

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/poll"
)

// sameSnapshot reports how got differs from want, or "" when a partner could not tell them apart:
// same products in the same order, same encodings, same match keys and lookups.
func sameSnapshot(got, want *Snapshot) string {
	if got.Active != want.Active || got.today != want.today || got.testProducts != want.testProducts ||
		!reflect.DeepEqual(got.Catalog, want.Catalog) {
		return fmt.Sprintf("catalog %+v active %v, want %+v active %v", got.Catalog, got.Active, want.Catalog, want.Active)
	}
	codes := func(s *Snapshot) []string {
		out := make([]string, len(s.entries))
		for i, e := range s.entries {
			out[i] = e.product.ProductCode
		}
		return out
	}
	if g, w := codes(got), codes(want); !reflect.DeepEqual(g, w) {
		return fmt.Sprintf("products %v, want %v", g, w)
	}
	if !reflect.DeepEqual(got.index, want.index) {
		return fmt.Sprintf("posting lists %v, want %v", got.index, want.index)
	}
	if len(got.byCode) != len(want.byCode) {
		return fmt.Sprintf("%d products by code, want %d", len(got.byCode), len(want.byCode))
	}
	for i, g := range got.entries {
		w := want.entries[i]
		if !bytes.Equal(g.list, w.list) || !bytes.Equal(g.detail, w.detail) {
			return fmt.Sprintf("product %s encoded as %s, want %s", g.product.ProductCode, g.detail, w.detail)
		}
		if !reflect.DeepEqual(g.product, w.product) {
			return fmt.Sprintf("product %s is %+v, want %+v", g.product.ProductCode, g.product, w.product)
		}
		if g.country != w.country || g.brand != w.brand || g.category != w.category || g.name != w.name ||
			!reflect.DeepEqual(g.languages, w.languages) || !reflect.DeepEqual(g.tags, w.tags) {
			return fmt.Sprintf("product %s match keys differ", g.product.ProductCode)
		}
		if got.byCode[g.product.ProductCode] != g {
			return fmt.Sprintf("product %s looked up by code is another entry", g.product.ProductCode)
		}
	}
	return ""
}

// productWriter changes a catalog's products at random, as provisioning and hand edits do.
type productWriter struct {
	rnd     *rand.Rand
	catalog uuid.UUID
	next    int
}

// newProductWriter creates a catalog of n products, seeded with seed.
func newProductWriter(t *testing.T, db *store.DB, seed uint64, n int) *productWriter {
	t.Helper()
	ctx := context.Background()
	w := &productWriter{rnd: rand.New(rand.NewPCG(seed, 1))}
	if err := db.Pool.QueryRow(ctx, `INSERT INTO catalogs (namespace, name) VALUES ('team', 'eu') RETURNING id`).
		Scan(&w.catalog); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error { return w.insert(ctx, tx, n) })
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// codes are some of the products' codes, test products' codes among them: a catalog product
// hides the sandbox test product of its code.
func (w *productWriter) code() string {
	if w.rnd.IntN(20) == 0 {
		return TestProducts()[w.rnd.IntN(len(TestProducts()))].ProductCode
	}
	return w.newCode()
}

// newCode is a code no product had before.
func (w *productWriter) newCode() string {
	w.next++
	return fmt.Sprintf("4%013d", w.next)
}

// insert adds n products in one statement.
func (w *productWriter) insert(ctx context.Context, tx pgx.Tx, n int) error {
	var codes, names, brands, countries, categories, tags, languages []string
	var positions []int32
	var prices []int64
	for range n {
		code := w.code()
		codes, names = append(codes, code), append(names, "Product "+code)
		positions = append(positions, int32(w.rnd.IntN(50)))
		brands = append(brands, fmt.Sprintf("Brand-%d", w.rnd.IntN(4)))
		countries = append(countries, []string{"DE", "GB", "FR"}[w.rnd.IntN(3)])
		prices = append(prices, int64(100+w.rnd.IntN(5000)))
		categories = append(categories, []string{"Gaming", "Music", "Shopping"}[w.rnd.IntN(3)])
		tags = append(tags, []string{"gaming", "gift"}[w.rnd.IntN(2)])
		languages = append(languages, []string{"de", "en"}[w.rnd.IntN(2)])
	}
	_, err := tx.Exec(ctx, `INSERT INTO catalog_products (catalog_id, product_code, position, name, brand,
		country_code, currency_code, buying_currency_code, denomination_type, price, buying_price, main_category,
		tags, languages, status)
		SELECT $1, code, position, name, brand, country, 'EUR', 'EUR', 'fixed', price, price, category, ARRAY[tag],
			jsonb_build_array(jsonb_build_object('languageCode', language, 'name', 'L')), 'active'
		FROM unnest($2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[], $9::text[],
			$10::text[]) AS p(code, position, name, brand, country, price, category, tag, language)
		ON CONFLICT DO NOTHING`,
		w.catalog, codes, positions, names, brands, countries, prices, categories, tags, languages)
	if err != nil {
		return fmt.Errorf("insert %d products: %w", n, err)
	}
	return nil
}

// step applies one random change, in one or several statements of one transaction, and says
// what it did.
func (w *productWriter) step(ctx context.Context, t *testing.T, db *store.DB) string {
	t.Helper()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// A few products of the catalog, picked at random.
	some := `(SELECT product_code FROM catalog_products WHERE catalog_id = $1 ORDER BY random() LIMIT $2)`
	var what string
	switch op := w.rnd.IntN(9); op {
	case 0, 1:
		n := 1 + w.rnd.IntN(4)
		what, err = fmt.Sprintf("insert %d", n), w.insert(ctx, tx, n)
	case 2:
		what, err = "bulk insert 150", w.insert(ctx, tx, 150)
	case 3:
		n := 1 + w.rnd.IntN(3)
		what = fmt.Sprintf("reprice %d", n)
		_, err = tx.Exec(ctx, `UPDATE catalog_products SET price = price + 1, buying_price = buying_price + 1,
			updated_at = now() WHERE catalog_id = $1 AND product_code IN `+some, w.catalog, n)
	case 4:
		n := 1 + w.rnd.IntN(3)
		what = fmt.Sprintf("reorder %d", n)
		_, err = tx.Exec(ctx, `UPDATE catalog_products SET position = (random() * 50)::int
			WHERE catalog_id = $1 AND product_code IN `+some, w.catalog, n)
	case 5:
		n := 1 + w.rnd.IntN(3)
		what = fmt.Sprintf("rebrand and retag %d", n)
		_, err = tx.Exec(ctx, `UPDATE catalog_products SET brand = 'Brand-' || (random() * 4)::int,
			tags = ARRAY['sale'], country_code = 'AT', main_category = 'Travel'
			WHERE catalog_id = $1 AND product_code IN `+some, w.catalog, n)
	case 6:
		n := 1 + w.rnd.IntN(3)
		what = fmt.Sprintf("delete %d", n)
		_, err = tx.Exec(ctx, `DELETE FROM catalog_products WHERE catalog_id = $1 AND product_code IN `+some,
			w.catalog, n)
	case 7:
		what = "recode 1"
		_, err = tx.Exec(ctx, `UPDATE catalog_products SET product_code = $3
			WHERE catalog_id = $1 AND product_code IN `+some, w.catalog, 1, w.newCode())
	default:
		what = "several statements"
		for range 3 + w.rnd.IntN(5) {
			if err == nil {
				err = w.insert(ctx, tx, 1)
			}
			if err == nil {
				_, err = tx.Exec(ctx, `UPDATE catalog_products SET name = name || '+'
					WHERE catalog_id = $1 AND product_code IN `+some, w.catalog, 1)
			}
		}
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return what
}

// TestRefreshedSnapshotEqualsRebuild applies random sequences of inserts, updates, reorders,
// recodes and deletes (alone, in bulk, several per transaction) to a sandbox catalog in
// PostgreSQL, with a cache kept fresh by the change notifications: after each, the snapshot the
// cache serves equals a snapshot built from a fresh load of the catalog, and the small changes
// were patched, not rebuilt.
func TestRefreshedSnapshotEqualsRebuild(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, store.Options{MaxConns: 8})
	cache := NewCache(db, tenancy.Sandbox)
	fresh := NewCache(db, tenancy.Sandbox)
	dir := auth.NewDirectory(db, string(tenancy.Sandbox))
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = dir.Run(runCtx, cache) }()
	poll.UntilTrue(t, 10*time.Second, "subscribed", func() bool {
		_, flushes := cache.Invalidations()
		return flushes == 1
	})

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	w := newProductWriter(t, db, seed, 40)
	catalogID := w.catalog
	acct := &auth.Account{CatalogID: &catalogID}
	var history []string
	for range 60 {
		history = append(history, w.step(ctx, t, db))
		// The step has committed and nothing else writes: one rebuild is what the cache must reach.
		want, _, err := fresh.build(ctx, catalogID, fresh.now())
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 10*time.Second, "cache equals a rebuild after "+strings.Join(history, ", "), func() (bool, string) {
			got, err := cache.ForAccount(ctx, acct)
			if err != nil {
				return false, err.Error()
			}
			diff := sameSnapshot(got, want)
			return diff == "", diff
		})
	}
	patches, rebuilds := cache.Builds()
	t.Logf("%d changes: %d patches, %d rebuilds", len(history), patches, rebuilds)
	if patches == 0 {
		t.Errorf("no change was patched")
	}
}

// TestCatalogRefreshServesTheOldSnapshotMeanwhile: while a catalog is rebuilt after a change
// notification, requests get the snapshot they had, without waiting; a burst of notifications
// causes one rebuild; the rebuilt snapshot then replaces the old one.
func TestCatalogRefreshServesTheOldSnapshotMeanwhile(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, store.Options{MaxConns: 8})
	catalogID := newProductWriter(t, db, 1, 10).catalog
	cache := NewCache(db, tenancy.Production)
	// The burst below is sent within the time a refresh waits for more of it.
	cache.settle = 200 * time.Millisecond
	acct := &auth.Account{CatalogID: &catalogID}
	old, err := cache.ForAccount(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	_, rebuilds := cache.Builds()

	// Hold the rebuild: reading the products waits for this lock.
	lock, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `LOCK TABLE catalog_products IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `DELETE FROM catalog_products`); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		cache.InvalidateCatalog(catalogID)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for range 3 {
		snap, err := cache.ForAccount(waitCtx, acct)
		if err != nil || snap != old {
			t.Fatalf("during the rebuild: %v, same snapshot %v", err, snap == old)
		}
		time.Sleep(cache.settle)
	}
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, 10*time.Second, "rebuilt snapshot served", func() bool {
		snap, err := cache.ForAccount(ctx, acct)
		return err == nil && snap.Len() == 0
	})
	time.Sleep(2 * cache.settle)
	if _, r := cache.Builds(); r != rebuilds+1 {
		t.Errorf("100 notifications caused %d rebuilds, want 1", r-rebuilds)
	}
}
