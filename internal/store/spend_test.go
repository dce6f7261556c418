package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

// spendAccount creates a partner with a production account on db and returns the account.
func spendAccount(t *testing.T, db *store.DB, name string) uuid.UUID {
	t.Helper()
	var account uuid.UUID
	err := db.Pool.QueryRow(t.Context(), `WITH p AS (INSERT INTO partners (namespace, name) VALUES ('ns', $1) RETURNING id)
		INSERT INTO accounts (partner_id, environment) SELECT id, 'production' FROM p RETURNING id`, name).Scan(&account)
	if err != nil {
		t.Fatal(err)
	}
	return account
}

// writeOrder writes an order as a placement does, whichever release: a row of orders, committed.
func writeOrder(t *testing.T, q store.Querier, account uuid.UUID, code, currency string, total, refunded int64,
	at time.Time,
) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	if _, err := q.Exec(t.Context(), `INSERT INTO orders (id, account_id, external_order_code, payload_hash, currency,
			total_price, total_quantity, debited_amount, refunded_amount, status, estimated_ready_at, created_at)
		VALUES ($1, $2, $3, '\x00', $4, $5, 1, $5, $6::bigint,
			CASE WHEN $6::bigint > 0 THEN 'failed' ELSE 'processing' END, now(), $7)`,
		id, account, code, currency, total, refunded, at); err != nil {
		t.Fatal(err)
	}
	return id
}

// refund sets an order's refund as fulfilment finishes it.
func refund(t *testing.T, q store.Querier, order uuid.UUID, amount int64) {
	t.Helper()
	if _, err := q.Exec(t.Context(), `UPDATE orders SET refunded_amount = $2, status = 'failed', finished_at = now()
		WHERE id = $1`, order, amount); err != nil {
		t.Fatal(err)
	}
}

// spentSince is the rule as the limit states it, summed from the orders themselves: the value
// of the account's orders in currency placed since start, less what was refunded.
func spentSince(t *testing.T, db *store.DB, account uuid.UUID, currency string, start time.Time) int64 {
	t.Helper()
	var spent int64
	if err := db.Pool.QueryRow(t.Context(), `SELECT COALESCE(sum(total_price - refunded_amount), 0)::bigint
		FROM orders WHERE account_id = $1 AND currency = $2 AND created_at >= $3`,
		account, currency, start).Scan(&spent); err != nil {
		t.Fatal(err)
	}
	return spent
}

// dailySpend reads the limit's figure as a placement does: in a transaction holding the spend
// lock, without the order being placed (placing; uuid.Nil for none).
func dailySpend(t *testing.T, db *store.DB, account uuid.UUID, currency string, now time.Time,
	placing uuid.UUID,
) int64 {
	t.Helper()
	var spent int64
	err := db.InTx(t.Context(), func(tx store.Tx) error {
		if err := store.LockDailySpend(t.Context(), tx, account, currency); err != nil {
			return err
		}
		var err error
		spent, err = store.DailySpend(t.Context(), tx, account, currency, now, placing)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return spent
}

// runningTotal is the day's row: its total and whether it was recounted; ok is false without one.
func runningTotal(t *testing.T, db *store.DB, account uuid.UUID, currency string, day time.Time,
) (spent int64, counted, ok bool) {
	t.Helper()
	err := db.Pool.QueryRow(t.Context(), `SELECT spent, counted FROM daily_spend
		WHERE account_id = $1 AND currency = $2 AND day = ($3::timestamptz AT TIME ZONE 'UTC')::date`,
		account, currency, day).Scan(&spent, &counted)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return spent, counted, true
}

// spendDay is a case of TestDailySpendCountsTheDay: the account's orders, and the day's spend
// at now before and after the later refunds.
type spendDay struct {
	name   string
	orders []spendOrder
	now    time.Duration // after the day's start
	want   int64         // before the later refunds
	later  int64         // after them
}

type spendOrder struct {
	at              time.Duration // after the day's start
	currency        string
	total, refunded int64
	// refundLater is set on the order after the first reads, as a fulfilment finishing it.
	refundLater int64
}

// TestDailySpendCountsTheDay: the limit's figure is the day's orders of the account and
// currency, from the first microsecond of the UTC day on (and any dated later, by a clock
// ahead), less their refunds, whether the day's total is recounted or kept by the triggers
// since.
func TestDailySpendCountsTheDay(t *testing.T) {
	db := storetest.Open(t, store.Options{})
	day := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC) // a daylight saving change in Europe
	tests := []spendDay{
		{name: "no orders", now: 12 * time.Hour},
		{name: "the last microsecond of the day before is not the day's", orders: []spendOrder{
			{at: -time.Microsecond, currency: "EUR", total: 700}, {at: 0, currency: "EUR", total: 300}},
			now: 12 * time.Hour, want: 300, later: 300},
		{name: "at midnight exactly", orders: []spendOrder{{at: -time.Microsecond, currency: "EUR", total: 700},
			{at: 0, currency: "EUR", total: 300}}, now: 0, want: 300, later: 300},
		{name: "until the last microsecond", orders: []spendOrder{{at: 24*time.Hour - time.Microsecond,
			currency: "EUR", total: 200}}, now: 24*time.Hour - time.Microsecond, want: 200, later: 200},
		{name: "dated tomorrow by a clock ahead", orders: []spendOrder{{at: time.Hour, currency: "EUR", total: 100},
			{at: 24*time.Hour + time.Millisecond, currency: "EUR", total: 40}}, now: 2 * time.Hour, want: 140, later: 140},
		{name: "other currencies are not counted", orders: []spendOrder{{at: time.Hour, currency: "USD", total: 900},
			{at: time.Hour, currency: "EUR", total: 100}}, now: 2 * time.Hour, want: 100, later: 100},
		{name: "refunds are subtracted", orders: []spendOrder{
			{at: time.Hour, currency: "EUR", total: 1000, refunded: 250},
			{at: 2 * time.Hour, currency: "EUR", total: 500, refundLater: 500}}, now: 3 * time.Hour,
			want: 1250, later: 750},
		{name: "a refund of yesterday's order is yesterday's", orders: []spendOrder{
			{at: -time.Hour, currency: "EUR", total: 800, refundLater: 800}, {at: time.Hour, currency: "EUR", total: 100}},
			now: 2 * time.Hour, want: 100, later: 100},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSpendDay(t, db, spendAccount(t, db, fmt.Sprint("day-", i)), day, tt)
		})
	}
}

func checkSpendDay(t *testing.T, db *store.DB, account uuid.UUID, day time.Time, tt spendDay) {
	t.Helper()
	ids := make([]uuid.UUID, len(tt.orders))
	for j, o := range tt.orders {
		ids[j] = writeOrder(t, db.Pool, account, fmt.Sprint("o-", j), o.currency, o.total, o.refunded, day.Add(o.at))
	}
	now := day.Add(tt.now)
	if got := spentSince(t, db, account, "EUR", day); got != tt.want {
		t.Fatalf("the orders sum to %d since the day's start; the case wants %d", got, tt.want)
	}
	// The first read recounts the day, the second reads the total the recount left.
	for _, read := range []string{"recounted", "kept"} {
		if got := dailySpend(t, db, account, "EUR", now, uuid.Nil); got != tt.want {
			t.Errorf("%s: spent %d, want %d", read, got, tt.want)
		}
	}
	for j, o := range tt.orders {
		if o.refundLater > 0 {
			refund(t, db.Pool, ids[j], o.refundLater)
		}
	}
	if got := dailySpend(t, db, account, "EUR", now, uuid.Nil); got != tt.later {
		t.Errorf("after the refunds: spent %d, want %d", got, tt.later)
	}
	if got := spentSince(t, db, account, "EUR", day); got != tt.later {
		t.Errorf("the orders sum to %d since the day's start after the refunds; the case wants %d", got, tt.later)
	}
}

// TestDailySpendLeavesOutTheOrderBeingPlaced: inside the placement's transaction the figure is
// the committed orders', without the order being placed, which its commit adds.
func TestDailySpendLeavesOutTheOrderBeingPlaced(t *testing.T) {
	ctx := t.Context()
	db := storetest.Open(t, store.Options{})
	account := spendAccount(t, db, "placing")
	now := time.Now()
	writeOrder(t, db.Pool, account, "earlier", "EUR", 100, 0, now)
	err := db.InTx(ctx, func(tx store.Tx) error {
		placing := writeOrder(t, tx, account, "placing", "EUR", 50, 0, now)
		if err := store.LockDailySpend(ctx, tx, account, "EUR"); err != nil {
			return err
		}
		for range 2 {
			spent, err := store.DailySpend(ctx, tx, account, "EUR", now, placing)
			if err != nil || spent != 100 {
				t.Errorf("spent %d, %v; want 100, without the order being placed", spent, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := dailySpend(t, db, account, "EUR", now, uuid.Nil); got != 150 {
		t.Errorf("after the commit: spent %d, want 150", got)
	}
}

// TestDailySpendInAnotherTimeZone: the day is the UTC day, whatever the session's time zone.
func TestDailySpendInAnotherTimeZone(t *testing.T) {
	ctx := t.Context()
	db := storetest.Open(t, store.Options{})
	account := spendAccount(t, db, "zone")
	day := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)
	writeOrder(t, db.Pool, account, "late", "EUR", 100, 0, day.Add(23*time.Hour+30*time.Minute))
	writeOrder(t, db.Pool, account, "before", "EUR", 100, 0, day.Add(-30*time.Minute))
	var spent int64
	err := db.InTx(ctx, func(tx store.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL TIME ZONE 'Europe/Berlin'`); err != nil {
			return err
		}
		var err error
		spent, err = store.DailySpend(ctx, tx, account, "EUR", day.Add(time.Hour), uuid.Nil)
		return err
	})
	if err != nil || spent != 100 {
		t.Errorf("spent %d, %v; want 100, the UTC day's", spent, err)
	}
}

// TestDailySpendAcrossTheUpgrade: the release before migration 00028 wrote orders without
// running totals, and keeps placing and refunding them while the new one rolls out; the limit's
// figure stays the sum of the day's orders for every account: one that ordered again after the
// migration (its day's row short of the earlier orders), one that did not (no row), and one whose
// row a recount made exact before the old release refunded an order.
func TestDailySpendAcrossTheUpgrade(t *testing.T) {
	ctx := t.Context()
	db, m := openEmpty(t)
	if _, err := m.UpTo(ctx, 27); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	y, mo, d := now.UTC().Date()
	day := time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
	again, quiet, recounted := spendAccount(t, db, "again"), spendAccount(t, db, "quiet"), spendAccount(t, db, "recounted")
	var refundable []uuid.UUID
	for _, account := range []uuid.UUID{again, quiet, recounted} {
		writeOrder(t, db.Pool, account, "before-1", "EUR", 1000, 0, now)
		writeOrder(t, db.Pool, account, "before-2", "EUR", 500, 200, now)
		refundable = append(refundable, writeOrder(t, db.Pool, account, "before-3", "EUR", 300, 0, now))
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if got := dailySpend(t, db, recounted, "EUR", now, uuid.Nil); got != 1600 {
		t.Fatalf("recounted: spent %d, want 1600", got)
	}
	// The old release keeps writing: an order of two accounts, a refund of each.
	writeOrder(t, db.Pool, again, "after-1", "EUR", 70, 0, now)
	writeOrder(t, db.Pool, recounted, "after-1", "EUR", 70, 0, now)
	refund(t, db.Pool, refundable[0], 300)
	refund(t, db.Pool, refundable[2], 300)
	if spent, _, _ := runningTotal(t, db, again, "EUR", day); spent != 70-300 {
		t.Fatalf("again's running total is %d before its recount; the case wants it short of the earlier orders", spent)
	}
	for _, tc := range []struct {
		name    string
		account uuid.UUID
	}{{"ordered again", again}, {"no order since", quiet}, {"recounted before", recounted}} {
		want := spentSince(t, db, tc.account, "EUR", day)
		if got := dailySpend(t, db, tc.account, "EUR", now, uuid.Nil); got != want {
			t.Errorf("%s: spent %d, want %d, the sum of the day's orders", tc.name, got, want)
		}
		if spent, counted, _ := runningTotal(t, db, tc.account, "EUR", day); spent != want || !counted {
			t.Errorf("%s: running total %d (counted %v), want %d", tc.name, spent, counted, want)
		}
	}
	audit, err := storetest.AuditMoney(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range audit.Findings {
		if strings.HasPrefix(f, "daily spend") {
			t.Error(f)
		}
	}
}

// TestDailySpendReadsTheRunningTotal holds the limit's read to the day's running total, on an
// account with 60 days of orders in two currencies, 864 of them today: the figure is the day's,
// and its plan reads a few pages, as many as on a day without orders.
func TestDailySpendReadsTheRunningTotal(t *testing.T) {
	ctx := t.Context()
	db := storetest.Open(t, store.Options{})
	account := spendAccount(t, db, "spend")
	// An order every 100 seconds for 60 days, alternately EUR and USD, each EUR order 10.00
	// of which 1.00 refunded.
	now := time.Now()
	dayStart := now.UTC().Truncate(24 * time.Hour)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO orders (account_id, external_order_code, payload_hash, currency,
			total_price, total_quantity, debited_amount, refunded_amount, status, estimated_ready_at, created_at)
		SELECT $1, 'o-' || i, '\x00', CASE WHEN i % 2 = 0 THEN 'EUR' ELSE 'USD' END, 1000, 1, 1000, 100,
			'completed', now(), $2::timestamptz + interval '24 hours' - make_interval(secs => 100 * i)
		FROM generate_series(1, 60 * 864) i`, account, dayStart); err != nil {
		t.Fatal(err)
	}
	// The insert rewrote each day's row once per order; vacuum leaves the one live version, as
	// pruning does between placements.
	if _, err := db.Pool.Exec(ctx, `VACUUM ANALYZE orders, daily_spend`); err != nil {
		t.Fatal(err)
	}
	want := spentSince(t, db, account, "EUR", dayStart)
	if spent := dailySpend(t, db, account, "EUR", now, uuid.Nil); spent != want || want == 0 {
		t.Fatalf("spent %d; want %d", spent, want)
	}
	rollback := errors.New("rollback")
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		var out string
		if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+store.DailySpendSQL,
			account, "EUR", dayStart, uuid.Nil).Scan(&out); err != nil {
			return err
		}

		var plans []struct{ Plan planNode }
		if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
			t.Fatalf("plan %s: %v", out, err)
		}
		p := plans[0].Plan
		indexes := strings.Join(p.indexes(), ",")
		if indexes != "orders_history_idx,daily_spend_pkey" && indexes != "daily_spend_pkey,orders_history_idx" {
			t.Errorf("the day's spend reads through %s, want daily_spend_pkey and orders_history_idx:\n%s", indexes, out)
		}
		// Two index descents and the row: the day's 864 orders lie in some 30 heap pages, which
		// the sum of the orders read.
		if pages := p.pages(); pages > 10 {
			t.Errorf("the day's spend read %d pages, want at most 10:\n%s", pages, out)
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
}

// planNode is a node of a JSON plan, with the pages it and its children read.
type planNode struct {
	Type  string     `json:"Node Type"`
	Index string     `json:"Index Name"`
	Hit   int        `json:"Shared Hit Blocks"`
	Read  int        `json:"Shared Read Blocks"`
	Plans []planNode `json:"Plans"`
}

// indexes names the indexes the plan scans, in plan order.
func (n planNode) indexes() []string {
	var out []string
	if strings.Contains(n.Type, "Index") && n.Index != "" {
		out = append(out, n.Index)
	}
	for _, c := range n.Plans {
		out = append(out, c.indexes()...)
	}
	return out
}

// pages is what the top node read, its children's pages included (EXPLAIN counts them in).
func (n planNode) pages() int { return n.Hit + n.Read }
