package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/internal/store"
)

// TestClaimStockReadsOnlyAvailableCodes: a claim reads a handful of pages however many codes were
// delivered before it, whatever the statistics say. Right after an import they say every code is
// available; ordering the claim by id alone then walked the primary key from the first code
// ever imported, past every delivered one, two pages each.
func TestClaimStockReadsOnlyAvailableCodes(t *testing.T) {
	ctx := context.Background()
	w := newWallet(t, "0", nil)
	orderID := stockOrder(t, w)
	const product, imported, delivered = "10000000000001", 3000, 2500
	// The product's codes, one import, and another product's after them.
	_, err := w.db.Pool.Exec(ctx, `INSERT INTO code_stock (product_code, ciphertext, digest, batch, imported_at)
		SELECT CASE WHEN g <= $1 THEN $2 ELSE '10000000000002' END, '\x00', sha256(g::text::bytea), 'b',
		       now() + g * interval '1 microsecond'
		FROM generate_series(1, $1 + 500) g`, imported, product)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Pool.Exec(ctx, `ANALYZE code_stock`); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Pool.Exec(ctx, `INSERT INTO order_lines (order_id, line_no, product_code, unit_price,
			quantity, currency) SELECT $1, g, $2, 0, 100, 'EUR' FROM generate_series(0, $3) g`,
		orderID, product, delivered/100); err != nil {
		t.Fatal(err)
	}
	var last int64
	for line := range delivered / 100 {
		var n int
		err := w.db.InTx(ctx, func(tx pgx.Tx) error {
			got, _, err := store.ClaimStock(ctx, tx,
				[]store.StockWant{{OrderID: orderID, LineNo: line, ProductCode: product, Quantity: 100}})
			n = got[store.LineRef{OrderID: orderID, LineNo: line}]
			return err
		})
		if err != nil || n != 100 {
			t.Fatalf("took %d codes (%v), want 100", n, err)
		}
		var first, newest int64
		if err := w.db.Pool.QueryRow(ctx, `SELECT min(stock_id), max(stock_id) FROM delivered_codes
			WHERE order_id = $1 AND line_no = $2`, orderID, line).Scan(&first, &newest); err != nil {
			t.Fatal(err)
		}
		if first <= last {
			t.Fatalf("code %d handed out after %d: not oldest import first", first, last)
		}
		last = newest
	}

	// The index of available codes holds the delivered ones' entries until a vacuum, a couple of
	// hundred to a page: a claim steps over those pages. Walking the delivered codes themselves
	// reads two pages for each.
	if pages := claimPages(t, w.db, product); pages > delivered/25 {
		t.Fatalf("a claim of one code after %d delivered read %d pages: it walks the delivered codes", delivered, pages)
	}
}

// stockOrder inserts an order of the wallet's account for claims to deliver codes to.
func stockOrder(t *testing.T, w wallet) uuid.UUID {
	t.Helper()
	var orderID uuid.UUID
	if err := w.db.Pool.QueryRow(t.Context(), `INSERT INTO orders (account_id, external_order_code, payload_hash,
		currency, total_price, total_quantity, estimated_ready_at)
		VALUES ($1, 'stock', '\x01', 'EUR', 0, 1, now()) RETURNING id`, w.account).Scan(&orderID); err != nil {
		t.Fatal(err)
	}
	return orderID
}

// claimPages is how many buffer pages one claim of a code of product reads, in a transaction
// rolled back.
func claimPages(t *testing.T, db *store.DB, product string) int {
	t.Helper()
	var pages int
	rollback := errors.New("rollback")
	err := db.InTx(t.Context(), func(tx pgx.Tx) error {
		var out string
		row := tx.QueryRow(t.Context(), `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+store.ClaimStockSQL, product, 1)
		if err := row.Scan(&out); err != nil {
			return err
		}
		var plans []struct {
			Plan struct {
				Hit  int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			}
		}
		if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
			t.Fatalf("plan %s: %v", out, err)
		}
		pages = plans[0].Plan.Hit + plans[0].Plan.Read
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	return pages
}

// TestClaimStaysShortUnderYearsOfDeliveredCodes: when delivered codes are nearly all of
// code_stock, as releases before migration 00030 left them until the purge takes them out, a
// vacuum still cleans the index of available codes, so a claim does not step over every code
// delivered since the vacuum before. By default a vacuum skips the indexes while fewer than 2%
// of the table's pages hold dead rows, which a day's deliveries never reach against years of
// history; and autovacuum runs after a number of deliveries, not a fraction of the table.
func TestClaimStaysShortUnderYearsOfDeliveredCodes(t *testing.T) {
	ctx := context.Background()
	w := newWallet(t, "0", nil)
	orderID := stockOrder(t, w)
	const product, history, available, delivered = "10000000000001", 600_000, 12_000, 10_000
	// Codes delivered long ago, of another product, then the product's stock.
	if _, err := w.db.Pool.Exec(ctx, `INSERT INTO code_stock (product_code, ciphertext, digest, batch, imported_at,
			order_id, delivered_at)
		SELECT '10000000000002', '\x00', sha256(('h' || g)::bytea), 'old', now() - interval '2 years', $1,
		       now() - interval '2 years'
		FROM generate_series(1, $2) g`, orderID, history); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Pool.Exec(ctx, `INSERT INTO code_stock (product_code, ciphertext, digest, batch, imported_at)
		SELECT $1, '\x00', sha256(g::text::bytea), 'b', now() + g * interval '1 microsecond'
		FROM generate_series(1, $2) g`, product, available); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Pool.Exec(ctx, `VACUUM ANALYZE code_stock`); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Pool.Exec(ctx, `INSERT INTO order_lines (order_id, line_no, product_code, unit_price,
			quantity, currency) SELECT $1, g, $2, 0, 100, 'EUR' FROM generate_series(0, $3) g`,
		orderID, product, delivered/100); err != nil {
		t.Fatal(err)
	}
	for line := range delivered / 100 {
		err := w.db.InTx(ctx, func(tx pgx.Tx) error {
			_, _, err := store.ClaimStock(ctx, tx,
				[]store.StockWant{{OrderID: orderID, LineNo: line, ProductCode: product, Quantity: 100}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	before := claimPages(t, w.db, product)
	// As autovacuum runs it: with the table's settings.
	if _, err := w.db.Pool.Exec(ctx, `VACUUM code_stock`); err != nil {
		t.Fatal(err)
	}
	if after := claimPages(t, w.db, product); after > 10 {
		t.Errorf("a claim after %d deliveries read %d pages, and %d after a vacuum: the vacuum left the "+
			"delivered codes' entries in the index", delivered, before, after)
	}

	var options []string
	if err := w.db.Pool.QueryRow(ctx,
		`SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = 'code_stock'::regclass`).Scan(&options); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"autovacuum_vacuum_scale_factor=0", "autovacuum_vacuum_threshold=25000"} {
		if !slices.Contains(options, want) {
			t.Errorf("code_stock's options %v lack %s: autovacuum would wait for a fraction of the table", options, want)
		}
	}
}
