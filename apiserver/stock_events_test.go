package apiserver_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/codes/codestest"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/test/poll"
)

// TestStockLowEvent: production orders that take a product of a partner's catalog under the
// catalog's threshold deliver one signed stock.low to the partner's endpoint that lists it;
// orders that follow under the threshold deliver none, and a partner that did not ask gets
// none. The stock gauge and the delivered-codes counter follow the orders.
func TestStockLowEvent(t *testing.T) {
	s := newStack(t, stackOptions{metrics: true})
	subscribed := s.onboard(t, "acme", nil)
	rcv := newReceiver(t, 0)
	s.setWebhook(t, subscribed, rcv.server.URL, notify.EventStockLow)
	others := s.onboard(t, "bolt", nil) // same namespace: bound to the same catalog
	quiet := newReceiver(t, 0)
	s.setWebhook(t, others, quiet.server.URL)

	// A product of this test's own: stock is shared by every catalog of the package's database.
	product := fmt.Sprintf("5%013d", time.Now().UnixNano()%1e13)
	c, products := testCatalog(subscribed.namespace)
	threshold := int32(2)
	c.Spec.StockLowThreshold = &threshold
	products = append(products, v1alpha1.CatalogProduct{ProductCode: product, Name: "Stocked", CountryCode: "DE",
		CurrencyCode: "EUR", Price: ptr(int64(100)), Status: "active"})
	if res, err := s.prov.ApplyCatalog(t.Context(), c, products); err != nil || len(res.Invalid) > 0 {
		t.Fatalf("apply: %v %v", err, res.Invalid)
	}
	codestest.Stock(t, s.db.Pool, s.cipher, product, "STOCK-"+product, 4)
	s.topUp(t, subscribed, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	key := subscribed.keys["production"]
	gauge := `codeport_code_stock{product_code=` + product + `}`
	delivered := `codeport_codes_delivered_total{product_code=` + product + `}`
	if got := scrape(t, s.metricsURL)[gauge]; got != 4 {
		t.Fatalf("%s = %v before any order, want 4", gauge, got)
	}

	// 4 codes: 3 left, 2 left (at the threshold), 1 left (under it: the event), none left.
	for i := range 4 {
		if r := s.placeAndFinish(t, "production", key, fmt.Sprintf("stock-%d", i), product, nil); r.body["status"] !=
			"completed" {
			t.Fatalf("order %d: %s", i, r.raw)
		}
	}
	poll.UntilTrue(t, 30*time.Second, "stock.low delivered", func() bool { return len(rcv.deliveries()) >= 1 })
	d := rcv.deliveries()[0]
	if !verify(webhookSecret, d) {
		t.Fatalf("signature does not verify: %s", d.body)
	}
	var ev struct {
		Type, Environment string
		Data              notify.StockData
	}
	if err := json.Unmarshal(d.body, &ev); err != nil {
		t.Fatal(err)
	}
	if want := (notify.StockData{ProductCode: product, Available: 1, Threshold: 2}); ev.Type != notify.EventStockLow ||
		ev.Environment != "production" || ev.Data != want {
		t.Fatalf("event %s, want stock.low in production with %+v", d.body, want)
	}
	// Events are stored in the transaction of the delivery, which committed before its order
	// read completed: the stored events are every delivery there will be.
	for tn, want := range map[*tenant]int{subscribed: 1, others: 0} {
		var n int
		if err := s.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_events
			WHERE account_id = $1 AND type = $2`, s.account(t, tn, "production").ID, notify.EventStockLow,
		).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s: %d stock.low events stored, want %d", tn.name, n, want)
		}
	}
	metrics := scrape(t, s.metricsURL)
	if metrics[gauge] != 0 || metrics[delivered] != 4 {
		t.Errorf("%s = %v, want 0; %s = %v, want 4", gauge, metrics[gauge], delivered, metrics[delivered])
	}
}
