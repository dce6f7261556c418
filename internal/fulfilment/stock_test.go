package fulfilment_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/codes/codestest"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// TestStockLowOncePerCrossing: deliveries that take a product's stock under its catalog's
// threshold raise one stock.low for the partner whose endpoint lists it, in the delivery's
// transaction; further deliveries under it raise nothing; a restock and a new fall raise again,
// also when a single delivery makes both the restocked level and the fall. A partner whose
// endpoint does not list the event hears nothing, and every code taken is counted once.
func TestStockLowOncePerCrossing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const product = "30000000000001"
	threshold := int32(3)
	catalog := testfixture.Catalog("stocked", testfixture.InNamespace("ns"),
		testfixture.CatalogWith(func(c *v1alpha1.Catalog) { c.Spec.StockLowThreshold = &threshold }))
	endpoint := func(events ...string) testfixture.OnboardOption {
		return testfixture.WithWebhooks(provisioning.Webhooks{string(tenancy.Production): {
			URL: "https://partner.example/hooks", Secret: []byte("whsec-test"), Events: events}})
	}
	production := string(tenancy.Production)
	funded := testfixture.WithBalance(production, "", testfixture.TopUp("t1", "EUR", "1000.00"))
	subscribed, err := testfixture.Onboard(ctx, f.prov, testfixture.Partner("acme", testfixture.InNamespace("ns")),
		testfixture.WithCatalog(catalog, testfixture.Product(product)), endpoint(notify.EventStockLow),
		testfixture.WithKeys(), funded)
	if err != nil {
		t.Fatal(err)
	}
	other, err := testfixture.Onboard(ctx, f.prov, testfixture.Partner("globex", testfixture.InNamespace("ns"),
		testfixture.WithCatalogRef("stocked")), endpoint(notify.EventOrderCompleted), testfixture.WithKeys(), funded)
	if err != nil {
		t.Fatal(err)
	}
	notifier := notify.NewNotifier(false, notify.DefaultRetry())
	taken := map[string]int{}
	fulfiller := fulfilment.NewFulfiller(f.db, f.cipher, time.Second, slog.New(slog.DiscardHandler)).
		OnStockLow(notifier.StockCrossedBelow).
		OnDelivered(func(p string, n int) { taken[p] += n })
	imported := 0
	restock := func(n int) {
		codestest.Stock(t, f.db.Pool, f.cipher, product, fmt.Sprint("CODE-", imported), n)
		imported += n
	}
	order := func(account uuid.UUID, quantity int) {
		id := f.place(t, account, production, []line{{product, quantity, 100}}, true, time.Now())
		if err := fulfiller.Fulfil(ctx, id, production); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name            string
		restock, orders int
		// events are the available counts of the stock.low events raised so far, oldest first.
		events []int64
	}{
		{"5 codes, one taken: 4 left", 5, 1, nil},
		{"3 left: at the threshold", 0, 1, nil},
		{"2 left: under it", 0, 1, []int64{2}},
		{"1 left: still under", 0, 1, []int64{2}},
		{"none left: still under", 0, 1, []int64{2}},
		{"out of stock, ordered again", 0, 1, []int64{2}},
		{"restocked to 6, one taken: 5 left", 6, 1, []int64{2}},
		{"4 taken: 1 left, a new crossing", 0, 4, []int64{2, 1}},
		{"restocked to 5 and 3 taken at once", 4, 3, []int64{2, 1, 2}},
	}
	for _, step := range steps {
		if step.restock > 0 {
			restock(step.restock)
		}
		order(subscribed.Account(production), step.orders)
		if got := stockEvents(t, f, subscribed.Account(production)); fmt.Sprint(got) != fmt.Sprint(step.events) {
			t.Fatalf("%s: stock.low events with available %v, want %v", step.name, got, step.events)
		}
	}
	order(other.Account(production), 1)
	if got := stockEvents(t, f, other.Account(production)); len(got) != 0 {
		t.Errorf("a partner whose endpoint does not list stock.low got %v", got)
	}
	if got, want := taken[product], imported-1; got != want {
		t.Errorf("counted %d codes taken, want %d (all imported but the one left)", got, want)
	}
}

// stockEvents are the available counts of the account's stock.low events, oldest first; each
// event's data names the product and the threshold.
func stockEvents(t *testing.T, f *fixture, account uuid.UUID) []int64 {
	t.Helper()
	rows, err := f.db.Pool.Query(context.Background(), `SELECT payload FROM webhook_events
		WHERE account_id = $1 AND type = $2 ORDER BY created_at, id`, account, notify.EventStockLow)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var payload []byte
		if err := rows.Scan(&payload); err != nil {
			t.Fatal(err)
		}
		var e struct {
			Environment string
			Data        notify.StockData
		}
		if err := json.Unmarshal(payload, &e); err != nil {
			t.Fatal(err)
		}
		if e.Data.ProductCode != "30000000000001" || e.Data.Threshold != 3 || e.Environment != "production" {
			t.Errorf("stock.low event %s", payload)
		}
		out = append(out, e.Data.Available)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
