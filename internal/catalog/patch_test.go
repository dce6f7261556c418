package catalog_test

import (
	"testing"
	"time"

	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/store"
)

// BenchmarkPatchOneProduct applies a one-product price change to a 100,000-product snapshot and
// reports its cost as a ratio (x-rebuild) to building the snapshot anew, timed in the same run.
func BenchmarkPatchOneProduct(b *testing.B) {
	const size = 100_000
	snap := catalogOf(b, size)
	products := make([]catalog.Product, 0, size)
	for _, p := range snap.Products() {
		products = append(products, *p)
	}
	changed := products[size/2].CatalogProduct
	price := *changed.Price + 1
	changed.Price = &price
	rows := []store.CatalogProduct{changed}
	codes := []string{changed.ProductCode}

	const rebuilds = 3
	start := time.Now()
	for range rebuilds {
		if _, err := catalog.NewSnapshot(products, "2026-11-22"); err != nil {
			b.Fatal(err)
		}
	}
	rebuild := time.Since(start) / rebuilds
	b.ResetTimer()
	for range b.N {
		if _, err := snap.Patch(codes, rows); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	patch := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(patch)/float64(rebuild), "x-rebuild")
	b.ReportMetric(float64(rebuild)/float64(patch), "rebuild/patch")
}
