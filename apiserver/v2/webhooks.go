package v2

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/codeport/codeport/apiserver/principal"
	"github.com/codeport/codeport/internal/notify"
)

// Webhooks serves the recovery endpoints of an account's webhook events.
type Webhooks struct {
	events *notify.Events
}

// NewWebhooks builds the webhook recovery handlers over one environment's events.
func NewWebhooks(events *notify.Events) *Webhooks {
	return &Webhooks{events: events}
}

// Events serves GET /webhooks/events: the account's events, newest first, with their delivery.
func (h *Webhooks) Events(c *fiber.Ctx) error {
	q, err := notify.ParseEventQuery(c.Context().QueryArgs())
	if err != nil {
		return err
	}
	page, err := h.events.List(c.UserContext(), principal.FromRequest(c).Account.ID, q)
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
	res, err := h.events.Replay(c.UserContext(), principal.FromRequest(c).Account.ID, r)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(res)
}
