package apiserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

// TestPlacementRetriesDeadlock: a writer that takes the account row before the balances (the
// wrong way round) deadlocks with a placement, and PostgreSQL aborts the placement. The server
// places the order again, so the partner gets its 202 — never a 502 for a conflict that
// resolves itself — and the order is written and debited exactly once.
func TestPlacementRetriesDeadlock(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	account := s.account(t, tn, "production").ID
	ctx := context.Background()

	locked := make(chan struct{})
	writer := make(chan error, 1)
	go func() {
		writer <- func() error {
			tx, err := s.db.Pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			// The placement, not this writer, is to be the deadlock's victim: it looks for the
			// deadlock after the server's deadlock_timeout, this session much later.
			if _, err := tx.Exec(ctx, `SET LOCAL deadlock_timeout = '30s'`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, account); err != nil {
				return err
			}
			close(locked)
			if err := storetest.WaitForLockWaiter(ctx, s.db); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE wallet_balances SET updated_at = now() WHERE account_id = $1`,
				account); err != nil {
				return fmt.Errorf("writer's balance update: %w", err)
			}
			return tx.Commit(ctx)
		}()
	}()
	<-locked
	r := s.call(t, "production", "POST", "/v2/orders", tn.keys["production"],
		order("deadlocked", line{"productCode": "10000000000001", "quantity": 1}))
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
	if r.status != 202 {
		t.Fatalf("placement that lost a deadlock: %d %s", r.status, r.raw)
	}
	w := s.call(t, "production", "GET", "/v2/wallet", tn.keys["production"], nil)
	if fmt.Sprint(w.body["balances"]) != "map[EUR:80]" {
		t.Fatalf("wallet after one order of 20.00 from 100.00: %s", w.raw)
	}
	sums, err := store.LedgerSum(t.Context(), s.db.Pool, account)
	if err != nil || sums["EUR"] != 8000 {
		t.Fatalf("ledger sum %v, %v; want 8000", sums, err)
	}
}

// TestPlacementWaitsOutAShortOutage: a placement that finds the database unavailable (a
// failover, a restart) tries again until its deadline, so an outage shorter than that costs the
// partner a slower 202 instead of a 502, and the order is written and debited once.
func TestPlacementWaitsOutAShortOutage(t *testing.T) {
	db := storetest.New(t)
	s := newStack(t, stackOptions{databaseURL: db.URL, noWorker: true, metrics: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	key := tn.keys["production"]
	// The key and the catalog are read from memory during the outage: cached after the caches'
	// first subscription, which flushes them.
	s.waitSubscribed(t)
	if r := s.call(t, "production", "GET", "/v2/catalog/products", key, nil); r.status != 200 {
		t.Fatalf("catalog before the outage: %d %s", r.status, r.raw)
	}
	setConnectable(t, db.Name, false)
	defer setConnectable(t, db.Name, true)
	reopened := make(chan struct{})
	go func() {
		defer close(reopened)
		time.Sleep(time.Second)
		setConnectable(t, db.Name, true)
	}()
	r := s.call(t, "production", "POST", "/v2/orders", key,
		order("through-the-outage", line{"productCode": "10000000000001", "quantity": 1}))
	<-reopened
	if r.status != 202 {
		t.Fatalf("placement across a 1 s outage: %d %s, want 202", r.status, r.raw)
	}
	w := s.call(t, "production", "GET", "/v2/wallet", key, nil)
	if fmt.Sprint(w.body["balances"]) != "map[EUR:80]" {
		t.Fatalf("wallet after one order of 20.00 from 100.00: %s", w.raw)
	}
	sums, err := store.LedgerSum(t.Context(), s.db.Pool, s.account(t, tn, "production").ID)
	if err != nil || sums["EUR"] != 8000 {
		t.Fatalf("ledger sum %v, %v; want 8000", sums, err)
	}
}
