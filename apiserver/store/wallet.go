package store

import (
	"context"
	"fmt"
	"sort"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// SetLowBalanceThreshold sets an account's threshold (major units) and re-evaluates the low
// flags of its balances without raising alerts: a changed threshold is not a crossing. It takes
// its locks in the ledger's lock order (see the ledger's package documentation): the account's
// balances first, then the account row, which it only updates (FOR NO KEY UPDATE, compatible
// with the KEY SHARE of placements' foreign-key checks). Rows whose values would not change are
// not written. It reports whether anything was written.
func SetLowBalanceThreshold(
	tx *gorm.DB, accountID uuid.UUID, threshold string, scales map[string]int64,
) (bool, error) {
	err := tx.Exec(`SELECT 1 FROM wallet_balances WHERE account_id = ? ORDER BY currency FOR UPDATE`, accountID).Error
	if err != nil {
		return false, fmt.Errorf("lock wallet balances: %w", err)
	}
	res := tx.Exec(`UPDATE accounts SET low_balance_threshold = ?::numeric, updated_at = now()
		WHERE id = ? AND low_balance_threshold IS DISTINCT FROM ?::numeric`, threshold, accountID, threshold)
	if res.Error != nil {
		return false, fmt.Errorf("set low-balance threshold: %w", res.Error)
	}
	written := res.RowsAffected > 0
	currencies := make([]string, 0, len(scales))
	for currency := range scales {
		currencies = append(currencies, currency)
	}
	sort.Strings(currencies)
	for _, currency := range currencies {
		res := tx.Exec(`UPDATE wallet_balances b SET low_balance = b.balance < ceil(a.low_balance_threshold * ?::numeric)
			FROM accounts a WHERE a.id = b.account_id AND b.account_id = ? AND b.currency = ?
			AND b.low_balance IS DISTINCT FROM (b.balance < ceil(a.low_balance_threshold * ?::numeric))`,
			scales[currency], accountID, currency, scales[currency])
		if res.Error != nil {
			return false, fmt.Errorf("refresh low-balance flag: %w", res.Error)
		}
		written = written || res.RowsAffected > 0
	}
	return written, nil
}

// TopUpReferences returns the references of an account's applied top-ups.
func TopUpReferences(ctx context.Context, db *gorm.DB, accountID uuid.UUID) ([]string, error) {
	var refs []string
	err := db.WithContext(ctx).Model(&WalletEntry{}).Where("account_id = ? AND kind = ?", accountID, EntryTopUp).
		Order("id").Pluck("reference", &refs).Error
	if err != nil {
		return nil, fmt.Errorf("list top-ups: %w", err)
	}
	return refs, nil
}

// Owner names the partner environment an account belongs to.
type Owner struct {
	Namespace, Partner, Environment string
}

// AccountOwner returns who owns an account.
func AccountOwner(ctx context.Context, db *gorm.DB, accountID string) (Owner, error) {
	var o Owner
	err := db.WithContext(ctx).Raw(`SELECT p.namespace, p.name AS partner, a.environment FROM accounts a
		JOIN partners p ON p.id = a.partner_id WHERE a.id = ?`, accountID).Scan(&o).Error
	if err != nil {
		return Owner{}, fmt.Errorf("find owner of account %s: %w", accountID, err)
	}
	if o.Namespace == "" {
		return Owner{}, ErrNotFound
	}
	return o, nil
}

// LedgerHead is the id of the newest ledger entry (0 when there is none).
func LedgerHead(ctx context.Context, db *gorm.DB) (int64, error) {
	var head int64
	if err := db.WithContext(ctx).Raw(`SELECT coalesce(max(id), 0) FROM wallet_entries`).Scan(&head).Error; err != nil {
		return 0, fmt.Errorf("read ledger head: %w", err)
	}
	return head, nil
}

// LedgerAccountsAfter returns the accounts with ledger entries whose id is above after, each
// with its highest such id. It reads the primary key's index from after on.
func LedgerAccountsAfter(ctx context.Context, db *gorm.DB, after int64) (map[string]int64, error) {
	var rows []struct {
		AccountID string
		Last      int64
	}
	err := db.WithContext(ctx).Raw(`SELECT account_id::text AS account_id, max(id) AS last FROM wallet_entries
		WHERE id > ? GROUP BY account_id`, after).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read ledger after entry %d: %w", after, err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.AccountID] = r.Last
	}
	return out, nil
}
