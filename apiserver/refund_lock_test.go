package apiserver_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
)

// TestRefundLocksTheWalletLast: the finishing transaction of an order with undelivered units
// takes the wallet's balance row, which every placement of the account needs, only for the
// refund and the commit. While the rest of that transaction runs (here a hook that waits), the
// row is free: another transaction can lock it without waiting.
func TestRefundLocksTheWalletLast(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	acct := s.account(t, tn, "sandbox")
	// The sandbox's always-failing test product: every unit is refunded.
	placed := s.call(t, "sandbox", "POST", "/v2/orders", tn.keys["sandbox"],
		order("r-1", line{"productCode": "99000000000003", "quantity": 2}))
	if placed.status != 202 {
		t.Fatalf("%d %s", placed.status, placed.raw)
	}
	orderID := uuid.MustParse(placed.str("orderId"))
	before := s.call(t, "sandbox", "GET", "/v2/wallet", tn.keys["sandbox"], nil)

	inHook, release := make(chan struct{}), make(chan struct{})
	hold := func(context.Context, store.Querier, []fulfilment.Finished) error {
		close(inHook)
		<-release
		return nil
	}
	f := fulfilment.NewFulfiller(s.db, s.cipher, time.Second, nil, hold)
	done := make(chan error, 1)
	go func() { done <- f.Fulfil(context.Background(), orderID, string(tenancy.Sandbox)) }()
	select {
	case <-inHook:
	case err := <-done:
		t.Fatalf("fulfilment ended before its hook: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("fulfilment never reached its hook")
	}
	lockErr := s.db.InTx(context.Background(), func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `SELECT 1 FROM wallet_balances WHERE account_id = $1 FOR UPDATE NOWAIT`,
			acct.ID)
		return err
	})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if lockErr != nil {
		t.Errorf("the balance row was locked while the finishing transaction ran its hooks: %v", lockErr)
	}
	after := s.call(t, "sandbox", "GET", "/v2/wallet", tn.keys["sandbox"], nil)
	if after.raw == nil || bytes.Equal(after.raw, before.raw) {
		t.Errorf("no refund reached the wallet: before %s, after %s", before.raw, after.raw)
	}
	var refunds int64
	if err := s.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM wallet_entries WHERE reference = $1 AND kind = $2`,
		orderID.String(), store.EntryRefund).Scan(&refunds); err != nil {
		t.Fatal(err)
	}
	if refunds != 1 {
		t.Errorf("%d refund entries, want 1", refunds)
	}
}
