package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// WebhookTarget is where an account's events go.
type WebhookTarget struct {
	URL string
	// SealedSecret opens with the codes key for Owner; nil until the operator has sealed it.
	SealedSecret []byte
	SecretKey    KeyRef // the codes key SealedSecret is sealed under
	Owner        string
	EventTypes   []string
	// Partner (namespace/name, as the wallet gauges name it) and Environment label the
	// delivery metrics.
	Partner     string
	Environment string
}

// webhooksSQL finds the enabled webhook endpoints of the accounts $1 (one row per account that
// has one, keyed by the account).
const webhooksSQL = `SELECT a.id, w.partner_id, w.environment, w.url, w.sealed_secret, w.secret_key_ref,
		w.event_types, p.namespace || '/' || p.name
	FROM webhook_endpoints w
	JOIN accounts a ON a.partner_id = w.partner_id AND a.environment = w.environment
	JOIN partners p ON p.id = a.partner_id
	WHERE a.id = ANY($1) AND w.enabled AND w.url <> '' AND p.deleted_at IS NULL`

// WebhookFor returns the enabled webhook endpoint of an account's partner in the account's
// environment, or ErrNotFound.
func WebhookFor(ctx context.Context, q Querier, accountID uuid.UUID) (WebhookTarget, error) {
	targets, err := WebhooksFor(ctx, q, []uuid.UUID{accountID})
	if err != nil {
		return WebhookTarget{}, err
	}
	t, ok := targets[accountID]
	if !ok {
		return WebhookTarget{}, ErrNotFound
	}
	return t, nil
}

// WebhooksFor returns the enabled webhook endpoints of accounts, in one statement, by account;
// an account without one is absent.
func WebhooksFor(ctx context.Context, q Querier, accounts []uuid.UUID) (map[uuid.UUID]WebhookTarget, error) {
	ids := make([]pgtype.UUID, len(accounts))
	for i, a := range accounts {
		ids[i] = pgUUID(a)
	}
	rows, err := q.Query(ctx, webhooksSQL, ids)
	if err != nil {
		return nil, fmt.Errorf("find webhooks: %w", err)
	}
	out := map[uuid.UUID]WebhookTarget{}
	var account, partnerID uuid.UUID
	var environment string
	var t WebhookTarget
	if _, err := pgx.ForEachRow(rows, []any{&account, &partnerID, &environment, &t.URL, &t.SealedSecret, &t.SecretKey,
		&t.EventTypes, &t.Partner},
		func() error {
			t.Owner = WebhookSecretOwner(partnerID, environment)
			t.Environment = environment
			out[account] = t
			t = WebhookTarget{}
			return nil
		}); err != nil {
		return nil, fmt.Errorf("find webhooks: %w", err)
	}
	return out, nil
}

// InsertWebhookEvent records an event before its delivery is scheduled.
func InsertWebhookEvent(ctx context.Context, q Querier, e *WebhookEvent) error {
	_, err := q.Exec(ctx, `INSERT INTO webhook_events (id, account_id, type, payload, created_at)
		VALUES ($1, $2, $3, $4, $5)`, e.ID, pgUUID(e.AccountID), e.Type, []byte(e.Payload), e.CreatedAt)
	if err != nil {
		return fmt.Errorf("record webhook event: %w", err)
	}
	return nil
}

// Delivery states of a webhook event.
const (
	WebhookPending   = "pending"
	WebhookDelivered = "delivered"
	WebhookFailed    = "failed"
)

const webhookEventColumns = `id, account_id, type, payload, created_at, delivered_at, state, attempts, last_attempt_at`

func scanWebhookEvent(row pgx.Row) (WebhookEvent, error) {
	var e WebhookEvent
	var payload []byte
	if err := row.Scan(&e.ID, &e.AccountID, &e.Type, &payload, &e.CreatedAt, &e.DeliveredAt, &e.State, &e.Attempts,
		&e.LastAttemptAt); err != nil {
		return WebhookEvent{}, err
	}
	e.Payload = payload
	return e, nil
}

// WebhookEventByID loads an event.
func WebhookEventByID(ctx context.Context, q Querier, id string) (WebhookEvent, error) {
	e, err := scanWebhookEvent(q.QueryRow(ctx, `SELECT `+webhookEventColumns+` FROM webhook_events WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return WebhookEvent{}, ErrNotFound
	}
	if err != nil {
		return WebhookEvent{}, fmt.Errorf("load webhook event: %w", err)
	}
	return e, nil
}

// RecordWebhookAttempt counts one delivery attempt of an event.
func RecordWebhookAttempt(ctx context.Context, q Querier, id string) error {
	_, err := q.Exec(ctx, `UPDATE webhook_events SET attempts = attempts + 1, last_attempt_at = now() WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("record webhook attempt: %w", err)
	}
	return nil
}

// MarkWebhookDelivered records a successful delivery of a pending event; delivered_at keeps the
// first one.
func MarkWebhookDelivered(ctx context.Context, q Querier, id string) error {
	_, err := q.Exec(ctx, `UPDATE webhook_events SET state = 'delivered', delivered_at = coalesce(delivered_at, now())
		WHERE id = $1 AND state = 'pending'`, id)
	if err != nil {
		return fmt.Errorf("mark webhook delivered: %w", err)
	}
	return nil
}

// MarkWebhookFailed records that a pending event's delivery gave up.
func MarkWebhookFailed(ctx context.Context, q Querier, id string) error {
	_, err := q.Exec(ctx, `UPDATE webhook_events SET state = 'failed' WHERE id = $1 AND state = 'pending'`, id)
	if err != nil {
		return fmt.Errorf("mark webhook failed: %w", err)
	}
	return nil
}

// WebhookEventCursor is the position after which a listing continues: the last event of the
// previous page.
type WebhookEventCursor struct {
	CreatedAt time.Time
	ID        string
}

// WebhookEventQuery selects an account's events, newest first.
type WebhookEventQuery struct {
	// Type, when not empty, keeps only events of that type.
	Type string
	// After, when set, starts the page below that position.
	After *WebhookEventCursor
	Limit int
}

// ListWebhookEvents returns a page of an account's events, newest first.
func ListWebhookEvents(
	ctx context.Context, q Querier, accountID uuid.UUID, wq WebhookEventQuery,
) ([]WebhookEvent, error) {
	// With no cursor the keyset bound is above every row: one statement, one plan.
	after := WebhookEventCursor{CreatedAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	if wq.After != nil {
		after = *wq.After
	}
	rows, err := q.Query(ctx, `SELECT `+webhookEventColumns+` FROM webhook_events
		WHERE account_id = $1 AND ($2 = '' OR type = $2) AND (created_at, id) < ($3, $4)
		ORDER BY created_at DESC, id DESC LIMIT $5`,
		pgUUID(accountID), wq.Type, after.CreatedAt, after.ID, wq.Limit)
	if err != nil {
		return nil, fmt.Errorf("list webhook events: %w", err)
	}
	defer rows.Close()
	var out []WebhookEvent
	for rows.Next() {
		e, err := scanWebhookEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("list webhook events: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list webhook events: %w", err)
	}
	return out, nil
}

// WebhookReplay selects the events of one account to deliver again.
type WebhookReplay struct {
	AccountID    uuid.UUID
	Since, Until time.Time
	// Type, when not empty, keeps only events of that type.
	Type string
	// Limit bounds the events queued by one replay.
	Limit int
	// Job is the delivery job template: its Args are replaced by each event's {"eventId": id}.
	Job Job
}

// ReplayedEvents is what a replay queued.
type ReplayedEvents struct {
	Queued int
	// Last is the creation time of the newest event queued (zero when none was).
	Last time.Time
}

// QueueWebhookReplay moves the account's delivered and failed events created in [Since, Until)
// back to pending, oldest first and at most Limit of them, and queues one delivery job for each,
// in one statement. Events already pending keep their one queued delivery: the row locks make
// concurrent replays queue each event once.
func QueueWebhookReplay(ctx context.Context, q Querier, r WebhookReplay) (ReplayedEvents, error) {
	var res ReplayedEvents
	var last *time.Time
	err := q.QueryRow(ctx, `WITH picked AS (
			SELECT id FROM webhook_events
			WHERE account_id = $1 AND created_at >= $2 AND created_at < $3 AND ($4 = '' OR type = $4)
				AND state <> 'pending'
			ORDER BY created_at, id LIMIT $5 FOR UPDATE),
		marked AS (
			UPDATE webhook_events e SET state = 'pending' FROM picked
			WHERE e.id = picked.id AND e.state <> 'pending' RETURNING e.id, e.created_at),
		queued AS (
			INSERT INTO river_job (kind, queue, args, max_attempts)
			SELECT $6, $7, jsonb_build_object('eventId', id), $8 FROM marked RETURNING 1)
		SELECT (SELECT count(*) FROM queued), (SELECT max(created_at) FROM marked)`,
		pgUUID(r.AccountID), r.Since, r.Until, r.Type, r.Limit, r.Job.Kind, r.Job.Queue, r.Job.MaxAttempts).
		Scan(&res.Queued, &last)
	if err != nil {
		return ReplayedEvents{}, fmt.Errorf("queue webhook replay: %w", err)
	}
	if last != nil {
		res.Last = *last
	}
	return res, nil
}

// PruneWebhookEvents deletes up to batch events created before cutoff whose delivery is not
// pending, and returns how many it deleted.
func PruneWebhookEvents(ctx context.Context, q Querier, cutoff time.Time, batch int) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM webhook_events WHERE id IN (
		SELECT id FROM webhook_events WHERE created_at < $1 AND state <> 'pending' ORDER BY created_at LIMIT $2)`,
		cutoff, batch)
	if err != nil {
		return 0, fmt.Errorf("prune webhook events: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Contact is who hears about an account by e-mail.
type Contact struct {
	Partner      string
	DisplayName  string
	ContactEmail string
	Environment  string
}

// ContactOf returns an account's partner contact.
func ContactOf(ctx context.Context, q Querier, accountID uuid.UUID) (Contact, error) {
	var c Contact
	err := q.QueryRow(ctx, `SELECT p.namespace || '/' || p.name, p.display_name, p.contact_email, a.environment
		FROM accounts a JOIN partners p ON p.id = a.partner_id WHERE a.id = $1`, pgUUID(accountID)).
		Scan(&c.Partner, &c.DisplayName, &c.ContactEmail, &c.Environment)
	if errors.Is(err, pgx.ErrNoRows) {
		return Contact{}, ErrNotFound
	}
	if err != nil {
		return Contact{}, fmt.Errorf("find contact: %w", err)
	}
	return c, nil
}

// ProductSubscriber is an account that asked for product events of its catalog.
type ProductSubscriber struct {
	AccountID   uuid.UUID
	Environment string
	// EventTypes are the product event types its endpoint lists.
	EventTypes []string
}

// ProductSubscribers returns the accounts of live partners bound to the catalog whose enabled
// endpoint lists any of eventTypes.
func ProductSubscribers(
	ctx context.Context, q Querier, catalogID uuid.UUID, eventTypes []string,
) ([]ProductSubscriber, error) {
	rows, err := q.Query(ctx, `SELECT a.id, a.environment, w.event_types
		FROM partners p
		JOIN accounts a ON a.partner_id = p.id
		JOIN webhook_endpoints w ON w.partner_id = a.partner_id AND w.environment = a.environment
		WHERE p.catalog_id = $1 AND p.deleted_at IS NULL AND w.enabled AND w.url <> ''
		  AND w.event_types && $2::text[]
		ORDER BY a.id`, pgUUID(catalogID), eventTypes)
	if err != nil {
		return nil, fmt.Errorf("find product event subscribers: %w", err)
	}
	subs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ProductSubscriber, error) {
		var s ProductSubscriber
		var id pgtype.UUID
		err := row.Scan(&id, &s.Environment, &s.EventTypes)
		s.AccountID = uuid.UUID(id.Bytes)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("find product event subscribers: %w", err)
	}
	return subs, nil
}
