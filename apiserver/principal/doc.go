// Package principal carries the authenticated caller on a Fiber request: the access middleware
// attaches the auth.Principal it resolved, and handlers read it back. It is the one piece of
// authentication that knows about Fiber, so that auth itself stays free of the HTTP framework.
package principal
