package history

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// verifySQL are the money audit's rules (storetest.AuditMoney) as aggregates: each counts the
// rows that break its rule, so that they run over tens of millions of orders without reading
// them into memory. The audit itself, which holds every order, is for databases that fit.
var verifySQL = []struct{ rule, sql string }{
	{"balances that differ from their ledger", `
		SELECT count(*) FROM wallet_balances b
		LEFT JOIN (SELECT account_id, currency, sum(amount) AS total FROM wallet_entries GROUP BY 1, 2) e
			USING (account_id, currency)
		WHERE b.balance <> COALESCE(e.total, 0)`},
	{"finished orders whose status, debit, refund or codes disagree", `
		WITH e AS (SELECT reference, count(*) FILTER (WHERE kind = 'order_debit') AS debits,
		                  COALESCE(-sum(amount) FILTER (WHERE kind = 'order_debit'), 0) AS debited,
		                  count(*) FILTER (WHERE kind = 'refund') AS refunds,
		                  COALESCE(sum(amount) FILTER (WHERE kind = 'refund'), 0) AS refunded
		           FROM wallet_entries WHERE kind IN ('order_debit', 'refund') GROUP BY reference),
		     d AS (SELECT order_id, count(*) AS n FROM delivered_codes GROUP BY order_id)
		SELECT count(*) FROM orders o
		LEFT JOIN e ON e.reference = o.id::text
		LEFT JOIN d ON d.order_id = o.id
		WHERE o.status <> 'processing' AND (
			o.status <> CASE COALESCE(d.n, 0) WHEN o.total_quantity THEN 'completed' WHEN 0 THEN 'failed'
			                 ELSE 'partially_completed' END
			OR o.delivered <> COALESCE(d.n, 0)
			OR (o.debited_amount > 0 AND (COALESCE(e.debits, 0) <> 1 OR e.debited <> o.debited_amount))
			OR (o.debited_amount = 0 AND COALESCE(e.debits, 0) <> 0)
			OR o.refunded_amount <> CASE WHEN o.debited_amount = 0 THEN 0
			       ELSE (o.total_quantity - COALESCE(d.n, 0)) * (o.total_price / o.total_quantity) END
			OR COALESCE(e.refunded, 0) <> o.refunded_amount OR COALESCE(e.refunds, 0) > 1
			OR (o.refunded_amount > 0) <> (COALESCE(e.refunds, 0) = 1))`},
	{"debits or refunds without their order", `
		SELECT count(*) FROM wallet_entries e WHERE e.kind IN ('order_debit', 'refund')
		AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.id::text = e.reference AND o.account_id = e.account_id)`},
	{"processing orders without their fulfilment job", `
		SELECT count(*) FROM orders o WHERE o.status = 'processing' AND NOT EXISTS (
			SELECT 1 FROM river_job j WHERE j.kind = 'codeport.fulfil_order' AND j.args->>'orderId' = o.id::text)`},
	{"stock codes delivered twice or not as recorded", `
		SELECT count(*) FROM delivered_codes d JOIN code_stock s ON s.id = d.stock_id
		WHERE s.order_id IS DISTINCT FROM d.order_id OR s.digest <> d.digest`},
	{"delivered codes still available in stock", `
		SELECT count(*) FROM code_stock s WHERE s.order_id IS NULL
		AND EXISTS (SELECT 1 FROM delivered_codes d WHERE d.digest = s.digest)`},
}

// Verify checks the rules of the money audit over the whole database in aggregate, in one
// repeatable-read snapshot, and returns one finding per rule broken, with the count of rows
// that break it. Codes delivered twice are refused by the schema (unique digests, unique units).
func Verify(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	var findings []string
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			var err error
			findings, err = VerifyIn(ctx, tx)
			return err
		})
	return findings, err
}

// VerifyIn runs Verify's checks in the caller's transaction.
func VerifyIn(ctx context.Context, tx pgx.Tx) ([]string, error) {
	// The checks join whole tables: let each hash join have the memory it needs.
	if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '256MB'`); err != nil {
		return nil, fmt.Errorf("history: verify: %w", err)
	}
	var findings []string
	for _, c := range verifySQL {
		var n int64
		if err := tx.QueryRow(ctx, c.sql).Scan(&n); err != nil {
			return nil, fmt.Errorf("history: verify %s: %w", c.rule, err)
		}
		if n > 0 {
			findings = append(findings, fmt.Sprintf("%d %s", n, c.rule))
		}
	}
	return findings, nil
}
