package configdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/codeport/codeport/internal/store"
)

// unchangedRow runs query, which selects the id of a row only when it already holds the values
// to be written, into id. Upserts ask first, because even an INSERT … ON CONFLICT DO UPDATE
// whose WHERE skips the update locks the row it conflicts with.
func unchangedRow(tx *gorm.DB, id *uuid.UUID, query string, args ...any) (bool, error) {
	var ids []uuid.UUID
	if err := tx.Raw(query, args...).Scan(&ids).Error; err != nil {
		return false, err
	}
	if len(ids) == 0 {
		return false, nil
	}
	*id = ids[0]
	return true, nil
}

// DeleteCatalog retires a catalog; partners bound to it then see an empty catalog.
func DeleteCatalog(ctx context.Context, db *gorm.DB, namespace, name string) error {
	now := time.Now()
	err := db.WithContext(ctx).Exec(`UPDATE catalogs SET deleted_at = ?, updated_at = ?
		WHERE namespace = ? AND name = ? AND deleted_at IS NULL`, now, now, namespace, name).Error
	if err != nil {
		return fmt.Errorf("delete catalog %s/%s: %w", namespace, name, err)
	}
	return nil
}

// CatalogID returns the id of a live catalog.
func CatalogID(ctx context.Context, db *gorm.DB, namespace, name string) (uuid.UUID, error) {
	var ids []uuid.UUID
	err := db.WithContext(ctx).Raw(`SELECT id FROM catalogs WHERE namespace = ? AND name = ? AND deleted_at IS NULL`,
		namespace, name).Scan(&ids).Error
	if err != nil {
		return uuid.Nil, fmt.Errorf("find catalog %s/%s: %w", namespace, name, err)
	}
	if len(ids) == 0 {
		return uuid.Nil, store.ErrNotFound
	}
	return ids[0], nil
}

// BoundCatalog returns the id and name of the live catalog a live partner is bound to now, or
// store.ErrNotFound when it is bound to none.
func BoundCatalog(ctx context.Context, db *gorm.DB, namespace, partner string) (uuid.UUID, string, error) {
	var rows []struct {
		ID   uuid.UUID
		Name string
	}
	err := db.WithContext(ctx).Raw(`SELECT c.id, c.name FROM partners p JOIN catalogs c ON c.id = p.catalog_id
		WHERE p.namespace = ? AND p.name = ? AND p.deleted_at IS NULL AND c.deleted_at IS NULL`,
		namespace, partner).Scan(&rows).Error
	if err != nil {
		return uuid.Nil, "", fmt.Errorf("find the catalog of partner %s/%s: %w", namespace, partner, err)
	}
	if len(rows) == 0 {
		return uuid.Nil, "", store.ErrNotFound
	}
	return rows[0].ID, rows[0].Name, nil
}

// UpsertPartner creates or updates a partner by (namespace, name), reviving a deleted one. A
// partner already as given is not written.
func UpsertPartner(tx *gorm.DB, p *Partner) error {
	same, err := unchangedRow(tx, &p.ID, `SELECT id FROM partners WHERE namespace = ? AND name = ?
		AND (display_name, contact_email, catalog_id, suspended, deleted_at)
		    IS NOT DISTINCT FROM (?, ?, ?::uuid, ?, NULL::timestamptz)`,
		p.Namespace, p.Name, p.DisplayName, p.ContactEmail, p.CatalogID, p.Suspended)
	if err != nil {
		return fmt.Errorf("read partner %s/%s: %w", p.Namespace, p.Name, err)
	}
	if same {
		return nil
	}
	err = tx.Raw(`WITH up AS (
		INSERT INTO partners (namespace, name, display_name, contact_email, catalog_id, suspended)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (namespace, name) DO UPDATE SET display_name = EXCLUDED.display_name,
			contact_email = EXCLUDED.contact_email, catalog_id = EXCLUDED.catalog_id, suspended = EXCLUDED.suspended,
			updated_at = now(), deleted_at = NULL
		WHERE (partners.display_name, partners.contact_email, partners.catalog_id, partners.suspended, partners.deleted_at)
		      IS DISTINCT FROM (EXCLUDED.display_name, EXCLUDED.contact_email, EXCLUDED.catalog_id, EXCLUDED.suspended,
		       NULL::timestamptz)
		RETURNING id)
		SELECT id FROM up UNION ALL SELECT id FROM partners WHERE namespace = ? AND name = ? LIMIT 1`,
		p.Namespace, p.Name, p.DisplayName, p.ContactEmail, p.CatalogID, p.Suspended, p.Namespace, p.Name).Row().Scan(&p.ID)
	if err != nil {
		return fmt.Errorf("upsert partner %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// UpsertAccount creates or updates the account of a partner's environment; an account already
// as given is not written. The wallet threshold is owned by the Wallet resource and left alone.
func UpsertAccount(tx *gorm.DB, a *Account) error {
	same, err := unchangedRow(tx, &a.ID, `SELECT id FROM accounts WHERE partner_id = ? AND environment = ?
		AND (ip_whitelist, rate_limit_per_minute, ordering_enabled, wallet_enabled, max_quantity_per_order,
		     daily_spend_limits, suspended)
		    IS NOT DISTINCT FROM (?::cidr[], ?, ?, ?, ?::integer, ?::jsonb, ?)`,
		a.PartnerID, a.Environment, a.IPWhitelist, a.RateLimitPerMinute, a.OrderingEnabled, a.WalletEnabled,
		a.MaxQuantityPerOrder, a.DailySpendLimits, a.Suspended)
	if err != nil {
		return fmt.Errorf("read %s account: %w", a.Environment, err)
	}
	if same {
		return nil
	}
	err = tx.Raw(`WITH up AS (
		INSERT INTO accounts (partner_id, environment, ip_whitelist, rate_limit_per_minute, ordering_enabled,
			wallet_enabled, max_quantity_per_order, daily_spend_limits, suspended)
		VALUES (?, ?, ?::cidr[], ?, ?, ?, ?, ?, ?)
		ON CONFLICT (partner_id, environment) DO UPDATE SET ip_whitelist = EXCLUDED.ip_whitelist,
			rate_limit_per_minute = EXCLUDED.rate_limit_per_minute, ordering_enabled = EXCLUDED.ordering_enabled,
			wallet_enabled = EXCLUDED.wallet_enabled, max_quantity_per_order = EXCLUDED.max_quantity_per_order,
			daily_spend_limits = EXCLUDED.daily_spend_limits, suspended = EXCLUDED.suspended, updated_at = now()
		WHERE (accounts.ip_whitelist, accounts.rate_limit_per_minute, accounts.ordering_enabled, accounts.wallet_enabled,
		       accounts.max_quantity_per_order, accounts.daily_spend_limits, accounts.suspended)
		      IS DISTINCT FROM (EXCLUDED.ip_whitelist, EXCLUDED.rate_limit_per_minute, EXCLUDED.ordering_enabled,
		       EXCLUDED.wallet_enabled, EXCLUDED.max_quantity_per_order, EXCLUDED.daily_spend_limits, EXCLUDED.suspended)
		RETURNING id)
		SELECT id FROM up UNION ALL SELECT id FROM accounts WHERE partner_id = ? AND environment = ? LIMIT 1`,
		a.PartnerID, a.Environment, a.IPWhitelist, a.RateLimitPerMinute, a.OrderingEnabled,
		a.WalletEnabled, a.MaxQuantityPerOrder, a.DailySpendLimits, a.Suspended, a.PartnerID, a.Environment).Row().Scan(&a.ID)
	if err != nil {
		return fmt.Errorf("upsert %s account: %w", a.Environment, err)
	}
	return nil
}

// RetirePartner marks a partner deleted, suspends its accounts and revokes its keys. Orders and
// the ledger stay.
func RetirePartner(ctx context.Context, db *gorm.DB, namespace, name string) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var p Partner
		err := tx.Where("namespace = ? AND name = ?", namespace, name).Take(&p).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find partner %s/%s: %w", namespace, name, err)
		}
		err = tx.Exec(`UPDATE accounts SET suspended = true, updated_at = now() WHERE partner_id = ?`, p.ID).Error
		if err != nil {
			return fmt.Errorf("suspend accounts: %w", err)
		}
		if err := tx.Exec(`UPDATE api_keys SET revoked_at = now() WHERE revoked_at IS NULL AND account_id IN
			(SELECT id FROM accounts WHERE partner_id = ?)`, p.ID).Error; err != nil {
			return fmt.Errorf("revoke keys: %w", err)
		}
		if err := tx.Exec(`UPDATE webhook_endpoints SET enabled = false WHERE partner_id = ?`, p.ID).Error; err != nil {
			return fmt.Errorf("disable webhooks: %w", err)
		}
		return tx.Exec(`UPDATE partners SET deleted_at = now(), updated_at = now() WHERE id = ?`, p.ID).Error
	})
}

// WebhookEndpoints returns a partner's endpoints by environment.
func WebhookEndpoints(tx *gorm.DB, partnerID uuid.UUID) (map[string]WebhookEndpoint, error) {
	var rows []WebhookEndpoint
	if err := tx.Where("partner_id = ?", partnerID).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read webhooks: %w", err)
	}
	out := make(map[string]WebhookEndpoint, len(rows))
	for _, r := range rows {
		out[r.Environment] = r
	}
	return out, nil
}

// UpsertWebhook stores where a partner's events of an environment go; a nil endpoint removes
// it. An endpoint already as given is not written.
func UpsertWebhook(tx *gorm.DB, partnerID uuid.UUID, environment string, w *WebhookEndpoint) error {
	if w == nil {
		err := tx.Where("partner_id = ? AND environment = ?", partnerID, environment).Delete(&WebhookEndpoint{}).Error
		if err != nil {
			return fmt.Errorf("remove %s webhook: %w", environment, err)
		}
		return nil
	}
	w.PartnerID, w.Environment = partnerID, environment
	err := tx.Exec(`INSERT INTO webhook_endpoints (partner_id, environment, url, sealed_secret, secret_key_ref,
			event_types, enabled)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (partner_id, environment) DO UPDATE SET url = EXCLUDED.url, sealed_secret = EXCLUDED.sealed_secret,
			secret_key_ref = EXCLUDED.secret_key_ref, event_types = EXCLUDED.event_types, enabled = EXCLUDED.enabled,
			updated_at = now()
		WHERE (webhook_endpoints.url, webhook_endpoints.sealed_secret, webhook_endpoints.secret_key_ref,
		       webhook_endpoints.event_types, webhook_endpoints.enabled)
		      IS DISTINCT FROM (EXCLUDED.url, EXCLUDED.sealed_secret, EXCLUDED.secret_key_ref, EXCLUDED.event_types,
		       EXCLUDED.enabled)`,
		partnerID, environment, w.URL, w.SealedSecret, w.SecretKeyRef, w.EventTypes, w.Enabled).Error
	if err != nil {
		return fmt.Errorf("upsert %s webhook: %w", environment, err)
	}
	return nil
}

// InsertKey registers a key digest for an account; registering the same digest again is a
// no-op. inserted reports whether the row is new.
func InsertKey(tx *gorm.DB, k *APIKey) (inserted bool, err error) {
	res := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "digest"}}, DoNothing: true}).Create(k)
	if res.Error != nil {
		return false, fmt.Errorf("register key: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// RevokeKeysOf revokes every active key issued by source except the one with digest keep (nil
// revokes all). It returns how many were revoked.
func RevokeKeysOf(tx *gorm.DB, source string, keep []byte) (int64, error) {
	q := tx.Model(&APIKey{}).Where("source = ? AND revoked_at IS NULL", source)
	if keep != nil {
		q = q.Where("digest <> ?", keep)
	}
	res := q.Update("revoked_at", time.Now())
	if res.Error != nil {
		return 0, fmt.Errorf("revoke keys of %s: %w", source, res.Error)
	}
	return res.RowsAffected, nil
}

// ExpireKeysOf gives the keys of source that are active without an end, except the one with
// digest keep, until now + grace (the database's clock, which the API checks against), and
// revokes at once any key of source still in an earlier grace period: only the key a rotation
// replaces overlaps with its successor. It returns the end given.
func ExpireKeysOf(tx *gorm.DB, source string, keep []byte, grace time.Duration) (time.Time, error) {
	var until time.Time
	err := tx.Raw(`SELECT now() + make_interval(secs => ?)`, grace.Seconds()).Scan(&until).Error
	if err != nil {
		return time.Time{}, fmt.Errorf("expire keys of %s: %w", source, err)
	}
	err = tx.Exec(`UPDATE api_keys SET revoked_at = now()
		WHERE source = ? AND revoked_at IS NULL AND expires_at IS NOT NULL AND digest <> ?`, source, keep).Error
	if err != nil {
		return time.Time{}, fmt.Errorf("revoke keys of %s in an earlier grace period: %w", source, err)
	}
	err = tx.Exec(`UPDATE api_keys SET expires_at = ?
		WHERE source = ? AND revoked_at IS NULL AND expires_at IS NULL AND digest <> ?`, until, source, keep).Error
	if err != nil {
		return time.Time{}, fmt.Errorf("expire keys of %s: %w", source, err)
	}
	return until, nil
}

// ExpiringKey is a key of a source that still works until ExpiresAt.
type ExpiringKey struct {
	KeyPrefix string
	ExpiresAt time.Time
	// Expired: ExpiresAt has passed by the database's clock; the API already refuses the key.
	Expired bool
}

// ExpiringKeyOf returns the key of source in a grace period, if any (the one ending last).
func ExpiringKeyOf(ctx context.Context, db *gorm.DB, source string) (ExpiringKey, bool, error) {
	var rows []ExpiringKey
	err := db.WithContext(ctx).Raw(`SELECT key_prefix, expires_at, expires_at <= now() AS expired FROM api_keys
		WHERE source = ? AND revoked_at IS NULL AND expires_at IS NOT NULL
		ORDER BY expires_at DESC LIMIT 1`, source).Scan(&rows).Error
	if err != nil {
		return ExpiringKey{}, false, fmt.Errorf("look up the previous key of %s: %w", source, err)
	}
	if len(rows) == 0 {
		return ExpiringKey{}, false, nil
	}
	return rows[0], true, nil
}

// RevokeExpiredKeysOf marks the keys of source whose grace period has ended as revoked then.
func RevokeExpiredKeysOf(ctx context.Context, db *gorm.DB, source string) (int64, error) {
	res := db.WithContext(ctx).Exec(`UPDATE api_keys SET revoked_at = expires_at
		WHERE source = ? AND revoked_at IS NULL AND expires_at <= now()`, source)
	if res.Error != nil {
		return 0, fmt.Errorf("revoke expired keys of %s: %w", source, res.Error)
	}
	return res.RowsAffected, nil
}

// KeyStatus is what the database records of a key digest.
type KeyStatus struct {
	// Exists: the digest is registered.
	Exists bool
	// Active: neither revoked nor past the end of a grace period.
	Active bool
	// Source is the issuing resource ("namespace/name") the key is registered to.
	Source string
}

// KeyState reports, in one query, whether a digest is registered, whether it is active, and
// which source it is registered to.
func KeyState(ctx context.Context, db *gorm.DB, digest []byte) (KeyStatus, error) {
	var rows []struct {
		Active bool
		Source string
	}
	err := db.WithContext(ctx).Raw(`SELECT revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) AS active,
			source
		FROM api_keys WHERE digest = ?`, digest).Scan(&rows).Error
	if err != nil {
		return KeyStatus{}, fmt.Errorf("look up key: %w", err)
	}
	if len(rows) == 0 {
		return KeyStatus{}, nil
	}
	return KeyStatus{Exists: true, Active: rows[0].Active, Source: rows[0].Source}, nil
}
