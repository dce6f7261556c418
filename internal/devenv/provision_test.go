package devenv

import (
	"strings"
	"testing"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// TestCatalogProductsMergeShards: dev serves a catalog's products followed by those of the
// shards naming it in its namespace, in shard name order, and refuses a productCode listed by
// two of them, as the operator does.
func TestCatalogProductsMergeShards(t *testing.T) {
	products := func(codes ...string) []v1alpha1.CatalogProduct {
		var out []v1alpha1.CatalogProduct
		for _, c := range codes {
			out = append(out, v1alpha1.CatalogProduct{ProductCode: c})
		}
		return out
	}
	shard := func(ns, name, catalog string, codes ...string) v1alpha1.CatalogShard {
		return *testfixture.CatalogShard(name, catalog, products(codes...), testfixture.InNamespace(ns))
	}
	catalog := testfixture.Catalog("eu", testfixture.InNamespace("p"), testfixture.WithProducts(products("1")...))
	for _, tc := range []struct {
		name   string
		shards []v1alpha1.CatalogShard
		want   string // product codes in order, or the error's text
	}{
		{"no shards", nil, "1"},
		{"in name order", []v1alpha1.CatalogShard{shard("p", "eu-2", "eu", "4"), shard("p", "eu-1", "eu", "2", "3")},
			"1 2 3 4"},
		{"other namespaces and catalogs ignored",
			[]v1alpha1.CatalogShard{shard("q", "eu-1", "eu", "5"), shard("p", "us-1", "us", "6")}, "1"},
		{"duplicates refused", []v1alpha1.CatalogShard{shard("p", "eu-1", "eu", "1")},
			"1 (in Catalog eu, CatalogShard eu-1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manifests{Shards: tc.shards}
			got, err := m.catalogProducts(catalog)
			var codes []string
			for _, p := range got {
				codes = append(codes, p.ProductCode)
			}
			if err != nil && !strings.Contains(err.Error(), tc.want) || err == nil && strings.Join(codes, " ") != tc.want {
				t.Fatalf("got %v, %v; want %s", codes, err, tc.want)
			}
		})
	}
}
