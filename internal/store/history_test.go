package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

// BenchmarkHistoryDepth reads a page of 100 orders from the top of an account's history of
// 200,000 orders and from 95% down it (by cursor), and the same deep page by OFFSET, as keyset
// paging replaced it. It reports each read's time relative to the top page of the same run:
// keyset pages cost the same at any depth, OFFSET pages grow with it.
func BenchmarkHistoryDepth(b *testing.B) {
	ctx := context.Background()
	db := storetest.Open(b, store.Options{MaxConns: 4})
	var account uuid.UUID
	err := db.Pool.QueryRow(ctx, `WITH p AS (INSERT INTO partners (namespace, name) VALUES ('ns', 'deep') RETURNING id)
		INSERT INTO accounts (partner_id, environment) SELECT id, 'production' FROM p RETURNING id`).Scan(&account)
	if err != nil {
		b.Fatal(err)
	}
	const orders = 200_000
	if _, err := db.Pool.Exec(ctx, `INSERT INTO orders (account_id, external_order_code, payload_hash, currency,
			total_price, total_quantity, status, estimated_ready_at, created_at)
		SELECT $1, 'o-' || i, '\x00', 'EUR', 1000, 1, CASE WHEN i % 500 = 0 THEN 'failed' ELSE 'completed' END,
			now(), now() - make_interval(secs => i)
		FROM generate_series(1, $2::int) i`, account, orders); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `ANALYZE orders`); err != nil {
		b.Fatal(err)
	}
	var deep store.OrderKey
	if err := db.Pool.QueryRow(ctx, `SELECT created_at, id FROM orders WHERE account_id = $1
		ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT 1`, account, orders*95/100).Scan(&deep.At, &deep.ID); err != nil {
		b.Fatal(err)
	}
	page := func(f store.OrderFilter) {
		f.AccountID, f.Limit = account, 101
		list, err := store.HistoryOrders(ctx, db.Pool, f)
		if err != nil || len(list) != 101 {
			b.Fatalf("page: %d orders, %v", len(list), err)
		}
	}
	offset := func() {
		rows, err := db.Pool.Query(ctx, `SELECT id FROM orders WHERE account_id = $1
			ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT 101`, account, orders*95/100)
		if err != nil {
			b.Fatal(err)
		}
		rows.Close()
	}
	var top, keyset, byOffset, failed time.Duration
	timed := func(d *time.Duration, f func()) {
		start := time.Now()
		f()
		*d += time.Since(start)
	}
	b.ResetTimer()
	for b.Loop() {
		timed(&top, func() { page(store.OrderFilter{}) })
		timed(&keyset, func() { page(store.OrderFilter{Before: &deep}) })
		timed(&failed, func() { page(store.OrderFilter{Status: store.OrderFailed}) })
		timed(&byOffset, offset)
	}
	b.ReportMetric(float64(keyset)/float64(top), "deep/top")
	b.ReportMetric(float64(failed)/float64(top), "failed/top")
	b.ReportMetric(float64(byOffset)/float64(top), "offset-deep/top")
	b.ReportMetric(float64(top.Microseconds())/float64(b.N), "top-µs/op")
}

// TestOrdersBeforeMetadataReadAsWithout: orders written before migration 00018 read, after it,
// as orders without metadata, in the order read and in the history.
func TestOrdersBeforeMetadataReadAsWithout(t *testing.T) {
	ctx := context.Background()
	db, m := openEmpty(t)
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DownTo(ctx, 15); err != nil {
		t.Fatal(err)
	}
	var account uuid.UUID
	err := db.Pool.QueryRow(ctx, `WITH p AS (INSERT INTO partners (namespace, name) VALUES ('ns', 'old') RETURNING id),
		a AS (INSERT INTO accounts (partner_id, environment) SELECT id, 'production' FROM p RETURNING id),
		o AS (INSERT INTO orders (account_id, external_order_code, payload_hash, currency, total_price, total_quantity,
			estimated_ready_at) SELECT id, 'before-18', '\x00', 'EUR', 1000, 1, now() FROM a)
		SELECT id FROM a`).Scan(&account)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	o, err := store.FindOrder(ctx, db.Pool, account, "before-18")
	if err != nil || len(o.Metadata) != 0 {
		t.Fatalf("order %+v, %v", o, err)
	}
	list, err := store.HistoryOrders(ctx, db.Pool, store.OrderFilter{AccountID: account, Limit: 10})
	if err != nil || len(list) != 1 || len(list[0].Metadata) != 0 {
		t.Fatalf("history %+v, %v", list, err)
	}
}
