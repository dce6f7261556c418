package apiserver_test

import (
	"testing"
)

func TestLegacyV1(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	bearer := "Bearer " + tn.keys["bearer:production"]
	unknown := "Bearer cp_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA000000"

	for name, tc := range map[string]struct {
		env, auth, message string
	}{
		"no header":                    {"production", "", "Missing bearer token"},
		"not bearer":                   {"production", "Basic " + tn.keys["bearer:production"], "Missing bearer token"},
		"unknown token":                {"production", unknown, "Invalid bearer token"},
		"v2 api key as bearer":         {"production", "Bearer " + tn.keys["production"], "Invalid bearer token"},
		"token of another environment": {"sandbox", bearer, "Invalid bearer token"},
	} {
		t.Run(name, func(t *testing.T) {
			expectError(t, s.call(t, tc.env, "GET", "/v1/catalog", tc.auth, nil), 401, tc.message)
		})
	}
	// A v2 key sent as x-api-key does not open v1 either.
	expectError(t, s.call(t, "production", "GET", "/v1/catalog", tn.keys["production"], nil), 401, "Missing bearer token")

	cat := s.call(t, "production", "GET", "/v1/catalog", bearer, nil)
	for _, field := range []string{
		"id", "name", "fromDate", "toDate", "status", "description", "catalogTypeId", "resellerId",
		"createdAt", "updatedAt", "deletedAt",
	} {
		if _, ok := cat.body[field]; !ok {
			t.Errorf("catalog lacks %s: %s", field, cat.raw)
		}
	}
	if cat.str("status") != "active" || cat.str("name") != "eu" || cat.body["toDate"] != nil {
		t.Errorf("catalog: %s", cat.raw)
	}
	// v1 writes instants as v2 and webhooks do: RFC 3339, UTC, milliseconds.
	for _, field := range []string{"fromDate", "createdAt", "updatedAt"} {
		if !etaFormat.MatchString(cat.str(field)) {
			t.Errorf("%s %q is not in the API's date-time format", field, cat.str(field))
		}
	}

	list := s.call(t, "production", "GET", "/v1/catalog/products", bearer, nil)
	if list.body["take"] != float64(20) || list.body["skip"] != float64(0) || list.body["count"] != float64(5) {
		t.Fatalf("defaults: %s", list.raw)
	}
	page := s.call(t, "production", "GET", "/v1/catalog/products?skip=1&take=1", bearer, nil)
	products := page.body["products"].([]any)
	if len(products) != 1 || products[0].(map[string]any)["id"] != "10000000000002" {
		t.Fatalf("paging: %s", page.raw)
	}
	expectError(t, s.call(t, "production", "GET", "/v1/catalog/products?take=0", bearer, nil),
		400, "take must be an integer between 1 and 100")

	p := s.call(t, "production", "GET", "/v1/catalog/product?ean=5901234123457", bearer, nil)
	want := map[string]any{
		"id": "10000000000001", "ean": "5901234123457", "rrp": "20.00", "rrpCurrency": "EUR", "price": float64(2000),
		"buyingPrice": float64(1900), "isCurrencyMismatch": false, "tags": "gaming,credit", "status": "active",
		"state": "available",
	}
	for k, v := range want {
		if p.body[k] != v {
			t.Errorf("%s = %v, want %v", k, p.body[k], v)
		}
	}
	for _, absent := range []string{"discountAmount", "currencyMismatch", "redeemable"} {
		if _, ok := p.body[absent]; ok {
			t.Errorf("v2 field %s in a v1 product", absent)
		}
	}
	lang := p.body["languages"].([]any)[0].(map[string]any)
	for _, f := range []string{
		"languageCode", "name", "sku", "image", "descriptionHtml", "description", "tncHtml", "tnc",
		"redemptionInstructionsHtml", "redemptionInstructions",
	} {
		if _, ok := lang[f]; !ok {
			t.Errorf("language lacks %s", f)
		}
	}
	bySKU := s.call(t, "production", "GET", "/v1/catalog/product?sku=de-de-10000000000001", bearer, nil)
	if bySKU.str("id") != "10000000000001" {
		t.Fatalf("by sku: %s", bySKU.raw)
	}
	expectError(t, s.call(t, "production", "GET", "/v1/catalog/product", bearer, nil),
		400, "ean is required (or sku in the form {CC}-{LL}-{productCode})")
	expectError(t, s.call(t, "production", "GET", "/v1/catalog/product?ean=000", bearer, nil),
		404, "Product with ean 000 was not found in your catalog")
}
