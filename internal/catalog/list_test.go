package catalog_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/test/benchratio"
)

// catalogOf builds n products; every third is German, brands cycle through ten.
func catalogOf(t testing.TB, n int) *catalog.Snapshot {
	t.Helper()
	base := catalog.TestProducts()[0]
	products := make([]catalog.Product, n)
	for i := range products {
		p := base
		p.ProductCode = fmt.Sprintf("1%013d", i)
		p.Position = i
		p.Name = fmt.Sprintf("Product %d", i)
		p.Brand = fmt.Sprintf("brand-%d", i%10)
		p.CountryCode = []string{"DE", "GB", "FR"}[i%3]
		p.IsSandboxProduct, p.Outcome = false, ""
		products[i] = p
	}
	snap, err := catalog.NewSnapshot(products, "2026-11-22")
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

type listBody struct {
	Count, Skip, Take int
	Products          []struct{ ProductCode string }
}

// TestListPaging checks count and page of the list against the products the query selects,
// with and without filters, at and past the catalog's end, listed once and again.
func TestListPaging(t *testing.T) {
	const n = 25
	snap := catalogOf(t, n)
	codes := func(pred func(i int) bool) []string {
		var out []string
		for i := range n {
			if pred(i) {
				out = append(out, fmt.Sprintf("1%013d", i))
			}
		}
		return out
	}
	all := codes(func(int) bool { return true })
	german := codes(func(i int) bool { return i%3 == 0 })
	brand3German := codes(func(i int) bool { return i%3 == 0 && i%10 == 3 })
	cases := []struct {
		query    string
		selected []string
		skip     int
		take     int
	}{
		{"", all, 0, 20},
		{"take=5", all, 0, 5},
		{"skip=20&take=10", all, 20, 10},
		{"skip=25", all, 25, 20},
		{"skip=100", all, 100, 20},
		{"country=de", german, 0, 20},
		{"country=de&skip=3&take=2", german, 3, 2},
		{"country=de&brand=brand-3", brand3German, 0, 20},
		{"country=de&skip=50", german, 50, 20},
	}
	for _, tc := range cases {
		values, _ := url.ParseQuery(tc.query)
		q, apiErr := catalog.ParseQuery(values)
		if apiErr != nil {
			t.Fatalf("%q: %v", tc.query, apiErr)
		}
		body := snap.AppendListJSON(nil, q)
		// The second listing of a filter is served from the snapshot's remembered selection.
		if again := snap.AppendListJSON(nil, q); !bytes.Equal(again, body) {
			t.Fatalf("%q: second listing differs:\n%s\n%s", tc.query, body, again)
		}
		var got listBody
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		want := tc.selected[min(tc.skip, len(tc.selected)):min(tc.skip+tc.take, len(tc.selected))]
		var page []string
		for _, p := range got.Products {
			page = append(page, p.ProductCode)
		}
		pageDiffers := !slices.Equal(page, want) && len(want)+len(page) > 0
		if got.Count != len(tc.selected) || got.Skip != tc.skip || got.Take != tc.take || pageDiffers {
			t.Errorf("%q: count %d skip %d take %d page %v; want count %d page %v",
				tc.query, got.Count, got.Skip, got.Take, page, len(tc.selected), want)
		}
	}
}

// TestListPageReusesBuffer: encoding a page into a buffer that has room allocates nothing but
// the page's index, so a warm server lists without garbage.
func TestListPageReusesBuffer(t *testing.T) {
	snap := catalogOf(t, 1000)
	q, _ := catalog.ParseQuery(url.Values{})
	buf := snap.AppendListJSON(nil, q)
	if allocs := testing.AllocsPerRun(100, func() { buf = snap.AppendListJSON(buf[:0], q) }); allocs > 1 {
		t.Fatalf("%.0f allocations per page, want at most 1", allocs)
	}
}

// BenchmarkListPage encodes a 20-product page from catalogs of 1,000 and 10,000 products and
// reports its cost as a ratio (x-copy) to copying the same pre-encoded page, timed in the same
// run: the floor of any list handler.
func BenchmarkListPage(b *testing.B) {
	for _, size := range []int{1000, 10000} {
		snap := catalogOf(b, size)
		for _, query := range []string{"take=20", "take=20&country=de&brand=brand-3,brand-7"} {
			values, _ := url.ParseQuery(query)
			q, _ := catalog.ParseQuery(values)
			page := snap.AppendListJSON(nil, q)
			b.Run(fmt.Sprintf("products=%d/%s", size, query), func(b *testing.B) {
				buf := make([]byte, 0, len(page))
				benchratio.CopyRatio(b, page, func() { buf = snap.AppendListJSON(buf[:0], q) })
			})
		}
	}
}
