package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Gauges is the state the metrics report at scrape time.
type Gauges struct {
	Queues []struct {
		Queue            string
		Jobs             int64
		OldestAgeSeconds float64
	}
	Stock []struct {
		ProductCode string
		Codes       int64
	}
	Balances []struct {
		Partner, Environment, Currency string
		Balance                        int64
		LowBalance                     bool
	}
}

// ReadGauges reads queue depths, code stock and wallet balances.
func ReadGauges(ctx context.Context, db *gorm.DB) (Gauges, error) {
	var g Gauges
	db = db.WithContext(ctx)
	if err := db.Raw(`SELECT queue, count(*) AS jobs,
			COALESCE(EXTRACT(EPOCH FROM now() - min(scheduled_at) FILTER (WHERE scheduled_at <= now())), 0)::float8
				AS oldest_age_seconds
		FROM river_job WHERE state IN ('available', 'retryable', 'scheduled') GROUP BY queue`).
		Scan(&g.Queues).Error; err != nil {
		return Gauges{}, fmt.Errorf("queue gauges: %w", err)
	}
	if err := db.Raw(`SELECT product_code, count(*) FILTER (WHERE order_id IS NULL) AS codes
		FROM code_stock GROUP BY product_code`).Scan(&g.Stock).Error; err != nil {
		return Gauges{}, fmt.Errorf("stock gauges: %w", err)
	}
	if err := db.Raw(`SELECT p.namespace || '/' || p.name AS partner, a.environment, b.currency, b.balance, b.low_balance
		FROM wallet_balances b JOIN accounts a ON a.id = b.account_id JOIN partners p ON p.id = a.partner_id
		WHERE p.deleted_at IS NULL`).Scan(&g.Balances).Error; err != nil {
		return Gauges{}, fmt.Errorf("wallet gauges: %w", err)
	}
	return g, nil
}
