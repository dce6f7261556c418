package fulfilment

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/wallet"
)

// Finished describes an order that fulfilment just moved to a terminal state, for whoever must
// hear of it (webhooks); hooks run inside the finishing transaction.
type Finished struct {
	Environment string
	Order       *store.Order
	Status      string
}

// Hook is called in the finishing transaction q with every order it finishes; an error rolls
// the finish back, and the orders are then finished one by one, each in a transaction of its
// own, so that the error fails only the jobs of the orders it is about.
type Hook func(ctx context.Context, q store.Querier, finished []Finished) error

// StockHook is called in the finishing transaction q with the catalogs' products whose stock a
// delivery found low and whose partners were not told yet (each recorded as told in q); an
// error rolls the finish back, as a Hook's does.
type StockHook func(ctx context.Context, q store.Querier, low []store.StockLevel) error

// Fulfiller finishes orders.
type Fulfiller struct {
	db     *store.DB
	cipher *codes.Cipher
	// SlowDelay is how long the sandbox Slow product stays processing.
	slowDelay time.Duration
	hooks     []Hook
	// stockHooks hear of products found low; delivered counts codes taken from the stock,
	// after the commit that took them.
	stockHooks []StockHook
	delivered  func(productCode string, codes int)
	log        *slog.Logger
	now        func() time.Time
	tracer     trace.Tracer
}

// WithTracing records a span per fulfilment attempt (its database statements become children).
func (f *Fulfiller) WithTracing(tp trace.TracerProvider) *Fulfiller {
	if tp != nil {
		f.tracer = tp.Tracer("github.com/codeport/codeport/internal/fulfilment")
	}
	return f
}

// OnStockLow adds a hook told of products whose stock a delivery found low (see StockHook).
func (f *Fulfiller) OnStockLow(h StockHook) *Fulfiller {
	f.stockHooks = append(f.stockHooks, h)
	return f
}

// OnDelivered sets what hears, after each commit, how many codes of each product were taken
// from the production stock.
func (f *Fulfiller) OnDelivered(fn func(productCode string, codes int)) *Fulfiller {
	f.delivered = fn
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

// Error implements error.
func (e *SnoozeError) Error() string { return fmt.Sprintf("not ready: retry in %s", e.Delay) }

// Fulfil delivers what it can for a processing order of environment and finishes it. An order
// that is no longer processing is left alone.
func (f *Fulfiller) Fulfil(ctx context.Context, orderID uuid.UUID, environment string) error {
	return f.FulfilMany(ctx, environment, []uuid.UUID{orderID})[0]
}

// FulfilMany is Fulfil for several orders of environment at once, in one transaction, and
// returns each one's error (nil, a *SnoozeError or a failure) in the order of ids. When the
// transaction fails, each order is fulfilled again in a transaction of its own, so that an order
// whose finish fails (a hook's error, a constraint) fails alone.
func (f *Fulfiller) FulfilMany(ctx context.Context, environment string, ids []uuid.UUID) []error {
	errs := make([]error, len(ids))
	err := f.fulfilTogether(ctx, environment, ids, errs)
	if err == nil {
		return errs
	}
	if len(ids) == 1 || ctx.Err() != nil {
		for i, id := range ids {
			errs[i] = fmt.Errorf("fulfil order %s: %w", id, err)
		}
		return errs
	}
	f.log.Warn("fulfilling orders together failed; fulfilling each alone", slog.Int("orders", len(ids)),
		slog.Any("err", err))
	for i, id := range ids {
		errs[i] = f.Fulfil(ctx, id, environment)
	}
	return errs
}

// fulfilTogether finishes the orders of ids that are still processing, in one transaction, and
// sets the errors of those that must wait (the sandbox's Slow product) to a *SnoozeError.
func (f *Fulfiller) fulfilTogether(ctx context.Context, environment string, ids []uuid.UUID, errs []error) error {
	ctx, span := f.tracer.Start(ctx, "fulfil orders", trace.WithAttributes(
		attribute.Int("codeport.orders", len(ids)), attribute.String("codeport.environment", environment)))
	defer span.End()
	snoozed := map[uuid.UUID]time.Duration{}
	var taken map[string]int
	err := f.db.InTx(ctx, func(tx store.Tx) error {
		clear(snoozed)
		taken = nil
		orders, err := store.LockProcessingOrders(ctx, tx, ids)
		if err != nil {
			return err
		}
		ready := make([]*store.Order, 0, len(orders))
		for _, o := range orders {
			if tenancy.Environment(environment) == tenancy.Sandbox {
				if wait := f.slowWait(o); wait > 0 {
					snoozed[o.ID] = wait
					continue
				}
			}
			ready = append(ready, o)
		}
		if len(ready) == 0 {
			return nil
		}
		var d deliveries
		if tenancy.Environment(environment) == tenancy.Sandbox {
			d, err = f.deliverSandbox(ctx, tx, ready)
		} else {
			d, err = deliverStock(ctx, tx, ready)
			taken = d.taken
		}
		if err != nil {
			return err
		}
		return f.finish(ctx, tx, environment, ready, d)
	})
	if err != nil {
		return err
	}
	if f.delivered != nil {
		for product, n := range taken {
			f.delivered(product, n)
		}
	}
	for i, id := range ids {
		if wait, ok := snoozed[id]; ok {
			errs[i] = &SnoozeError{Delay: wait}
		}
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

// deliveries are what a fulfilment delivered: codes per order line, and for orders that fell
// short, why (the last short line's reason); from the stock, the codes taken per product and the
// products found low whose partners are to be told.
type deliveries struct {
	perLine map[store.LineRef]int
	reasons map[uuid.UUID]string
	taken   map[string]int
	low     []store.StockLevel
}

// deliverSandbox scripts the test products, mints SANDBOX- codes for everything else and
// records them, for all orders in one statement.
func (f *Fulfiller) deliverSandbox(ctx context.Context, q store.Querier, orders []*store.Order) (deliveries, error) {
	d := deliveries{perLine: map[store.LineRef]int{}, reasons: map[uuid.UUID]string{}}
	var codesOut []store.DeliveredCode
	now := f.now()
	for _, o := range orders {
		for _, l := range o.Lines {
			deliver := l.Quantity
			if outcome, ok := catalog.TestOutcome(l.ProductCode); ok {
				switch outcome {
				case catalog.OutcomeFailure:
					deliver = 0
					d.reasons[o.ID] = "Sandbox test product " + l.ProductCode + " always fails"
				case catalog.OutcomePartial:
					if l.Quantity >= 2 {
						deliver = l.Quantity / 2
						d.reasons[o.ID] = "Sandbox test product " + l.ProductCode + " delivers half of the units"
					}
				case catalog.OutcomeSuccess, catalog.OutcomeSlow:
				}
			}
			for u := range deliver {
				code, err := sandboxCode()
				if err != nil {
					return deliveries{}, err
				}
				ct, digest, err := f.cipher.Seal(code)
				if err != nil {
					return deliveries{}, err
				}
				codesOut = append(codesOut, store.DeliveredCode{OrderID: o.ID, LineNo: l.LineNo, UnitNo: u,
					KeyRef: f.cipher.Key(), Ciphertext: ct, Digest: digest, DeliveredAt: now})
			}
			d.perLine[store.LineRef{OrderID: o.ID, LineNo: l.LineNo}] = deliver
		}
	}
	return d, store.InsertDeliveredCodes(ctx, q, codesOut)
}

// deliverStock delivers production codes from the encrypted stock, for all orders in one
// statement, and brings the catalogs' low-stock notices of the products up to date.
func deliverStock(ctx context.Context, tx store.Pipeliner, orders []*store.Order) (deliveries, error) {
	var wants []store.StockWant
	for _, o := range orders {
		for _, l := range o.Lines {
			wants = append(wants, store.StockWant{OrderID: o.ID, LineNo: l.LineNo, ProductCode: l.ProductCode,
				Quantity: l.Quantity})
		}
	}
	perLine, levels, err := store.ClaimStock(ctx, tx, wants)
	if err != nil {
		return deliveries{}, err
	}
	d := deliveries{perLine: perLine, reasons: map[uuid.UUID]string{}, taken: map[string]int{}}
	for _, o := range orders {
		for _, l := range o.Lines {
			got := perLine[store.LineRef{OrderID: o.ID, LineNo: l.LineNo}]
			if got < l.Quantity {
				d.reasons[o.ID] = fmt.Sprintf("Insufficient stock for product %s: %d of %d units delivered",
					l.ProductCode, got, l.Quantity)
			}
			if got > 0 {
				d.taken[l.ProductCode] += got
			}
		}
	}
	var cleared, raised []store.StockLevel
	for _, l := range levels {
		switch codes.LowStockTransition(l.Threshold, l.Available, l.Delivered, l.Told) {
		case codes.NoticeClear:
			cleared = append(cleared, l)
		case codes.NoticeRaise:
			raised = append(raised, l)
		case codes.NoticeKeep:
		}
	}
	if d.low, err = store.RecordStockNotices(ctx, tx, cleared, raised); err != nil {
		return deliveries{}, err
	}
	return d, nil
}

// Outcome is how an order ends, given the units delivered of each of its lines (by line
// number) and why it fell short, if it did: its status, the units delivered, the refund of the
// undelivered value and the reason a failed order shows.
func Outcome(o *store.Order, delivered map[int]int, shortfall string) (status string, units int, refund int64,
	reason *string,
) {
	var undelivered int64
	for _, l := range o.Lines {
		got := min(delivered[l.LineNo], l.Quantity)
		units += got
		undelivered += int64(l.Quantity-got) * l.UnitPrice
	}
	status = store.OrderCompleted
	switch {
	case units == 0:
		status = store.OrderFailed
	case units < o.TotalQuantity:
		status = store.OrderPartiallyCompleted
	}
	if status == store.OrderFailed {
		if shortfall == "" {
			shortfall = "No codes could be delivered"
		}
		reason = &shortfall
	}
	// Only what was debited is refunded; undelivered value is exact because validation bounded
	// every line total.
	return status, units, min(undelivered, o.DebitedAmount), reason
}

// finish moves the orders to their terminal states in one statement, runs the hooks, and then
// refunds what was not delivered.
func (f *Fulfiller) finish(
	ctx context.Context, q store.Querier, environment string, orders []*store.Order, d deliveries,
) error {
	finished := make([]Finished, len(orders))
	for i, o := range orders {
		perLine := make(map[int]int, len(o.Lines))
		for _, l := range o.Lines {
			perLine[l.LineNo] = d.perLine[store.LineRef{OrderID: o.ID, LineNo: l.LineNo}]
		}
		o.Status, o.Delivered, o.RefundedAmount, o.Reason = Outcome(o, perLine, d.reasons[o.ID])
		finished[i] = Finished{Environment: environment, Order: o, Status: o.Status}
	}
	if err := store.FinishOrders(ctx, q, orders); err != nil {
		return err
	}
	for _, h := range f.hooks {
		if err := h(ctx, q, finished); err != nil {
			return err
		}
	}
	if len(d.low) > 0 {
		for _, h := range f.stockHooks {
			if err := h(ctx, q, d.low); err != nil {
				return err
			}
		}
	}
	// Refunds are the last statements: the wallet's balance rows, which every placement of the
	// account locks, are then held only for the credits and the commit. They go in account and
	// currency order, so that two finishing transactions never wait on each other's wallets.
	refunds := slices.Clone(orders)
	slices.SortFunc(refunds, func(a, b *store.Order) int {
		return cmp.Or(bytes.Compare(a.AccountID[:], b.AccountID[:]), strings.Compare(a.Currency, b.Currency))
	})
	for _, o := range refunds {
		if o.RefundedAmount == 0 {
			continue
		}
		if _, err := wallet.Credit(ctx, q, o.AccountID, o.Currency, store.EntryRefund, o.RefundedAmount,
			o.ID.String(), "undelivered units of order "+o.ExternalOrderCode); err != nil {
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
