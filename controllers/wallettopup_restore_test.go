package controllers_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/test/poll"
)

// TestWalletTopUpCreditedAgainAfterRestore: a WalletTopUp applied, then missing from the ledger
// because the database was restored from a backup older than the credit, is credited again when
// an operator starts; once, however many operators reconcile it.
func TestWalletTopUpCreditedAgainAfterRestore(t *testing.T) {
	ns := namespace(t)
	key, _ := onboard(t, ns)
	ctx := context.Background()
	create(t, walletObj(ns, "acme-sandbox", "sandbox", v1alpha1.TopUp{ID: "wire-1", Currency: "EUR", Amount: "100.00"}))
	create(t, topUpObj(ns, "wire-2", "acme-sandbox", "wire-2", "EUR", "50.00"))
	waitTopUp(t, ns, "wire-2", v1alpha1.ReasonApplied)
	acct, err := store.AccountOf(ctx, env.db.Pool, ns, "acme", "sandbox")
	if err != nil {
		t.Fatal(err)
	}

	// The ledger as a backup taken before the top-up has it. The ledger refuses deletes; as a
	// restore does, this bypasses its triggers.
	if err := pgx.BeginFunc(ctx, env.db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return fmt.Errorf("bypass the ledger's triggers: %w", err)
		}
		for _, q := range []string{
			`DELETE FROM top_up_sources WHERE account_id = $1 AND reference = 'wire-2'`,
			`DELETE FROM wallet_entries WHERE account_id = $1 AND kind = 'top_up' AND reference = 'wire-2'`,
			`UPDATE wallet_balances SET balance = balance - 5000 WHERE account_id = $1 AND currency = 'EUR'`,
		} {
			if _, err := tx.Exec(ctx, q, acct.ID); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if b := sandboxBalance(t, key); b != 100.0 {
		t.Fatalf("balance as restored: %v", b)
	}

	// An operator starting on the restored database: the top-up is credited again, once.
	replicaCtx, stopReplica := context.WithCancel(ctx)
	defer stopReplica()
	if err := startManager(replicaCtx, nil); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, timeout, "the top-up credited again", func() (bool, string) {
		b := sandboxBalance(t, key)
		return b == 150.0, fmt.Sprint(b)
	})
	var entries int
	if err := env.db.Pool.QueryRow(ctx, `SELECT count(*) FROM wallet_entries
		WHERE account_id = $1 AND kind = 'top_up' AND reference = 'wire-2'`, acct.ID).Scan(&entries); err != nil {
		t.Fatal(err)
	}
	if entries != 1 {
		t.Fatalf("%d ledger entries of the top-up", entries)
	}
	waitTopUp(t, ns, "wire-2", v1alpha1.ReasonApplied)
}
