package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Lock order of money rows. Every transaction that touches a wallet takes its row locks in this
// order, so placements, fulfilment refunds, top-ups and threshold changes never deadlock:
//
//  1. the order rows (a placement inserts its one; fulfilment locks those it finishes, in id
//     order);
//  2. the account's wallet_balances rows, all of them, in currency order (FOR UPDATE); a
//     fulfilment that refunds several accounts takes them account after account, in account id
//     order;
//  3. the accounts row: placements only take KEY SHARE on it through their foreign-key checks,
//     at the end of the statement that locked the balances; writers of the account row (the
//     threshold, provisioning) UPDATE it without changing its key, i.e. FOR NO KEY UPDATE,
//     which KEY SHARE does not wait for. Nothing takes FOR UPDATE or FOR SHARE on accounts.
//  4. the daily_spend rows (spend.go): the triggers that add an order or a refund to its day's
//     running total run at the commit, after every statement of the transaction; a limited
//     placement that recounts a day locks its row after the balances. A transaction that
//     changes a day's total of a wallet-debiting account holds that account's balances first,
//     so two of them never wait on each other's day rows in opposite orders.
//
// Every placement of an account queues on its balance rows, so a transaction takes them as late
// as it can: fulfilment's refund is its last statement before the commit.
//
// Reads of balances for status and responses take no locks at all.

// ErrInsufficientBalance is returned when an entry would take a balance below zero.
var ErrInsufficientBalance = errors.New("insufficient balance")

// ErrBalanceOverflow is returned when an entry would take a balance past the largest the ledger
// can hold (math.MaxInt64 minor units); the entry is not written.
var ErrBalanceOverflow = errors.New("would pass the largest balance the ledger can hold")

// LedgerEntry is one change of a wallet balance. Amount is signed minor units: positive for
// top-ups and refunds, negative for order debits.
type LedgerEntry struct {
	AccountID uuid.UUID
	Currency  string
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
	// Threshold is the account's low-balance limit in minor units of the entry's currency, the
	// configured threshold rounded up (money.LowBalanceLimit; 0 when none): what balances are
	// judged against.
	Threshold int64
	// ThresholdSetting is the threshold as configured and stored (decimal major units), what
	// notices show partners, as GET /wallet does.
	ThresholdSetting string
	// Balances are all of the account's balances after the entry, by currency. The entry locked
	// them all, so they stay as they are until its transaction ends: an order's response shows
	// the wallet as the order left it without reading it again.
	Balances []Balance
}

// CrossedBelow reports whether the entry took the balance below its threshold, which is when
// low-balance alerts fire (once per crossing).
func (r LedgerResult) CrossedBelow() bool { return r.Applied && !r.WasLow && r.IsLow }

// lockBalancesSQL locks every balance of the account, in currency order (step 2 of the lock
// order), each with the account's threshold as stored (decimal major units): money.IsLow judges
// it, so the database and the API apply one rule.
const lockBalancesSQL = `
SELECT b.currency, b.balance, b.low_balance, COALESCE(a.low_balance_threshold::text, '')
FROM wallet_balances b JOIN accounts a ON a.id = b.account_id
WHERE b.account_id = $1
ORDER BY b.currency
FOR UPDATE OF b`

// writeEntrySQL sets a locked balance to its new value and appends the entry that explains it.
// The entry is written even when no balance row was updated, so that its NOT NULL balance_after
// fails the statement, and with it the transaction, rather than a commit that follows it in a
// pipeline committing an entry-less change.
const writeEntrySQL = `
WITH updated AS (
    UPDATE wallet_balances SET balance = $1, low_balance = $2, updated_at = now()
    WHERE account_id = $3 AND currency = $4
    RETURNING balance
)
INSERT INTO wallet_entries (account_id, currency, kind, reference, amount, balance_after, note)
VALUES ($3, $4, $5, $6, $7, (SELECT balance FROM updated), $8)`

func writeEntryArgs(e *LedgerEntry, after int64, isLow bool) []any {
	return []any{after, isLow, pgUUID(e.AccountID), e.Currency, e.Kind, e.Reference, e.Amount, e.Note}
}

// ApplyLedgerEntry changes a balance and appends its ledger entry, in the transaction q,
// exactly once per (account, kind, reference). The account's balance rows are locked first, so
// concurrent entries of one wallet serialise and a concurrent duplicate sees the committed entry
// and does nothing.
func ApplyLedgerEntry(ctx context.Context, q Querier, e LedgerEntry) (LedgerResult, error) {
	if e.Amount == 0 {
		return LedgerResult{}, errors.New("ledger entry of zero amount")
	}
	if e.Amount > 0 {
		_, err := q.Exec(ctx, `INSERT INTO wallet_balances (account_id, currency) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			pgUUID(e.AccountID), e.Currency)
		if err != nil {
			return LedgerResult{}, fmt.Errorf("ensure wallet balance %s: %w", e.Currency, err)
		}
	}
	locked, err := lockBalances(ctx, q, e)
	if err != nil {
		return LedgerResult{}, err
	}
	if e.Amount > 0 {
		if locked.current < 0 {
			return LedgerResult{}, fmt.Errorf("lock wallet balance %s: row missing after insert", e.Currency)
		}
		var exists bool
		err := q.QueryRow(ctx,
			`SELECT EXISTS (SELECT 1 FROM wallet_entries WHERE account_id = $1 AND kind = $2 AND reference = $3)`,
			pgUUID(e.AccountID), e.Kind, e.Reference).Scan(&exists)
		if err != nil {
			return LedgerResult{}, fmt.Errorf("check ledger reference: %w", err)
		}
		if exists {
			return locked.unchanged(), nil
		}
	}
	res, err := locked.apply(e.Amount)
	if err != nil {
		return locked.unchanged(), err
	}
	if _, err := q.Exec(ctx, writeEntrySQL, writeEntryArgs(&e, res.BalanceAfter, res.IsLow)...); err != nil {
		return locked.unchanged(), fmt.Errorf("write ledger entry: %w", err)
	}
	return res, nil
}

// lockBalances locks and reads the account's balances.
func lockBalances(ctx context.Context, q Querier, e LedgerEntry) (lockedBalances, error) {
	locked := lockedBalances{currency: e.Currency, current: -1}
	rows, err := q.Query(ctx, lockBalancesSQL, pgUUID(e.AccountID))
	if err != nil {
		return locked, fmt.Errorf("lock wallet balances: %w", err)
	}
	var b Balance
	var threshold string
	_, err = pgx.ForEachRow(rows, []any{&b.Currency, &b.Balance, &b.LowBalance, &threshold}, func() error {
		locked.add(b, threshold)
		return nil
	})
	if err != nil {
		return locked, fmt.Errorf("lock wallet balances: %w", err)
	}
	return locked, nil
}

// Balance is one currency of a wallet.
type Balance struct {
	Currency   string
	Balance    int64
	LowBalance bool
}

// Balances returns an account's balances ordered by currency.
func Balances(ctx context.Context, q Querier, accountID uuid.UUID) ([]Balance, error) {
	rows, err := q.Query(ctx,
		`SELECT currency, balance, low_balance FROM wallet_balances WHERE account_id = $1 ORDER BY currency`,
		pgUUID(accountID))
	if err != nil {
		return nil, fmt.Errorf("read wallet balances: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Balance])
	if err != nil {
		return nil, fmt.Errorf("read wallet balances: %w", err)
	}
	return out, nil
}

// LedgerSum returns the sum of an account's ledger entries per currency; it always equals the
// balances, and tests and audits check that it does.
func LedgerSum(ctx context.Context, q Querier, accountID uuid.UUID) (map[string]int64, error) {
	rows, err := q.Query(ctx, `SELECT currency, sum(amount)::bigint FROM wallet_entries
		WHERE account_id = $1 GROUP BY currency`, pgUUID(accountID))
	if err != nil {
		return nil, fmt.Errorf("sum ledger: %w", err)
	}
	out := map[string]int64{}
	var currency string
	var total int64
	if _, err := pgx.ForEachRow(rows, []any{&currency, &total}, func() error {
		out[currency] = total
		return nil
	}); err != nil {
		return nil, fmt.Errorf("sum ledger: %w", err)
	}
	return out, nil
}
