package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

func openEmpty(t *testing.T) (*store.DB, *store.Migrator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := storetest.Create(ctx, t.Name(), false)
	if err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() { _ = d.Drop(context.Background()) })
	return openMigrator(t, d.URL)
}

// openMigrator opens a pool of its own on the database at url and a migrator over it.
func openMigrator(t *testing.T, url string) (*store.DB, *store.Migrator) {
	t.Helper()
	db, err := store.Open(context.Background(), url, store.Options{MaxConns: 4})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(db.Close)
	m, err := store.NewMigrator(db.SQL)
	if err != nil {
		t.Fatalf("migrator: %v", err)
	}
	return db, m
}

func tableExists(t *testing.T, db *store.DB, name string) bool {
	t.Helper()
	var exists bool
	err := db.Pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists)
	if err != nil {
		t.Fatalf("to_regclass(%s): %v", name, err)
	}
	return exists
}

var schemaTables = []string{
	"partners", "accounts", "api_keys", "catalogs", "catalog_products", "wallet_balances",
	"wallet_entries", "orders", "order_lines", "code_stock", "delivered_codes",
	"webhook_endpoints", "webhook_events", "river_job", "river_queue",
}

// TestMigrationsRoundTrip walks the schema up from empty, down one step at a time to zero, and up
// again: every step's down must undo its up exactly, or the second up fails.
func TestMigrationsRoundTrip(t *testing.T) {
	ctx := context.Background()
	db, m := openEmpty(t)

	applied, err := m.Up(ctx)
	if err != nil {
		t.Fatalf("up from empty: %v", err)
	}
	if len(applied) < 7 {
		t.Fatalf("applied %d migrations, want at least 7 (ours and the job queue's)", len(applied))
	}
	for _, table := range schemaTables {
		if !tableExists(t, db, table) {
			t.Errorf("table %s missing after up", table)
		}
	}

	for step := len(applied); step > 0; step-- {
		if _, err := m.Down(ctx); err != nil {
			t.Fatalf("down (at step %d): %v", step, err)
		}
	}
	if v, err := m.Version(ctx); err != nil || v != 0 {
		t.Fatalf("version after full down = %d, %v; want 0", v, err)
	}
	for _, table := range schemaTables {
		if tableExists(t, db, table) {
			t.Errorf("table %s still present at version 0", table)
		}
	}
	if _, err := m.Down(ctx); !errors.Is(err, store.ErrNothingToRollBack) {
		t.Errorf("down at version 0: err = %v, want ErrNothingToRollBack", err)
	}

	reapplied, err := m.Up(ctx)
	if err != nil {
		t.Fatalf("second up: %v", err)
	}
	if len(reapplied) != len(applied) {
		t.Errorf("second up applied %d migrations, first applied %d", len(reapplied), len(applied))
	}
	statuses, err := m.Status(ctx)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	for _, s := range statuses {
		if !s.Applied {
			t.Errorf("migration %d (%s) not applied after up", s.Version, s.Source)
		}
	}
}

// TestSchemaConstraints checks that the database itself refuses what must never happen, so a bug
// in application code cannot overdraw a wallet, duplicate an order or apply a top-up twice.
func TestSchemaConstraints(t *testing.T) {
	ctx := context.Background()
	db, m := openEmpty(t)
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	exec := func(sql string, args ...any) error {
		_, err := db.Pool.Exec(ctx, sql, args...)
		return err
	}
	var partnerID, accountID string
	err := db.Pool.QueryRow(ctx, `INSERT INTO partners (namespace, name) VALUES ('p', 'acme') RETURNING id`).
		Scan(&partnerID)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Pool.QueryRow(ctx, `INSERT INTO accounts (partner_id, environment) VALUES ($1, 'production') RETURNING id`,
		partnerID).Scan(&accountID)
	if err != nil {
		t.Fatal(err)
	}
	if err := exec(`INSERT INTO wallet_balances (account_id, currency, balance) VALUES ($1, 'EUR', 1000)`,
		accountID); err != nil {
		t.Fatal(err)
	}
	const entry = `INSERT INTO wallet_entries (account_id, currency, kind, reference, amount, balance_after)`
	if err := exec(entry+` VALUES ($1, 'EUR', 'top_up', 'wire-1', 1000, 1000)`, accountID); err != nil {
		t.Fatal(err)
	}
	order := `INSERT INTO orders (account_id, external_order_code, payload_hash, currency, total_price, total_quantity,
	              estimated_ready_at)
	          VALUES ($1, $2, '\x00', 'EUR', 100, 1, now())`
	if err := exec(order, accountID, "ORDER-1"); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		sql  string
		args []any
		code string // SQLSTATE
	}{
		{"negative balance", `UPDATE wallet_balances SET balance = balance - 1001 WHERE account_id = $1`,
			[]any{accountID}, "23514"},
		{"duplicate external order code", order, []any{accountID, "ORDER-1"}, "23505"},
		{"duplicate ledger reference", entry + ` VALUES ($1, 'EUR', 'top_up', 'wire-1', 5, 1005)`,
			[]any{accountID}, "23505"},
		{"ledger update", `UPDATE wallet_entries SET amount = 1 WHERE account_id = $1`, []any{accountID}, "P0001"},
		{"ledger delete", `DELETE FROM wallet_entries WHERE account_id = $1`, []any{accountID}, "P0001"},
		{"debit recorded as positive", entry + ` VALUES ($1, 'EUR', 'order_debit', 'o-2', 5, 995)`,
			[]any{accountID}, "23514"},
		{"second account for one environment", `INSERT INTO accounts (partner_id, environment) VALUES ($1, 'production')`,
			[]any{partnerID}, "23505"},
		{"unknown environment", `INSERT INTO accounts (partner_id, environment) VALUES ($1, 'staging')`,
			[]any{partnerID}, "23514"},
		{"13-digit product code", `INSERT INTO code_stock (product_code, ciphertext, digest)
			VALUES ('1234567890123', '\x00', decode(repeat('00', 32), 'hex'))`, nil, "23514"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := exec(tc.sql, tc.args...)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				t.Fatalf("err = %v, want a PostgreSQL error %s", err, tc.code)
			}
			if pgErr.Code != tc.code {
				t.Fatalf("SQLSTATE = %s (%s), want %s", pgErr.Code, pgErr.Message, tc.code)
			}
		})
	}

	var balance int64
	err = db.Pool.QueryRow(ctx, `SELECT balance FROM wallet_balances WHERE account_id = $1`, accountID).Scan(&balance)
	if err != nil || balance != 1000 {
		t.Errorf("balance = %d, %v; want 1000 untouched by the rejected statements", balance, err)
	}
}

// TestCheckSchema: an empty or older schema is refused with the versions named, the current one
// passes, and a newer one (a rolling upgrade's old pods) passes and says it is ahead. The check
// only reads: the empty database stays without goose's version table.
func TestCheckSchema(t *testing.T) {
	ctx := context.Background()
	db, m := openEmpty(t)
	newest, err := store.LatestSchemaVersion()
	if err != nil {
		t.Fatal(err)
	}
	refused := func(want int64) {
		t.Helper()
		_, _, err := store.CheckSchema(ctx, db.Pool)
		var behind *store.SchemaBehindError
		if !errors.As(err, &behind) || behind.Have != want || behind.Need != newest {
			t.Fatalf("CheckSchema at version %d: %v", want, err)
		}
	}
	refused(0)
	if tableExists(t, db, "codeport_schema_versions") {
		t.Fatal("the check created goose's version table")
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	statuses, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last := statuses[len(statuses)-1].Version; last != newest {
		t.Fatalf("LatestSchemaVersion = %d; the newest embedded migration is %d", newest, last)
	}
	if have, need, err := store.CheckSchema(ctx, db.Pool); err != nil || have != need {
		t.Fatalf("CheckSchema after up: %d, %d, %v", have, need, err)
	}
	if _, err := m.Down(ctx); err != nil {
		t.Fatal(err)
	}
	refused(statuses[len(statuses)-2].Version)
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	// A newer binary migrated the database further.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO codeport_schema_versions (version_id, is_applied) VALUES ($1, true)`,
		newest+1); err != nil {
		t.Fatal(err)
	}
	if have, need, err := store.CheckSchema(ctx, db.Pool); err != nil || have != newest+1 || need != newest {
		t.Fatalf("CheckSchema on a newer schema: %d, %d, %v", have, need, err)
	}
}

// TestMigrationsGiveUpWaitingForABusyOrdersTable: a step that locks orders gives up after its
// lock_timeout rather than queue every order read or write behind its wait, changes nothing,
// and succeeds when run again once the table is free. The locks held are those of a pg_dump
// (ACCESS SHARE, which adding a column waits for) and of a placement (ROW EXCLUSIVE, which
// creating triggers waits for).
func TestMigrationsGiveUpWaitingForABusyOrdersTable(t *testing.T) {
	for _, tc := range []struct {
		step int64
		held string
	}{
		{27, "ACCESS SHARE"},
		{28, "ROW EXCLUSIVE"},
	} {
		t.Run(tc.held, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			db, m := openBefore(ctx, t, tc.step)
			holder := beginLocked(ctx, t, db, "LOCK TABLE orders IN "+tc.held+" MODE")
			_, err := m.Up(ctx)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
				t.Fatalf("up while orders is held in %s mode: %v; want lock_timeout's 55P03 lock_not_available",
					tc.held, err)
			}
			if v, err := m.Version(ctx); err != nil || v != tc.step-1 {
				t.Fatalf("version after the step gave up: %d, %v; want %d", v, err, tc.step-1)
			}
			if err := holder.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Up(ctx); err != nil {
				t.Fatalf("up once orders is free: %v", err)
			}
		})
	}
}

// TestStockMigrationTakesLocksInADeliverysOrder: a delivery of the previous release holds
// code_stock (its claim) when it writes delivered_codes. Step 30, which drops the key between
// them, must wait for code_stock before it takes delivered_codes; taking them the other way round
// deadlocks with that delivery, and one of the two fails.
func TestStockMigrationTakesLocksInADeliverysOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	db, m := openBefore(ctx, t, store.StockDeleteSchemaVersion)
	delivery := beginLocked(ctx, t, db, "LOCK TABLE code_stock IN ROW EXCLUSIVE MODE")

	migrated := make(chan error, 1)
	go func() {
		_, err := m.Up(ctx)
		migrated <- err
	}()
	waitForLockWait(t, db)

	if _, err := delivery.Exec(ctx, "LOCK TABLE delivered_codes IN ROW EXCLUSIVE MODE"); err != nil {
		t.Fatalf("the delivery writing delivered_codes while step %d waits: %v",
			store.StockDeleteSchemaVersion, err)
	}
	if err := delivery.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("up once the delivery committed: %v", err)
	}
}

// openBefore opens a new database whose schema stops just before the given step.
func openBefore(ctx context.Context, t *testing.T, step int64) (*store.DB, *store.Migrator) {
	t.Helper()
	db, m := openEmpty(t)
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if _, err := m.DownTo(ctx, step-1); err != nil {
		t.Fatalf("down to %d: %v", step-1, err)
	}
	return db, m
}

// beginLocked begins a transaction on db that takes a lock, rolled back at the test's end if
// the test has not ended it.
func beginLocked(ctx context.Context, t *testing.T, db *store.DB, lock string) pgx.Tx {
	t.Helper()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, lock); err != nil {
		t.Fatalf("%s: %v", lock, err)
	}
	return tx
}
