package store_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

const leaveProduct = "10000000000001"

// stockCode is a code of leaveProduct for InsertStock, its digest and ciphertext derived from name.
func stockCode(name string) store.CodeStock {
	digest := sha256.Sum256([]byte(name))
	return store.CodeStock{ProductCode: leaveProduct, KeyRef: 1, Ciphertext: []byte(name), Digest: digest[:],
		Batch: "b", ImportedAt: time.Now()}
}

// registerInstance registers a process built for schema, last seen age ago, and returns its id.
func registerInstance(t *testing.T, db *store.DB, schema int64, age time.Duration) uuid.UUID {
	t.Helper()
	id := uuid.New()
	if _, err := db.Pool.Exec(t.Context(), `INSERT INTO codeport_instances
		(instance_id, component, version, schema_version, host, started_at, last_seen)
		VALUES ($1, 'serve', 'test', $2, 'test', now() - $3::interval, now() - $3::interval)`,
		id, schema, fmt.Sprintf("%f seconds", age.Seconds())); err != nil {
		t.Fatal(err)
	}
	return id
}

// deliverOne claims one code of leaveProduct for unit 0 of line 0 of orderID, in a transaction of
// its own, and returns the stock id it took.
func deliverOne(t *testing.T, db *store.DB, orderID uuid.UUID) int64 {
	t.Helper()
	ctx := t.Context()
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		got, _, err := store.ClaimStock(ctx, tx,
			[]store.StockWant{{OrderID: orderID, LineNo: 0, ProductCode: leaveProduct, Quantity: 1}})
		if err == nil && got[store.LineRef{OrderID: orderID}] != 1 {
			err = fmt.Errorf("delivered %d codes, want 1", got[store.LineRef{OrderID: orderID}])
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := db.Pool.QueryRow(ctx, `SELECT stock_id FROM delivered_codes WHERE order_id = $1`,
		orderID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// lineOrder is an order of the wallet's account with one line of quantity units of leaveProduct.
func lineOrder(t *testing.T, w wallet, quantity int) uuid.UUID {
	t.Helper()
	var orderID uuid.UUID
	if err := w.db.Pool.QueryRow(t.Context(), `WITH o AS (INSERT INTO orders (account_id, external_order_code,
			payload_hash, currency, total_price, total_quantity, estimated_ready_at)
		VALUES ($1, gen_random_uuid()::text, '\x01', 'EUR', 0, $3, now()) RETURNING id),
		l AS (INSERT INTO order_lines (order_id, line_no, product_code, unit_price, quantity, currency)
			SELECT id, 0, $2, 0, $3, 'EUR' FROM o)
		SELECT id FROM o`, w.account, leaveProduct, quantity).Scan(&orderID); err != nil {
		t.Fatal(err)
	}
	return orderID
}

// TestDeliveryTakesTheCodeOutOfStock: a delivered code's stock row is deleted, and its
// delivered_codes row keeps the stock id, the sealed code and its digest; while a process built
// before StockDeleteSchemaVersion is registered, the row stays, marked delivered, since that
// process refuses a duplicate import by it. A process that stopped heartbeating no longer counts.
func TestDeliveryTakesTheCodeOutOfStock(t *testing.T) {
	cases := []struct {
		name     string
		instance time.Duration // age of an older binary's row; 0: none registered
		kept     bool
	}{
		{"no older binary", 0, false},
		{"older binary running", time.Second, true},
		{"older binary gone quiet", store.InstanceExpiry + time.Minute, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := newWallet(t, "0", nil)
			if _, err := store.InsertStock(ctx, w.db.Pool, []store.CodeStock{stockCode("one")}); err != nil {
				t.Fatal(err)
			}
			if tc.instance > 0 {
				registerInstance(t, w.db, store.StockDeleteSchemaVersion-1, tc.instance)
			}
			orderID := lineOrder(t, w, 1)
			id := deliverOne(t, w.db, orderID)
			var stockRows int
			var same bool
			if err := w.db.Pool.QueryRow(ctx, `SELECT count(s.id),
					coalesce(bool_and(s.order_id = d.order_id AND s.delivered_at = d.delivered_at), false)
				FROM delivered_codes d LEFT JOIN code_stock s ON s.id = d.stock_id AND s.digest = d.digest
					AND s.ciphertext = d.ciphertext
				WHERE d.stock_id = $1 AND d.ciphertext = 'one' AND d.digest = sha256('one')`,
				id).Scan(&stockRows, &same); err != nil {
				t.Fatal(err)
			}
			if kept := stockRows == 1; kept != tc.kept || (kept && !same) {
				t.Errorf("stock rows of the delivered code: %d (marked delivered: %t); want kept %t",
					stockRows, same, tc.kept)
			}
			audit(t, w.db)
		})
	}
}

// TestImportRefusesDeliveredCodes: an import skips, and counts as known, a code in stock, one
// delivered, one delivered and archived, and one whose archive row was then deleted (the archive
// dumped and deleted); the new ones are added.
func TestImportRefusesDeliveredCodes(t *testing.T) {
	ctx := context.Background()
	w := newWallet(t, "0", nil)
	known := []store.CodeStock{stockCode("delivered"), stockCode("archived"), stockCode("retired"),
		stockCode("available")}
	if n, err := store.InsertStock(ctx, w.db.Pool, known[:3]); err != nil || n != 3 {
		t.Fatalf("first import: %d, %v; want 3", n, err)
	}
	deliverOne(t, w.db, lineOrder(t, w, 1))
	archived, retired := lineOrder(t, w, 1), lineOrder(t, w, 1)
	deliverOne(t, w.db, archived)
	deliverOne(t, w.db, retired)
	for _, orderID := range []uuid.UUID{archived, retired} {
		archiveOrder(t, w.db, orderID)
	}
	if _, err := w.db.Pool.Exec(ctx, `DELETE FROM delivered_codes_archive WHERE order_id = $1`, retired); err != nil {
		t.Fatal(err)
	}
	if n, err := store.InsertStock(ctx, w.db.Pool, known[3:]); err != nil || n != 1 {
		t.Fatalf("import of available: %d, %v; want 1", n, err)
	}

	n, err := store.InsertStock(ctx, w.db.Pool, append(known, stockCode("new")))
	if err != nil || n != 1 {
		t.Fatalf("second import: %d added, %v; want 1 (new)", n, err)
	}
	var available []string
	rows, err := w.db.Pool.Query(ctx, `SELECT convert_from(ciphertext, 'UTF8') FROM code_stock
		WHERE order_id IS NULL ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	if available, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(available) != "[available new]" {
		t.Errorf("available codes %v, want [available new]", available)
	}
	audit(t, w.db)
}

// archiveOrder moves the order's delivered codes and lines to the archive, as
// store.ArchiveOrders does.
func archiveOrder(t *testing.T, db *store.DB, orderID uuid.UUID) {
	t.Helper()
	if _, err := db.Pool.Exec(t.Context(), `WITH codes AS (DELETE FROM delivered_codes WHERE order_id = $1 RETURNING *),
		archived AS (INSERT INTO delivered_codes_archive (order_id, line_no, unit_no, stock_id, key_ref, ciphertext,
			digest, delivered_at)
			SELECT order_id, line_no, unit_no, stock_id, key_ref, ciphertext, digest, delivered_at FROM codes),
		lines AS (DELETE FROM order_lines WHERE order_id = $1 RETURNING *),
		archived_lines AS (INSERT INTO order_lines_archive (order_id, line_no, product_code, unit_price, quantity,
			currency, sku) SELECT order_id, line_no, product_code, unit_price, quantity, currency, sku FROM lines)
		UPDATE orders SET archived_at = now() WHERE id = $1`, orderID); err != nil {
		t.Fatal(err)
	}
}

// TestImportWaitsForADeliveryInFlight: an import of a code whose delivery has deleted its stock
// row but not committed waits for that delivery, then refuses the code if it committed and
// finds it in stock if it rolled back. Either way the code is available at most once and never
// both delivered and available. A single statement that checked the delivered codes before
// waiting would add the delivered code back.
func TestImportWaitsForADeliveryInFlight(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("delivery committed %t", commit), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := newWallet(t, "0", nil)
			if _, err := store.InsertStock(ctx, w.db.Pool, []store.CodeStock{stockCode("raced")}); err != nil {
				t.Fatal(err)
			}
			orderID := lineOrder(t, w, 1)
			tx, err := w.db.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, _, err := store.ClaimStock(ctx, tx,
				[]store.StockWant{{OrderID: orderID, LineNo: 0, ProductCode: leaveProduct, Quantity: 1}}); err != nil {
				t.Fatal(err)
			}
			type result struct {
				n   int64
				err error
			}
			imported := make(chan result, 1)
			go func() {
				n, err := store.InsertStock(ctx, w.db.Pool, []store.CodeStock{stockCode("raced")})
				imported <- result{n, err}
			}()
			waitForLockWait(t, w.db)
			select {
			case r := <-imported:
				t.Fatalf("the import returned (%d, %v) while the delivery was in flight", r.n, r.err)
			default:
			}
			if commit {
				err = tx.Commit(ctx)
			} else {
				err = tx.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			if r := <-imported; r.err != nil || r.n != 0 {
				t.Errorf("import after the delivery: %d added, %v; want 0", r.n, r.err)
			}
			var available int
			if err := w.db.Pool.QueryRow(ctx, `SELECT count(*) FROM code_stock WHERE order_id IS NULL`).
				Scan(&available); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: 1}[commit]; available != want {
				t.Errorf("%d codes available, want %d", available, want)
			}
			audit(t, w.db)
		})
	}
}

// waitForLockWait returns once a session of db's database waits on a lock.
func waitForLockWait(t *testing.T, db *store.DB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var waiting int
		if err := db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no session waits on a lock: the import did not wait for the delivery in flight")
}

// TestPurgeDeliveredStock: the rows deliveries left in code_stock, marked delivered, go in
// batches once no older binary runs, and the available codes stay; the stock gauge still
// reports a product whose every code went.
func TestPurgeDeliveredStock(t *testing.T) {
	ctx := context.Background()
	w := newWallet(t, "0", nil)
	orderID := stockOrder(t, w)
	// As an older binary left them: 25 delivered codes of one product, and another product's
	// stock imported by it (no stock_products row), 3 delivered and 2 available.
	if _, err := w.db.Pool.Exec(ctx, `INSERT INTO code_stock (product_code, ciphertext, digest, order_id, delivered_at)
		SELECT CASE WHEN g <= 25 THEN '10000000000007' ELSE '10000000000008' END, '\x00', sha256(g::text::bytea),
		       CASE WHEN g <= 28 THEN $1::uuid END, CASE WHEN g <= 28 THEN now() END
		FROM generate_series(1, 30) g`, orderID); err != nil {
		t.Fatal(err)
	}
	old := registerInstance(t, w.db, store.StockDeleteSchemaVersion-1, 0)
	if n, err := store.PurgeDeliveredStock(ctx, w.db.Pool, 10); err != nil || n != 0 {
		t.Fatalf("purge beside an older binary: %d, %v; want 0", n, err)
	}
	if _, err := w.db.Pool.Exec(ctx, `DELETE FROM codeport_instances WHERE instance_id = $1`, old); err != nil {
		t.Fatal(err)
	}
	var batches []int64
	for {
		n, err := store.PurgeDeliveredStock(ctx, w.db.Pool, 10)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, n)
		if n < 10 {
			break
		}
	}
	if fmt.Sprint(batches) != "[10 10 8]" {
		t.Errorf("purged %v, want [10 10 8]", batches)
	}
	if err := store.RecordStockProducts(ctx, w.db.Pool); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := w.db.Pool.QueryRow(ctx, `SELECT count(*) FROM code_stock WHERE order_id IS NULL`).
		Scan(&left); err != nil || left != 2 {
		t.Fatalf("%d codes available after the purge (%v), want 2", left, err)
	}
	g, err := store.ReadGauges(ctx, w.db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(g.Stock); got != "[{10000000000007 0} {10000000000008 2}]" {
		t.Errorf("stock gauges %s, want the emptied product at 0 and the other at 2", got)
	}
}

// TestStockGaugeKeepsAnEmptiedProduct: a product whose every code has been delivered (its rows
// deleted) is still reported, at 0.
func TestStockGaugeKeepsAnEmptiedProduct(t *testing.T) {
	ctx := context.Background()
	w := newWallet(t, "0", nil)
	if _, err := store.InsertStock(ctx, w.db.Pool, []store.CodeStock{stockCode("only")}); err != nil {
		t.Fatal(err)
	}
	deliverOne(t, w.db, lineOrder(t, w, 1))
	g, err := store.ReadGauges(ctx, w.db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(g.Stock); got != "[{"+leaveProduct+" 0}]" {
		t.Errorf("stock gauges %s, want %s at 0", got, leaveProduct)
	}
}

// audit fails the test on any finding of the money audit (the orders here stay processing, so
// only the codes and the ledger are judged).
func audit(t *testing.T, db *store.DB) {
	t.Helper()
	a, err := storetest.AuditMoney(t.Context(), db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Findings) > 0 {
		t.Errorf("audit: %q", a.Findings)
	}
}
