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
