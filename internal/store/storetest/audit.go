package storetest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/internal/store"
)

// Audit is what a database says about its money and orders, read in one snapshot: every order
// with the digests of the codes it delivered, and every way in which the rules that keep money
// from going missing are broken. A test that put a database through a fault (a killed process,
// a failover, a restore) asserts that Findings is empty and compares Orders with the answers its
// clients were given.
type Audit struct {
	Orders   []AuditedOrder
	Findings []string
}

// AuditedOrder is one stored order as the audit read it.
type AuditedOrder struct {
	ID                string
	Account           string
	ExternalOrderCode string
	Status            string
	// Codes are the SHA-256 digests of the delivered codes, hex, in line and unit order: equal
	// Codes are the same codes, whatever key seals them.
	Codes string
}

// ByCode indexes the orders by externalOrderCode; a code stored twice keeps its last order and
// is a finding of the caller's to report (the database refuses it within one account).
func (a *Audit) ByCode() map[string]AuditedOrder {
	m := make(map[string]AuditedOrder, len(a.Orders))
	for _, o := range a.Orders {
		m[o.ExternalOrderCode] = o
	}
	return m
}

// TxBeginner is a *pgxpool.Pool or a *pgx.Conn: the audit reads in a transaction of its own.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// allEntries and allCodes are the ledger and the delivered codes, online and archived: an
// archived order is audited as any other, from the archive.
const (
	allEntries = `(SELECT account_id, currency, kind, reference, amount FROM wallet_entries
		WHERE NOT (kind = 'adjustment' AND reference = 'archived:' || id)
		UNION ALL SELECT account_id, currency, kind, reference, amount FROM wallet_entries_archive)`
	allCodes = `(SELECT order_id, line_no, unit_no, stock_id, digest FROM delivered_codes
		UNION ALL SELECT order_id, line_no, unit_no, stock_id, digest FROM delivered_codes_archive)`
)

// auditOrdersSQL reads every order with its ledger entries and delivered codes in one statement,
// so that the figures of each order agree with each other.
const auditOrdersSQL = `
WITH e AS (SELECT reference, kind, count(*) AS n, sum(amount)::bigint AS amount FROM ` + allEntries + ` x
           WHERE kind IN ('order_debit', 'refund') GROUP BY reference, kind),
     d AS (SELECT order_id, count(*) AS n, count(DISTINCT digest) AS distinct_codes,
                  string_agg(encode(digest, 'hex'), ',' ORDER BY line_no, unit_no) AS digests
           FROM ` + allCodes + ` c GROUP BY order_id)
SELECT o.id::text, o.account_id::text, o.external_order_code, o.status, o.total_quantity,
       o.debited_amount, o.refunded_amount, o.total_price,
       COALESCE(db.n, 0), COALESCE(-db.amount, 0), COALESCE(rf.n, 0), COALESCE(rf.amount, 0),
       COALESCE(d.n, 0), COALESCE(d.distinct_codes, 0), COALESCE(d.digests, '')
FROM orders o
LEFT JOIN e db ON db.reference = o.id::text AND db.kind = 'order_debit'
LEFT JOIN e rf ON rf.reference = o.id::text AND rf.kind = 'refund'
LEFT JOIN d ON d.order_id = o.id
ORDER BY o.created_at, o.id`

// auditChecksSQL names what is wrong across orders: each row is one finding. The balance is
// checked twice: against the online ledger, whose carried entries stand for the archived ones,
// and against the whole ledger, online and archived, without the carried entries; and the
// online ledger must chain, each entry's balance_after its predecessor's plus its amount.
var auditChecksSQL = []struct{ kind, sql string }{
	{"balance differs from its ledger", `SELECT b.account_id::text || ' ' || b.currency || ': balance ' ||
		b.balance || ', ledger ' || COALESCE((SELECT sum(amount) FROM wallet_entries e
		WHERE e.account_id = b.account_id AND e.currency = b.currency), 0)
		FROM wallet_balances b WHERE b.balance <> COALESCE((SELECT sum(amount) FROM wallet_entries e
		WHERE e.account_id = b.account_id AND e.currency = b.currency), 0)`},
	{"balance differs from its ledger with the archive", `SELECT b.account_id::text || ' ' || b.currency ||
		': balance ' || b.balance || ', ledger with the archive ' || COALESCE((SELECT sum(amount) FROM ` +
		allEntries + ` e WHERE e.account_id = b.account_id AND e.currency = b.currency), 0)
		FROM wallet_balances b WHERE b.balance <> COALESCE((SELECT sum(amount) FROM ` + allEntries + ` e
		WHERE e.account_id = b.account_id AND e.currency = b.currency), 0)`},
	{"ledger does not chain", `SELECT account_id::text || ' ' || currency || ' entry ' || id || ': ' ||
		before || ' + ' || amount || ' is not ' || balance_after
		FROM (SELECT id, account_id, currency, amount, balance_after,
		             lag(balance_after, 1, 0::bigint) OVER (PARTITION BY account_id, currency ORDER BY id) AS before
		      FROM wallet_entries) e
		WHERE before + amount <> balance_after`},
	{"debit or refund without its order", `SELECT e.kind || ' ' || e.reference || ' of ' || e.amount
		FROM ` + allEntries + ` e WHERE e.kind IN ('order_debit', 'refund')
		AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.id::text = e.reference AND o.account_id = e.account_id)`},
	{"archived order with online rows", `SELECT o.id::text FROM orders o WHERE o.archived_at IS NOT NULL AND (
		EXISTS (SELECT 1 FROM order_lines l WHERE l.order_id = o.id)
		OR EXISTS (SELECT 1 FROM delivered_codes d WHERE d.order_id = o.id)
		OR EXISTS (SELECT 1 FROM wallet_entries e WHERE e.account_id = o.account_id
		           AND e.kind IN ('order_debit', 'refund') AND e.reference = o.id::text))`},
	// An order put back online (docs/operations.md) gets its lines and codes back; its ledger
	// entries may stay archived, carried.
	{"archived lines or codes of an order online", `SELECT o.id::text FROM orders o JOIN (
		SELECT order_id FROM order_lines_archive UNION SELECT order_id FROM delivered_codes_archive
		) a ON a.order_id = o.id WHERE o.archived_at IS NULL`},
	// A running total counts from its recount on (store.DailySpend); an uncounted one may lack
	// the orders written before migration 00028.
	{"daily spend differs from its orders", `SELECT s.account_id::text || ' ' || s.currency || ' ' || s.day ||
		': running total ' || s.spent || ', orders ' || COALESCE(o.spent, 0)
		FROM daily_spend s LEFT JOIN LATERAL (SELECT sum(total_price - refunded_amount) AS spent FROM orders
			WHERE account_id = s.account_id AND currency = s.currency
			AND (created_at AT TIME ZONE 'UTC')::date = s.day) o ON true
		WHERE s.counted AND s.spent <> COALESCE(o.spent, 0)`},
	{"stock code delivered twice", `SELECT 'stock row ' || stock_id || ' in ' || count(*) || ' deliveries'
		FROM ` + allCodes + ` c WHERE stock_id IS NOT NULL GROUP BY stock_id HAVING count(*) > 1`},
	{"code delivered twice", `SELECT encode(digest, 'hex') || ' in ' || count(*) || ' deliveries'
		FROM ` + allCodes + ` c GROUP BY digest HAVING count(*) > 1`},
	// A delivered code leaves the stock (store.ClaimStock), and an import refuses it.
	{"delivered code available in stock", `SELECT 'stock row ' || s.id || ': ' || encode(s.digest, 'hex')
		FROM code_stock s WHERE s.order_id IS NULL AND (EXISTS (SELECT 1 FROM ` + allCodes + ` c
		WHERE c.digest = s.digest) OR EXISTS (SELECT 1 FROM retired_code_digests r WHERE r.digest = s.digest))`},
}

// AuditMoney reads the database in one repeatable-read snapshot and checks that each order was
// debited exactly what it records (once, or not at all when wallet ordering was off), refunded
// exactly the value it did not deliver (in at most one entry), carries the status its codes
// give it, and delivered no code twice; that no debit or refund lacks its order; that no stock
// code went out twice, and none delivered is available again; that every balance equals the
// sum of its ledger, online (carried entries standing for archived ones) and with the archive,
// and that the online ledger chains; that every counted daily spend total is the sum of its
// day's orders; and that an archived order's rows are all in the archive. An order still
// processing is reported as it stands: wait until none is before auditing.
func AuditMoney(ctx context.Context, db TxBeginner) (*Audit, error) {
	q, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("audit: begin: %w", err)
	}
	//nolint:errcheck // read-only: ending it loses nothing, and an error is the reads' to report.
	defer q.Rollback(context.WithoutCancel(ctx))
	a := &Audit{}
	if err := a.readOrders(ctx, q); err != nil {
		return nil, err
	}
	for _, c := range auditChecksSQL {
		rows, err := q.Query(ctx, c.sql)
		if err != nil {
			return nil, fmt.Errorf("audit %s: %w", c.kind, err)
		}
		for rows.Next() {
			var detail string
			if err := rows.Scan(&detail); err != nil {
				rows.Close()
				return nil, fmt.Errorf("audit %s: %w", c.kind, err)
			}
			a.Findings = append(a.Findings, c.kind+": "+detail)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("audit %s: %w", c.kind, err)
		}
	}
	return a, nil
}

func (a *Audit) readOrders(ctx context.Context, q store.Querier) error {
	rows, err := q.Query(ctx, auditOrdersSQL)
	if err != nil {
		return fmt.Errorf("audit orders: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var o AuditedOrder
		var f orderFigures
		if err := rows.Scan(&o.ID, &o.Account, &o.ExternalOrderCode, &o.Status, &f.quantity, &f.debited,
			&f.refunded, &f.total, &f.debits, &f.debitSum, &f.refunds, &f.refundSum, &f.delivered, &f.distinct,
			&o.Codes); err != nil {
			return fmt.Errorf("audit orders: %w", err)
		}
		if problem := f.check(o.Status); problem != "" {
			a.Findings = append(a.Findings, fmt.Sprintf("order %s (%s): %s", o.ExternalOrderCode, o.ID, problem))
		}
		a.Orders = append(a.Orders, o)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit orders: %w", err)
	}
	return nil
}

// orderFigures are one order's recorded amounts and what its ledger entries and codes say.
type orderFigures struct {
	quantity, delivered, distinct        int64
	total, debited, refunded             int64
	debits, debitSum, refunds, refundSum int64
}

// check names the first rule the order breaks, or returns "".
func (f orderFigures) check(status string) string {
	if status == store.OrderProcessing {
		return ""
	}
	want := store.OrderPartiallyCompleted
	switch f.delivered {
	case f.quantity:
		want = store.OrderCompleted
	case 0:
		want = store.OrderFailed
	}
	// Lines of one order share a unit price in the tests' orders; the refund is the value of the
	// units not delivered at the order's average price, as fulfilment computes it.
	undelivered := (f.quantity - f.delivered) * (f.total / max(f.quantity, 1))
	if f.debited == 0 {
		undelivered = 0
	}
	switch {
	case status != want:
		return fmt.Sprintf("status %s with %d of %d codes", status, f.delivered, f.quantity)
	case f.debited > 0 && (f.debits != 1 || f.debitSum != f.debited):
		return fmt.Sprintf("debited %d in %d entries of %d", f.debited, f.debits, f.debitSum)
	case f.debited == 0 && f.debits != 0:
		return fmt.Sprintf("no debit recorded, %d debit entries of %d", f.debits, f.debitSum)
	case f.refunded != undelivered || f.refundSum != f.refunded || f.refunds > 1 || (f.refunded > 0) != (f.refunds == 1):
		return fmt.Sprintf("undelivered %d, refunded %d in %d entries of %d",
			undelivered, f.refunded, f.refunds, f.refundSum)
	case f.distinct != f.delivered:
		return fmt.Sprintf("%d codes, %d distinct", f.delivered, f.distinct)
	}
	return ""
}
