package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Gauges is the state the metrics report at scrape time.
type Gauges struct {
	Queues   []QueueGauge
	Stock    []StockGauge
	Balances []BalanceGauge
}

// QueueGauge is the backlog of one job queue.
type QueueGauge struct {
	Queue            string
	Jobs             int64
	OldestAgeSeconds float64
}

// StockGauge is the number of undelivered codes of a product.
type StockGauge struct {
	ProductCode string
	Codes       int64
}

// BalanceGauge is one balance of a live partner's wallet.
type BalanceGauge struct {
	Partner, Environment, Currency string
	Balance                        int64
	LowBalance                     bool
}

// ReadGauges reads queue depths, code stock and wallet balances.
func ReadGauges(ctx context.Context, q Querier) (Gauges, error) {
	var g Gauges
	var err error
	g.Queues, err = collect[QueueGauge](ctx, q, `SELECT queue, count(*),
			COALESCE(EXTRACT(EPOCH FROM now() - min(scheduled_at) FILTER (WHERE scheduled_at <= now())), 0)::float8
		FROM river_job WHERE state IN ('available', 'retryable', 'scheduled') GROUP BY queue`)
	if err != nil {
		return Gauges{}, fmt.Errorf("queue gauges: %w", err)
	}
	// A product whose every code has been delivered has no row left in code_stock; stock_products
	// keeps it reported, at 0. code_stock holds the products older binaries imported.
	g.Stock, err = collect[StockGauge](ctx, q, `SELECT p.product_code, count(s.product_code)
		FROM (SELECT product_code FROM stock_products UNION SELECT product_code FROM code_stock) p
		LEFT JOIN code_stock s ON s.product_code = p.product_code AND s.order_id IS NULL
		GROUP BY p.product_code`)
	if err != nil {
		return Gauges{}, fmt.Errorf("stock gauges: %w", err)
	}
	g.Balances, err = collect[BalanceGauge](ctx, q, `SELECT p.namespace || '/' || p.name, a.environment, b.currency,
			b.balance, b.low_balance
		FROM wallet_balances b JOIN accounts a ON a.id = b.account_id JOIN partners p ON p.id = a.partner_id
		WHERE p.deleted_at IS NULL`)
	if err != nil {
		return Gauges{}, fmt.Errorf("wallet gauges: %w", err)
	}
	return g, nil
}

// collect runs query and scans its rows, column by column, into Ts.
func collect[T any](ctx context.Context, q Querier, query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[T])
}
