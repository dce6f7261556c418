package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/apiserver/principal"
	"github.com/codeport/codeport/apiserver/ratelimit"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/pgtext"
	"github.com/codeport/codeport/internal/recovery"
	"github.com/codeport/codeport/internal/tenancy"
)

// credential says how an interface carries its key: v2 uses x-api-key, legacy v1 a bearer token.
type credential struct {
	kind    tenancy.KeyKind
	extract func(c *fiber.Ctx) string
	missing func() *apierror.Error
	invalid func() *apierror.Error
}

// bearerCredential is the legacy v1 interface's Authorization: Bearer <token>.
var bearerCredential = credential{
	kind: tenancy.BearerToken,
	extract: func(c *fiber.Ctx) string {
		scheme, token, ok := strings.Cut(strings.TrimSpace(c.Get(fiber.HeaderAuthorization)), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return ""
		}
		return strings.TrimSpace(token)
	},
	missing: apierror.MissingBearerToken,
	invalid: apierror.InvalidBearerToken,
}

var apiKeyCredential = credential{
	kind:    tenancy.APIKey,
	extract: func(c *fiber.Ctx) string { return c.Get("x-api-key") },
	missing: apierror.MissingAPIKey,
	invalid: apierror.InvalidAPIKey,
}

// access is the request pipeline of docs/architecture.md, in its order: key (401) → IP allowlist (403) →
// rate limit (429) → handler. Requests that fail before a key is established are limited per
// client IP, so guessing keys costs the same as using one. Every response carries the
// X-RateLimit-* headers, errors included.
func (s *Server) access(cred credential) fiber.Handler {
	return func(c *fiber.Ctx) error {
		now := time.Now()
		ip := s.clientIP(c)

		reject := func(reason string, e *apierror.Error) error {
			s.countAuthFailure(reason)
			if err := s.limit(c, "ip", "ip:"+ip.String(), s.cfg.UnauthenticatedRatePerMinute, now); err != nil {
				return err
			}
			return e
		}

		key := cred.extract(c)
		if key == "" {
			return reject(authMissing, cred.missing())
		}
		p, err := s.keys.Lookup(c.UserContext(), key, cred.kind)
		if err != nil {
			if errors.Is(err, auth.ErrInvalidKey) {
				return reject(authInvalid, cred.invalid())
			}
			s.log.ErrorContext(c.UserContext(), "key lookup failed", slog.Any("err", err))
			// The database is unreachable: answer as the spec does for an unavailable upstream.
			if c.Method() == fiber.MethodPost && strings.HasSuffix(c.Path(), "/orders") {
				return reject(authUnavailable, apierror.OrderCreationFailed())
			}
			return reject(authUnavailable,
				apierror.New(fiber.StatusBadGateway, "Service temporarily unavailable. Please try again later."))
		}
		if !p.Account.Allows(ip) {
			return reject(authIPDenied, apierror.IPNotWhitelisted(ip.String()))
		}
		if p.Account.Suspended {
			return reject(authSuspended, apierror.AccountSuspended())
		}
		principal.Attach(c, p)
		if err := s.limit(c, "key", p.RateBucket, p.Account.RateLimitPerMinute, now); err != nil {
			return err
		}
		return c.Next()
	}
}

// storableQuery refuses a request whose query has a name or value that is not valid UTF-8 or
// holds NUL. Handlers hand query values to PostgreSQL (an externalOrderCode filter, a cursor's
// id), which refuses such text with the whole statement: checked here once, for every parameter
// of every route, the mistake is the client's 400 and never a failed query.
func (s *Server) storableQuery(c *fiber.Ctx) error {
	for name, value := range c.Context().QueryArgs().All() {
		if !pgtext.StorableBytes(name) || !pgtext.StorableBytes(value) {
			return apierror.BadRequest(fmt.Sprintf("Query parameter %q must be valid UTF-8 text without NUL characters", name))
		}
	}
	return c.Next()
}

// recoverHandler answers a request whose handling panicked with the contract's 500, logged
// with its stack and request id; the connection and every other request go on.
func (s *Server) recoverHandler(c *fiber.Ctx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			log := s.log.With(slog.String("request_id", string(c.Response().Header.Peek(HeaderRequestID))))
			_ = recovery.Recovered(c.UserContext(), log, c.Method()+" "+c.Route().Path, v) // logged; answered below
			err = apierror.Internal()
		}
	}()
	return c.Next()
}

// recoverPanics is the outermost handler: a panic that escapes every other (in the request's
// observation or its error handler, which run outside recoverHandler) answers that request the
// contract's 500 instead of ending the process and every partner's connection with it.
func (s *Server) recoverPanics(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			id := string(ctx.Response.Header.Peek(HeaderRequestID))
			_ = recovery.Recovered(ctx, s.log.With(slog.String("request_id", id)), "request "+string(ctx.Path()), v)
			ctx.Response.Reset()
			var issued [issuedIDSize]byte
			if id == "" {
				s.beginAnswer(&ctx.Request.Header, &ctx.Response.Header, issued[:0])
			} else {
				ctx.Response.Header.Set(HeaderRequestID, id)
				setProtectiveHeaders(&ctx.Response.Header)
			}
			// The error's fields are plain strings and an integer: encoding cannot fail.
			body, _ := json.Marshal(apierror.Internal())
			ctx.SetStatusCode(fasthttp.StatusInternalServerError)
			ctx.SetContentType(fiber.MIMEApplicationJSON)
			ctx.SetBody(body)
		}()
		next(ctx)
	}
}

// limit counts one request against bucket, sets the rate-limit headers, and returns the 429
// error when the bucket is exhausted.
func (s *Server) limit(c *fiber.Ctx, kind, bucket string, perMinute int, now time.Time) error {
	d, err := s.limiter.Allow(c.UserContext(), bucket, perMinute, now)
	if err != nil {
		// The limiter protects the service; an outage of its backend must not take the API down.
		s.log.WarnContext(c.UserContext(), "rate limiter unavailable", slog.Any("err", err))
		return nil
	}
	setRateLimitHeaders(&c.Response().Header, d)
	if !d.Allowed {
		s.countRateLimited(kind)
		retry := d.RetryAfter(now)
		c.Set(fiber.HeaderRetryAfter, strconv.FormatInt(retry, 10))
		return apierror.RateLimited(retry)
	}
	return nil
}

func setRateLimitHeaders(h *fasthttp.ResponseHeader, d ratelimit.Decision) {
	// fasthttp would write X-Ratelimit-Limit; the contract spells X-RateLimit-Limit, and clients
	// with case-sensitive header maps look for exactly that. Every other header of the response
	// is set with its canonical spelling.
	h.DisableNormalizing()
	var digits [20]byte
	for _, header := range d.Headers() {
		// The header keeps its own copy of the value.
		h.SetBytesV(header.Name, strconv.AppendInt(digits[:0], header.Value, 10))
	}
}

// clientIP is the TCP peer, or the forwarded client when the peer is a configured trusted proxy.
// The access pipeline and the request log each work it out: that costs less than keeping it in
// the request's locals, which would box it on the heap.
func (s *Server) clientIP(c *fiber.Ctx) netip.Addr {
	return s.clientIPOf(c.Context().RemoteIP(), c.Request().Header.PeekAll(fiber.HeaderXForwardedFor))
}

// clientIPOf is the client of a request from peer whose X-Forwarded-For lines are forwardedFor.
func (s *Server) clientIPOf(peer net.IP, forwardedFor [][]byte) netip.Addr {
	addr, _ := netip.AddrFromSlice(peer)
	return auth.ClientIP(addr.Unmap(), forwardedFor, s.cfg.TrustedProxies)
}

// errorHandler renders every error as the contract's body. Anything that is not an API error is
// logged and becomes the contract's 500, without internals.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	apiErr, ok := apierror.As(err)
	if !ok {
		var fe *fiber.Error
		switch {
		case errors.As(err, &fe) && fe.Code == fiber.StatusRequestEntityTooLarge:
			apiErr = apierror.BodyTooLarge(s.cfg.BodyLimit)
		case errors.As(err, &fe) && fe.Code == fiber.StatusNotFound && c.Path() == "/":
			apiErr = apierror.RootNotFound(c.Method())
		case errors.As(err, &fe) && fe.Code == fiber.StatusNotFound:
			apiErr = apierror.RouteNotFound(c.Method(), c.Path())
		case errors.As(err, &fe) && fe.Code == fiber.StatusMethodNotAllowed:
			if allow := s.methods.allow(c.Path()); allow != "" {
				c.Set(fiber.HeaderAllow, allow)
			}
			apiErr = apierror.MethodNotAllowed()
		case errors.As(err, &fe) && fe.Code < 500:
			apiErr = apierror.New(fe.Code, fe.Message)
		default:
			s.log.ErrorContext(c.UserContext(), "unhandled error", slog.String("path", c.Route().Path),
				slog.String("request_id", string(c.Response().Header.Peek(HeaderRequestID))), slog.Any("err", err))
			apiErr = apierror.Internal()
		}
	}
	return c.Status(apiErr.Status).JSON(apiErr)
}
