package auth

import "github.com/gofiber/fiber/v2"

const principalLocal = "codeport.principal"

// Attach records the authenticated caller on the request.
func Attach(c *fiber.Ctx, p *Principal) { c.Locals(principalLocal, p) }

// FromRequest returns the caller recorded by Attach. Handlers behind the access pipeline can
// rely on it being set.
func FromRequest(c *fiber.Ctx) *Principal {
	p, _ := c.Locals(principalLocal).(*Principal)
	return p
}
