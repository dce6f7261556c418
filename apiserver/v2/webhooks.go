package v2

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/codeport/codeport/apiserver/principal"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/store"
)

// Webhooks serves the recovery endpoints of an account's webhook events.
type Webhooks struct {
	environment string
	db          *store.DB
	notifier    *notify.Notifier
}

// NewWebhooks builds the webhook recovery handlers of one environment.
func NewWebhooks(environment string, db *store.DB, notifier *notify.Notifier) *Webhooks {
	return &Webhooks{environment: environment, db: db, notifier: notifier}
}

// Events serves GET /webhooks/events: the account's events, newest first, with their delivery.
func (h *Webhooks) Events(c *fiber.Ctx) error {
	q, err := notify.ParseEventQuery(c.Context().QueryArgs())
	if err != nil {
		return err
	}
	page, err := notify.ListEvents(c.UserContext(), h.db.Pool, principal.FromRequest(c).Account.ID, q)
	if err != nil {
		return err
	}
	return c.JSON(page)
}

// Replay serves POST /webhooks/replay: 202 with how many events were queued again.
func (h *Webhooks) Replay(c *fiber.Ctx) error {
	// Its parameters are in the query; a body, if one is sent, must still be what a POST of the
	// API takes.
	if err := jsonBody(c, false); err != nil {
		return err
	}
	r, err := notify.ParseReplay(c.Context().QueryArgs(), time.Now())
	if err != nil {
		return err
	}
	res, err := h.notifier.Replay(c.UserContext(), h.db, principal.FromRequest(c).Account.ID, h.environment, r)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(res)
}
