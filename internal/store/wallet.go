package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/tenancy"
)

// SetLowBalanceThreshold sets an account's threshold (decimal major units) and re-evaluates the
// low flags of its balances by money.IsLow, in the transaction q, without raising alerts: a
// changed threshold is not a crossing. It takes its locks in the ledger's lock order (see
// ledger.go): the account's balances first, then the account row, which it only updates (FOR NO
// KEY UPDATE, compatible with the KEY SHARE of placements' foreign-key checks). Rows whose values
// would not change are not written. It reports whether anything was written.
func SetLowBalanceThreshold(ctx context.Context, q Querier, accountID uuid.UUID, threshold string) (bool, error) {
	id := pgUUID(accountID)
	rows, err := q.Query(ctx, `SELECT currency, balance, low_balance FROM wallet_balances
		WHERE account_id = $1 ORDER BY currency FOR UPDATE`, id)
	if err != nil {
		return false, fmt.Errorf("lock wallet balances: %w", err)
	}
	balances, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Balance])
	if err != nil {
		return false, fmt.Errorf("lock wallet balances: %w", err)
	}
	tag, err := q.Exec(ctx, `UPDATE accounts SET low_balance_threshold = $1::numeric, updated_at = now()
		WHERE id = $2 AND low_balance_threshold IS DISTINCT FROM $1::numeric`, threshold, id)
	if err != nil {
		return false, fmt.Errorf("set low-balance threshold: %w", err)
	}
	written := tag.RowsAffected() > 0
	for _, b := range balances {
		low := money.IsLow(b.Balance, money.LowBalanceLimit(threshold, b.Currency))
		if low == b.LowBalance {
			continue
		}
		if _, err := q.Exec(ctx, `UPDATE wallet_balances SET low_balance = $1 WHERE account_id = $2 AND currency = $3`,
			low, id, b.Currency); err != nil {
			return false, fmt.Errorf("refresh low-balance flag of %s: %w", b.Currency, err)
		}
		written = true
	}
	return written, nil
}

// TopUpEntry is an applied top-up of an account's ledger.
type TopUpEntry struct {
	Reference string
	Currency  string
	// Amount is in minor units.
	Amount    int64
	CreatedAt time.Time
	// Source is the WalletTopUp that recorded it ("WalletTopUp/<name>"), "" for a Wallet's
	// spec.topUps.
	Source string
}

const topUpEntriesSQL = `
SELECT e.reference, e.currency, e.amount, e.created_at, coalesce(s.source, '')
FROM wallet_entries e
LEFT JOIN top_up_sources s ON s.account_id = e.account_id AND s.kind = e.kind AND s.reference = e.reference
WHERE e.account_id = $1 AND e.kind = 'top_up'`

// TopUps returns an account's applied top-ups, oldest first.
func TopUps(ctx context.Context, q Querier, accountID uuid.UUID) ([]TopUpEntry, error) {
	rows, err := q.Query(ctx, topUpEntriesSQL+` ORDER BY e.id`, pgUUID(accountID))
	if err != nil {
		return nil, fmt.Errorf("list top-ups: %w", err)
	}
	entries, err := pgx.CollectRows(rows, scanTopUp)
	if err != nil {
		return nil, fmt.Errorf("list top-ups: %w", err)
	}
	return entries, nil
}

// TopUpByReference returns the account's top-up of reference, if applied.
func TopUpByReference(ctx context.Context, q Querier, accountID uuid.UUID, reference string) (
	TopUpEntry, bool, error,
) {
	rows, err := q.Query(ctx, topUpEntriesSQL+` AND e.reference = $2`, pgUUID(accountID), reference)
	if err != nil {
		return TopUpEntry{}, false, fmt.Errorf("look up top-up %s: %w", reference, err)
	}
	entries, err := pgx.CollectRows(rows, scanTopUp)
	if err != nil {
		return TopUpEntry{}, false, fmt.Errorf("look up top-up %s: %w", reference, err)
	}
	if len(entries) == 0 {
		return TopUpEntry{}, false, nil
	}
	return entries[0], true, nil
}

func scanTopUp(row pgx.CollectableRow) (TopUpEntry, error) {
	var e TopUpEntry
	err := row.Scan(&e.Reference, &e.Currency, &e.Amount, &e.CreatedAt, &e.Source)
	return e, err
}

// RecordTopUpSource notes which WalletTopUp recorded the top-up entry of reference, in the
// transaction that wrote the entry.
func RecordTopUpSource(ctx context.Context, q Querier, accountID uuid.UUID, reference, source string) error {
	_, err := q.Exec(ctx, `INSERT INTO top_up_sources (account_id, reference, source) VALUES ($1, $2, $3)`,
		pgUUID(accountID), reference, source)
	if err != nil {
		return fmt.Errorf("record source of top-up %s: %w", reference, err)
	}
	return nil
}

// AccountOwner returns who owns an account.
func AccountOwner(ctx context.Context, q Querier, accountID string) (tenancy.Owner, error) {
	var o tenancy.Owner
	err := q.QueryRow(ctx, `SELECT p.namespace, p.name, a.environment FROM accounts a
		JOIN partners p ON p.id = a.partner_id WHERE a.id = $1`, accountID).
		Scan(&o.Namespace, &o.Partner, &o.Environment)
	if errors.Is(err, pgx.ErrNoRows) {
		return tenancy.Owner{}, ErrNotFound
	}
	if err != nil {
		return tenancy.Owner{}, fmt.Errorf("find owner of account %s: %w", accountID, err)
	}
	return o, nil
}

// LedgerHead is the id of the newest ledger entry (0 when there is none).
func LedgerHead(ctx context.Context, q Querier) (int64, error) {
	var head int64
	if err := q.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM wallet_entries`).Scan(&head); err != nil {
		return 0, fmt.Errorf("read ledger head: %w", err)
	}
	return head, nil
}

// LedgerAccountsAfter returns the accounts with ledger entries whose id is above after, each
// with its highest such id. It reads the primary key's index from after on.
func LedgerAccountsAfter(ctx context.Context, q Querier, after int64) (map[string]int64, error) {
	rows, err := q.Query(ctx, `SELECT account_id::text, max(id) FROM wallet_entries
		WHERE id > $1 GROUP BY account_id`, after)
	if err != nil {
		return nil, fmt.Errorf("read ledger after entry %d: %w", after, err)
	}
	out := map[string]int64{}
	var account string
	var last int64
	if _, err := pgx.ForEachRow(rows, []any{&account, &last}, func() error {
		out[account] = last
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read ledger after entry %d: %w", after, err)
	}
	return out, nil
}

// WalletOwner is the Wallet resource (its uid and name) that manages an account's wallet.
type WalletOwner struct {
	UID, Name string
}

// ClaimWallet makes w the manager of the account's wallet unless a Wallet already is, and
// returns the manager. An account that has one is only read: reconciles of its Wallet write
// nothing.
func ClaimWallet(ctx context.Context, q Querier, accountID uuid.UUID, w WalletOwner) (WalletOwner, error) {
	owner, found, err := WalletOwnerOf(ctx, q, accountID)
	if err != nil || found {
		return owner, err
	}
	_, err = q.Exec(ctx, `INSERT INTO wallet_owners (account_id, wallet_uid, name) VALUES ($1, $2, $3)
		ON CONFLICT (account_id) DO NOTHING`, pgUUID(accountID), w.UID, w.Name)
	if err != nil {
		return WalletOwner{}, fmt.Errorf("claim wallet: %w", err)
	}
	owner, _, err = WalletOwnerOf(ctx, q, accountID)
	return owner, err
}

// ReplaceWalletOwner hands the account's wallet from a manager that no longer exists to w,
// unless another Wallet took it over meanwhile; it returns the manager.
func ReplaceWalletOwner(ctx context.Context, q Querier, accountID uuid.UUID, from, w WalletOwner) (WalletOwner, error) {
	_, err := q.Exec(ctx, `UPDATE wallet_owners SET wallet_uid = $3, name = $4, claimed_at = now()
		WHERE account_id = $1 AND wallet_uid = $2`, pgUUID(accountID), from.UID, w.UID, w.Name)
	if err != nil {
		return WalletOwner{}, fmt.Errorf("take over wallet: %w", err)
	}
	owner, _, err := WalletOwnerOf(ctx, q, accountID)
	return owner, err
}

// WalletOwnerOf returns the Wallet that manages the account's wallet, if one does.
func WalletOwnerOf(ctx context.Context, q Querier, accountID uuid.UUID) (WalletOwner, bool, error) {
	var o WalletOwner
	err := q.QueryRow(ctx, `SELECT wallet_uid, name FROM wallet_owners WHERE account_id = $1`, pgUUID(accountID)).
		Scan(&o.UID, &o.Name)
	if errors.Is(err, pgx.ErrNoRows) {
		return WalletOwner{}, false, nil
	}
	if err != nil {
		return WalletOwner{}, false, fmt.Errorf("read wallet owner: %w", err)
	}
	return o, true, nil
}
