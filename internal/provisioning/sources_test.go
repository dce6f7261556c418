package provisioning_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
)

func source(name string, codes ...string) provisioning.ProductSource {
	s := provisioning.ProductSource{Name: name}
	for _, c := range codes {
		s.Products = append(s.Products, v1alpha1.CatalogProduct{ProductCode: c})
	}
	return s
}

func TestMergeProducts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sources []provisioning.ProductSource
		codes   []string
		dups    []provisioning.DuplicateProduct
	}{
		{"disjoint, in source order", []provisioning.ProductSource{source("a", "2", "1"), source("b", "3")},
			[]string{"2", "1", "3"}, nil},
		{"twice in one source is not a cross-source duplicate",
			[]provisioning.ProductSource{source("a", "1", "1"), source("b", "2")}, []string{"1", "1", "2"}, nil},
		{"across sources, named in source order",
			[]provisioning.ProductSource{source("a", "1", "2"), source("b", "3", "2"), source("c", "2", "1")},
			[]string{"1", "2", "3", "2", "2", "1"},
			[]provisioning.DuplicateProduct{{"1", []string{"a", "c"}}, {"2", []string{"a", "b", "c"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			products, dups := provisioning.MergeProducts(tc.sources)
			var codes []string
			for _, p := range products {
				codes = append(codes, p.ProductCode)
			}
			if !reflect.DeepEqual(codes, tc.codes) || fmt.Sprint(dups) != fmt.Sprint(tc.dups) {
				t.Fatalf("got %v %v, want %v %v", codes, dups, tc.codes, tc.dups)
			}
		})
	}
}

func TestDuplicatesMessageIsCapped(t *testing.T) {
	var dups []provisioning.DuplicateProduct
	for i := range 8 {
		dups = append(dups, provisioning.DuplicateProduct{ProductCode: fmt.Sprint(i), Sources: []string{"a", "b"}})
	}
	want := "Products listed more than once, the last good catalog stays in service: " +
		"0 (in a, b); 1 (in a, b); 2 (in a, b); 3 (in a, b); 4 (in a, b); and 3 more"
	if got := provisioning.DuplicatesMessage(dups); got != want {
		t.Fatalf("got %q", got)
	}
}
