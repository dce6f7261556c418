package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// AccountOf returns the account of a live partner's environment, or ErrNotFound.
func AccountOf(ctx context.Context, q Querier, namespace, name, environment string) (Account, error) {
	return accountOf(ctx, q, namespace, name, environment, false)
}

// RetainedAccountOf is AccountOf for a deleted partner too: partners are never hard-deleted, and
// their accounts keep the orders and the ledger, which stay readable.
func RetainedAccountOf(ctx context.Context, q Querier, namespace, name, environment string) (Account, error) {
	return accountOf(ctx, q, namespace, name, environment, true)
}

func accountOf(ctx context.Context, q Querier, namespace, name, environment string, retired bool) (Account, error) {
	var a Account
	// The named column types scan through database/sql's interface, which pgx feeds binary
	// arrays; their underlying types scan natively.
	err := q.QueryRow(ctx, `SELECT a.id, a.partner_id, a.environment, a.ip_whitelist::text[], a.rate_limit_per_minute,
			a.ordering_enabled, a.wallet_enabled, a.max_quantity_per_order, a.daily_spend_limits,
			a.low_balance_threshold::text, a.suspended, a.created_at, a.updated_at
		FROM accounts a JOIN partners p ON p.id = a.partner_id
		WHERE p.namespace = $1 AND p.name = $2 AND (p.deleted_at IS NULL OR $4) AND a.environment = $3`,
		namespace, name, environment, retired).Scan(&a.ID, &a.PartnerID, &a.Environment, (*[]string)(&a.IPWhitelist),
		&a.RateLimitPerMinute, &a.OrderingEnabled, &a.WalletEnabled, &a.MaxQuantityPerOrder,
		(*map[string]any)(&a.DailySpendLimits), &a.LowBalanceThreshold, &a.Suspended, &a.CreatedAt, &a.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Account{}, ErrNotFound
	}
	if err != nil {
		return Account{}, fmt.Errorf("find %s account of %s/%s: %w", environment, namespace, name, err)
	}
	return a, nil
}
