package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// WebhookTarget is where an account's events go.
type WebhookTarget struct {
	URL string
	// SealedSecret opens with the codes key for Owner; nil until the operator has sealed it.
	SealedSecret []byte
	Owner        string
	EventTypes   []string
}

// WebhookFor returns the enabled webhook endpoint of an account's partner in the account's
// environment, or ErrNotFound.
func WebhookFor(ctx context.Context, q Querier, accountID uuid.UUID) (WebhookTarget, error) {
	var t WebhookTarget
	var partnerID uuid.UUID
	var environment string
	err := q.QueryRow(ctx, `SELECT w.partner_id, w.environment, w.url, w.sealed_secret, w.event_types
		FROM webhook_endpoints w
		JOIN accounts a ON a.partner_id = w.partner_id AND a.environment = w.environment
		JOIN partners p ON p.id = a.partner_id
		WHERE a.id = $1 AND w.enabled AND p.deleted_at IS NULL`, pgUUID(accountID)).
		Scan(&partnerID, &environment, &t.URL, &t.SealedSecret, &t.EventTypes)
	if errors.Is(err, pgx.ErrNoRows) {
		return WebhookTarget{}, ErrNotFound
	}
	if err != nil {
		return WebhookTarget{}, fmt.Errorf("find webhook: %w", err)
	}
	if t.URL == "" {
		return WebhookTarget{}, ErrNotFound
	}
	t.Owner = WebhookSecretOwner(partnerID, environment)
	return t, nil
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

// WebhookEventByID loads an event.
func WebhookEventByID(ctx context.Context, q Querier, id string) (WebhookEvent, error) {
	var e WebhookEvent
	var payload []byte
	err := q.QueryRow(ctx, `SELECT id, account_id, type, payload, created_at, delivered_at
		FROM webhook_events WHERE id = $1`, id).
		Scan(&e.ID, &e.AccountID, &e.Type, &payload, &e.CreatedAt, &e.DeliveredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return WebhookEvent{}, ErrNotFound
	}
	if err != nil {
		return WebhookEvent{}, fmt.Errorf("load webhook event: %w", err)
	}
	e.Payload = payload
	return e, nil
}

// MarkWebhookDelivered records the first successful delivery of an event.
func MarkWebhookDelivered(ctx context.Context, q Querier, id string) error {
	_, err := q.Exec(ctx, `UPDATE webhook_events SET delivered_at = now() WHERE id = $1 AND delivered_at IS NULL`, id)
	if err != nil {
		return fmt.Errorf("mark webhook delivered: %w", err)
	}
	return nil
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
