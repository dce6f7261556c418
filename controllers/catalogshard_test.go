package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

func shardObj(ns, name, catalog string, products ...v1alpha1.CatalogProduct) *v1alpha1.CatalogShard {
	return testfixture.CatalogShard(name, catalog, products, testfixture.InNamespace(ns))
}

// codeRange returns products with productCodes from..from+n-1 (14 digits), priced 1000.
func codeRange(from, n int) []v1alpha1.CatalogProduct {
	out := make([]v1alpha1.CatalogProduct, n)
	for i := range out {
		out[i] = product(fmt.Sprintf("%014d", from+i), 1000)
	}
	return out
}

// rowVersions returns the xmin (the writing transaction) of each product row of the catalog
// ns/eu: a row whose xmin changed was written.
func rowVersions(t *testing.T, ns string) map[string]string {
	t.Helper()
	rows, err := env.db.Pool.Query(context.Background(), `SELECT p.product_code, p.xmin::text
		FROM catalog_products p JOIN catalogs c ON c.id = p.catalog_id
		WHERE c.namespace = $1 AND c.name = 'eu' AND c.deleted_at IS NULL`, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var code, xmin string
		if err := rows.Scan(&code, &xmin); err != nil {
			t.Fatal(err)
		}
		out[code] = xmin
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func catalogState(t *testing.T, ns string) (v1alpha1.Catalog, *metav1.Condition) {
	t.Helper()
	var c v1alpha1.Catalog
	get(t, ns, "eu", &c)
	return c, meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady)
}

func waitProducts(t *testing.T, ns, what string, products, shards int32) {
	t.Helper()
	poll.Until(t, timeout, what, func() (bool, string) {
		c, cond := catalogState(t, ns)
		return cond != nil && cond.Status == metav1.ConditionTrue && c.Status.ProductCount == products &&
				c.Status.ShardCount == shards,
			fmt.Sprintf("%d products, %d shards: %v", c.Status.ProductCount, c.Status.ShardCount, cond)
	})
}

// waitServed waits until the sandbox API serves (or no longer serves) product code.
func waitServed(t *testing.T, key, code string, served bool) {
	t.Helper()
	poll.Until(t, timeout, fmt.Sprintf("product %s served: %t", code, served), func() (bool, string) {
		got := getJSON(t, "sandbox", "/catalog/products/"+code, key)["productCode"]
		return (got == code) == served, fmt.Sprint(got)
	})
}

// TestCatalogShards: a catalog serves the union of its own products and its shards'; a shard
// edit writes only the rows it changes; a productCode in two sources stops the catalog at its
// last good version, naming the code and the sources; shards of other namespaces and catalogs
// do not count; deleting a shard withdraws its products.
func TestCatalogShards(t *testing.T) {
	ns := namespace(t)
	sandboxKey, _ := onboard(t, ns) // catalog eu: inline 10000000000001 and 10000000000002
	other := ns + "-other"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}})
	create(t, shardObj(ns, "eu-001", "eu", codeRange(20000000000000, 300)...))
	create(t, shardObj(ns, "eu-002", "eu", codeRange(20000000000300, 300)...))
	// Neither of these is the catalog's: another namespace, another catalog.
	create(t, shardObj(other, "eu-003", "eu", codeRange(30000000000000, 5)...))
	create(t, shardObj(ns, "us-001", "us", codeRange(40000000000000, 5)...))
	waitProducts(t, ns, "union served", 602, 2)
	// Replicas refresh their snapshots from the change notifications, moments after the write.
	for _, code := range []string{"10000000000001", "20000000000000", "20000000000599"} {
		waitServed(t, sandboxKey, code, true)
	}
	for _, code := range []string{"30000000000000", "40000000000000"} {
		if got := getJSON(t, "sandbox", "/catalog/products/"+code, sandboxKey)["productCode"]; got != nil {
			t.Fatalf("product %s of a shard not naming the catalog is served", code)
		}
	}
	var shard v1alpha1.CatalogShard
	poll.Until(t, timeout, "shard status", func() (bool, string) {
		get(t, ns, "eu-001", &shard)
		return shard.Status.ProductCount == 300, fmt.Sprint(shard.Status)
	})

	t.Run("an edit writes what changed", func(t *testing.T) {
		before := rowVersions(t, ns)
		update(t, ns, "eu-002", &shard, func() { shard.Spec.Products[7].Price = ptr(int64(1234)) })
		code := shard.Spec.Products[7].ProductCode
		poll.Until(t, timeout, "new price served", func() (bool, string) {
			got := getJSON(t, "sandbox", "/catalog/products/"+code, sandboxKey)
			return fmt.Sprint(got["price"]) == "1234" || fmt.Sprint(got["price"]) == "12.34", fmt.Sprint(got["price"])
		})
		after := rowVersions(t, ns)
		var written []string
		for c, x := range after {
			if before[c] != x {
				written = append(written, c)
			}
		}
		if len(after) != 602 || len(written) != 1 || written[0] != code {
			t.Fatalf("%d rows, written %v; want only %s", len(after), written, code)
		}
		waitEvent(t, ns, "Catalog", "eu", "Normal ProductsChanged: 0 products added, 1 changed, 0 removed")
	})

	t.Run("duplicates keep the last good catalog", func(t *testing.T) {
		dup := append(codeRange(20000000000010, 7), product("10000000000002", 999))
		create(t, shardObj(ns, "eu-009", "eu", append(dup, codeRange(50000000000000, 3)...)...))
		poll.Until(t, timeout, "duplicates reported", func() (bool, string) {
			_, cond := catalogState(t, ns)
			return cond != nil && cond.Reason == v1alpha1.ReasonDuplicateProducts &&
				strings.Contains(cond.Message, "10000000000002 (in Catalog eu, CatalogShard eu-009)") &&
				strings.Contains(cond.Message, "20000000000010 (in CatalogShard eu-001, CatalogShard eu-009)") &&
				strings.Contains(cond.Message, "and 3 more"), cond.String()
		})
		waitEvent(t, ns, "Catalog", "eu", "Warning DuplicateProducts: Products listed more than once")
		if got := getJSON(t, "sandbox", "/catalog/products/50000000000000", sandboxKey)["productCode"]; got != nil {
			t.Fatal("a catalog with duplicates was applied")
		}
		if got := getJSON(t, "sandbox", "/catalog/products/20000000000599", sandboxKey)["productCode"]; got == nil {
			t.Fatal("the last good catalog is no longer served")
		}
		if err := env.k8s.Delete(context.Background(), shardObj(ns, "eu-009", "eu")); err != nil {
			t.Fatal(err)
		}
		waitProducts(t, ns, "duplicates gone", 602, 2)
	})

	t.Run("deleting a shard withdraws its products", func(t *testing.T) {
		if err := env.k8s.Delete(context.Background(), shardObj(ns, "eu-001", "eu")); err != nil {
			t.Fatal(err)
		}
		waitProducts(t, ns, "shard withdrawn", 302, 1)
		waitServed(t, sandboxKey, "20000000000000", false)
		if n := len(rowVersions(t, ns)); n != 302 {
			t.Fatalf("%d product rows, want 302", n)
		}
	})
}

// TestCatalogShardValidation: the API server refuses a shard over MaxItems and a productCode
// twice in one shard, in its own words.
func TestCatalogShardValidation(t *testing.T) {
	ns := namespace(t)
	for _, tc := range []struct {
		name     string
		products []v1alpha1.CatalogProduct
		want     string
	}{
		{"too many", codeRange(60000000000000, v1alpha1.MaxShardProducts+1),
			fmt.Sprintf("must have at most %d items", v1alpha1.MaxShardProducts)},
		{"duplicate", append(codeRange(60000000000000, 2), product("60000000000000", 5)), "Duplicate value"},
		{"bad product", []v1alpha1.CatalogProduct{{ProductCode: "1", Name: "x", CountryCode: "DE", CurrencyCode: "EUR",
			Price: ptr(int64(1))}}, "spec.products[0].productCode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := env.k8s.Create(context.Background(), shardObj(ns, "s", "eu", tc.products...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
