package catalog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/codeport/codeport/internal/store"
)

// variedCatalog is n products whose filter values repeat and overlap: several languages and tags
// per product, duplicates and mixed case among them.
func variedCatalog(t testing.TB, rnd *rand.Rand, n int) *Snapshot {
	t.Helper()
	pick := func(values ...string) string { return values[rnd.IntN(len(values))] }
	products := make([]Product, n)
	for i := range products {
		p := TestProducts()[0]
		p.IsSandboxProduct, p.Outcome = false, ""
		p.ProductCode = fmt.Sprintf("2%013d", i)
		p.Name = pick("Gift Card ", "Game Credit ", "Streaming ") + p.ProductCode
		p.CountryCode, p.Brand = pick("DE", "GB", "FR", "AT"), pick("Acme", "ACME Gift", "Nebula", "brand-3")
		p.MainCategory = pick("Gaming", "Gift Cards", "gaming")
		p.Tags = []string{pick("gaming", "Gift", "video"), pick("gaming", "sale")}
		p.Languages = []store.ProductLanguage{{LanguageCode: pick("en", "de")}, {LanguageCode: pick("EN", "fr")}}
		products[i] = p
	}
	snap, err := NewSnapshot(products, "2026-11-22")
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestSelectionFollowsTheFilterRules: what the posting lists select equals testing every product
// against the filters' rules (any of a filter's values; every filter; search in name or code).
func TestSelectionFollowsTheFilterRules(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 7))
	snap := variedCatalog(t, rnd, 500)
	cases := []Query{
		{Countries: []string{"de"}},
		{Countries: []string{"de", "gb"}, Brands: []string{"acme"}},
		{Countries: []string{"de"}, Brands: []string{"brand-3", "nebula"}, Tags: []string{"gaming"}},
		{Languages: []string{"en"}},
		{Languages: []string{"en", "fr"}, Tags: []string{"gift", "sale"}},
		{Categories: []string{"gaming"}, Search: "credit"},
		{Search: "2000000000004"},
		{Search: "nothing"},
		{Countries: []string{"us"}},
		{Countries: []string{"de"}, Brands: []string{"unknown"}, Tags: []string{"gaming"}},
	}
	values := [][]string{{"de", "gb", "fr", "at", "us"}, {"en", "de", "fr"}, {"acme", "acme gift", "nebula", "brand-3"},
		{"gaming", "gift cards"}, {"gaming", "gift", "video", "sale"}}
	for range 200 {
		var lists [5][]string
		for d := range lists {
			for _, v := range values[d] {
				if rnd.IntN(4) == 0 {
					lists[d] = append(lists[d], v)
				}
			}
		}
		cases = append(cases, Query{Countries: lists[0], Languages: lists[1], Brands: lists[2], Categories: lists[3],
			Tags: lists[4], Search: []string{"", "", "card", "1"}[rnd.IntN(4)]})
	}
	for _, q := range cases {
		var want []int32
		for i, e := range snap.entries {
			if e.matches(&q) {
				want = append(want, int32(i))
			}
		}
		if got := snap.selectAll(&q); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("%+v: selected %v, want %v", q, got, want)
		}
		// Remembered selections are the same.
		if got := snap.selection(&q); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("%+v: remembered %v, want %v", q, got, want)
		}
	}
}

// TestFilteredPageAllocatesNothing: a warm server parses a filtered list request with a pooled
// parser and writes a page of a remembered selection without allocating.
func TestFilteredPageAllocatesNothing(t *testing.T) {
	snap := variedCatalog(t, rand.New(rand.NewPCG(1, 2)), 1000)
	var parser QueryParser
	var buf []byte
	page := func() {
		parser.Reset()
		for _, kv := range [][2]string{{"take", "20"}, {"country", "de"}, {"brand", "acme,nebula"}, {"tag", "gaming"}} {
			parser.Add(kv[0], kv[1])
		}
		q, err := parser.Query()
		if err != nil {
			t.Fatal(err)
		}
		buf = snap.AppendListJSON(buf[:0], q)
	}
	page()
	if allocs := testing.AllocsPerRun(100, page); allocs > 0 {
		t.Fatalf("%.0f allocations per filtered page", allocs)
	}
}
