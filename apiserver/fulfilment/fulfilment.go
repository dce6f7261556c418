// Package fulfilment delivers codes for orders: one River job per order, enqueued in the
// placement transaction and finished in one transaction that records the codes, refunds the
// undelivered value and moves the order to its terminal state. Finishing is guarded by
// status = 'processing', so a job retried or rescued after a crash never delivers twice.
package fulfilment

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/codeport/codeport/apiserver/catalog"
	"github.com/codeport/codeport/apiserver/codes"
	"github.com/codeport/codeport/apiserver/store"
	"github.com/codeport/codeport/apiserver/wallet"
)

// Finished describes an order that fulfilment just moved to a terminal state, for whoever must
// hear of it (webhooks); hooks run inside the finishing transaction.
type Finished struct {
	Environment string
	Order       *store.Order
	Status      string
}

// Hook is called in the finishing transaction q with every order it finishes; an error rolls
// the finish back and retries it.
type Hook func(ctx context.Context, q store.Querier, finished []Finished) error

// Fulfiller finishes orders.
type Fulfiller struct {
	db     *store.DB
	cipher *codes.Cipher
	// SlowDelay is how long the sandbox Slow product stays processing.
	slowDelay time.Duration
	hooks     []Hook
	log       *slog.Logger
	now       func() time.Time
	tracer    trace.Tracer
}

// WithTracing records a span per fulfilment attempt (its database statements become children).
func (f *Fulfiller) WithTracing(tp trace.TracerProvider) *Fulfiller {
	if tp != nil {
		f.tracer = tp.Tracer("github.com/codeport/codeport/apiserver/fulfilment")
	}
	return f
}

// NewFulfiller builds a fulfiller; hooks run in every finishing transaction.
func NewFulfiller(
	db *store.DB, cipher *codes.Cipher, slowDelay time.Duration, log *slog.Logger, hooks ...Hook,
) *Fulfiller {
	if log == nil {
		log = slog.Default()
	}
	return &Fulfiller{db: db, cipher: cipher, slowDelay: slowDelay, hooks: hooks, log: log, now: time.Now,
		tracer: noop.NewTracerProvider().Tracer("")}
}

// SnoozeError asks the queue to run the job again after Delay without counting a failure.
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("not ready: retry in %s", e.Delay) }

// unit is one code to deliver.
type unit struct {
	line, unit int
	stockID    *int64
	ciphertext []byte
	digest     []byte
}

// Fulfil delivers what it can for a processing order of environment and finishes it. An order
// that is no longer processing is left alone.
func (f *Fulfiller) Fulfil(ctx context.Context, orderID uuid.UUID, environment string) error {
	ctx, span := f.tracer.Start(ctx, "fulfil order", trace.WithAttributes(
		attribute.String("codeport.order_id", orderID.String()), attribute.String("codeport.environment", environment)))
	defer span.End()
	err := f.db.InTx(ctx, func(tx pgx.Tx) error {
		o, err := store.LockProcessingOrder(ctx, tx, orderID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var units []unit
		var reason string
		if environment == store.EnvironmentSandbox {
			if wait := f.slowWait(&o); wait > 0 {
				return &SnoozeError{Delay: wait}
			}
			units, reason, err = f.sandboxUnits(&o)
		} else {
			units, reason, err = f.stockUnits(ctx, tx, &o)
		}
		if err != nil {
			return err
		}
		return f.finish(ctx, tx, environment, &o, units, reason)
	})
	if err != nil {
		var snooze *SnoozeError
		if errors.As(err, &snooze) {
			return snooze
		}
		return fmt.Errorf("fulfil order %s: %w", orderID, err)
	}
	return nil
}

func (f *Fulfiller) slowWait(o *store.Order) time.Duration {
	for _, l := range o.Lines {
		if outcome, ok := catalog.TestOutcome(l.ProductCode); ok && outcome == catalog.OutcomeSlow {
			return time.Until(o.CreatedAt.Add(f.slowDelay))
		}
	}
	return 0
}

// sandboxUnits scripts the test products and mints SANDBOX- codes for everything else.
func (f *Fulfiller) sandboxUnits(o *store.Order) ([]unit, string, error) {
	var units []unit
	var reason string
	for _, l := range o.Lines {
		deliver := l.Quantity
		if outcome, ok := catalog.TestOutcome(l.ProductCode); ok {
			switch outcome {
			case catalog.OutcomeFailure:
				deliver = 0
				reason = "Sandbox test product " + l.ProductCode + " always fails"
			case catalog.OutcomePartial:
				if l.Quantity >= 2 {
					deliver = l.Quantity / 2
					reason = "Sandbox test product " + l.ProductCode + " delivers half of the units"
				}
			case catalog.OutcomeSuccess, catalog.OutcomeSlow:
			}
		}
		for u := range deliver {
			code, err := sandboxCode()
			if err != nil {
				return nil, "", err
			}
			ct, digest, err := f.cipher.Seal(code)
			if err != nil {
				return nil, "", err
			}
			units = append(units, unit{line: l.LineNo, unit: u, ciphertext: ct, digest: digest})
		}
	}
	return units, reason, nil
}

// stockUnits takes production codes from the encrypted stock.
func (f *Fulfiller) stockUnits(ctx context.Context, q store.Querier, o *store.Order) ([]unit, string, error) {
	var units []unit
	var reason string
	for _, l := range o.Lines {
		stock, err := store.TakeStock(ctx, q, o.ID, l.ProductCode, l.Quantity)
		if err != nil {
			return nil, "", err
		}
		if len(stock) < l.Quantity {
			reason = fmt.Sprintf("Insufficient stock for product %s: %d of %d units delivered",
				l.ProductCode, len(stock), l.Quantity)
		}
		for u, s := range stock {
			id := s.ID
			units = append(units, unit{line: l.LineNo, unit: u, stockID: &id, ciphertext: s.Ciphertext, digest: s.Digest})
		}
	}
	return units, reason, nil
}

func (f *Fulfiller) finish(
	ctx context.Context, q store.Querier, environment string, o *store.Order, units []unit, reason string,
) error {
	now := f.now()
	delivered := make([]store.DeliveredCode, len(units))
	perLine := map[int]int{}
	for i, u := range units {
		delivered[i] = store.DeliveredCode{OrderID: o.ID, LineNo: u.line, UnitNo: u.unit, StockID: u.stockID,
			Ciphertext: u.ciphertext, Digest: u.digest, DeliveredAt: now}
		perLine[u.line]++
	}
	if err := store.InsertDeliveredCodes(ctx, q, delivered); err != nil {
		return err
	}
	var undelivered int64
	for _, l := range o.Lines {
		undelivered += int64(l.Quantity-perLine[l.LineNo]) * l.UnitPrice
	}
	status := store.OrderCompleted
	switch {
	case len(units) == 0:
		status = store.OrderFailed
	case len(units) < o.TotalQuantity:
		status = store.OrderPartiallyCompleted
	}
	// Only what was debited is refunded; undelivered value is exact because validation bounded
	// every line total.
	refunded := min(undelivered, o.DebitedAmount)
	var reasonPtr *string
	if status == store.OrderFailed {
		if reason == "" {
			reason = "No codes could be delivered"
		}
		reasonPtr = &reason
	}
	if err := store.FinishOrder(ctx, q, o.ID, status, len(units), refunded, reasonPtr); err != nil {
		return err
	}
	o.Status, o.Delivered, o.RefundedAmount, o.Reason = status, len(units), refunded, reasonPtr
	for _, h := range f.hooks {
		if err := h(ctx, q, []Finished{{Environment: environment, Order: o, Status: status}}); err != nil {
			return err
		}
	}
	// The refund is the last statement: the wallet's balance row, which every placement of the
	// account locks, is then held only for the credit and the commit.
	if refunded > 0 {
		if _, err := wallet.Credit(ctx, q, o.AccountID, o.Currency, store.EntryRefund, refunded, o.ID.String(),
			"undelivered units of order "+o.ExternalOrderCode); err != nil {
			return err
		}
	}
	return nil
}

const codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// sandboxCode mints a test code: SANDBOX-XXXX-XXXX-XXXX-XXXX.
func sandboxCode() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("sandbox code: %w", err)
	}
	out := []byte("SANDBOX-")
	for i, c := range b {
		if i > 0 && i%4 == 0 {
			out = append(out, '-')
		}
		out = append(out, codeAlphabet[int(c)%len(codeAlphabet)])
	}
	return string(out), nil
}
