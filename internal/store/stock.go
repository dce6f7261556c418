package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// StockLevel is a delivered product's stock as one catalog holding it judges it.
type StockLevel struct {
	CatalogID   uuid.UUID
	ProductCode string
	// Threshold is the catalog's stock_low_threshold (always positive here).
	Threshold int64
	// Available is the codes left after the delivery, counted up to Threshold: a product with
	// Threshold codes or more reads Threshold, so the count costs at most Threshold index entries.
	Available int64
	// Delivered is the codes the delivery took of the product.
	Delivered int64
	// Told is true when a stock.low notice stands for this catalog and product.
	Told bool
}

// stockLevelsSQL reads, for products ($1) and the codes a delivery took of each ($2), every
// live catalog with a threshold that holds them, its count of available codes (up to the
// largest threshold, after the delivery's own writes) and whether its notice stands.
const stockLevelsSQL = `
WITH delivered AS (SELECT * FROM unnest($1::text[], $2::bigint[]) AS d (product_code, delivered)),
held AS (
    SELECT c.id AS catalog_id, d.product_code, c.stock_low_threshold::bigint AS threshold, d.delivered
    FROM delivered d
    JOIN catalog_products cp ON cp.product_code = d.product_code
    JOIN catalogs c ON c.id = cp.catalog_id AND c.deleted_at IS NULL AND c.stock_low_threshold > 0),
counted AS (
    SELECT b.product_code, (SELECT count(*) FROM (SELECT 1 FROM code_stock s
        WHERE s.product_code = b.product_code AND s.order_id IS NULL LIMIT b.bound) x) AS available
    FROM (SELECT product_code, max(threshold) AS bound FROM held GROUP BY product_code) b)
SELECT h.catalog_id, h.product_code, h.threshold, least(c.available, h.threshold), h.delivered,
    EXISTS (SELECT 1 FROM stock_low_notices n WHERE n.catalog_id = h.catalog_id AND n.product_code = h.product_code)
FROM held h JOIN counted c USING (product_code)
ORDER BY h.catalog_id, h.product_code`

// queueStockLevels queues the read of the products' levels in batch; the returned slice holds
// them once the batch has run.
func queueStockLevels(batch *pgx.Batch, products []string, delivered map[string]int64) *[]StockLevel {
	counts := make([]int64, len(products))
	for i, p := range products {
		counts[i] = delivered[p]
	}
	var levels []StockLevel
	batch.Queue(stockLevelsSQL, products, counts).Query(func(rows pgx.Rows) error {
		var err error
		levels, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (StockLevel, error) {
			var l StockLevel
			var id pgtype.UUID
			err := row.Scan(&id, &l.ProductCode, &l.Threshold, &l.Available, &l.Delivered, &l.Told)
			l.CatalogID = uuid.UUID(id.Bytes)
			return l, err
		})
		if err != nil {
			return fmt.Errorf("stock levels: %w", err)
		}
		return nil
	})
	return &levels
}

// RecordStockNotices forgets the notices of cleared and records those of raised, in one round
// trip of tx, and returns the raised levels whose notice this transaction recorded. A raised
// level whose notice stands (Told: a stale one) has it replaced. A concurrent delivery that
// recorded the same notice first raises it and this one does not, so partners are told once.
func RecordStockNotices(ctx context.Context, tx Pipeliner, cleared, raised []StockLevel) ([]StockLevel, error) {
	var forget []StockLevel
	forget = append(forget, cleared...)
	for _, l := range raised {
		if l.Told {
			forget = append(forget, l)
		}
	}
	batch := &pgx.Batch{}
	if len(forget) > 0 {
		ids, products := stockKeys(forget)
		batch.Queue(`DELETE FROM stock_low_notices n USING unnest($1::uuid[], $2::text[]) AS f (catalog_id, product_code)
			WHERE n.catalog_id = f.catalog_id AND n.product_code = f.product_code`, ids, products)
	}
	var recorded []StockLevel
	if len(raised) > 0 {
		ids, products := stockKeys(raised)
		available := make([]int64, len(raised))
		for i, l := range raised {
			available[i] = l.Available
		}
		batch.Queue(`INSERT INTO stock_low_notices (catalog_id, product_code, available)
			SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[])
			ON CONFLICT (catalog_id, product_code) DO NOTHING
			RETURNING catalog_id, product_code`, ids, products, available).Query(func(rows pgx.Rows) error {
			var id pgtype.UUID
			var product string
			_, err := pgx.ForEachRow(rows, []any{&id, &product}, func() error {
				for _, l := range raised {
					if l.CatalogID == uuid.UUID(id.Bytes) && l.ProductCode == product {
						recorded = append(recorded, l)
						break
					}
				}
				return nil
			})
			return err
		})
	}
	if batch.Len() == 0 {
		return nil, nil
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("record stock notices: %w", err)
	}
	return recorded, nil
}

func stockKeys(levels []StockLevel) ([]pgtype.UUID, []string) {
	ids, products := make([]pgtype.UUID, len(levels)), make([]string, len(levels))
	for i, l := range levels {
		ids[i], products[i] = pgUUID(l.CatalogID), l.ProductCode
	}
	return ids, products
}

// CatalogStock counts a catalog's products by their available codes.
type CatalogStock struct {
	Threshold int64
	// Low counts the products under Threshold, OutOfStock those with no code.
	Low, OutOfStock int64
	// Lowest are the first products under the threshold (under 1 when it is 0), fewest codes
	// first, then by product code.
	Lowest []ProductStock
}

// ProductStock is a product's available codes.
type ProductStock struct {
	ProductCode string
	Available   int64
}

// catalogStockSQL counts each product of catalog ($1, $2) up to its threshold (at least 1, to
// tell out of stock), so that its cost follows the catalog's size and threshold, never the size
// of the stock; $3 bounds the lowest products listed.
const catalogStockSQL = `
WITH c AS (SELECT id, stock_low_threshold::bigint AS threshold FROM catalogs
    WHERE namespace = $1 AND name = $2 AND deleted_at IS NULL),
levels AS (
    SELECT p.product_code, (SELECT count(*) FROM (SELECT 1 FROM code_stock s
        WHERE s.product_code = p.product_code AND s.order_id IS NULL LIMIT greatest(c.threshold, 1)) x) AS available
    FROM c JOIN catalog_products p ON p.catalog_id = c.id)
SELECT c.threshold, a.low, a.out, w.codes, w.available
FROM c
CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE available < c.threshold) AS low,
    count(*) FILTER (WHERE available = 0) AS out FROM levels) a
CROSS JOIN LATERAL (SELECT coalesce(array_agg(product_code ORDER BY available, product_code), '{}') AS codes,
    coalesce(array_agg(available ORDER BY available, product_code), '{}') AS available
    FROM (SELECT product_code, available FROM levels WHERE available < greatest(c.threshold, 1)
        ORDER BY available, product_code LIMIT $3) x) w`

// ReadCatalogStock counts the stock of catalog namespace/name's products and lists its lowest
// ones, at most lowest of them; ErrNotFound when no such catalog is in service.
func ReadCatalogStock(ctx context.Context, q Querier, namespace, name string, lowest int) (CatalogStock, error) {
	var s CatalogStock
	var codes []string
	var available []int64
	err := q.QueryRow(ctx, catalogStockSQL, namespace, name, lowest).Scan(&s.Threshold, &s.Low, &s.OutOfStock,
		&codes, &available)
	if errors.Is(err, pgx.ErrNoRows) {
		return CatalogStock{}, fmt.Errorf("catalog %s/%s: %w", namespace, name, ErrNotFound)
	}
	if err != nil {
		return CatalogStock{}, fmt.Errorf("stock of catalog %s/%s: %w", namespace, name, err)
	}
	for i := range codes {
		s.Lowest = append(s.Lowest, ProductStock{ProductCode: codes[i], Available: available[i]})
	}
	return s, nil
}

// purgeDeliveredStockSQL deletes up to $3 stock rows of delivered codes, lowest id first,
// through code_stock_delivered_idx, unless a live process built for a schema below $2 is
// registered (olderInstancesSQL), and records their products in stock_products. Rows another
// transaction holds are skipped.
const purgeDeliveredStockSQL = `
WITH gone AS (
    DELETE FROM code_stock WHERE id IN (
        SELECT id FROM code_stock WHERE order_id IS NOT NULL ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
    AND NOT EXISTS (SELECT 1 FROM ` + olderInstancesSQL + `)
    RETURNING product_code
), products AS (
    INSERT INTO stock_products (product_code) SELECT DISTINCT product_code FROM gone ON CONFLICT DO NOTHING
)
SELECT count(*) FROM gone`

// PurgeDeliveredStock deletes up to limit of the stock rows that deliveries left in code_stock,
// marked delivered, before StockDeleteSchemaVersion or while an older binary ran, and returns
// how many it deleted: none while such a binary runs, since it refuses a duplicate import by
// these rows. Each code's delivered_codes row, which stays, is its record.
func PurgeDeliveredStock(ctx context.Context, q Querier, limit int) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, purgeDeliveredStockSQL, InstanceExpiry.Seconds(), StockDeleteSchemaVersion, limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("purge delivered codes from the stock: %w", err)
	}
	return n, nil
}

// RecordStockProducts adds to stock_products the products of code_stock it lacks: those an
// older binary imported, which does not record them. It reads the whole table.
func RecordStockProducts(ctx context.Context, q Querier) error {
	if _, err := q.Exec(ctx, `INSERT INTO stock_products (product_code)
		SELECT DISTINCT product_code FROM code_stock ON CONFLICT DO NOTHING`); err != nil {
		return fmt.Errorf("record the products of the stock: %w", err)
	}
	return nil
}
