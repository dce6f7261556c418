package provisioning

import (
	"fmt"
	"sort"
	"strings"

	"github.com/codeport/codeport/api/v1alpha1"
)

// ProductSource is one place a catalog's products come from: the Catalog itself, one of its
// productsFrom ConfigMaps, or one of its CatalogShards.
type ProductSource struct {
	// Name says where the products come from in status messages, e.g. "CatalogShard games-001".
	Name     string
	Products []v1alpha1.CatalogProduct
}

// DuplicateProduct is a productCode that more than one source of a catalog lists.
type DuplicateProduct struct {
	ProductCode string
	// Sources names the sources listing it, in source order.
	Sources []string
}

// MergeProducts concatenates the products of sources, in order, and returns the productCodes
// listed by more than one source (ordered by productCode). A productCode listed twice by one
// source is left to ApplyCatalog, which refuses it as an invalid product.
func MergeProducts(sources []ProductSource) ([]v1alpha1.CatalogProduct, []DuplicateProduct) {
	n := 0
	for _, s := range sources {
		n += len(s.Products)
	}
	products := make([]v1alpha1.CatalogProduct, 0, n)
	first := make(map[string]int, n)
	holders := map[string][]string{}
	for i, s := range sources {
		for _, p := range s.Products {
			products = append(products, p)
			at, seen := first[p.ProductCode]
			switch {
			case !seen:
				first[p.ProductCode] = i
			case at == i:
			default:
				names := holders[p.ProductCode]
				if names == nil {
					names = []string{sources[at].Name}
				}
				if names[len(names)-1] != s.Name {
					names = append(names, s.Name)
				}
				holders[p.ProductCode] = names
			}
		}
	}
	dups := make([]DuplicateProduct, 0, len(holders))
	for code, names := range holders {
		dups = append(dups, DuplicateProduct{ProductCode: code, Sources: names})
	}
	sort.Slice(dups, func(i, j int) bool { return dups[i].ProductCode < dups[j].ProductCode })
	return products, dups
}

// maxListed caps how many offending products a status message names.
const maxListed = 5

// DuplicatesMessage is the Ready condition's message for duplicates: the first few productCodes
// with the sources listing each, then how many more there are.
func DuplicatesMessage(dups []DuplicateProduct) string {
	parts := make([]string, 0, maxListed+1)
	for i, d := range dups {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(dups)-maxListed))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (in %s)", d.ProductCode, strings.Join(d.Sources, ", ")))
	}
	return "Products listed more than once, the last good catalog stays in service: " + strings.Join(parts, "; ")
}
