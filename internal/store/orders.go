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

// orderColumns are the columns of orders that Order holds.
const orderColumns = `id, account_id, external_order_code, payload_hash, currency, total_price, total_quantity,
	debited_amount, refunded_amount, status, delivered, reason, estimated_ready_at, created_at, finished_at,
	metadata, archived_at`

// FindOrder returns an account's order with its lines, by order id or external order code.
// Another account's order is not found, whatever the reference, and neither is an archived one.
func FindOrder(ctx context.Context, q Querier, accountID uuid.UUID, reference string) (Order, error) {
	if id, err := uuid.Parse(reference); err == nil {
		o, err := findOrder(ctx, q, "account_id = $1 AND id = $2 AND archived_at IS NULL", pgUUID(accountID), pgUUID(id))
		if !errors.Is(err, ErrNotFound) {
			return o, err
		}
	}
	return findOrder(ctx, q, "account_id = $1 AND external_order_code = $2 AND archived_at IS NULL",
		pgUUID(accountID), reference)
}

// FindOrderByExternalCode returns an account's order with its lines by external order code,
// archived or not: the code stays taken after its order is archived (ArchivedAt set, no lines).
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
	rows, err := q.Query(ctx, `SELECT order_id, line_no, unit_no, stock_id, key_ref, ciphertext, digest,
			delivered_at
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

// lockProcessingSQL locks the orders of $1 that are still processing, with their lines, a row
// per line. Rows are locked in id order, so two transactions locking overlapping sets (a job
// rescued while its first run is still going) wait on each other instead of deadlocking.
const lockProcessingSQL = `SELECT o.id, o.account_id, o.external_order_code, o.payload_hash, o.currency,
		o.total_price, o.total_quantity, o.debited_amount, o.refunded_amount, o.status, o.delivered, o.reason,
		o.estimated_ready_at, o.created_at, o.finished_at, o.metadata,
		l.line_no, l.product_code, l.unit_price, l.quantity, l.sku
	FROM orders o JOIN order_lines l ON l.order_id = o.id
	WHERE o.id = ANY($1) AND o.status = $2
	ORDER BY o.id, l.line_no
	FOR UPDATE OF o`

// LockProcessingOrders locks the orders of ids that are still processing, with their lines, for
// the fulfilment transaction q, in one statement, and returns them in id order. Finished orders
// are left out: finishing happens once.
func LockProcessingOrders(ctx context.Context, q Querier, ids []uuid.UUID) ([]*Order, error) {
	pgIDs := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		pgIDs[i] = pgUUID(id)
	}
	rows, err := q.Query(ctx, lockProcessingSQL, pgIDs, OrderProcessing)
	if err != nil {
		return nil, fmt.Errorf("lock processing orders: %w", err)
	}
	var out []*Order
	var o Order
	var l OrderLine
	_, err = pgx.ForEachRow(rows, []any{&o.ID, &o.AccountID, &o.ExternalOrderCode, &o.PayloadHash, &o.Currency,
		&o.TotalPrice, &o.TotalQuantity, &o.DebitedAmount, &o.RefundedAmount, &o.Status, &o.Delivered, &o.Reason,
		&o.EstimatedReadyAt, &o.CreatedAt, &o.FinishedAt, &o.Metadata,
		&l.LineNo, &l.ProductCode, &l.UnitPrice, &l.Quantity, &l.SKU}, func() error {
		if len(out) == 0 || out[len(out)-1].ID != o.ID {
			next := o
			next.Lines = nil
			out = append(out, &next)
		}
		last := out[len(out)-1]
		l.OrderID, l.Currency = o.ID, o.Currency
		last.Lines = append(last.Lines, l)
		// The next row decodes into a map of its own, not into the one this order kept.
		o.Metadata = nil
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock processing orders: %w", err)
	}
	return out, nil
}

// StockWant is an order line to deliver from the stock.
type StockWant struct {
	OrderID     uuid.UUID
	LineNo      int
	ProductCode string
	Quantity    int
}

// LineRef names an order line.
type LineRef struct {
	OrderID uuid.UUID
	LineNo  int
}

// claimStockSQL locks up to $2 available codes of product $1, oldest import first, through the
// index of available codes: its ORDER BY is one the primary key cannot give, so no statistics
// can make the planner walk the key past every code already delivered. Codes locked by
// concurrent fulfilments are skipped.
const claimStockSQL = `SELECT id FROM code_stock WHERE product_code = $1 AND order_id IS NULL
	ORDER BY imported_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`

// StockDeleteSchemaVersion is the migration after which a delivered code leaves code_stock
// (00030): binaries built for an older schema refuse a duplicate import by code_stock alone, so
// while one of them is registered in codeport_instances a delivery leaves the code's row in
// code_stock, marked delivered, and the purge (PurgeDeliveredStock) waits.
const StockDeleteSchemaVersion = 30

// deliverStockSQL takes locked codes out of the stock for order units ($3-$6: code, order, line,
// unit) and records them as delivered, in one statement: the stock row is deleted, or, while a
// live process built for a schema below $2 is registered (olderInstancesSQL), marked delivered;
// codeport_instances holds a row per process, so that check reads a page or two. Its input is
// arrays, which the planner takes for a few rows whatever their length: each code is found by
// its key.
const deliverStockSQL = `
WITH wanted AS (
    SELECT a.*, EXISTS (SELECT 1 FROM ` + olderInstancesSQL + `) AS keep
    FROM unnest($3::bigint[], $4::uuid[], $5::int[], $6::int[]) AS a (id, order_id, line_no, unit_no)
), deleted AS (
    DELETE FROM code_stock s USING wanted a
    WHERE s.id = a.id AND NOT a.keep
    RETURNING a.order_id, a.line_no, a.unit_no, s.id, s.key_ref, s.ciphertext, s.digest, now() AS delivered_at
), kept AS (
    UPDATE code_stock s SET order_id = a.order_id, delivered_at = now()
    FROM wanted a
    WHERE s.id = a.id AND a.keep
    RETURNING a.order_id, a.line_no, a.unit_no, s.id, s.key_ref, s.ciphertext, s.digest, s.delivered_at
)
INSERT INTO delivered_codes (order_id, line_no, unit_no, stock_id, key_ref, ciphertext, digest, delivered_at)
SELECT * FROM deleted UNION ALL SELECT * FROM kept`

// Pipeliner is a Querier that also sends several statements in one round trip: a pgx.Tx.
type Pipeliner interface {
	Querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ClaimStock delivers codes from the stock to the units of wants and returns how many each line
// got, and the products' stock levels after the delivery as the catalogs holding them judge it
// (StockLevels), in two round trips whatever the number of lines: one locks codes of every
// product wanted (a statement per product, pipelined), the other assigns them, records the
// deliveries and reads the levels. Codes go oldest import first, to lines in the order of wants;
// when a product runs short, the lines last in wants go without, and a line's delivered units
// are numbered from 0 without gaps. Locked codes are skipped, so concurrent fulfilments never
// wait on each other or share a code. tx must be a transaction: the codes stay locked between
// the two round trips.
func ClaimStock(ctx context.Context, tx Pipeliner, wants []StockWant) (map[LineRef]int, []StockLevel, error) {
	wanted := map[string]int{}
	var products []string
	for _, w := range wants {
		if _, ok := wanted[w.ProductCode]; !ok {
			products = append(products, w.ProductCode)
		}
		wanted[w.ProductCode] += w.Quantity
	}
	claimed := make(map[string][]int64, len(products))
	batch := &pgx.Batch{}
	for _, p := range products {
		batch.Queue(claimStockSQL, p, wanted[p]).Query(func(rows pgx.Rows) error {
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			claimed[p] = ids
			return err
		})
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, nil, fmt.Errorf("claim stock: %w", err)
	}
	got := map[LineRef]int{}
	delivered := make(map[string]int64, len(products))
	var ids []int64
	var orders []pgtype.UUID
	var lines, units []int64
	for _, w := range wants {
		available := claimed[w.ProductCode]
		n := min(w.Quantity, len(available))
		for u := range n {
			ids, orders = append(ids, available[u]), append(orders, pgUUID(w.OrderID))
			lines, units = append(lines, int64(w.LineNo)), append(units, int64(u))
		}
		claimed[w.ProductCode] = available[n:]
		got[LineRef{OrderID: w.OrderID, LineNo: w.LineNo}] += n
		delivered[w.ProductCode] += int64(n)
	}
	batch = &pgx.Batch{}
	if len(ids) > 0 {
		batch.Queue(deliverStockSQL, InstanceExpiry.Seconds(), StockDeleteSchemaVersion, ids, orders, lines, units)
	}
	// Products that got nothing are read too: their stock is out, and a crossing that
	// deliveries committed together missed is seen here.
	levels := queueStockLevels(batch, products, delivered)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, nil, fmt.Errorf("deliver stock: %w", err)
	}
	return got, *levels, nil
}

// InsertDeliveredCodes records delivered units in one statement.
func InsertDeliveredCodes(ctx context.Context, q Querier, codes []DeliveredCode) error {
	if len(codes) == 0 {
		return nil
	}
	n := len(codes)
	orders, lines, units := make([]pgtype.UUID, n), make([]int64, n), make([]int64, n)
	stock, ciphertexts, digests := make([]*int64, n), make([][]byte, n), make([][]byte, n)
	keys, at := make([]int16, n), make([]time.Time, n)
	for i, c := range codes {
		orders[i], lines[i], units[i] = pgUUID(c.OrderID), int64(c.LineNo), int64(c.UnitNo)
		stock[i], ciphertexts[i], digests[i], at[i] = c.StockID, c.Ciphertext, c.Digest, c.DeliveredAt
		keys[i] = int16(c.KeyRef)
	}
	_, err := q.Exec(ctx, `INSERT INTO delivered_codes (order_id, line_no, unit_no, stock_id, key_ref, ciphertext,
			digest, delivered_at)
		SELECT * FROM unnest($1::uuid[], $2::int[], $3::int[], $4::bigint[], $5::smallint[], $6::bytea[],
			$7::bytea[], $8::timestamptz[])`, orders, lines, units, stock, keys, ciphertexts, digests, at)
	if err != nil {
		return fmt.Errorf("record delivered codes: %w", err)
	}
	return nil
}

// FinishOrders moves processing orders to their terminal state (each order's Status, Delivered,
// RefundedAmount and Reason), in one statement. Each must have been locked processing in q's
// transaction; one that is not makes the whole statement fail with ErrNotFound.
func FinishOrders(ctx context.Context, q Querier, orders []*Order) error {
	n := len(orders)
	ids, statuses, delivered := make([]pgtype.UUID, n), make([]string, n), make([]int64, n)
	refunded, reasons := make([]int64, n), make([]*string, n)
	for i, o := range orders {
		ids[i], statuses[i], delivered[i] = pgUUID(o.ID), o.Status, int64(o.Delivered)
		refunded[i], reasons[i] = o.RefundedAmount, o.Reason
	}
	tag, err := q.Exec(ctx, `UPDATE orders o SET status = f.status, delivered = f.delivered,
			refunded_amount = f.refunded, reason = f.reason, finished_at = now()
		FROM unnest($1::uuid[], $2::text[], $3::int[], $4::bigint[], $5::text[])
			AS f (id, status, delivered, refunded, reason)
		WHERE o.id = f.id AND o.status = $6`, ids, statuses, delivered, refunded, reasons, OrderProcessing)
	if err != nil {
		return fmt.Errorf("finish orders: %w", err)
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("finish orders: %d of %d processing: %w", tag.RowsAffected(), n, ErrNotFound)
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

// insertStockSQL adds codes to the stock, skipping those whose digest it holds already, records
// their products in stock_products, and returns the ids of the codes it added.
const insertStockSQL = `
WITH products AS (
    INSERT INTO stock_products (product_code) SELECT DISTINCT unnest($1::text[]) ON CONFLICT DO NOTHING
)
INSERT INTO code_stock (product_code, key_ref, ciphertext, digest, batch, imported_at)
SELECT * FROM unnest($1::text[], $2::smallint[], $3::bytea[], $4::bytea[], $5::text[], $6::timestamptz[])
ON CONFLICT (digest) DO NOTHING
RETURNING id`

// dropDeliveredSQL deletes, of the stock rows $1 just added, those whose code was delivered
// already: online, archived, or archived and then deleted from the archive (its digest retired).
const dropDeliveredSQL = `DELETE FROM code_stock s WHERE s.id = ANY($1) AND (
    EXISTS (SELECT 1 FROM delivered_codes d WHERE d.digest = s.digest)
    OR EXISTS (SELECT 1 FROM delivered_codes_archive d WHERE d.digest = s.digest)
    OR EXISTS (SELECT 1 FROM retired_code_digests r WHERE r.digest = s.digest))`

// InsertStock adds encrypted codes to the stock in one transaction of db's (a savepoint when db
// is a transaction); codes whose digest is already known (in stock or delivered) are skipped and
// not counted.
//
// A delivered code is no longer in code_stock (StockDeleteSchemaVersion), so the insert alone
// would take it back. The check against the delivered codes is a second statement, with a
// snapshot taken after the insert: an insert that met the stock row of a code being delivered
// waited on the unique digest until that delivery committed or rolled back, so a delivery it
// did not conflict with is visible to the check. One statement would check with a snapshot
// taken before that wait and miss it. Codes added and found delivered are deleted in the same
// transaction, so no fulfilment ever sees them.
func InsertStock(ctx context.Context, db TxBeginner, rows []CodeStock) (inserted int64, err error) {
	if len(rows) == 0 {
		return 0, nil
	}
	n := len(rows)
	products, batches := make([]string, n), make([]string, n)
	ciphertexts, digests := make([][]byte, n), make([][]byte, n)
	keys, at := make([]int16, n), make([]time.Time, n)
	for i, r := range rows {
		products[i], batches[i], ciphertexts[i], digests[i], at[i] = r.ProductCode, r.Batch, r.Ciphertext, r.Digest,
			r.ImportedAt
		keys[i] = int16(r.KeyRef)
	}
	err = BeginFunc(ctx, db, func(tx Tx) error {
		added, err := tx.Query(ctx, insertStockSQL, products, keys, ciphertexts, digests, batches, at)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(added, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		tag, err := tx.Exec(ctx, dropDeliveredSQL, ids)
		inserted = int64(len(ids)) - tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("insert stock: %w", err)
	}
	return inserted, nil
}
