package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// InsertOrder records a new order with its lines (o.Lines) and the job that fulfils it, in one
// statement, unless the account already has an order with the same external order code;
// inserted is false then and nothing is written. A concurrent insert of the same code waits for
// the other transaction, so exactly one of them inserts.
func InsertOrder(ctx context.Context, q Querier, o *Order, fulfilment Job) (inserted bool, err error) {
	return insertedOrder(q.QueryRow(ctx, placeOrderSQL, placementArgs(o, fulfilment, nil)...))
}

// LockDailySpend serialises the orders of one account and currency for the rest of the
// transaction q, so two concurrent orders cannot both fit under a daily limit that only one of
// them fits.
func LockDailySpend(ctx context.Context, q Querier, accountID uuid.UUID, currency string) error {
	_, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`,
		"spend:"+accountID.String()+":"+currency)
	if err != nil {
		return fmt.Errorf("lock daily spend: %w", err)
	}
	return nil
}

// SpentSince sums the value of an account's orders in currency placed since start, less what
// was refunded for undelivered units.
func SpentSince(ctx context.Context, q Querier, accountID uuid.UUID, currency string, start time.Time) (int64, error) {
	var spent int64
	err := q.QueryRow(ctx, `SELECT COALESCE(sum(total_price - refunded_amount), 0)::bigint FROM orders
		WHERE account_id = $1 AND currency = $2 AND created_at >= $3`, pgUUID(accountID), currency, start).Scan(&spent)
	if err != nil {
		return 0, fmt.Errorf("sum daily spend: %w", err)
	}
	return spent, nil
}

// orderColumns are the columns of orders that Order holds.
const orderColumns = `id, account_id, external_order_code, payload_hash, currency, total_price, total_quantity,
	debited_amount, refunded_amount, status, delivered, reason, estimated_ready_at, created_at, finished_at,
	metadata`

// FindOrder returns an account's order with its lines, by order id or external order code.
// Another account's order is not found, whatever the reference.
func FindOrder(ctx context.Context, q Querier, accountID uuid.UUID, reference string) (Order, error) {
	if id, err := uuid.Parse(reference); err == nil {
		o, err := findOrder(ctx, q, "account_id = $1 AND id = $2", pgUUID(accountID), pgUUID(id))
		if !errors.Is(err, ErrNotFound) {
			return o, err
		}
	}
	return FindOrderByExternalCode(ctx, q, accountID, reference)
}

// FindOrderByExternalCode returns an account's order with its lines by external order code.
func FindOrderByExternalCode(ctx context.Context, q Querier, accountID uuid.UUID, code string) (Order, error) {
	return findOrder(ctx, q, "account_id = $1 AND external_order_code = $2", pgUUID(accountID), code)
}

func findOrder(ctx context.Context, q Querier, where string, args ...any) (Order, error) {
	o, err := oneOrder(ctx, q, `SELECT `+orderColumns+` FROM orders WHERE `+where, args...)
	if err != nil {
		return Order{}, err
	}
	if o.Lines, err = linesOf(ctx, q, o.ID); err != nil {
		return Order{}, err
	}
	return o, nil
}

// oneOrder runs a query for at most one order row; none is ErrNotFound.
func oneOrder(ctx context.Context, q Querier, query string, args ...any) (Order, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return Order{}, fmt.Errorf("find order: %w", err)
	}
	o, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByNameLax[Order])
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, ErrNotFound
	}
	if err != nil {
		return Order{}, fmt.Errorf("find order: %w", err)
	}
	return o, nil
}

func linesOf(ctx context.Context, q Querier, orderID uuid.UUID) ([]OrderLine, error) {
	rows, err := q.Query(ctx, `SELECT order_id, line_no, product_code, unit_price, quantity, currency, sku
		FROM order_lines WHERE order_id = $1 ORDER BY line_no`, pgUUID(orderID))
	if err != nil {
		return nil, fmt.Errorf("load lines of order %s: %w", orderID, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowToStructByName[OrderLine])
	if err != nil {
		return nil, fmt.Errorf("load lines of order %s: %w", orderID, err)
	}
	return lines, nil
}

// DeliveredCodesOf returns an order's delivered codes (still encrypted) in line and unit order.
func DeliveredCodesOf(ctx context.Context, q Querier, orderID uuid.UUID) ([]DeliveredCode, error) {
	rows, err := q.Query(ctx, `SELECT order_id, line_no, unit_no, stock_id, ciphertext, digest, delivered_at
		FROM delivered_codes WHERE order_id = $1 ORDER BY line_no, unit_no`, pgUUID(orderID))
	if err != nil {
		return nil, fmt.Errorf("load delivered codes: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[DeliveredCode])
	if err != nil {
		return nil, fmt.Errorf("load delivered codes: %w", err)
	}
	return out, nil
}

// LockProcessingOrder locks an order that is still processing, with its lines, for the
// fulfilment transaction q. A finished order is ErrNotFound: finishing happens once.
func LockProcessingOrder(ctx context.Context, q Querier, orderID uuid.UUID) (Order, error) {
	o, err := oneOrder(ctx, q, `SELECT `+orderColumns+` FROM orders WHERE id = $1 AND status = $2 FOR UPDATE`,
		pgUUID(orderID), OrderProcessing)
	if err != nil {
		return Order{}, err
	}
	if o.Lines, err = linesOf(ctx, q, orderID); err != nil {
		return Order{}, err
	}
	return o, nil
}

// takeStockSQL claims codes oldest import first, through the index of available codes: its
// ORDER BY is one the primary key cannot give, so no statistics can make the planner walk the
// key past every code already delivered.
const takeStockSQL = `UPDATE code_stock SET order_id = $1, delivered_at = now()
	WHERE id IN (SELECT id FROM code_stock WHERE product_code = $2 AND order_id IS NULL
	             ORDER BY imported_at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
	RETURNING id, product_code, ciphertext, digest`

// TakeStock assigns up to n unassigned codes of a product to an order, oldest import first, and
// returns them. Rows locked by concurrent fulfilments are skipped, so orders never wait on each
// other or share a code.
func TakeStock(ctx context.Context, q Querier, orderID uuid.UUID, productCode string, n int) ([]CodeStock, error) {
	rows, err := q.Query(ctx, takeStockSQL, pgUUID(orderID), productCode, n)
	if err != nil {
		return nil, fmt.Errorf("take stock of %s: %w", productCode, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByNameLax[CodeStock])
	if err != nil {
		return nil, fmt.Errorf("take stock of %s: %w", productCode, err)
	}
	return out, nil
}

// InsertDeliveredCodes records delivered units in one statement.
func InsertDeliveredCodes(ctx context.Context, q Querier, codes []DeliveredCode) error {
	if len(codes) == 0 {
		return nil
	}
	n := len(codes)
	orders, lines, units := make([]pgtype.UUID, n), make([]int64, n), make([]int64, n)
	stock, ciphertexts, digests := make([]*int64, n), make([][]byte, n), make([][]byte, n)
	at := make([]time.Time, n)
	for i, c := range codes {
		orders[i], lines[i], units[i] = pgUUID(c.OrderID), int64(c.LineNo), int64(c.UnitNo)
		stock[i], ciphertexts[i], digests[i], at[i] = c.StockID, c.Ciphertext, c.Digest, c.DeliveredAt
	}
	_, err := q.Exec(ctx, `INSERT INTO delivered_codes (order_id, line_no, unit_no, stock_id, ciphertext, digest,
			delivered_at)
		SELECT * FROM unnest($1::uuid[], $2::int[], $3::int[], $4::bigint[], $5::bytea[], $6::bytea[],
			$7::timestamptz[])`, orders, lines, units, stock, ciphertexts, digests, at)
	if err != nil {
		return fmt.Errorf("record delivered codes: %w", err)
	}
	return nil
}

// FinishOrder moves a processing order to its terminal state.
func FinishOrder(
	ctx context.Context, q Querier, orderID uuid.UUID, status string, delivered int, refunded int64, reason *string,
) error {
	tag, err := q.Exec(ctx, `UPDATE orders SET status = $1, delivered = $2, refunded_amount = $3, reason = $4,
			finished_at = now()
		WHERE id = $5 AND status = $6`, status, delivered, refunded, reason, pgUUID(orderID), OrderProcessing)
	if err != nil {
		return fmt.Errorf("finish order %s: %w", orderID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("finish order %s: %w", orderID, ErrNotFound)
	}
	return nil
}

// StockCount returns the number of undelivered codes of a product.
func StockCount(ctx context.Context, q Querier, productCode string) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT count(*) FROM code_stock WHERE product_code = $1 AND order_id IS NULL`,
		productCode).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count stock: %w", err)
	}
	return n, nil
}

// InsertStock adds encrypted codes to the stock in one statement; codes whose digest is already
// known (in stock or delivered) are skipped and not counted.
func InsertStock(ctx context.Context, q Querier, rows []CodeStock) (inserted int64, err error) {
	if len(rows) == 0 {
		return 0, nil
	}
	n := len(rows)
	products, batches := make([]string, n), make([]string, n)
	ciphertexts, digests := make([][]byte, n), make([][]byte, n)
	at := make([]time.Time, n)
	for i, r := range rows {
		products[i], batches[i], ciphertexts[i], digests[i], at[i] = r.ProductCode, r.Batch, r.Ciphertext, r.Digest,
			r.ImportedAt
	}
	tag, err := q.Exec(ctx, `INSERT INTO code_stock (product_code, ciphertext, digest, batch, imported_at)
		SELECT * FROM unnest($1::text[], $2::bytea[], $3::bytea[], $4::text[], $5::timestamptz[])
		ON CONFLICT (digest) DO NOTHING`, products, ciphertexts, digests, batches, at)
	if err != nil {
		return 0, fmt.Errorf("insert stock: %w", err)
	}
	return tag.RowsAffected(), nil
}
