package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/codeport/codeport/internal/money"
)

// ErrNeedsTransaction is returned by PlaceOrder when the debit would take the balance below
// the account's low-balance threshold: the notifications of that crossing are written in the
// placement's transaction, through the caller's hooks, so the caller places the order in a
// transaction of its own (InsertOrder, ApplyLedgerEntry). Nothing was written.
var ErrNeedsTransaction = errors.New("placement needs the caller's transaction")

// placeOrderSQL writes an order, its lines (parallel arrays) and its fulfilment job in one
// statement (the job row by hand, not through River's client: see Job for the measurement);
// nothing is written when the external order code is taken. When $21 is true and the
// order was inserted, it then locks every balance of the account in currency order, as
// lockBalancesSQL does, with the account's threshold as stored. The lock reads placed, so it
// waits for the insert, which waits for any concurrent insert of the same code: no placement
// holds a balance while it waits on another's order.
// It returns one row per locked balance, or one row of NULLs, each with the count of orders
// inserted.
const placeOrderSQL = `
WITH placed AS (
    INSERT INTO orders (id, account_id, external_order_code, payload_hash, currency, total_price, total_quantity,
                        debited_amount, status, estimated_ready_at, created_at, metadata)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $22::jsonb)
    ON CONFLICT (account_id, external_order_code) DO NOTHING
    RETURNING id
), lines AS (
    INSERT INTO order_lines (order_id, line_no, product_code, unit_price, quantity, currency, sku)
    SELECT placed.id, l.line_no, l.product_code, l.unit_price, l.quantity, $5, l.sku
    FROM placed, unnest($12::bigint[], $13::text[], $14::bigint[], $15::bigint[], $16::text[])
        AS l (line_no, product_code, unit_price, quantity, sku)
), job AS (
    INSERT INTO river_job (kind, queue, args, max_attempts)
    SELECT $17, $18, $19::jsonb, $20 FROM placed
), locked AS (
    SELECT b.currency, b.balance, b.low_balance, COALESCE(a.low_balance_threshold::text, '') AS threshold
    FROM wallet_balances b JOIN accounts a ON a.id = b.account_id
    WHERE $21 AND b.account_id = $2 AND EXISTS (SELECT 1 FROM placed)
    ORDER BY b.currency
    FOR UPDATE OF b
)
SELECT (SELECT count(*) FROM placed)::int, l.currency, l.balance, l.low_balance, l.threshold
FROM (SELECT 1) AS one LEFT JOIN locked l ON true
ORDER BY l.currency`

// placementArgs are placeOrderSQL's arguments; with a debit, the account's balances are locked.
func placementArgs(o *Order, fulfilment Job, debit *LedgerEntry) []any {
	n := len(o.Lines)
	lineNos, prices, quantities := make([]int64, n), make([]int64, n), make([]int64, n)
	codes, skus := make([]string, n), make([]string, n)
	for i, l := range o.Lines {
		lineNos[i], codes[i], skus[i] = int64(l.LineNo), l.ProductCode, l.SKU
		prices[i], quantities[i] = l.UnitPrice, int64(l.Quantity)
	}
	return []any{pgUUID(o.ID), pgUUID(o.AccountID), o.ExternalOrderCode, o.PayloadHash, o.Currency, o.TotalPrice,
		o.TotalQuantity, o.DebitedAmount, o.Status, o.EstimatedReadyAt, o.CreatedAt,
		lineNos, codes, prices, quantities, skus,
		fulfilment.Kind, fulfilment.Queue, string(fulfilment.Args), fulfilment.MaxAttempts,
		debit != nil, metadataJSON(o.Metadata)}
}

// metadataJSON is an order's metadata as placeOrderSQL's text parameter: {} for none (a JSON
// null would not be the object the column holds).
func metadataJSON(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(m) // cannot fail: strings only
	return string(b)
}

// PlaceOrder records a new order with its lines (o.Lines) and its fulfilment job and, when
// debit is not nil, applies the debit, all committed together. Without a debit it is one
// statement; with one, two round trips: [begin, order and balance lock] then [ledger entry,
// commit], pipelined on one connection. It returns inserted false, having written nothing,
// when the account already has an order with the external order code; ErrInsufficientBalance
// when the balance is short and ErrNeedsTransaction when the debit would cross the low-balance
// threshold, having written nothing either.
func (db *DB) PlaceOrder(
	ctx context.Context, o *Order, fulfilment Job, debit *LedgerEntry,
) (inserted bool, res LedgerResult, err error) {
	if debit == nil {
		inserted, err := insertedOrder(db.Pool.QueryRow(ctx, placeOrderSQL, placementArgs(o, fulfilment, nil)...))
		return inserted, LedgerResult{}, err
	}
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return false, LedgerResult{}, fmt.Errorf("place order: %w", err)
	}
	// The pool closes a connection released inside a transaction, which rolls it back: no
	// error path below can leave a half-written placement behind.
	defer conn.Release()
	tx := conn.Conn()

	batch := &pgx.Batch{}
	batch.Queue("begin")
	var placed int
	locked := lockedBalances{currency: debit.Currency, current: -1}
	batch.Queue(placeOrderSQL, placementArgs(o, fulfilment, debit)...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var row placementRow
			if err := rows.Scan(row.dest(&placed)...); err != nil {
				return err
			}
			if row.currency != nil {
				locked.add(Balance{Currency: *row.currency, Balance: *row.balance, LowBalance: *row.low}, *row.threshold)
			}
		}
		return rows.Err()
	})
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return false, LedgerResult{}, fmt.Errorf("insert order: %w", err)
	}
	if placed != 1 {
		return false, LedgerResult{}, rollback(ctx, tx)
	}
	res, err = locked.apply(debit.Amount)
	if err != nil {
		return false, LedgerResult{}, errors.Join(err, rollback(ctx, tx))
	}
	if res.CrossedBelow() {
		return false, LedgerResult{}, errors.Join(ErrNeedsTransaction, rollback(ctx, tx))
	}

	batch = &pgx.Batch{}
	batch.Queue(writeEntrySQL, writeEntryArgs(debit, res.BalanceAfter, res.IsLow)...)
	committed := false
	batch.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		// COMMIT of a transaction that failed answers ROLLBACK, without an error.
		committed = tag.String() == "COMMIT"
		return nil
	})
	err = tx.SendBatch(ctx, batch).Close()
	// A statement that fails in the pipeline makes the server skip the commit after it; the
	// transaction stays open and is rolled back on release. Only the commit's own answer says the
	// placement is written.
	if !committed {
		return false, LedgerResult{}, errors.Join(errors.New("debit and commit order: not committed"), err)
	}
	return true, res, nil
}

// pgUUID is id as pgx encodes it straight to binary; a uuid.UUID goes through its text form.
func pgUUID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }

// insertedOrder reads the one row of placeOrderSQL run without a debit: whether the order was
// inserted. Both drivers' rows (database/sql through GORM, pgx) scan alike.
func insertedOrder(row interface{ Scan(dest ...any) error }) (bool, error) {
	var placed int
	var r placementRow
	if err := row.Scan(r.dest(&placed)...); err != nil {
		return false, fmt.Errorf("insert order: %w", err)
	}
	return placed == 1, nil
}

func rollback(ctx context.Context, tx *pgx.Conn) error {
	if _, err := tx.Exec(ctx, "rollback"); err != nil {
		return fmt.Errorf("roll back placement: %w", err)
	}
	return nil
}

// placementRow is a row of placeOrderSQL past its first column: a locked balance, or NULLs.
type placementRow struct {
	currency, threshold *string
	balance             *int64
	low                 *bool
}

func (r *placementRow) dest(placed *int) []any {
	return []any{placed, &r.currency, &r.balance, &r.low, &r.threshold}
}

// lockedBalances are an account's balances as a lock returned them, in currency order, with
// the index and low-balance limit (minor units) of the currency of the entry at hand (current -1
// when it has none).
type lockedBalances struct {
	currency  string
	balances  []Balance
	current   int
	threshold int64
	// setting is the account's threshold as stored (every row of a lock carries the same).
	setting string
}

func (l *lockedBalances) add(b Balance, threshold string) {
	l.setting = threshold
	if b.Currency == l.currency {
		l.current, l.threshold = len(l.balances), money.LowBalanceLimit(threshold, b.Currency)
	}
	l.balances = append(l.balances, b)
}

// unchanged is the result of an entry that changed nothing: the balances as locked.
func (l *lockedBalances) unchanged() LedgerResult {
	if l.current < 0 {
		return LedgerResult{Balances: l.balances}
	}
	b := l.balances[l.current]
	return LedgerResult{
		BalanceAfter:     b.Balance,
		WasLow:           b.LowBalance,
		IsLow:            b.LowBalance,
		Threshold:        l.threshold,
		ThresholdSetting: l.setting,
		Balances:         l.balances,
	}
}

// apply is the result of an entry of amount (signed minor units) on the locked balances, its
// Balances a copy with the entry applied; writing the entry is the caller's. A debit larger than
// the balance, or in a currency the account holds none of, is ErrInsufficientBalance.
func (l *lockedBalances) apply(amount int64) (LedgerResult, error) {
	if l.current < 0 {
		return LedgerResult{}, ErrInsufficientBalance
	}
	before := l.balances[l.current]
	if (amount > 0 && before.Balance > math.MaxInt64-amount) || (amount < 0 && before.Balance < -amount) {
		if amount < 0 {
			return LedgerResult{}, ErrInsufficientBalance
		}
		balance, err := money.Format(before.Balance, l.currency)
		if err != nil {
			balance = fmt.Sprint(before.Balance)
		}
		return LedgerResult{}, fmt.Errorf("the %s balance (%s) %w", l.currency, balance, ErrBalanceOverflow)
	}
	after := before.Balance + amount
	isLow := money.IsLow(after, l.threshold)
	balances := slices.Clone(l.balances)
	balances[l.current] = Balance{Currency: l.currency, Balance: after, LowBalance: isLow}
	return LedgerResult{
		Applied:          true,
		BalanceAfter:     after,
		WasLow:           before.LowBalance,
		IsLow:            isLow,
		Threshold:        l.threshold,
		ThresholdSetting: l.setting,
		Balances:         balances,
	}, nil
}

// IsTransient reports whether err is a deadlock (40P01) or serialization failure (40001): the
// database rolled the transaction back as a whole, so running it again is safe and may succeed.
func IsTransient(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}
