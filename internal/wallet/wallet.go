package wallet

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/store"
)

// Snapshot is the wallet as order responses show it.
type Snapshot struct {
	Balances   map[string]json.Number `json:"balances"`
	LowBalance bool                   `json:"lowBalance"`
}

// View is the GET /wallet response: the snapshot plus the configured threshold.
type View struct {
	Snapshot
	Threshold json.Number `json:"threshold"`
}

func entry(
	accountID uuid.UUID, currency, kind, reference string, amount int64, note string,
) (store.LedgerEntry, error) {
	if _, err := money.Scale(currency); err != nil {
		return store.LedgerEntry{}, fmt.Errorf("ledger entry: %w", err)
	}
	return store.LedgerEntry{AccountID: accountID, Currency: currency, Kind: kind,
		Reference: reference, Amount: amount, Note: note}, nil
}

// DebitEntry is the ledger entry taking amount (> 0 minor units) from the account's balance in
// currency for an order; applied, it fails with store.ErrInsufficientBalance, changing nothing,
// when the balance is short.
func DebitEntry(accountID uuid.UUID, currency string, amount int64, orderID string) (store.LedgerEntry, error) {
	if amount <= 0 {
		return store.LedgerEntry{}, fmt.Errorf("debit of %d: amount must be positive", amount)
	}
	return entry(accountID, currency, store.EntryOrderDebit, orderID, -amount, "")
}

// Credit adds amount (> 0 minor units) to the account's balance in the transaction q as a
// top-up, refund or adjustment. It is idempotent on (account, kind, reference): a second call
// changes nothing and reports Applied false.
func Credit(
	ctx context.Context, q store.Querier, accountID uuid.UUID, currency, kind string, amount int64,
	reference, note string,
) (store.LedgerResult, error) {
	if amount <= 0 {
		return store.LedgerResult{}, fmt.Errorf("credit of %d: amount must be positive", amount)
	}
	e, err := entry(accountID, currency, kind, reference, amount, note)
	if err != nil {
		return store.LedgerResult{}, err
	}
	return store.ApplyLedgerEntry(ctx, q, e)
}

// Read returns the account's wallet. lowBalance is computed against the threshold in force now,
// so a changed threshold shows at once.
func Read(ctx context.Context, q store.Querier, accountID uuid.UUID, threshold string) (View, error) {
	balances, err := store.Balances(ctx, q, accountID)
	if err != nil {
		return View{}, err
	}
	snapshot, err := SnapshotOf(balances, threshold)
	if err != nil {
		return View{}, err
	}
	return View{Snapshot: snapshot, Threshold: FormatThreshold(threshold)}, nil
}

// SnapshotOf renders balances as order responses show them, lowBalance judged against threshold.
func SnapshotOf(balances []store.Balance, threshold string) (Snapshot, error) {
	s := Snapshot{Balances: make(map[string]json.Number, len(balances))}
	for _, b := range balances {
		n, err := money.Number(b.Balance, b.Currency)
		if err != nil {
			return Snapshot{}, fmt.Errorf("render balance: %w", err)
		}
		s.Balances[b.Currency] = n
		if money.IsLow(b.Balance, money.LowBalanceLimit(threshold, b.Currency)) {
			s.LowBalance = true
		}
	}
	return s, nil
}

// FormatThreshold renders a stored threshold ("100.000000") as the JSON number partners see (100).
func FormatThreshold(threshold string) json.Number { return json.Number(money.TrimDecimal(threshold)) }
