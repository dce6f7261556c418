package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Daily spend limits (migration 00028, docs/operations.md "Daily spend totals"). daily_spend
// holds, per account, currency and UTC day, the sum of total_price - refunded_amount of the
// day's orders. Triggers on orders add every order and every refund to its day's row when its
// transaction commits, so the row's lock is the last a transaction takes (after the order rows
// and the balances of ledger.go's lock order), and a committed row always includes exactly the
// committed orders it has counted. A row is exact once counted: recounted from orders under its
// lock, which the first limited placement of the day does (rows start uncounted, since the
// triggers miss the orders written before they existed).

// LockDailySpend serialises the orders of one account and currency for the rest of the
// transaction q, so two concurrent orders cannot both fit under a daily limit that only one of
// them fits.
func LockDailySpend(ctx context.Context, q Querier, accountID uuid.UUID, currency string) error {
	_, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`,
		"spend:"+accountID.String()+":"+currency)
	if err != nil {
		return fmt.Errorf("lock daily spend: %w", err)
	}
	return nil
}

// dailySpendSQL reads the running total of the day starting at $3 and sums the account's orders
// dated after that day, which only a clock ahead of the caller's writes: orders_history_idx
// finds them, usually none, in a few pages however many orders the day holds. $4 is the
// caller's own order, which its commit adds.
const dailySpendSQL = `SELECT COALESCE(s.spent, 0), COALESCE(s.counted, false),
	(SELECT COALESCE(sum(o.total_price - o.refunded_amount), 0)::bigint FROM orders o
	 WHERE o.account_id = $1 AND o.currency = $2 AND o.created_at >= $3::timestamptz + interval '24 hours'
	   AND o.id <> $4)
FROM (SELECT 1) AS one
LEFT JOIN daily_spend s ON s.account_id = $1 AND s.currency = $2 AND s.day = ($3::timestamptz AT TIME ZONE 'UTC')::date`

// lockSpendDaySQL locks the day's row, creating it if no order of the day has yet.
const lockSpendDaySQL = `INSERT INTO daily_spend AS s (account_id, currency, day, spent)
VALUES ($1, $2, ($3::timestamptz AT TIME ZONE 'UTC')::date, 0)
ON CONFLICT (account_id, currency, day) DO UPDATE SET spent = s.spent`

// recountSpendDaySQL sets the locked row of the day starting at $3 to the sum of the day's
// committed orders but $4, as this statement's snapshot, taken after the lock, sees them: every
// order committed since adds itself to the row after this transaction ends.
const recountSpendDaySQL = `UPDATE daily_spend SET counted = true, spent = (
	SELECT COALESCE(sum(total_price - refunded_amount), 0)::bigint FROM orders
	WHERE account_id = $1 AND currency = $2 AND created_at >= $3 AND created_at < $3::timestamptz + interval '24 hours'
	  AND id <> $4)
WHERE account_id = $1 AND currency = $2 AND day = ($3::timestamptz AT TIME ZONE 'UTC')::date
RETURNING spent`

// DailySpend is what a daily spend limit holds an order to: the value of the account's orders
// in currency placed since the start of the UTC day of now, less what was refunded for
// undelivered units, as committed, without placing, the order q's transaction places (its
// commit adds it). It reads the day's running total, and recounts it from the day's orders the
// first time a day is read. q must be the placement's transaction, holding LockDailySpend's
// lock and, for an order that debits, the balances' (ledger.go's lock order: the day's row comes
// after them).
func DailySpend(ctx context.Context, q Querier, accountID uuid.UUID, currency string, now time.Time,
	placing uuid.UUID,
) (int64, error) {
	y, m, d := now.UTC().Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	args := []any{pgUUID(accountID), currency, day, pgUUID(placing)}
	var spent, later int64
	var counted bool
	if err := q.QueryRow(ctx, dailySpendSQL, args...).Scan(&spent, &counted, &later); err != nil {
		return 0, fmt.Errorf("read daily spend: %w", err)
	}
	if counted {
		return spent + later, nil
	}
	if _, err := q.Exec(ctx, lockSpendDaySQL, args[:3]...); err != nil {
		return 0, fmt.Errorf("lock daily spend of %s: %w", day.Format(time.DateOnly), err)
	}
	if err := q.QueryRow(ctx, recountSpendDaySQL, args...).Scan(&spent); err != nil {
		return 0, fmt.Errorf("recount daily spend of %s: %w", day.Format(time.DateOnly), err)
	}
	return spent + later, nil
}

// PruneDailySpend deletes the running totals of the environment's accounts for the UTC days
// before the one of before, which no limit reads again, and returns how many it deleted.
func PruneDailySpend(ctx context.Context, q Querier, environment string, before time.Time) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM daily_spend s USING accounts a
		WHERE a.id = s.account_id AND a.environment = $1 AND s.day < ($2::timestamptz AT TIME ZONE 'UTC')::date`,
		environment, before)
	if err != nil {
		return 0, fmt.Errorf("prune daily spend: %w", err)
	}
	return tag.RowsAffected(), nil
}
