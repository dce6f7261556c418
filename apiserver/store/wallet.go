package store

import (
	"context"
	"fmt"
	"sort"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// SetLowBalanceThreshold sets an account's threshold (major units) and re-evaluates the low
// flags of its balances without raising alerts: a changed threshold is not a crossing.
func SetLowBalanceThreshold(tx *gorm.DB, accountID uuid.UUID, threshold string, scales map[string]int64) error {
	// Concurrent calls for one account (operator replicas) serialise on the account row, and
	// balances are touched in currency order, so they cannot deadlock each other.
	if err := tx.Exec(`SELECT 1 FROM accounts WHERE id = ? FOR UPDATE`, accountID).Error; err != nil {
		return fmt.Errorf("lock account: %w", err)
	}
	if err := tx.Exec(`UPDATE accounts SET low_balance_threshold = ?::numeric, updated_at = now() WHERE id = ? AND low_balance_threshold <> ?::numeric`,
		threshold, accountID, threshold).Error; err != nil {
		return fmt.Errorf("set low-balance threshold: %w", err)
	}
	currencies := make([]string, 0, len(scales))
	for currency := range scales {
		currencies = append(currencies, currency)
	}
	sort.Strings(currencies)
	for _, currency := range currencies {
		scale := scales[currency]
		err := tx.Exec(`UPDATE wallet_balances b SET low_balance = b.balance < floor(a.low_balance_threshold * ?::numeric)
			FROM accounts a WHERE a.id = b.account_id AND b.account_id = ? AND b.currency = ?`, scale, accountID, currency).Error
		if err != nil {
			return fmt.Errorf("refresh low-balance flag: %w", err)
		}
	}
	return nil
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
