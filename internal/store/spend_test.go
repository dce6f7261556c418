package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

// TestDailySpendReadsOnlyTheDay holds the daily spend limit's sum to the day's orders of the
// account, through orders_history_idx, on an account with 60 days of orders in two currencies:
// the sum is the day's, the plan reads a few pages whatever the history's depth, and it needs
// no index of its own (migration 00026 dropped orders_account_spend_idx, which cost every
// order an index entry).
func TestDailySpendReadsOnlyTheDay(t *testing.T) {
	ctx := t.Context()
	db := storetest.Open(t, store.Options{})
	var account uuid.UUID
	err := db.Pool.QueryRow(ctx, `WITH p AS (INSERT INTO partners (namespace, name) VALUES ('ns', 'spend') RETURNING id)
		INSERT INTO accounts (partner_id, environment) SELECT id, 'production' FROM p RETURNING id`).Scan(&account)
	if err != nil {
		t.Fatal(err)
	}
	// An order every 100 seconds for 60 days, alternately EUR and USD, each EUR order 10.00
	// of which 1.00 refunded.
	dayStart := time.Now().UTC().Truncate(24 * time.Hour)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO orders (account_id, external_order_code, payload_hash, currency,
			total_price, total_quantity, debited_amount, refunded_amount, status, estimated_ready_at, created_at)
		SELECT $1, 'o-' || i, '\x00', CASE WHEN i % 2 = 0 THEN 'EUR' ELSE 'USD' END, 1000, 1, 1000, 100,
			'completed', now(), $2::timestamptz + interval '1 day' - make_interval(secs => 100 * i)
		FROM generate_series(1, 60 * 864) i`, account, dayStart); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `ANALYZE orders`); err != nil {
		t.Fatal(err)
	}
	var want int64
	if err := db.Pool.QueryRow(ctx, `SELECT sum(total_price - refunded_amount) FROM orders
		WHERE account_id = $1 AND currency = 'EUR' AND created_at >= $2`, account, dayStart).Scan(&want); err != nil {
		t.Fatal(err)
	}
	spent, err := store.SpentSince(ctx, db.Pool, account, "EUR", dayStart)
	if err != nil || spent != want || want == 0 {
		t.Fatalf("spent %d, %v; want %d", spent, err, want)
	}

	rollback := errors.New("rollback")
	err = db.InTx(ctx, func(tx pgx.Tx) error {
		var out string
		if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+store.SpentSinceSQL,
			account, "EUR", dayStart).Scan(&out); err != nil {
			return err
		}
		var plans []struct{ Plan planNode }
		if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
			t.Fatalf("plan %s: %v", out, err)
		}
		p := plans[0].Plan
		if indexes := p.indexes(); len(indexes) != 1 || indexes[0] != "orders_history_idx" {
			t.Errorf("the day's spend reads through %v, want orders_history_idx alone:\n%s", indexes, out)
		}
		// 864 orders of the day in a few dozen heap pages and the index's path to them.
		if pages := p.Hit + p.Read; pages > 60 {
			t.Errorf("the day's spend read %d pages of a 60-day history, want at most 60:\n%s", pages, out)
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	var spendIndexes int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = 'orders'
		AND indexdef LIKE '%(account_id, currency, created_at)%'`).Scan(&spendIndexes); err != nil {
		t.Fatal(err)
	}
	if spendIndexes != 0 {
		t.Errorf("orders has %d indexes on (account_id, currency, created_at), which the spend sum does not need",
			spendIndexes)
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
