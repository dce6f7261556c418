package store

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// ErrInsufficientBalance is returned when an entry would take a balance below zero.
var ErrInsufficientBalance = errors.New("insufficient balance")

// LedgerEntry is one change of a wallet balance. Amount is signed minor units: positive for
// top-ups and refunds, negative for order debits.
type LedgerEntry struct {
	AccountID uuid.UUID
	Currency  string
	// Scale is 10^digits of the currency, to turn the account's threshold (major units) into
	// minor units inside the database.
	Scale     int64
	Kind      string
	Reference string
	Amount    int64
	Note      string
}

// LedgerResult says what an entry did.
type LedgerResult struct {
	// Applied is false when an entry with the same (account, kind, reference) already existed;
	// nothing changed then.
	Applied      bool
	BalanceAfter int64
	// WasLow and IsLow are the balance's low flag before and after the entry.
	WasLow bool
	IsLow  bool
	// Threshold is the account's low-balance threshold in minor units (0 when none).
	Threshold int64
}

// CrossedBelow reports whether the entry took the balance below its threshold, which is when
// low-balance alerts fire (once per crossing).
func (r LedgerResult) CrossedBelow() bool { return r.Applied && !r.WasLow && r.IsLow }

const lockBalanceSQL = `
SELECT b.balance, b.low_balance, COALESCE(floor(a.low_balance_threshold * ?::numeric), 0)::bigint
FROM wallet_balances b JOIN accounts a ON a.id = b.account_id
WHERE b.account_id = ? AND b.currency = ?
FOR UPDATE OF b`

const writeEntrySQL = `
WITH updated AS (
    UPDATE wallet_balances SET balance = ?, low_balance = ?, updated_at = now()
    WHERE account_id = ? AND currency = ?
    RETURNING balance
)
INSERT INTO wallet_entries (account_id, currency, kind, reference, amount, balance_after, note)
SELECT ?, ?, ?, ?, ?, balance, ? FROM updated`

// ApplyLedgerEntry changes a balance and appends its ledger entry, in tx, exactly once per
// (account, kind, reference). The balance row is locked first, so concurrent entries of one
// wallet serialise and a concurrent duplicate sees the committed entry and does nothing.
func ApplyLedgerEntry(tx *gorm.DB, e LedgerEntry) (LedgerResult, error) {
	if e.Amount == 0 {
		return LedgerResult{}, errors.New("ledger entry of zero amount")
	}
	if e.Amount > 0 {
		err := tx.Exec(`INSERT INTO wallet_balances (account_id, currency) VALUES (?, ?) ON CONFLICT DO NOTHING`,
			e.AccountID, e.Currency).Error
		if err != nil {
			return LedgerResult{}, fmt.Errorf("ensure wallet balance %s: %w", e.Currency, err)
		}
	}
	var current struct {
		Balance    int64
		LowBalance bool
		Threshold  int64
	}
	res := tx.Raw(lockBalanceSQL, e.Scale, e.AccountID, e.Currency).Row()
	if err := res.Scan(&current.Balance, &current.LowBalance, &current.Threshold); err != nil {
		if errors.Is(err, sql.ErrNoRows) && e.Amount < 0 {
			return LedgerResult{}, ErrInsufficientBalance
		}
		return LedgerResult{}, fmt.Errorf("lock wallet balance %s: %w", e.Currency, err)
	}
	out := LedgerResult{BalanceAfter: current.Balance, WasLow: current.LowBalance, IsLow: current.LowBalance, Threshold: current.Threshold}
	if e.Amount > 0 {
		var exists bool
		err := tx.Raw(`SELECT EXISTS (SELECT 1 FROM wallet_entries WHERE account_id = ? AND kind = ? AND reference = ?)`,
			e.AccountID, e.Kind, e.Reference).Row().Scan(&exists)
		if err != nil {
			return LedgerResult{}, fmt.Errorf("check ledger reference: %w", err)
		}
		if exists {
			return out, nil
		}
	}
	if (e.Amount > 0 && current.Balance > math.MaxInt64-e.Amount) || (e.Amount < 0 && current.Balance < -e.Amount) {
		if e.Amount < 0 {
			return out, ErrInsufficientBalance
		}
		return out, fmt.Errorf("wallet balance %s would overflow", e.Currency)
	}
	after := current.Balance + e.Amount
	isLow := current.Threshold > 0 && after < current.Threshold
	err := tx.Exec(writeEntrySQL, after, isLow, e.AccountID, e.Currency,
		e.AccountID, e.Currency, e.Kind, e.Reference, e.Amount, e.Note).Error
	if err != nil {
		return out, fmt.Errorf("write ledger entry: %w", err)
	}
	return LedgerResult{Applied: true, BalanceAfter: after, WasLow: current.LowBalance, IsLow: isLow, Threshold: current.Threshold}, nil
}

// Balance is one currency of a wallet.
type Balance struct {
	Currency   string
	Balance    int64
	LowBalance bool
	UpdatedAt  time.Time
}

// Balances returns an account's balances ordered by currency.
func Balances(db *gorm.DB, accountID uuid.UUID) ([]Balance, error) {
	var out []Balance
	err := db.Raw(`SELECT currency, balance, low_balance, updated_at FROM wallet_balances WHERE account_id = ? ORDER BY currency`,
		accountID).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read wallet balances: %w", err)
	}
	return out, nil
}

// LedgerSum returns the sum of an account's ledger entries per currency; it always equals the
// balances, and tests and audits check that it does.
func LedgerSum(db *gorm.DB, accountID uuid.UUID) (map[string]int64, error) {
	var rows []struct {
		Currency string
		Total    int64
	}
	err := db.Raw(`SELECT currency, sum(amount)::bigint AS total FROM wallet_entries WHERE account_id = ? GROUP BY currency`,
		accountID).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("sum ledger: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Currency] = r.Total
	}
	return out, nil
}
