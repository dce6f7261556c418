package apiserver_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/test/poll"
)

// productEvent is a delivered product.* or catalog.updated event.
type productEvent struct {
	ID, Type, Environment string
	Data                  struct {
		ProductCode             string
		Previous, Current       json.RawMessage
		Added, Updated, Removed int
	}
}

// receivedEvents waits for n successful deliveries to rcv and decodes them, checking signatures.
func receivedEvents(t *testing.T, rcv *receiver, n int) []productEvent {
	t.Helper()
	poll.UntilTrue(t, 30*time.Second, fmt.Sprintf("%d events delivered", n), func() bool {
		return len(rcv.deliveries()) >= n
	})
	var events []productEvent
	for _, d := range rcv.deliveries() {
		if !verify(webhookSecret, d) {
			t.Fatalf("signature does not verify: %s", d.body)
		}
		var ev productEvent
		if err := json.Unmarshal(d.body, &ev); err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	return events
}

// TestProductEvents: a catalog change raises, for each account of a partner bound to the catalog
// whose endpoint lists them, product.updated (previous and current state, the current one as the
// product read now answers) and product.removed; partners that did not ask get nothing, an
// unchanged apply raises nothing, and a change of more than MaxProductEvents products raises one
// catalog.updated.
func TestProductEvents(t *testing.T) {
	s := newStack(t, stackOptions{})
	subscribed := s.onboard(t, "acme", nil)
	rcv := newReceiver(t, 0)
	s.setWebhook(t, subscribed, rcv.server.URL, notify.ProductEventTypes...)
	others := s.onboard(t, "bolt", nil) // same namespace: bound to the same catalog
	quiet := newReceiver(t, 0)
	s.setWebhook(t, others, quiet.server.URL)

	c, products := testCatalog(subscribed.namespace)
	products[0].Price = ptr(int64(2100))
	removed := products[3].ProductCode
	products = append(products[:3], products[4:]...)
	added := v1alpha1.CatalogProduct{ProductCode: "10000000000006", Name: "New Pass", CountryCode: "DE",
		CurrencyCode: "EUR", Price: ptr(int64(1500)), Status: "active"}
	products = append(products, added)
	if res, err := s.prov.ApplyCatalog(t.Context(), c, products); err != nil || len(res.Invalid) > 0 {
		t.Fatalf("apply: %v %v", err, res.Invalid)
	}

	events := receivedEvents(t, rcv, 6)
	seen := map[string]productEvent{}
	for _, ev := range events {
		seen[ev.Environment+" "+ev.Type+" "+ev.Data.ProductCode] = ev
	}
	for _, env := range []string{"sandbox", "production"} {
		changed := seen[env+" product.updated 10000000000001"]
		var before, after struct{ Price, BuyingPrice int64 }
		if json.Unmarshal(changed.Data.Previous, &before) != nil || json.Unmarshal(changed.Data.Current, &after) != nil ||
			before.Price != 2000 || after.Price != 2100 || after.BuyingPrice != 1995 {
			t.Errorf("%s price change: %+v", env, changed)
		}
		read := s.call(t, env, "GET", "/v2/catalog/products/10000000000001", subscribed.keys[env], nil)
		if !sameJSON(changed.Data.Current, read.raw) {
			t.Errorf("%s: current state\n%s\ndiffers from the product read\n%s", env, changed.Data.Current, read.raw)
		}
		if gone := seen[env+" product.removed "+removed]; string(gone.Data.Current) != "null" ||
			len(gone.Data.Previous) < 10 {
			t.Errorf("%s removal: %+v", env, gone)
		}
		if fresh := seen[env+" product.updated "+added.ProductCode]; string(fresh.Data.Previous) != "null" ||
			len(fresh.Data.Current) < 10 {
			t.Errorf("%s addition: %+v", env, fresh)
		}
	}
	if len(seen) != 6 {
		t.Errorf("%d distinct events, want 6: %v", len(seen), seen)
	}

	// Nothing changes: nothing is raised. Then a bulk change: one catalog.updated per account.
	if _, err := s.prov.ApplyCatalog(t.Context(), c, products); err != nil {
		t.Fatal(err)
	}
	for i := range notify.MaxProductEvents + 1 {
		products = append(products, v1alpha1.CatalogProduct{ProductCode: fmt.Sprintf("2%013d", i), Name: "Bulk",
			CountryCode: "DE", CurrencyCode: "EUR", Price: ptr(int64(100)), Status: "active"})
	}
	if _, err := s.prov.ApplyCatalog(t.Context(), c, products); err != nil {
		t.Fatal(err)
	}
	events = receivedEvents(t, rcv, 8)
	time.Sleep(500 * time.Millisecond) // no late or extra deliveries
	if got := len(rcv.deliveries()); got != 8 {
		t.Fatalf("%d deliveries after the unchanged apply and the bulk change, want 8", got)
	}
	for _, ev := range events[6:] {
		if ev.Type != notify.EventCatalogUpdated || ev.Data.Added != notify.MaxProductEvents+1 ||
			ev.Data.Updated != 0 || ev.Data.Removed != 0 {
			t.Errorf("bulk change: %+v", ev)
		}
	}
	if n := len(quiet.deliveries()); n != 0 {
		t.Errorf("a partner whose endpoint lists no product events got %d deliveries", n)
	}
}
