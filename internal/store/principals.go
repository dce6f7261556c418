package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// KeyPrincipal is what a live key of an environment grants: the key, its account and partner,
// as auth.Directory caches them. Columns come as stored; auth parses them.
type KeyPrincipal struct {
	KeyID   uuid.UUID
	KeyKind string
	// ExpiresAt is set while the key is in a rotation's grace period.
	ExpiresAt           *time.Time
	AccountID           uuid.UUID
	PartnerID           uuid.UUID
	Partner             string // namespace/name
	ContactEmail        string
	Environment         string
	CatalogID           *uuid.UUID
	IPWhitelist         []string
	RateLimitPerMinute  int
	OrderingEnabled     bool
	WalletEnabled       bool
	MaxQuantityPerOrder *int32
	// DailySpendLimits is the stored JSON object, currency to minor units.
	DailySpendLimits    []byte
	LowBalanceThreshold string
	// Suspended is the account's or the partner's suspension.
	Suspended bool
}

// LookupKey returns the principal of the unrevoked, unexpired key with digest in environment,
// of a partner not deleted, or ErrNotFound.
func LookupKey(ctx context.Context, q Querier, digest []byte, environment string) (KeyPrincipal, error) {
	var p KeyPrincipal
	err := q.QueryRow(ctx, `
SELECT k.id, k.kind, k.expires_at, a.id, a.partner_id, p.namespace || '/' || p.name, p.contact_email, a.environment,
       p.catalog_id, a.ip_whitelist::text[], a.rate_limit_per_minute, a.ordering_enabled, a.wallet_enabled,
       a.max_quantity_per_order, a.daily_spend_limits, a.low_balance_threshold::text, a.suspended OR p.suspended
FROM api_keys k
JOIN accounts a ON a.id = k.account_id
JOIN partners p ON p.id = a.partner_id
WHERE k.digest = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())
  AND p.deleted_at IS NULL AND a.environment = $2`, digest, environment).Scan(
		&p.KeyID, &p.KeyKind, &p.ExpiresAt, &p.AccountID, &p.PartnerID, &p.Partner, &p.ContactEmail, &p.Environment,
		&p.CatalogID, &p.IPWhitelist, &p.RateLimitPerMinute, &p.OrderingEnabled, &p.WalletEnabled,
		&p.MaxQuantityPerOrder, &p.DailySpendLimits, &p.LowBalanceThreshold, &p.Suspended)
	if errors.Is(err, pgx.ErrNoRows) {
		return KeyPrincipal{}, ErrNotFound
	}
	if err != nil {
		return KeyPrincipal{}, fmt.Errorf("look up key: %w", err)
	}
	return p, nil
}

// ProductCatalogued reports whether a catalog not deleted lists the product.
func ProductCatalogued(ctx context.Context, q Querier, productCode string) (bool, error) {
	var listed bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM catalog_products p JOIN catalogs c ON c.id = p.catalog_id
		WHERE p.product_code = $1 AND c.deleted_at IS NULL)`, productCode).Scan(&listed)
	if err != nil {
		return false, fmt.Errorf("look up product %s in the catalogs: %w", productCode, err)
	}
	return listed, nil
}
