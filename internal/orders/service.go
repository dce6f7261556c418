package orders

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/store"
)

// Estimate is when an order of totalUnits should be ready: a base delay plus a per-unit time,
// plus the scripted delay of slow sandbox products.
type Estimate struct {
	Base    time.Duration
	PerUnit time.Duration
	// Slow is how long the sandbox Slow product stays processing.
	Slow time.Duration
}

// DefaultEstimate suits the stock and sandbox fulfilment of this service.
func DefaultEstimate() Estimate {
	return Estimate{Base: 2 * time.Second, PerUnit: 20 * time.Millisecond, Slow: 10 * time.Second}
}

func (e Estimate) readyAt(now time.Time, plan *Plan) time.Time {
	at := now.Add(e.Base + time.Duration(plan.TotalQuantity)*e.PerUnit)
	for _, l := range plan.Lines {
		if l.Product.Outcome == catalog.OutcomeSlow {
			return at.Add(e.Slow)
		}
	}
	return at
}

// LowBalanceHook runs in the placement transaction when its debit took a balance below the
// account's threshold (notifications).
type LowBalanceHook func(
	ctx context.Context, q store.Querier, accountID uuid.UUID, environment, currency string, res store.LedgerResult,
) error

// Service places and reads orders.
type Service struct {
	// OnLowBalance, when set, hears of every threshold crossing.
	OnLowBalance LowBalanceHook
	// OnPlaced, when set, hears of every accepted order (metrics).
	OnPlaced func(environment string)
	db       *store.DB
	catalogs *catalog.Cache
	cipher   *codes.Cipher
	estimate Estimate
	log      *slog.Logger
	// Timeout bounds the placement transaction, so a stuck database answers 502 instead of
	// holding the partner's request.
	timeout time.Duration
}

// NewService wires the order service.
func NewService(
	db *store.DB, catalogs *catalog.Cache, cipher *codes.Cipher, estimate Estimate, log *slog.Logger,
) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{db: db, catalogs: catalogs, cipher: cipher, estimate: estimate, log: log, timeout: 10 * time.Second}
}
