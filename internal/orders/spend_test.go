package orders_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/orders"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/poll"
)

// eurLimit is a daily spend limit of the given number of eurCredit orders (20.00 EUR each).
func eurLimit(orders int64, wallet bool) *v1alpha1.OrderingSpec {
	return &v1alpha1.OrderingSpec{WalletEnabled: ptr(wallet),
		Limits: &v1alpha1.OrderLimits{DailySpend: map[string]int64{"EUR": orders * 2000}}}
}

// spendOf is the account's EUR spend today as the orders hold it, and as its running total holds
// it (-1 without one), with whether the total was recounted.
func (f *fixture) spendOf(t *testing.T, acct *auth.Account) (orders, total int64, counted bool) {
	t.Helper()
	err := f.db.Pool.QueryRow(context.Background(), `SELECT
		(SELECT COALESCE(sum(total_price - refunded_amount), 0)::bigint FROM orders
		 WHERE account_id = $1 AND currency = 'EUR' AND created_at >= $2),
		COALESCE((SELECT spent FROM daily_spend WHERE account_id = $1 AND currency = 'EUR'
		          AND day = ($2::timestamptz AT TIME ZONE 'UTC')::date), -1),
		COALESCE((SELECT counted FROM daily_spend WHERE account_id = $1 AND currency = 'EUR'
		          AND day = ($2::timestamptz AT TIME ZONE 'UTC')::date), false)`,
		acct.ID, time.Now().UTC().Truncate(24*time.Hour)).Scan(&orders, &total, &counted)
	if err != nil {
		t.Fatal(err)
	}
	return orders, total, counted
}

// TestPlaceConcurrentOrdersRaceForTheLimit: orders racing for the last part of a daily spend
// limit are judged one after another against the day's running total: exactly as many are placed
// as the rest of the limit covers, the others are refused, and the running total is the sum of
// the day's orders, whether the race starts the day or follows earlier orders, with a wallet (the
// debit locks the balances before the total is read) or without.
func TestPlaceConcurrentOrdersRaceForTheLimit(t *testing.T) {
	tests := []struct {
		name    string
		wallet  bool
		earlier int   // orders placed one by one before the race
		limit   int64 // in orders
	}{
		{name: "first orders of the day", wallet: true, limit: 5},
		{name: "the last part of the limit", wallet: true, earlier: 10, limit: 15},
		{name: "the last part of the limit, no wallet", earlier: 10, limit: 15},
		{name: "nothing left", wallet: true, earlier: 3, limit: 3},
	}
	const racing = 12
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			acct := f.onboard(t, "acme", partner{ordering: eurLimit(tt.limit, tt.wallet),
				topUps: []v1alpha1.TopUp{eur("t1", "1000.00")}})
			for i := range tt.earlier {
				body := order(fmt.Sprint("earlier-", i), eurCredit, 1)
				if _, _, err := f.service.Place(context.Background(), acct, []byte(body)); err != nil {
					t.Fatalf("earlier order %d: %v", i, err)
				}
			}
			bodies := make([]string, racing)
			for i := range bodies {
				bodies[i] = order(fmt.Sprint("racing-", i), eurCredit, 1)
			}
			placed, refused := 0, 0
			for _, r := range f.placeThroughGate(t, acct, bodies) {
				switch {
				case r.err == nil && !r.replayed:
					placed++
				case reasonOf(r.err) == orders.LimitExceeded:
					refused++
				default:
					t.Fatalf("Place = replayed %v, %v", r.replayed, r.err)
				}
			}
			if want := int(tt.limit) - tt.earlier; placed != want || refused != racing-want {
				t.Errorf("%d placed and %d refused, want %d and %d", placed, refused, want, racing-want)
			}
			sum, total, counted := f.spendOf(t, acct)
			if sum != tt.limit*2000 || total != sum || !counted {
				t.Errorf("the day's orders sum to %d, its running total is %d (counted %v); want both %d",
					sum, total, counted, tt.limit*2000)
			}
		})
	}
}

// placeThroughGate places the bodies concurrently and holds each at its order's insert, whose
// foreign key check waits for a transaction that locks the account's row, until all of them
// wait there: released together, they reach the limit's check together.
func (f *fixture) placeThroughGate(t *testing.T, acct *auth.Account, bodies []string) []placeResult {
	t.Helper()
	ctx := context.Background()
	gate, err := f.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Rollback(ctx) //nolint:errcheck // committed below; a failed test only ends it
	if _, err := gate.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, acct.ID); err != nil {
		t.Fatal(err)
	}
	results := make([]placeResult, len(bodies))
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			v, replayed, err := f.service.Place(ctx, acct, []byte(body))
			results[i] = placeResult{v, replayed, err}
		})
	}
	poll.Until(t, time.Minute, "every placement waiting at the gate", func() (bool, string) {
		var waiting int
		if err := f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			return false, err.Error()
		}
		return waiting == len(bodies), fmt.Sprintf("%d of %d waiting", waiting, len(bodies))
	})
	if err := gate.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return results
}

// TestPlaceAfterARefundUnderTheLimit: an order fulfilment fails is refunded, and its value no
// longer counts against the day's limit, as the limit's rule subtracts refunds: the order that
// was refused for the limit before fits after.
func TestPlaceAfterARefundUnderTheLimit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	acct := f.onboard(t, "acme", partner{ordering: eurLimit(2, true), topUps: []v1alpha1.TopUp{eur("t1", "100.00")}})
	first, _, err := f.service.Place(ctx, acct, []byte(order("A", eurCredit, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.service.Place(ctx, acct, []byte(order("B", eurCredit, 1))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.service.Place(ctx, acct, []byte(order("C", eurCredit, 1))); reasonOf(err) != orders.LimitExceeded {
		t.Fatalf("third order: %v, want the limit's refusal", err)
	}
	// The catalog has no stock: the order fails and is refunded whole.
	fulfiller := fulfilment.NewFulfiller(f.db, f.cipher, time.Second, nil)
	if err := fulfiller.Fulfil(ctx, first.OrderID, string(tenancy.Production)); err != nil {
		t.Fatal(err)
	}
	if sum, total, _ := f.spendOf(t, acct); sum != 2000 || total != 2000 {
		t.Fatalf("after the refund the day's orders sum to %d and the running total is %d, want 2000", sum, total)
	}
	if _, _, err := f.service.Place(ctx, acct, []byte(order("C", eurCredit, 1))); err != nil {
		t.Errorf("the order the refund made room for: %v", err)
	}
	if sum, total, counted := f.spendOf(t, acct); sum != 4000 || total != 4000 || !counted {
		t.Errorf("the day's orders sum to %d, the running total is %d (counted %v), want 4000", sum, total, counted)
	}
}

// TestPlaceWhileRefundsLandUnderTheLimit: fulfilment refunds the day's orders while new orders
// race for the limit and orders without a limit share the wallet: every placement is placed or
// refused for the limit, every fulfilment succeeds (the triggers' row locks come last, so
// nothing deadlocks), the day's spend never passes the limit, and the running total ends equal
// to the day's orders.
func TestPlaceWhileRefundsLandUnderTheLimit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	acct := f.onboard(t, "acme", partner{ordering: eurLimit(10, true), topUps: []v1alpha1.TopUp{eur("t1", "1000.00")}})
	var earlier []uuid.UUID
	for i := range 10 {
		v, _, err := f.service.Place(ctx, acct, []byte(order(fmt.Sprint("earlier-", i), eurCredit, 1)))
		if err != nil {
			t.Fatal(err)
		}
		earlier = append(earlier, v.OrderID)
	}
	fulfiller := fulfilment.NewFulfiller(f.db, f.cipher, time.Second, nil)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			<-start
			for j := i; j < len(earlier); j += 2 {
				if err := fulfiller.Fulfil(ctx, earlier[j], string(tenancy.Production)); err != nil {
					t.Errorf("fulfil %s: %v", earlier[j], err)
				}
			}
		})
	}
	results := make([]placeResult, 16)
	for i := range results {
		wg.Go(func() {
			<-start
			v, replayed, err := f.service.Place(ctx, acct, []byte(order(fmt.Sprint("racing-", i), eurCredit, 1)))
			results[i] = placeResult{v, replayed, err}
		})
	}
	close(start)
	wg.Wait()
	for _, r := range results {
		if r.err != nil && reasonOf(r.err) != orders.LimitExceeded {
			t.Errorf("Place: %v", r.err)
		}
	}
	sum, total, _ := f.spendOf(t, acct)
	if sum > 10*2000 || total != sum {
		t.Errorf("the day's orders sum to %d and the running total is %d; want them equal and within %d",
			sum, total, 10*2000)
	}
}
