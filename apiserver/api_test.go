package apiserver_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store/storetest"
)

func TestPingAndRateLimitHeaders(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	for _, env := range []string{"production", "sandbox"} {
		r := s.call(t, env, "GET", "/v2/ping", tn.keys[env], nil)
		if r.status != 200 || r.str("status") != "ok" || r.str("timestamp") == "" {
			t.Fatalf("%s ping: %d %s", env, r.status, r.raw)
		}
		// The API's one date-time format: RFC 3339, UTC, milliseconds.
		if !etaFormat.MatchString(r.str("timestamp")) {
			t.Errorf("%s ping: timestamp %q is not RFC 3339 UTC with milliseconds", env, r.str("timestamp"))
		}
		for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
			if _, err := strconv.ParseInt(r.header.Get(h), 10, 64); err != nil {
				t.Fatalf("%s: header %s = %q", env, h, r.header.Get(h))
			}
		}
	}
}

func TestAuthentication(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	cases := []struct {
		name, env, key, message string
	}{
		{"missing key", "production", "", "Missing API key"},
		{"garbage key", "production", "not-a-key", "Invalid API key"},
		{"well-formed unknown key", "production", "cp_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA000000", "Invalid API key"},
		{"sandbox key on production", "production", tn.keys["sandbox"], "Invalid API key"},
		{"production key on sandbox", "sandbox", tn.keys["production"], "Invalid API key"},
		{"bearer token as x-api-key", "production", tn.keys["bearer:production"], "Invalid API key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.call(t, tc.env, "GET", "/v2/catalog/products", tc.key, nil)
			expectError(t, r, 401, tc.message)
			if r.str("error") != "Unauthorized" {
				t.Fatalf("error label %q", r.str("error"))
			}
			if r.header.Get("X-RateLimit-Limit") == "" {
				t.Fatal("401 without rate-limit headers")
			}
		})
	}
}

// TestUnroutedRequests: requests no route takes still get the contract's error body, whatever
// their method or path, with an X-Request-Id (and, in the API, the rate-limit headers); a path served for other
// methods answers 405 with an Allow header that lists them.
func TestUnroutedRequests(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	key, bearer := tn.keys["production"], "Bearer "+tn.keys["bearer:production"]
	cases := []struct {
		name, method, path, key string
		status                  int
		message, allow          string
	}{
		{"unknown path", "GET", "/v2/nothing-here", key, 404, "Cannot GET /v2/nothing-here", ""},
		{"the server's root", "GET", "/", "", 404,
			"Cannot GET /: the partner API is under /v2 (legacy /v1), its reference at /docs", ""},
		{"the server's root, posted to", "POST", "/", "", 404,
			"Cannot POST /: the partner API is under /v2 (legacy /v1), its reference at /docs", ""},
		{"unknown path outside the API", "GET", "/nothing-here", "", 404, "Cannot GET /nothing-here", ""},
		{"unknown path of v1", "GET", "/v1/nothing-here", bearer, 404, "Cannot GET /v1/nothing-here", ""},
		{"unknown path below a route", "GET", "/v2/orders/x/y", key, 404, "Cannot GET /v2/orders/x/y", ""},
		{"method the route does not take", "DELETE", "/v2/ping", key, 405, "Method not allowed", "GET, HEAD"},
		{"deletion of the order list", "DELETE", "/v2/orders", key, 405, "Method not allowed", "GET, HEAD, POST"},
		{"deletion of an order", "DELETE", "/v2/orders/x", key, 405, "Method not allowed", "GET, HEAD"},
		{"route matched as the router matches", "PUT", "/V2/Orders/", key, 405, "Method not allowed", "GET, HEAD, POST"},
		{"method the v1 route does not take", "POST", "/v1/catalog", bearer, 405, "Method not allowed", "GET, HEAD"},
		{"wrong method without a key is refused for the key first", "DELETE", "/v2/orders/x", "", 401, "Missing API key", ""},
		{"method the route does not take outside the API", "DELETE", "/healthz", "", 405, "Method not allowed", "GET, HEAD"},
		{"method the router does not know", "PURGE", "/v2/ping", key, 405, "Method not allowed", "GET, HEAD"},
		{"unknown method without a key", "BREW", "/v2/catalog/products", "", 405, "Method not allowed", "GET, HEAD"},
		{"unknown method on an unknown path", "BREW", "/v2/teapot", "", 405, "Method not allowed", ""},
		{"unknown method outside the API", "BREW", "/healthz", "", 405, "Method not allowed", "GET, HEAD"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.call(t, "production", tc.method, tc.path, tc.key, nil)
			expectError(t, r, tc.status, tc.message)
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Fatalf("Allow %q, want %q", got, tc.allow)
			}
			if r.header.Get("X-Request-Id") == "" {
				t.Fatalf("answer without X-Request-Id: %v", r.header)
			}
			// The health probes and the other paths outside /v2 and /v1 stand outside the
			// rate-limited API.
			limited := strings.HasPrefix(strings.ToLower(tc.path), "/v")
			if limited && (r.header.Get("X-RateLimit-Limit") == "" || r.header.Get("X-RateLimit-Reset") == "") {
				t.Fatalf("API answer without rate-limit headers: %v", r.header)
			}
		})
	}
}

// TestRefusalsBeforeRoutingCountPerIP: requests refused before any key is read (a method the
// router does not know) count against the client IP's bucket, as failed authentications do, and
// are answered 429 once it is spent.
func TestRefusalsBeforeRoutingCountPerIP(t *testing.T) {
	s := newStack(t, stackOptions{})
	awayFromMinuteEnd()
	limit := 0
	for i := 0; ; i++ {
		r := s.call(t, "production", "BREW", "/v2/ping", "", nil)
		if i == 0 {
			limit, _ = strconv.Atoi(r.header.Get("X-RateLimit-Limit"))
			if limit < 1 {
				t.Fatalf("X-RateLimit-Limit %q", r.header.Get("X-RateLimit-Limit"))
			}
		}
		if i < limit {
			expectError(t, r, 405, "Method not allowed")
			if r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(limit-1-i) {
				t.Fatalf("request %d: remaining %q", i, r.header.Get("X-RateLimit-Remaining"))
			}
			continue
		}
		retry := r.header.Get("Retry-After")
		expectError(t, r, http.StatusTooManyRequests, "Rate limit exceeded. Retry after "+retry+"s.")
		break
	}
	// The IP's budget is spent for requests without a key as well.
	if r := s.call(t, "production", "GET", "/v2/ping", "", nil); r.status != http.StatusTooManyRequests {
		t.Fatalf("a request without a key after the IP's budget: %d %s", r.status, r.raw)
	}
}

func TestIPWhitelist(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "remote", func(p *v1alpha1.Partner) { p.Spec.IPWhitelist = []string{"203.0.113.0/24"} })
	r := s.call(t, "production", "GET", "/v2/ping", tn.keys["production"], nil)
	if r.status != 403 || r.header.Get("X-RateLimit-Limit") == "" {
		t.Fatalf("got %d %s", r.status, r.raw)
	}
	// An override for one environment applies to it alone.
	tn2 := s.onboard(t, "split", func(p *v1alpha1.Partner) {
		p.Spec.Environments = &v1alpha1.EnvironmentOverrides{
			Sandbox: &v1alpha1.AccessPolicy{IPWhitelist: []string{"198.51.100.7"}},
		}
	})
	if r := s.call(t, "production", "GET", "/v2/ping", tn2.keys["production"], nil); r.status != 200 {
		t.Fatalf("production: %d %s", r.status, r.raw)
	}
	if r := s.call(t, "sandbox", "GET", "/v2/ping", tn2.keys["sandbox"], nil); r.status != 403 {
		t.Fatalf("sandbox: %d %s", r.status, r.raw)
	}
}

func TestCatalogList(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{databaseURL: storetest.New(t).URL})
	tn := s.onboard(t, "acme", nil)
	key := tn.keys["production"]
	cases := []struct {
		query string
		codes []string
	}{
		{"", []string{"10000000000001", "10000000000002", "10000000000003", "10000000000004", "10000000000005"}},
		{"country=gb", []string{"10000000000004"}},
		{"country=GB,de&brand=streamco", []string{"10000000000004"}},
		{"brand=ACME%20CREDIT,nebula", []string{"10000000000001", "10000000000003", "10000000000005"}},
		{"category=gaming&tag=credit", []string{"10000000000001"}},
		{"tag=GIFT,video", []string{"10000000000002", "10000000000004"}},
		{"language=de", []string{"10000000000001"}},
		{"language=DE,en", []string{"10000000000001", "10000000000002", "10000000000004"}},
		{"search=gift", []string{"10000000000002"}},
		{"search=00000000004", []string{"10000000000004"}},
		{"search=nothing-matches", nil},
		{"skip=1&take=2", []string{"10000000000002", "10000000000003"}},
		{"skip=10", nil},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			r := s.call(t, "production", "GET", "/v2/catalog/products?"+tc.query, key, nil)
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			products, _ := r.body["products"].([]any)
			var got []string
			for _, p := range products {
				got = append(got, p.(map[string]any)["productCode"].(string))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.codes) {
				t.Fatalf("got %v, want %v", got, tc.codes)
			}
		})
	}
	r := s.call(t, "production", "GET", "/v2/catalog/products?skip=1&take=2", key, nil)
	if r.body["count"] != float64(5) || r.body["skip"] != float64(1) || r.body["take"] != float64(2) {
		t.Fatalf("paging fields: %s", r.raw)
	}
	if r := s.call(t, "production", "GET", "/v2/catalog/products", key, nil); r.body["take"] != float64(20) {
		t.Fatalf("default take: %s", r.raw)
	}
	for q, msg := range map[string]string{
		"take=0":   "take must be an integer between 1 and 100",
		"take=101": "take must be an integer between 1 and 100",
		"take=ten": "take must be an integer between 1 and 100",
		"skip=-1":  "skip must be an integer greater than or equal to 0",
		"skip=1.5": "skip must be an integer greater than or equal to 0",
	} {
		expectError(t, s.call(t, "production", "GET", "/v2/catalog/products?"+q, key, nil), 400, msg)
	}
}

func TestSandboxCatalogHasTestProducts(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	r := s.call(t, "sandbox", "GET", "/v2/catalog/products?brand=codeport%20test&take=100", tn.keys["sandbox"], nil)
	if r.body["count"] != float64(5) {
		t.Fatalf("sandbox test products: %s", r.raw)
	}
	for _, p := range r.body["products"].([]any) {
		if p.(map[string]any)["isSandboxProduct"] != true {
			t.Fatalf("test product without isSandboxProduct: %v", p)
		}
	}
	r = s.call(t, "production", "GET", "/v2/catalog/products?brand=codeport+test", tn.keys["production"], nil)
	if r.body["count"] != float64(0) {
		t.Fatalf("production lists test products: %s", r.raw)
	}
	prod := s.call(t, "production", "GET", "/v2/catalog/products/10000000000001", tn.keys["production"], nil)
	if _, ok := prod.body["isSandboxProduct"]; ok {
		t.Fatal("isSandboxProduct on an ordinary product")
	}
}

func TestProductDetail(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	key := tn.keys["production"]
	fixed := s.call(t, "production", "GET", "/v2/catalog/products/10000000000001", key, nil)
	want := map[string]any{
		"productCode": "10000000000001", "price": float64(2000), "buyingPrice": float64(1900), "discountAmount": float64(100),
		"discountPercentage": float64(5), "currencyMismatch": false, "denominationType": "fixed", "redeemable": "Germany",
		"denominationMinValue": nil, "denominationMaxValue": nil, "denominationStep": nil, "denominationDefaultValue": nil,
		"promotion": false, "serviceFee": false, "status": "active", "type": "digital",
	}
	for k, v := range want {
		if got, ok := fixed.body[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	for _, absent := range []string{"rrp", "rrpCurrency", "state", "discount", "promotionType", "serviceFeeType"} {
		if _, ok := fixed.body[absent]; ok {
			t.Errorf("field %s must not be in v2", absent)
		}
	}
	langs := fixed.body["languages"].([]any)
	if len(langs) != 2 || langs[0].(map[string]any)["sku"] != "DE-EN-10000000000001" {
		t.Errorf("languages: %v", langs)
	}
	if tags, ok := fixed.body["tags"].([]any); !ok || len(tags) != 2 {
		t.Errorf("tags must be an array: %v", fixed.body["tags"])
	}
	open := s.call(t, "production", "GET", "/v2/catalog/products/10000000000002", key, nil)
	for k, v := range map[string]any{
		"denominationType": "open", "denominationMinValue": float64(500), "denominationMaxValue": float64(10000),
		"denominationStep": float64(100), "denominationDefaultValue": float64(2500), "discountPercentage": 7.5,
	} {
		if open.body[k] != v {
			t.Errorf("open %s = %v, want %v", k, open.body[k], v)
		}
	}
	promo := s.call(t, "production", "GET", "/v2/catalog/products/10000000000005", key, nil)
	for k, v := range map[string]any{"promotion": true, "promotionType": "Discount", "promotionDetails": "10%",
		"promotionStartDate": "2026-01-01", "serviceFee": true, "serviceFeeType": "Percentage", "serviceFeeValue": "2.5",
		"preorder": true, "firstSale": "2027-03-01"} {
		if promo.body[k] != v {
			t.Errorf("promotion product %s = %v, want %v", k, promo.body[k], v)
		}
	}
	expectError(t, s.call(t, "production", "GET", "/v2/catalog/products/99999999999999", key, nil), 404,
		"Product 99999999999999 was not found in your catalog")
	// A sandbox test product does not exist in production.
	expectError(t, s.call(t, "production", "GET", "/v2/catalog/products/99000000000001", key, nil), 404,
		"Product 99000000000001 was not found in your catalog")
	expectError(t, s.call(t, "production", "GET", "/v2/catalog/products/"+url.PathEscape("abc"), key, nil), 404,
		"Product abc was not found in your catalog")
}
