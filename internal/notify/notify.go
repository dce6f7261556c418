package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/codeport/codeport/internal/apitime"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/store"
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
	// Metadata is the order's metadata, when it was placed with some.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// BalanceData is the data of balance.low events; amounts in major units.
type BalanceData struct {
	Currency  string      `json:"currency"`
	Balance   json.Number `json:"balance"`
	Threshold json.Number `json:"threshold"`
}

// Notifier raises events inside the transactions that cause them.
type Notifier struct {
	// Mail is false when no SMTP server is configured: low balances then raise webhooks only.
	mail        bool
	maxAttempts int
}

// NewNotifier builds a notifier; mail says whether e-mails are sent.
func NewNotifier(mail bool, retry Retry) *Notifier {
	return &Notifier{mail: mail, maxAttempts: retry.attemptsFor24h()}
}

// enqueue schedules a job of the environment's notification queue in q.
func (n *Notifier) enqueue(ctx context.Context, q store.Querier, environment string, args river.JobArgs) error {
	job, err := store.NewJob(args, QueueName(environment), n.maxAttempts)
	if err != nil {
		return err
	}
	return store.EnqueueJob(ctx, q, job)
}

// raise records an event for the account's webhook (when it has one that wants this type) and
// schedules its delivery, in the transaction q.
func (n *Notifier) raise(
	ctx context.Context, q store.Querier, accountID uuid.UUID, environment, eventType string, data any,
) error {
	target, err := store.WebhookFor(ctx, q, accountID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return n.raiseTo(ctx, q, target, accountID, environment, eventType, data)
}

// raiseTo records an event for target, the account's webhook, when it wants this type, and
// schedules its delivery, in the transaction q.
func (n *Notifier) raiseTo(ctx context.Context, q store.Querier, target store.WebhookTarget, accountID uuid.UUID,
	environment, eventType string, data any,
) error {
	if len(target.EventTypes) > 0 && !slices.Contains(target.EventTypes, eventType) {
		return nil
	}
	return n.record(ctx, q, accountID, environment, eventType, data)
}

// record stores an event for the account and schedules its delivery, in the transaction q; the
// caller has checked that the account's endpoint wants it.
func (n *Notifier) record(
	ctx context.Context, q store.Querier, accountID uuid.UUID, environment, eventType string, data any,
) error {
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
	if err := store.InsertWebhookEvent(ctx, q, &store.WebhookEvent{ID: ev.ID, AccountID: accountID, Type: eventType,
		Payload: payload, CreatedAt: ev.CreatedAt.Time}); err != nil {
		return err
	}
	return n.enqueue(ctx, q, environment, DeliverArgs{EventID: ev.ID})
}

// OrderFinished is a fulfilment hook: it raises order.completed, order.partially_completed or
// order.failed for each finished order in the finishing transaction. One statement finds the
// webhooks of all their accounts; only orders whose account has one write anything more.
func (n *Notifier) OrderFinished(ctx context.Context, q store.Querier, finished []fulfilment.Finished) error {
	accounts := make([]uuid.UUID, 0, len(finished))
	for _, f := range finished {
		if !slices.Contains(accounts, f.Order.AccountID) {
			accounts = append(accounts, f.Order.AccountID)
		}
	}
	targets, err := store.WebhooksFor(ctx, q, accounts)
	if err != nil {
		return err
	}
	for _, f := range finished {
		target, ok := targets[f.Order.AccountID]
		eventType := orderEvent(f.Status)
		if !ok || eventType == "" {
			continue
		}
		if err := n.raiseTo(ctx, q, target, f.Order.AccountID, f.Environment, eventType,
			OrderData{OrderID: f.Order.ID, ExternalOrderCode: f.Order.ExternalOrderCode, Status: f.Status,
				Metadata: f.Order.Metadata}); err != nil {
			return err
		}
	}
	return nil
}

// orderEvent is the event of an order's terminal status ("" for any other).
func orderEvent(status string) string {
	switch status {
	case store.OrderCompleted:
		return EventOrderCompleted
	case store.OrderPartiallyCompleted:
		return EventOrderPartiallyCompleted
	case store.OrderFailed:
		return EventOrderFailed
	}
	return ""
}

// BalanceCrossedBelow raises balance.low and schedules the e-mail, in the transaction of the
// debit that crossed the threshold. Callers invoke it only on a crossing, so there is one of
// each per crossing, however many orders follow while the balance stays low.
func (n *Notifier) BalanceCrossedBelow(
	ctx context.Context, q store.Querier, accountID uuid.UUID, environment, currency string, res store.LedgerResult,
) error {
	balance, err := money.Number(res.BalanceAfter, currency)
	if err != nil {
		return err
	}
	// The threshold as the partner configured it, as GET /wallet shows it: "0.5" JPY, not the
	// whole yen balances are judged against.
	threshold := json.Number(money.TrimDecimal(res.ThresholdSetting))
	data := BalanceData{Currency: currency, Balance: balance, Threshold: threshold}
	if err := n.raise(ctx, q, accountID, environment, EventBalanceLow, data); err != nil {
		return err
	}
	if !n.mail {
		return nil
	}
	return n.enqueue(ctx, q, environment,
		EmailArgs{AccountID: accountID, Currency: currency, Balance: res.BalanceAfter, Threshold: res.Threshold,
			ThresholdSetting: string(threshold)})
}
