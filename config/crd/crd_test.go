package crd_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/codeport/codeport/config/crd"
	"github.com/codeport/codeport/internal/money"
)

// currencyFields are the fields of the custom resources that name a currency, by kind: the
// currency of a price or a top-up, and the keys of the spending limits.
var currencyFields = map[string][]string{
	"Catalog":      {"spec.products[].currencyCode"},
	"CatalogShard": {"spec.products[].currencyCode"},
	"Partner": {
		"spec.ordering.limits.dailySpend",
		"spec.environments.sandbox.ordering.limits.dailySpend",
		"spec.environments.production.ordering.limits.dailySpend",
	},
	"Wallet":      {"spec.topUps[].currency"},
	"WalletTopUp": {"spec.currency"},
}

var quotedCode = regexp.MustCompile(`'([A-Z]{3})'`)

// TestCurrencyRulesListTheActiveCurrencies: every field of the CRDs that names a currency
// refuses, at admission, what internal/money does not accept, and accepts everything it does:
// its rule lists exactly money.Currencies(), the list the partner API and the operator use. A
// field that names a currency and is not in currencyFields fails too, so a new one cannot go
// unchecked.
//
//nolint:gocognit // walks every CRD schema for its currency fields
func TestCurrencyRulesListTheActiveCurrencies(t *testing.T) {
	crds, err := crd.Definitions()
	if err != nil {
		t.Fatal(err)
	}
	want := money.Currencies()
	seen := map[string][]string{}
	for _, c := range crds {
		kind := c.Spec.Names.Kind
		for _, v := range c.Spec.Versions {
			walk(v.Schema.OpenAPIV3Schema, "", func(path string, s *apiextensionsv1.JSONSchemaProps) {
				name := path[strings.LastIndex(path, ".")+1:]
				name = strings.TrimSuffix(name, "[]")
				if !strings.Contains(strings.ToLower(name), "currenc") && name != "dailySpend" {
					return
				}
				seen[kind] = append(seen[kind], path)
				var lists int
				for _, rule := range s.XValidations {
					if !strings.Contains(rule.Rule, " in [") {
						continue
					}
					lists++
					var got []string
					for _, m := range quotedCode.FindAllStringSubmatch(rule.Rule, -1) {
						got = append(got, m[1])
					}
					if !slices.Equal(got, want) {
						t.Errorf("%s %s: rule lists %d codes, internal/money %d: run make generate manifests helm",
							kind, path, len(got), len(want))
					}
				}
				if lists != 1 {
					t.Errorf("%s %s names a currency but has %d rules listing the currencies, want 1", kind, path, lists)
				}
			})
		}
	}
	for kind, paths := range currencyFields {
		slices.Sort(paths)
		got := slices.Compact(slices.Sorted(slices.Values(seen[kind])))
		if !slices.Equal(got, paths) {
			t.Errorf("%s: currency fields %v, want %v", kind, got, paths)
		}
	}
	for kind := range seen {
		if _, ok := currencyFields[kind]; !ok {
			t.Errorf("%s names currencies at %v: add them to currencyFields", kind, seen[kind])
		}
	}
}

// walk calls visit for every property under s, with its path (list items as name[]).
func walk(s *apiextensionsv1.JSONSchemaProps, path string, visit func(string, *apiextensionsv1.JSONSchemaProps)) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		child := name
		if path != "" {
			child = path + "." + name
		}
		visit(child, &p)
		walk(&p, child, visit)
		if p.Items != nil && p.Items.Schema != nil {
			walk(p.Items.Schema, child+"[]", visit)
		}
	}
}
