package v1

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/store"
)

// TestParagraphs: the legacy *Html fields are the plain text as HTML paragraphs, blank lines
// between paragraphs and line breaks within them, with the text escaped, since partners render
// these fields as HTML and catalog text comes from partner-supplied feeds.
func TestParagraphs(t *testing.T) {
	tests := []struct{ text, want string }{
		{"", ""},
		{"Redeem on the website.", "<p>Redeem on the website.</p>"},
		{"First.\n\nSecond.", "<p>First.</p><p>Second.</p>"},
		{"Step 1\nStep 2", "<p>Step 1<br>Step 2</p>"},
		{"Windows\r\n\r\nline endings\r\ntoo", "<p>Windows</p><p>line endings<br>too</p>"},
		{"  Trimmed  \n\n  paragraphs ", "<p>Trimmed</p><p>paragraphs</p>"},
		{`<script>alert("x")</script> & more`, "<p>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; more</p>"},
	}
	for _, tt := range tests {
		if got := paragraphs(tt.text); got != tt.want {
			t.Errorf("paragraphs(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

// TestLegacyProduct: the v1 shape's own rules. A fixed product shows its price and buying
// price, and its rrp is the recommended price or, without one, the price, as a decimal of the
// currency; an open product has neither price and an rrp only when one is recommended. Only
// inactive products are unavailable. Tags are comma-joined; SKUs are upper case.
func TestLegacyProduct(t *testing.T) {
	fixed := func(mutate func(*store.CatalogProduct)) *catalog.Product {
		p := store.CatalogProduct{ProductCode: "10000000000001", CountryCode: "de", CurrencyCode: "EUR",
			BuyingCurrencyCode: "EUR", DenominationType: catalog.DenominationFixed, Price: ptr(2000),
			BuyingPrice: ptr(1900), Tags: []string{"gaming", "credit"}, Status: catalog.StatusActive}
		if mutate != nil {
			mutate(&p)
		}
		return &catalog.Product{CatalogProduct: p}
	}
	open := func(p *store.CatalogProduct) {
		p.DenominationType, p.DenominationMin, p.DenominationMax = catalog.DenominationOpen, ptr(500), ptr(10000)
	}
	tests := []struct {
		name    string
		product *catalog.Product
		want    map[string]any
	}{
		{"fixed", fixed(nil), map[string]any{"price": 2000.0, "buyingPrice": 1900.0, "rrp": "20.00",
			"rrpCurrency": "EUR", "isCurrencyMismatch": false, "tags": "gaming,credit", "state": "available"}},
		{"fixed with a recommended price", fixed(func(p *store.CatalogProduct) { p.RRP = ptr(2499) }),
			map[string]any{"price": 2000.0, "rrp": "24.99", "rrpCurrency": "EUR"}},
		{"fixed in yen", fixed(func(p *store.CatalogProduct) {
			p.CurrencyCode, p.BuyingCurrencyCode, p.Price = "JPY", "JPY", ptr(500)
		}), map[string]any{"price": 500.0, "rrp": "500", "rrpCurrency": "JPY"}},
		{"open", fixed(open), map[string]any{"price": nil, "buyingPrice": nil, "rrp": nil, "rrpCurrency": ""}},
		{"open with a recommended price", fixed(func(p *store.CatalogProduct) { open(p); p.RRP = ptr(2500) }),
			map[string]any{"price": nil, "rrp": "25.00", "rrpCurrency": "EUR"}},
		{"bought in another currency", fixed(func(p *store.CatalogProduct) { p.BuyingCurrencyCode = "USD" }),
			map[string]any{"isCurrencyMismatch": true, "buyingCurrencyCode": "USD"}},
		{"inactive", fixed(func(p *store.CatalogProduct) { p.Status = catalog.StatusInactive }),
			map[string]any{"status": "inactive", "state": "unavailable"}},
		{"preorder", fixed(func(p *store.CatalogProduct) { p.Status = catalog.StatusPreorder }),
			map[string]any{"status": "preorder", "state": "available"}},
		{"languages", fixed(func(p *store.CatalogProduct) {
			p.Languages = []store.ProductLanguage{{LanguageCode: "en", Name: "English", Tnc: "No refunds.\n\nEU only."}}
		}), map[string]any{"languages": []any{map[string]any{"languageCode": "en", "name": "English",
			"sku": "DE-EN-10000000000001", "image": "", "description": "", "descriptionHtml": "",
			"tnc": "No refunds.\n\nEU only.", "tncHtml": "<p>No refunds.</p><p>EU only.</p>",
			"redemptionInstructions": "", "redemptionInstructionsHtml": ""}}}},
	}
	for _, tt := range tests {
		raw, err := json.Marshal(legacy(tt.product))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		for field, want := range tt.want {
			if value, ok := got[field]; !ok || !reflect.DeepEqual(value, want) {
				t.Errorf("%s: %s = %#v, want %#v", tt.name, field, got[field], want)
			}
		}
	}
}

func ptr(v int64) *int64 { return &v }
