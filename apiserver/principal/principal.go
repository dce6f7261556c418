// Package principal carries the authenticated caller on a Fiber request: the access middleware
// attaches the auth.Principal it resolved, and handlers read it back. It is the one piece of
// authentication that knows about Fiber, so that auth itself stays free of the HTTP framework.
package principal

import (
	"github.com/gofiber/fiber/v2"

	"github.com/codeport/codeport/internal/auth"
)

const local = "codeport.principal"

// Attach records the authenticated caller on the request.
func Attach(c *fiber.Ctx, p *auth.Principal) { c.Locals(local, p) }

// FromRequest returns the caller recorded by Attach. Handlers behind the access pipeline can
// rely on it being set.
func FromRequest(c *fiber.Ctx) *auth.Principal {
	p, _ := c.Locals(local).(*auth.Principal)
	return p
}
