package orders

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/wallet"
)

// Placing an order, top to bottom: Place validates the request against the partner's catalog
// snapshot; recordRetrying runs record, which writes the order, its lines, its fulfilment job
// and its debit, committed together (the store's pipelined placement, or recordInTx when a daily
// spend limit or a low-balance crossing must run inside the transaction). The lock order of the
// money rows is written in store/ledger.go, the low-balance rule in money.IsLow.

var (
	errDuplicate    = errors.New("duplicate external order code")
	errEnqueue      = errors.New("enqueue fulfilment")
	errLimit        = errors.New("daily spend limit")
	errInsufficient = errors.New("insufficient funds")
)

// Place runs POST /orders. It returns the order's representation and whether it is a replay of
// an existing order (HTTP 200) rather than a new one (HTTP 202).
func (s *Service) Place(ctx context.Context, acct *auth.Account, body []byte) (View, bool, error) {
	if !acct.OrderingEnabled {
		return View{}, false, refuse(OrderingDisabled)
	}
	req, err := Decode(body)
	if err != nil {
		return View{}, false, err
	}
	hash := req.Hash()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	snap, err := s.catalogs.ForAccount(ctx, acct)
	if err != nil {
		s.log.ErrorContext(ctx, "load catalog for order", slog.Any("err", err))
		return View{}, false, fmt.Errorf("%w: load catalog: %w", ErrNotPlaced, err)
	}
	plan, refusal := Validate(&req, snap, acct)
	if refusal != nil {
		// A replay is answered with its order even when the request would no longer validate
		// (a product withdrawn since, say). New orders skip this lookup: the placement
		// transaction's insert detects replays on its own.
		if v, replayed, err := s.replay(ctx, acct, req.ExternalOrderCode, hash); err != nil || replayed {
			return v, replayed, err
		}
		return View{}, false, refusal
	}

	now := time.Now()
	order := store.Order{
		ID:                uuid.Must(uuid.NewV7()),
		AccountID:         acct.ID,
		ExternalOrderCode: req.ExternalOrderCode,
		PayloadHash:       hash,
		Currency:          plan.Currency,
		TotalPrice:        plan.Total,
		TotalQuantity:     int(plan.TotalQuantity),
		Status:            store.OrderProcessing,
		EstimatedReadyAt:  s.estimate.readyAt(now, &plan),
		CreatedAt:         now,
		Metadata:          req.Metadata,
	}
	if acct.WalletEnabled && plan.Total > 0 {
		// Recorded with the order; the debit below either succeeds or rolls the order back.
		order.DebitedAmount = plan.Total
	}
	debit, err := s.recordRetrying(ctx, acct, &order, &plan, now)
	switch {
	case errors.Is(err, errDuplicate):
		v, _, err := s.replay(ctx, acct, req.ExternalOrderCode, hash)
		return v, err == nil, err
	case errors.Is(err, errLimit):
		return View{}, false, refuse(LimitExceeded)
	case errors.Is(err, errInsufficient):
		return View{}, false, refuse(InsufficientFunds)
	case errors.Is(err, errEnqueue):
		s.log.ErrorContext(ctx, "enqueue fulfilment", slog.Any("err", err))
		return View{}, false, fmt.Errorf("%w: %w", ErrFulfilmentUnavailable, err)
	case err != nil:
		s.log.ErrorContext(ctx, "place order", slog.Any("err", err))
		return View{}, false, fmt.Errorf("%w: %w", ErrNotPlaced, err)
	}
	if s.OnPlaced != nil {
		s.OnPlaced(acct.Environment)
	}
	return render(&order, nil, s.walletAfter(ctx, acct, debit)), false, nil
}

// placementAttempts bounds how often a placement the database rolled back as a deadlock or
// serialization failure is tried before the partner gets a 502.
const placementAttempts = 3

// outagePauseLimit is the longest pause between two attempts of a placement that found the
// database unavailable.
const outagePauseLimit = time.Second

// recordRetrying runs record until it succeeds or fails for good. Two failures are tried again:
// a transient conflict (at most placementAttempts times, with a jittered pause so that the
// transactions that collided do not collide again), and an unavailable database (a failover, a
// restart: with a pause growing to outagePauseLimit, until the placement's deadline), so that a
// short outage costs the partner a slower 202 rather than a 502. A retry can neither place the
// order twice nor debit twice: the order keeps its id and external order code, a rolled-back
// attempt wrote nothing, and an attempt cut off at COMMIT that did commit makes the retry's
// insert find the order, which is then answered as a replay.
func (s *Service) recordRetrying(
	ctx context.Context, acct *auth.Account, order *store.Order, plan *Plan, now time.Time,
) (store.LedgerResult, error) {
	conflicts, outagePause := 0, 50*time.Millisecond
	for {
		res, err := s.record(ctx, acct, order, plan, now)
		var pause time.Duration
		switch {
		case err == nil:
			return res, nil
		case store.IsTransient(err):
			conflicts++
			if conflicts == placementAttempts {
				return res, err
			}
			s.log.WarnContext(ctx, "placement rolled back by the database, retrying",
				slog.Int("attempt", conflicts), slog.Any("err", err))
			jitter := rand.N(20 * time.Millisecond) //nolint:gosec // jitter, not a secret
			pause = time.Duration(conflicts) * (5*time.Millisecond + jitter)
		case store.IsUnavailable(err):
			// Not logged here: every placement meets the same outage, and the one that gives
			// up logs it.
			pause, outagePause = outagePause, min(2*outagePause, outagePauseLimit)
		default:
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(pause):
		}
	}
}

// record writes the placement of docs/architecture.md: idempotency insert (with the lines and the
// fulfilment job) → limits → debit. It returns the debit's ledger result (zero when the order
// debited nothing). The store pipelines the common case in two round trips; an order under a
// daily spend limit, or whose debit crosses the low-balance threshold, is written in a
// transaction of this package, where the limit's checks and the crossing's hook run.
func (s *Service) record(
	ctx context.Context, acct *auth.Account, order *store.Order, plan *Plan, now time.Time,
) (store.LedgerResult, error) {
	order.Lines = make([]store.OrderLine, len(plan.Lines))
	for i, l := range plan.Lines {
		order.Lines[i] = store.OrderLine{OrderID: order.ID, LineNo: i, ProductCode: l.Product.ProductCode,
			UnitPrice: l.UnitPrice, Quantity: int(l.Quantity), Currency: plan.Currency, SKU: l.SKU}
	}
	job, err := fulfilment.Job(order.ID, acct.Environment)
	if err != nil {
		return store.LedgerResult{}, fmt.Errorf("%w: %w", errEnqueue, err)
	}
	var debit *store.LedgerEntry
	if order.DebitedAmount > 0 {
		entry, err := wallet.DebitEntry(acct.ID, plan.Currency, order.DebitedAmount, order.ID.String())
		if err != nil {
			return store.LedgerResult{}, err
		}
		debit = &entry
	}
	if _, limited := acct.DailySpendLimits[plan.Currency]; !limited {
		inserted, res, err := s.db.PlaceOrder(ctx, order, job, debit)
		switch {
		case errors.Is(err, store.ErrInsufficientBalance):
			return store.LedgerResult{}, errInsufficient
		case errors.Is(err, store.ErrNeedsTransaction):
			// Placed below, in a transaction the low-balance hook writes in.
		case err != nil:
			return store.LedgerResult{}, err
		case !inserted:
			return store.LedgerResult{}, errDuplicate
		default:
			return res, nil
		}
	}
	var res store.LedgerResult
	err = s.db.InTx(ctx, func(tx store.Tx) error {
		var err error
		res, err = s.recordInTx(ctx, tx, acct, order, job, debit, now)
		return err
	})
	return res, err
}

// recordInTx is record's transaction.
func (s *Service) recordInTx(
	ctx context.Context, tx store.Querier, acct *auth.Account, order *store.Order, job store.Job, debit *store.LedgerEntry,
	now time.Time,
) (store.LedgerResult, error) {
	inserted, err := store.InsertOrder(ctx, tx, order, job)
	if err != nil {
		return store.LedgerResult{}, err
	}
	if !inserted {
		return store.LedgerResult{}, errDuplicate
	}
	limit, limited := acct.DailySpendLimits[order.Currency]
	if limited {
		if err := store.LockDailySpend(ctx, tx, acct.ID, order.Currency); err != nil {
			return store.LedgerResult{}, err
		}
	}
	// The debit comes before the limit's check: the day's running total is locked after the
	// balances (store/ledger.go). A refused order rolls the debit back with everything else, and
	// an order both short of funds and over the limit is refused for the limit, as before.
	var res store.LedgerResult
	var debitErr error
	if debit != nil {
		res, debitErr = store.ApplyLedgerEntry(ctx, tx, *debit)
		if debitErr != nil && !errors.Is(debitErr, store.ErrInsufficientBalance) {
			return store.LedgerResult{}, debitErr
		}
	}
	if limited {
		spent, err := store.DailySpend(ctx, tx, acct.ID, order.Currency, now, order.ID)
		if err != nil {
			return store.LedgerResult{}, err
		}
		if spent+order.TotalPrice > limit {
			return store.LedgerResult{}, errLimit
		}
	}
	if debitErr != nil {
		return store.LedgerResult{}, errInsufficient
	}
	if debit == nil {
		return store.LedgerResult{}, nil
	}
	if res.CrossedBelow() && s.OnLowBalance != nil {
		if err := s.OnLowBalance(ctx, tx, acct.ID, acct.Environment, order.Currency, res); err != nil {
			return store.LedgerResult{}, fmt.Errorf("%w: %w", errEnqueue, err)
		}
	}
	return res, nil
}

// replay answers a request whose external order code exists: the same payload gets the order
// as it is now, a different payload a 409. replayed is false when the code is new.
func (s *Service) replay(
	ctx context.Context, acct *auth.Account, externalOrderCode string, hash []byte,
) (View, bool, error) {
	o, err := store.FindOrderByExternalCode(ctx, s.db.Pool, acct.ID, externalOrderCode)
	if errors.Is(err, store.ErrNotFound) {
		return View{}, false, nil
	}
	if err != nil {
		s.log.ErrorContext(ctx, "look up order for idempotency", slog.Any("err", err))
		return View{}, false, fmt.Errorf("%w: look up %s: %w", ErrNotPlaced, externalOrderCode, err)
	}
	if !bytes.Equal(o.PayloadHash, hash) {
		return View{}, false, refuse(ExternalOrderCodeReusedOther)
	}
	if o.ArchivedAt != nil {
		// The order is past retention: it was placed, and is not placed again, but its details
		// (codes among them) are no longer served.
		return View{}, false, refuse(AlreadyPlacedArchived)
	}
	v, err := s.view(ctx, acct, &o)
	if err != nil {
		s.log.ErrorContext(ctx, "render replayed order", slog.Any("err", err))
		return View{}, false, fmt.Errorf("%w: render replay of %s: %w", ErrNotPlaced, externalOrderCode, err)
	}
	return v, true, nil
}

// walletAfter is the wallet as the placement left it: the balances its debit locked, or, for an
// order that debited nothing, a fresh read.
func (s *Service) walletAfter(ctx context.Context, acct *auth.Account, debit store.LedgerResult) wallet.Snapshot {
	if debit.Applied {
		snapshot, err := wallet.SnapshotOf(debit.Balances, acct.LowBalanceThreshold)
		if err == nil {
			return snapshot
		}
		s.log.WarnContext(ctx, "render wallet after placement", slog.Any("err", err))
	}
	snapshot, err := s.walletSnapshot(ctx, acct)
	if err != nil {
		// The order is placed; a wallet read failing now must not make the partner retry it.
		s.log.WarnContext(ctx, "read wallet after placement", slog.Any("err", err))
	}
	return snapshot
}
