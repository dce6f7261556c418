// Package notify tells partners what happened: signed webhooks (Standard Webhooks scheme) for
// finished orders and low balances, and a low-balance e-mail once per crossing. Events are
// recorded and their deliveries enqueued in the same transaction as the change they report, so
// an event exists exactly when its change committed; River delivers them at least once.
package notify

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"gorm.io/gorm"

	"github.com/codeport/codeport/apiserver/apitime"
	"github.com/codeport/codeport/apiserver/fulfilment"
	"github.com/codeport/codeport/apiserver/money"
	"github.com/codeport/codeport/apiserver/store"
)

// Event types of the spec.
const (
	EventOrderCompleted          = "order.completed"
	EventOrderFailed             = "order.failed"
	EventOrderPartiallyCompleted = "order.partially_completed"
	EventBalanceLow              = "balance.low"
)

// QueueName is the River queue of an environment's notifications.
func QueueName(environment string) string { return "notify_" + environment }

// Event is the webhook body: the spec's draft payload.
type Event struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// Environment is sandbox or production: the same externalOrderCode can exist in both.
	Environment string       `json:"environment"`
	CreatedAt   apitime.Time `json:"createdAt"`
	Data        any          `json:"data"`
}

// OrderData is the data of order.* events.
type OrderData struct {
	OrderID           uuid.UUID `json:"orderId"`
	ExternalOrderCode string    `json:"externalOrderCode"`
	Status            string    `json:"status"`
}

// BalanceData is the data of balance.low events; amounts in major units.
type BalanceData struct {
	Currency  string      `json:"currency"`
	Balance   json.Number `json:"balance"`
	Threshold json.Number `json:"threshold"`
}

// Notifier raises events inside the transactions that cause them.
type Notifier struct {
	queue *river.Client[*sql.Tx]
	// Mail is false when no SMTP server is configured: low balances then raise webhooks only.
	mail        bool
	maxAttempts int
}

// NewNotifier builds a notifier enqueuing on db; mail says whether e-mails are sent.
func NewNotifier(db *store.DB, mail bool, retry Retry) (*Notifier, error) {
	client, err := river.NewClient(riverdatabasesql.New(db.SQL), &river.Config{})
	if err != nil {
		return nil, fmt.Errorf("notification queue: %w", err)
	}
	return &Notifier{queue: client, mail: mail, maxAttempts: retry.attemptsFor24h()}, nil
}

func sqlTx(tx *gorm.DB) (*sql.Tx, error) {
	s, ok := tx.Statement.ConnPool.(*sql.Tx)
	if !ok {
		return nil, errors.New("notification raised outside a database/sql transaction")
	}
	return s, nil
}

// raise records an event for the account's webhook (when it has one that wants this type) and
// schedules its delivery, in tx.
func (n *Notifier) raise(
	ctx context.Context, tx *gorm.DB, accountID uuid.UUID, environment, eventType string, data any,
) error {
	target, err := store.WebhookFor(ctx, tx, accountID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(target.EventTypes) > 0 && !slices.Contains(target.EventTypes, eventType) {
		return nil
	}
	ev := Event{
		ID:          "evt_" + uuid.Must(uuid.NewV7()).String(),
		Type:        eventType,
		Environment: environment,
		CreatedAt:   apitime.Of(time.Now()),
		Data:        data,
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	if err := store.InsertWebhookEvent(tx, &store.WebhookEvent{ID: ev.ID, AccountID: accountID, Type: eventType,
		Payload: payload, CreatedAt: ev.CreatedAt.Time}); err != nil {
		return err
	}
	stx, err := sqlTx(tx)
	if err != nil {
		return err
	}
	_, err = n.queue.InsertTx(ctx, stx, DeliverArgs{EventID: ev.ID},
		&river.InsertOpts{Queue: QueueName(environment), MaxAttempts: n.maxAttempts})
	if err != nil {
		return fmt.Errorf("schedule webhook delivery: %w", err)
	}
	return nil
}

// OrderFinished is a fulfilment hook: it raises order.completed, order.partially_completed or
// order.failed in the finishing transaction.
func (n *Notifier) OrderFinished(ctx context.Context, tx *gorm.DB, f fulfilment.Finished) error {
	eventType := map[string]string{
		store.OrderCompleted: EventOrderCompleted, store.OrderFailed: EventOrderFailed,
		store.OrderPartiallyCompleted: EventOrderPartiallyCompleted,
	}[f.Status]
	if eventType == "" {
		return nil
	}
	return n.raise(ctx, tx, f.Order.AccountID, f.Environment, eventType,
		OrderData{OrderID: f.Order.ID, ExternalOrderCode: f.Order.ExternalOrderCode, Status: f.Status})
}

// BalanceCrossedBelow raises balance.low and schedules the e-mail, in the transaction of the
// debit that crossed the threshold. Callers invoke it only on a crossing, so there is one of
// each per crossing, however many orders follow while the balance stays low.
func (n *Notifier) BalanceCrossedBelow(
	ctx context.Context, tx *gorm.DB, accountID uuid.UUID, environment, currency string, res store.LedgerResult,
) error {
	balance, err := money.Number(res.BalanceAfter, currency)
	if err != nil {
		return err
	}
	threshold, err := money.Number(res.Threshold, currency)
	if err != nil {
		return err
	}
	data := BalanceData{Currency: currency, Balance: balance, Threshold: threshold}
	if err := n.raise(ctx, tx, accountID, environment, EventBalanceLow, data); err != nil {
		return err
	}
	if !n.mail {
		return nil
	}
	stx, err := sqlTx(tx)
	if err != nil {
		return err
	}
	_, err = n.queue.InsertTx(ctx, stx,
		EmailArgs{AccountID: accountID, Currency: currency, Balance: res.BalanceAfter, Threshold: res.Threshold},
		&river.InsertOpts{Queue: QueueName(environment), MaxAttempts: n.maxAttempts})
	if err != nil {
		return fmt.Errorf("schedule low-balance e-mail: %w", err)
	}
	return nil
}
