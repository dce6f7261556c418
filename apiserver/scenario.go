package apiserver

import (
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/internal/tenancy"
)

// ScenarioHeader asks the sandbox to fail a request the way production can.
const ScenarioHeader = "X-Sandbox-Scenario"

// Scenarios a sandbox request can force.
const (
	// ScenarioTimeout runs the request, then, once the configured delay has passed, answers 504
	// as a gateway whose upstream timed out would: an order is placed all the same.
	ScenarioTimeout = "timeout"
	// ScenarioRateLimited answers the contract's 429 with Retry-After.
	ScenarioRateLimited = "rate-limited"
	// ScenarioServerError answers the contract's 500.
	ScenarioServerError = "server-error"
	// ScenarioInsufficientFunds answers POST /orders with the contract's 422 insufficient funds.
	ScenarioInsufficientFunds = "insufficient-funds"
)

// Scenarios are the values ScenarioHeader takes.
var Scenarios = []string{ScenarioTimeout, ScenarioRateLimited, ScenarioServerError, ScenarioInsufficientFunds}

// MaxSandboxTimeoutDelay bounds the timeout scenario's delay, below the server's write timeout
// and the patience of common HTTP clients.
const MaxSandboxTimeoutDelay = 25 * time.Second

// parseScenario reads a ScenarioHeader value exactly as the documents' pattern states it: one of
// Scenarios in lower case. HTTP has already dropped the whitespace around a header's value; a
// value in other letter case is unknown, as the documents say, so that a test which passes
// against the sandbox sends what a generated client sends.
func parseScenario(value string) (string, bool) {
	if slices.Contains(Scenarios, value) {
		return value, true
	}
	return "", false
}

// isPlaceOrder says whether the request places an order.
func isPlaceOrder(c *fiber.Ctx) bool {
	return c.Method() == fiber.MethodPost && strings.HasSuffix(strings.TrimSuffix(c.Path(), "/"), "/orders")
}

// sandboxScenario forces the failure a sandbox request asks for in ScenarioHeader, after the key,
// allowlist and rate-limit checks (whose headers the answer keeps). Production ignores the header.
func (s *Server) sandboxScenario(c *fiber.Ctx) error {
	if tenancy.Environment(s.cfg.Environment) != tenancy.Sandbox {
		return c.Next()
	}
	raw := c.Get(ScenarioHeader)
	if raw == "" {
		return c.Next()
	}
	scenario, ok := parseScenario(raw)
	if !ok {
		return apierror.UnknownSandboxScenario(raw, Scenarios)
	}
	switch scenario {
	case ScenarioRateLimited:
		return forceRateLimited(c, time.Now())
	case ScenarioServerError:
		return apierror.Internal()
	case ScenarioInsufficientFunds:
		if isPlaceOrder(c) {
			return apierror.InsufficientFunds()
		}
		return c.Next()
	default:
		return s.forceTimeout(c)
	}
}

// forceRateLimited answers as an exhausted window does: no requests remaining, Retry-After the
// seconds until the window's reset.
func forceRateLimited(c *fiber.Ctx, now time.Time) error {
	retry := int64(1)
	if reset, err := strconv.ParseInt(string(c.Response().Header.Peek("X-RateLimit-Reset")), 10, 64); err == nil {
		retry = max(reset-now.Unix(), 1)
	}
	c.Response().Header.Set("X-RateLimit-Remaining", "0")
	c.Set(fiber.HeaderRetryAfter, strconv.FormatInt(retry, 10))
	return apierror.RateLimited(retry)
}

// forceTimeout runs the request, so that whatever it does (placing an order) happens as it would
// behind a gateway that gave up waiting, then answers 504 once the configured delay has passed.
func (s *Server) forceTimeout(c *fiber.Ctx) error {
	start := time.Now()
	if err := c.Next(); err != nil {
		if _, ok := apierror.As(err); !ok {
			s.log.ErrorContext(c.UserContext(), "request under the timeout scenario failed", slog.Any("err", err))
		}
	}
	timer := time.NewTimer(min(s.cfg.SandboxTimeoutDelay, MaxSandboxTimeoutDelay) - time.Since(start))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-c.Context().Done():
	}
	c.Response().ResetBody()
	c.Response().Header.Del("Idempotent-Replayed")
	return apierror.GatewayTimeout()
}
