package v2

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/apiserver/principal"
	"github.com/codeport/codeport/internal/apitime"
	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/listing"
	"github.com/codeport/codeport/internal/orders"
	"github.com/codeport/codeport/internal/pgtext"
	"github.com/codeport/codeport/internal/recovery"
	"github.com/codeport/codeport/internal/wallet"
)

// Handlers serves /v2 for one environment.
type Handlers struct {
	environment string
	catalogs    *catalog.Cache
	orders      *orders.Service
	wallets     *wallet.Service
	slowSeconds int
	// Log, when set, hears of statements cut short while streaming.
	Log *slog.Logger
	// parsers are ListProducts' query parsers, reused so that parsing allocates nothing.
	parsers sync.Pool
}

// NewHandlers builds the v2 handlers; slowSeconds is how long the sandbox Slow product takes.
func NewHandlers(
	environment string, catalogs *catalog.Cache, ordersService *orders.Service, wallets *wallet.Service, slowSeconds int,
) *Handlers {
	return &Handlers{environment: environment, catalogs: catalogs, orders: ordersService, wallets: wallets,
		slowSeconds: slowSeconds}
}

// Ping answers the connectivity check.
func (h *Handlers) Ping(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok", "timestamp": apitime.Of(time.Now())})
}

func (h *Handlers) snapshot(c *fiber.Ctx) (*catalog.Snapshot, error) {
	snap, err := h.catalogs.ForAccount(c.UserContext(), principal.FromRequest(c).Account)
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// ListProducts serves GET /catalog/products with the spec's filters and paging.
func (h *Handlers) ListProducts(c *fiber.Ctx) error {
	parser, _ := h.parsers.Get().(*catalog.QueryParser)
	if parser == nil {
		parser = new(catalog.QueryParser)
	}
	// The query's strings live in the parser: it goes back to the pool once the page is written.
	defer h.parsers.Put(parser)
	parser.Reset()
	for k, v := range c.Context().QueryArgs().All() {
		parser.Add(utils.UnsafeString(k), utils.UnsafeString(v))
	}
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
	if err := jsonBody(c, true); err != nil {
		return err
	}
	// The body as received: Ctx.Body would decode a Content-Encoding without bound, should a
	// compressed body ever get past the refusal in front of this handler.
	view, replayed, err := h.orders.Place(c.UserContext(), principal.FromRequest(c).Account, c.Request().Body())
	if err != nil {
		return err
	}
	if replayed {
		c.Set("Idempotent-Replayed", "true")
		return c.Status(fiber.StatusOK).JSON(view)
	}
	return c.Status(fiber.StatusAccepted).JSON(view)
}

// jsonBody refuses a request body that is not JSON in UTF-8 (a charset, when named, must be
// utf-8). required: the route needs a body, so an empty one must also say it is JSON.
func jsonBody(c *fiber.Ctx, required bool) error {
	if !required && len(c.Request().Body()) == 0 {
		return nil
	}
	if !c.Is("json") {
		return apierror.UnsupportedMediaType()
	}
	if cs := charset(c.Get(fiber.HeaderContentType)); cs != "" && !strings.EqualFold(cs, "utf-8") {
		return apierror.UnsupportedMediaType()
	}
	return nil
}

// charset is the charset parameter of a Content-Type, unquoted, or "".
func charset(contentType string) string {
	_, params, _ := strings.Cut(contentType, ";")
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		name, value, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(name), "charset") {
			return strings.Trim(strings.TrimSpace(value), `"`)
		}
	}
	return ""
}

// GetOrder serves GET /orders/{reference} (orderId or externalOrderCode).
func (h *Handlers) GetOrder(c *fiber.Ctx) error {
	reference, err := url.PathUnescape(c.Params("reference"))
	if err != nil {
		reference = c.Params("reference")
	}
	if !pgtext.Storable(reference) {
		// No order can have such a reference: PostgreSQL could not have stored it.
		return apierror.OrderNotFound(reference)
	}
	view, err := h.orders.Get(c.UserContext(), principal.FromRequest(c).Account, reference)
	if err != nil {
		return err
	}
	return c.JSON(view)
}

// Wallet serves GET /wallet.
func (h *Handlers) Wallet(c *fiber.Ctx) error {
	acct := principal.FromRequest(c).Account
	view, err := h.wallets.Read(c.UserContext(), acct.ID, acct.LowBalanceThreshold)
	if err != nil {
		return fmt.Errorf("read wallet: %w", err)
	}
	return c.JSON(view)
}

// SandboxScenarios serves GET /sandbox/scenarios, a route of the sandbox alone.
func (h *Handlers) SandboxScenarios(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"scenarios": catalog.Scenarios(h.slowSeconds)})
}

// MIMETextCSV is the media type of statements in CSV: RFC 4180 with a header row.
const MIMETextCSV = "text/csv"

// csvStreamTimeout bounds the streaming of one CSV page after its headers are sent.
const csvStreamTimeout = 30 * time.Second

// Statement serves GET /wallet/transactions: a page of the account's ledger, as JSON, or as CSV
// streamed row by row when the client prefers text/csv (Accept).
func (h *Handlers) Statement(c *fiber.Ctx) error {
	acct := principal.FromRequest(c).Account
	q, err := listing.Parse(c.Context().QueryArgs(), listing.Statement, acct.ID, listing.ParamCurrency)
	if err != nil {
		return err
	}
	if c.Accepts(fiber.MIMEApplicationJSON, MIMETextCSV) != MIMETextCSV {
		page, err := h.wallets.Statement(c.UserContext(), acct.ID, q)
		if err != nil {
			return fmt.Errorf("read statement: %w", err)
		}
		return c.JSON(page)
	}
	next, write, err := h.wallets.StatementCSV(c.UserContext(), acct.ID, q)
	if err != nil {
		return fmt.Errorf("read statement: %w", err)
	}
	if next != "" {
		c.Set("X-Next-Cursor", next)
	}
	c.Set(fiber.HeaderContentType, MIMETextCSV+"; charset=utf-8; header=present")
	if c.Method() == fiber.MethodHead {
		// A HEAD answer has no body: fasthttp never reads a stream, so none is started.
		return nil
	}
	streamCSV(c, h.Log, write)
	return nil
}

// streamCSV sends write's CSV as the body. The writer runs on a goroutine of its own after the
// handler returns, while fasthttp sends the response and may already be reading the
// connection's next request: it must not touch c or its RequestCtx, and the request's context
// must not end its query. It recovers its own panic, so a statement can only cost its own
// connection.
func streamCSV(c *fiber.Ctx, log *slog.Logger, write func(context.Context, io.Writer) error) {
	if log == nil {
		log = slog.Default()
	}
	log = log.With(slog.String("request_id", string(c.Response().Header.Peek("X-Request-Id"))))
	ctx, conn := context.WithoutCancel(c.UserContext()), c.Context().Conn()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		ctx, cancel := context.WithTimeout(ctx, csvStreamTimeout)
		defer cancel()
		sink := &failedWrites{w: w}
		err := recovery.Do(ctx, log, "statement writer", func() { err := write(ctx, sink); sink.source = err })
		if err == nil {
			err = sink.source
		}
		if err == nil || sink.err != nil {
			// A failed write means the client is gone or the response was abandoned: fasthttp
			// has closed, or is done with, the connection; closing it here could cut another
			// request's answer.
			return
		}
		// The statement failed while fasthttp still waits for the rest of this body: closing
		// the connection mid-body is how the client learns that the statement is incomplete,
		// rather than taking a short page for a whole one.
		log.ErrorContext(ctx, "stream statement", slog.Any("err", err))
		_ = conn.Close()
	})
}

// failedWrites remembers the first error of the response's side, to tell it from the
// statement's.
type failedWrites struct {
	w      io.Writer
	err    error
	source error
}

func (f *failedWrites) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil && f.err == nil {
		f.err = err
	}
	return n, err
}

// ListOrders serves GET /orders: a page of the account's orders, newest first, without codes.
func (h *Handlers) ListOrders(c *fiber.Ctx) error {
	acct := principal.FromRequest(c).Account
	q, err := listing.Parse(c.Context().QueryArgs(), listing.Orders, acct.ID,
		listing.ParamStatus, listing.ParamExternalOrderCode)
	if err != nil {
		return err
	}
	page, err := h.orders.History(c.UserContext(), acct, q)
	if err != nil {
		return err
	}
	return c.JSON(page)
}
