// Package retention archives the details of orders past the operator's retention period: their
// lines, delivered codes and ledger entries move to the archive tables (store.ArchiveOrders), in
// small transactions, while the order's row stays online as the record of its
// externalOrderCode. docs/operations.md ("Order retention") says what partners see.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/recovery"
	"github.com/codeport/codeport/internal/store"
)

// Minimum is the shortest retention period: an order outlives, by a day, every webhook event
// that names it (notify.EventRetention), so a partner listing or replaying events never meets an
// order the API no longer shows.
const Minimum = notify.EventRetention + 24*time.Hour

// Day is the unit the period is configured in.
const Day = 24 * time.Hour

// Defaults of a Policy.
const (
	DefaultBatch = 500
	DefaultEvery = time.Hour
)

// Policy is how an environment's order details are kept.
type Policy struct {
	// Environment is whose accounts' orders are archived.
	Environment string
	// After is how long after an order finished its details stay online; 0 keeps them forever.
	After time.Duration
	// Batch bounds the orders of one archival transaction.
	Batch int
	// Every is the pause between two runs.
	Every time.Duration
}

// CheckDays refuses a retention period (in days) that breaks a promise: 0 (off) or at least
// Minimum.
func CheckDays(days int) error {
	if days == 0 || time.Duration(days)*Day >= Minimum {
		return nil
	}
	return fmt.Errorf("must be 0 (keep orders online forever) or at least %d days, longer than webhook "+
		"events are kept; not %d", int(Minimum/Day), days)
}

// ErrOlderBinaries is returned by a run that did nothing because a codeport process built for a
// schema without archived orders still runs (a rolling upgrade in progress): it would show an
// archived order as an order without codes.
var ErrOlderBinaries = errors.New("a codeport process older than archival still runs")

// Archiver runs a Policy.
type Archiver struct {
	db     *store.DB
	policy Policy
	log    *slog.Logger
}

// NewArchiver returns an archiver of policy on db; zero Batch and Every take their defaults.
func NewArchiver(db *store.DB, policy Policy, log *slog.Logger) *Archiver {
	if policy.Batch <= 0 {
		policy.Batch = DefaultBatch
	}
	if policy.Every <= 0 {
		policy.Every = DefaultEvery
	}
	return &Archiver{db: db, policy: policy, log: log}
}

// Run archives once right away and then every Policy.Every until ctx ends. A failed run is
// logged and tried again at the next; it never stops the process.
func (a *Archiver) Run(ctx context.Context) {
	tick := time.NewTicker(a.policy.Every)
	defer tick.Stop()
	for {
		_ = recovery.Do(ctx, a.log, "order archival", func() {
			done, err := a.RunOnce(ctx, time.Now())
			switch {
			case errors.Is(err, ErrOlderBinaries):
				a.log.Info("order archival waits for the upgrade to finish", slog.Any("reason", err))
			case err != nil && ctx.Err() == nil:
				a.log.Warn("order archival", slog.Any("err", err), slog.Int64("orders", done.Orders))
			case done.Orders > 0:
				a.log.Info("archived orders past retention", slog.Int64("orders", done.Orders),
					slog.Int64("lines", done.Lines), slog.Int64("codes", done.Codes),
					slog.Int64("ledgerEntries", done.Entries), slog.Int64("carriedEntries", done.Carried))
			}
		})
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// RunOnce archives every order of the environment that finished more than Policy.After before
// now, account by account, Policy.Batch orders per transaction, and returns what it moved; then
// it deletes the accounts' daily spend totals of the days before that cutoff.
// Each transaction commits on its own: a run cut short (a crash, a failover, ctx) leaves whole
// batches behind, and the next run resumes from them.
func (a *Archiver) RunOnce(ctx context.Context, now time.Time) (store.Archived, error) {
	var done store.Archived
	if a.policy.After <= 0 {
		return done, nil
	}
	older, err := store.OlderInstancesRunning(ctx, a.db.Pool, store.ArchiveSchemaVersion)
	if err != nil {
		return done, err
	}
	if older > 0 {
		return done, fmt.Errorf("%w (%d process(es))", ErrOlderBinaries, older)
	}
	cutoff := now.Add(-a.policy.After)
	accounts, err := store.ArchivableAccounts(ctx, a.db.Pool, a.policy.Environment, cutoff)
	if err != nil {
		return done, err
	}
	for _, account := range accounts {
		for {
			batch, err := a.batch(ctx, account, cutoff)
			done.Add(batch)
			if err != nil {
				return done, fmt.Errorf("archive orders of account %s: %w", account, err)
			}
			if batch.Orders < int64(a.policy.Batch) {
				break
			}
		}
	}
	// The days whose orders are past retention are long past any daily spend limit.
	if _, err := store.PruneDailySpend(ctx, a.db.Pool, a.policy.Environment, cutoff); err != nil {
		return done, err
	}
	return done, nil
}

// batch archives one batch of the account's orders in a transaction of its own. Another
// process archiving the same account (two replicas) makes it skip the account: the account's
// ledger is rewritten by one archiver at a time.
func (a *Archiver) batch(ctx context.Context, account uuid.UUID, cutoff time.Time) (store.Archived, error) {
	var done store.Archived
	err := a.db.InTx(ctx, func(tx store.Tx) error {
		mine, err := store.LockAccountArchival(ctx, tx, account)
		if err != nil || !mine {
			return err
		}
		done, err = store.ArchiveOrders(ctx, tx, account, cutoff, a.policy.Batch)
		return err
	})
	if err != nil {
		return store.Archived{}, err
	}
	return done, nil
}
