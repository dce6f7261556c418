// Package v2 holds the handlers of the current partner API. Each one parses the request, calls
// the package that owns the rule, and renders the result; none holds business logic.
package v2

import (
	"fmt"
	"net/url"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/apiserver/auth"
	"github.com/codeport/codeport/apiserver/catalog"
	"github.com/codeport/codeport/apiserver/orders"
	"github.com/codeport/codeport/apiserver/store"
	"github.com/codeport/codeport/apiserver/wallet"
)

// Handlers serves /v2 for one environment.
type Handlers struct {
	environment string
	db          *store.DB
	catalogs    *catalog.Cache
	orders      *orders.Service
	slowSeconds int
}

// NewHandlers builds the v2 handlers; slowSeconds is how long the sandbox Slow product takes.
func NewHandlers(
	environment string, db *store.DB, catalogs *catalog.Cache, ordersService *orders.Service, slowSeconds int,
) *Handlers {
	return &Handlers{environment: environment, db: db, catalogs: catalogs, orders: ordersService, slowSeconds: slowSeconds}
}

// Ping answers the connectivity check.
func (h *Handlers) Ping(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok", "timestamp": time.Now().UTC().Format(time.RFC3339Nano)})
}

func (h *Handlers) snapshot(c *fiber.Ctx) (*catalog.Snapshot, error) {
	snap, err := h.catalogs.ForAccount(c.UserContext(), auth.FromRequest(c).Account)
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// ListProducts serves GET /catalog/products with the spec's filters and paging.
func (h *Handlers) ListProducts(c *fiber.Ctx) error {
	var parser catalog.QueryParser
	c.Context().QueryArgs().VisitAll(func(k, v []byte) { parser.Add(utils.UnsafeString(k), utils.UnsafeString(v)) })
	q, apiErr := parser.Query()
	if apiErr != nil {
		return apiErr
	}
	snap, err := h.snapshot(c)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	// Encode into the response's own pooled body buffer: a list page costs no allocation once
	// the server is warm.
	resp := c.Response()
	resp.SwapBody(snap.AppendListJSON(resp.SwapBody(nil)[:0], q))
	return nil
}

// GetProduct serves GET /catalog/products/{productCode}.
func (h *Handlers) GetProduct(c *fiber.Ctx) error {
	code := c.Params("productCode")
	snap, err := h.snapshot(c)
	if err != nil {
		return err
	}
	body, ok := snap.DetailJSON(code)
	if !ok {
		return apierror.ProductNotFound(code)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

// PlaceOrder serves POST /orders: 202 for a new order, 200 with Idempotent-Replayed for a replay.
func (h *Handlers) PlaceOrder(c *fiber.Ctx) error {
	if !c.Is("json") {
		return apierror.UnsupportedMediaType()
	}
	view, replayed, err := h.orders.Place(c.UserContext(), auth.FromRequest(c).Account, c.Body())
	if err != nil {
		return err
	}
	if replayed {
		c.Set("Idempotent-Replayed", "true")
		return c.Status(fiber.StatusOK).JSON(view)
	}
	return c.Status(fiber.StatusAccepted).JSON(view)
}

// GetOrder serves GET /orders/{reference} (orderId or externalOrderCode).
func (h *Handlers) GetOrder(c *fiber.Ctx) error {
	reference, err := url.PathUnescape(c.Params("reference"))
	if err != nil {
		reference = c.Params("reference")
	}
	view, err := h.orders.Get(c.UserContext(), auth.FromRequest(c).Account, reference)
	if err != nil {
		return err
	}
	return c.JSON(view)
}

// Wallet serves GET /wallet.
func (h *Handlers) Wallet(c *fiber.Ctx) error {
	acct := auth.FromRequest(c).Account
	view, err := wallet.Read(c.UserContext(), h.db.Pool, acct.ID, acct.LowBalanceThreshold)
	if err != nil {
		return fmt.Errorf("read wallet: %w", err)
	}
	return c.JSON(view)
}

// SandboxScenarios serves GET /sandbox/scenarios; the production API has no such resource.
func (h *Handlers) SandboxScenarios(c *fiber.Ctx) error {
	if h.environment != store.EnvironmentSandbox {
		return apierror.RouteNotFound(c.Method(), c.Path())
	}
	return c.JSON(fiber.Map{"scenarios": catalog.Scenarios(h.slowSeconds)})
}
