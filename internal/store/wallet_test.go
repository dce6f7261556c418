package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

// TestThresholdChangesDoNotDeadlockPlacements runs placements with debits against threshold
// changes of the same wallet (what a Wallet reconcile writes). Both take their locks in the
// ledger's order, so neither ever fails with a deadlock: the placements are tried once each,
// without the order service's retry.
func TestThresholdChangesDoNotDeadlockPlacements(t *testing.T) {
	w := newWallet(t, "10.00", map[string]int64{"EUR": 1_000_000_000, "GBP": 1_000_000_000})
	ctx := context.Background()
	const placers, ordersEach, changers, changesEach = 6, 40, 2, 40
	errs := make(chan error, placers*ordersEach+changers*changesEach)
	var wg sync.WaitGroup
	for p := range placers {
		wg.Go(func() {
			for i := range ordersEach {
				o := w.order(fmt.Sprintf("o-%d-%d", p, i), 100)
				if _, _, err := w.db.PlaceOrder(ctx, o, fulfilJob, w.debit(o)); err != nil {
					errs <- fmt.Errorf("placement %s: %w", o.ExternalOrderCode, err)
				}
			}
		})
	}
	for c := range changers {
		wg.Go(func() {
			for i := range changesEach {
				threshold := []string{"10.00", "20.00"}[(c+i)%2]
				err := w.db.InTx(ctx, func(tx pgx.Tx) error {
					_, err := store.SetLowBalanceThreshold(ctx, tx, w.account, threshold)
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("threshold %s: %w", threshold, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := w.state(t)
	if s.orders != placers*ordersEach || s.balance != s.ledger {
		t.Fatalf("orders %d (want %d), balance %d, ledger %d", s.orders, placers*ordersEach, s.balance, s.ledger)
	}
}

// TestSetLowBalanceThresholdWritesOnlyChanges: setting the threshold in force writes no row;
// a new one writes the account and the flags that flip.
func TestSetLowBalanceThresholdWritesOnlyChanges(t *testing.T) {
	w := newWallet(t, "10.00", map[string]int64{"EUR": 1500, "GBP": 500})
	ctx := context.Background()
	set := func(threshold string) bool {
		t.Helper()
		var written bool
		err := w.db.InTx(ctx, func(tx pgx.Tx) error {
			var err error
			written, err = store.SetLowBalanceThreshold(ctx, tx, w.account, threshold)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return written
	}
	if !set("20.00") {
		t.Fatal("a new threshold wrote nothing")
	}
	var lowEUR, lowGBP bool
	if err := w.db.Pool.QueryRow(context.Background(), `SELECT
		(SELECT low_balance FROM wallet_balances WHERE account_id = $1 AND currency = 'EUR'),
		(SELECT low_balance FROM wallet_balances WHERE account_id = $1 AND currency = 'GBP')`, w.account).
		Scan(&lowEUR, &lowGBP); err != nil {
		t.Fatal(err)
	}
	if !lowEUR || !lowGBP {
		t.Fatalf("under a threshold of 20.00, 15.00 EUR and 5.00 GBP are low: got EUR %v, GBP %v", lowEUR, lowGBP)
	}
	if set("20") {
		t.Fatal("the threshold in force, written differently, was written again")
	}
}

// TestThresholdChangeLeavesAccountToPlacements replays the interleaving that deadlocked a
// placement against a Wallet reconcile, step by step: a placement holds the wallet's balances
// and has yet to run its foreign-key check (KEY SHARE on the account); a threshold change starts
// and must wait for the balances without holding anything the placement's check needs.
func TestThresholdChangeLeavesAccountToPlacements(t *testing.T) {
	// 15.00 EUR is low under the new threshold: the change rewrites the balance's flag.
	w := newWallet(t, "10.00", map[string]int64{"EUR": 1500})
	ctx := context.Background()
	placement, err := w.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = placement.Rollback(ctx) }()
	if _, err := placement.Exec(ctx, `SELECT 1 FROM wallet_balances WHERE account_id = $1 ORDER BY currency FOR UPDATE`,
		w.account); err != nil {
		t.Fatal(err)
	}
	changed := make(chan error, 1)
	go func() {
		changed <- w.db.InTx(ctx, func(tx pgx.Tx) error {
			_, err := store.SetLowBalanceThreshold(ctx, tx, w.account, "20.00")
			return err
		})
	}()
	waiting := make(chan error, 1)
	go func() { waiting <- storetest.WaitForLockWaiter(ctx, w.db) }()
	select {
	case err := <-waiting:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-changed:
		t.Fatalf("finished without waiting for the locked balances: %v", err)
	}
	if _, err := placement.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := placement.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR KEY SHARE`, w.account); err != nil {
		t.Fatalf("the placement's foreign-key check waited on the threshold change: %v", err)
	}
	if err := placement.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-changed; err != nil {
		t.Fatalf("threshold change: %v", err)
	}
}

// TestThresholdFinerThanTheCurrency: a threshold of 0.5 applied to JPY (no minor digits) makes
// a balance of 0 low, as GET /wallet says; the debit that reaches 0 is a crossing, so its
// alerts fire.
func TestThresholdFinerThanTheCurrency(t *testing.T) {
	w := newWallet(t, "0.5", nil)
	ctx := context.Background()
	err := w.db.InTx(ctx, func(tx pgx.Tx) error {
		_, err := store.ApplyLedgerEntry(ctx, tx, store.LedgerEntry{AccountID: w.account, Currency: "JPY",
			Kind: store.EntryTopUp, Reference: "seed", Amount: 100})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	o := w.order("to-zero", 100)
	o.Currency, o.Lines[0].Currency = "JPY", "JPY"
	debit := w.debit(o)
	if _, _, err := w.db.PlaceOrder(ctx, o, fulfilJob, debit); !errors.Is(err, store.ErrNeedsTransaction) {
		t.Fatalf("debit to 0 JPY under a threshold of 0.5: %v, want the crossing's transaction", err)
	}
	var res store.LedgerResult
	err = w.db.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		res, err = store.ApplyLedgerEntry(ctx, tx, *debit)
		return err
	})
	if err != nil || !res.CrossedBelow() || res.BalanceAfter != 0 {
		t.Fatalf("debit to 0 JPY: %+v %v; want a crossing", res, err)
	}
	// Re-evaluating the flags under another fractional threshold keeps 0 JPY low.
	err = w.db.InTx(ctx, func(tx pgx.Tx) error {
		_, err := store.SetLowBalanceThreshold(ctx, tx, w.account, "0.4")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var low bool
	if err := w.db.Pool.QueryRow(ctx, `SELECT low_balance FROM wallet_balances WHERE account_id = $1 AND currency = 'JPY'`,
		w.account).Scan(&low); err != nil || !low {
		t.Fatalf("0 JPY under a threshold of 0.4: low %v, %v", low, err)
	}
}

// TestThresholdRuleAgreesWithWallet: the ledger judges a balance by the threshold as the
// database stores it (numeric, six digits) and GET /wallet by the threshold as provisioned; for
// every threshold and balance both say low or both do not.
func TestThresholdRuleAgreesWithWallet(t *testing.T) {
	w := newWallet(t, "0", nil)
	ctx := context.Background()
	cases := []struct {
		threshold, currency string
		balance             int64
	}{
		{"10", "EUR", 999}, {"10", "EUR", 1000}, {"10.005", "EUR", 1000}, {"10.005", "EUR", 1001},
		{"0.5", "JPY", 1}, {"1.5", "JPY", 1}, {"1.5", "JPY", 2}, {"2", "JPY", 2},
		{"0.0001", "KWD", 1}, {"0.0015", "KWD", 1}, {"0.0015", "KWD", 2}, {"12.3456", "KWD", 12345},
		{"12.3456", "KWD", 12346},
	}
	for i, tc := range cases {
		var res store.LedgerResult
		err := w.db.InTx(ctx, func(tx pgx.Tx) error {
			if _, err := store.SetLowBalanceThreshold(ctx, tx, w.account, tc.threshold); err != nil {
				return err
			}
			var err error
			res, err = store.ApplyLedgerEntry(ctx, tx, store.LedgerEntry{AccountID: w.account, Currency: tc.currency,
				Kind: store.EntryAdjustment, Reference: fmt.Sprintf("case-%d", i), Amount: tc.balance})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := money.IsLow(res.BalanceAfter, money.LowBalanceLimit(tc.threshold, tc.currency)); res.IsLow != want {
			t.Errorf("%d %s under a threshold of %s: the lock says low %v, the wallet %v",
				res.BalanceAfter, tc.currency, tc.threshold, res.IsLow, want)
		}
		// Start the next case from zero.
		err = w.db.InTx(ctx, func(tx pgx.Tx) error {
			_, err := store.ApplyLedgerEntry(ctx, tx, store.LedgerEntry{AccountID: w.account, Currency: tc.currency,
				Kind: store.EntryAdjustment, Reference: fmt.Sprintf("reset-%d", i), Amount: -res.BalanceAfter})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
