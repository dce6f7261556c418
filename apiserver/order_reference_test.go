package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/codeport/codeport/api/v1alpha1"
)

// TestOrderReferenceIsPathEscaped: an externalOrderCode may hold any character, so partners send
// it path-escaped as the reference of GET /v2/orders/{reference}, and the handler unescapes it
// once: "50%" arrives as 50%25, "INV/1" as INV%2F1. A reference that is no valid escape, such
// as a bare %, is looked up as sent.
func TestOrderReferenceIsPathEscaped(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "1000.00"})
	key := tn.keys["production"]
	place := func(code string) string {
		t.Helper()
		r := s.call(t, "production", "POST", "/v2/orders", key, order(code, line{"productCode": "10000000000001",
			"quantity": 1}))
		if r.status != 202 {
			t.Fatalf("place %q: %d %s", code, r.status, r.raw)
		}
		return r.str("orderId")
	}
	for _, code := range []string{"INV/2026/001", "order #5", "café", "a+b", "50%", "50%25", "a?b=c", "x/../y",
		" padded "} {
		id := place(code)
		r := s.call(t, "production", "GET", "/v2/orders/"+url.PathEscape(code), key, nil)
		if r.status != 200 || r.str("orderId") != id {
			t.Errorf("GET %q as %s: %d %s, want order %s", code, url.PathEscape(code), r.status, r.raw, id)
		}
	}

	// Clients that do not escape send a bare %; the request line carries it verbatim.
	id := place("100%")
	req, err := http.NewRequest(http.MethodGet, s.baseURL["production"]+"/", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = "/v2/orders/100%"
	req.Header.Set("x-api-key", key)
	resp, err := s.client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ OrderID string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 || body.OrderID != id {
		t.Errorf("GET /v2/orders/100%% unescaped: %d %+v (%v), want order %s", resp.StatusCode, body, err, id)
	}
}
