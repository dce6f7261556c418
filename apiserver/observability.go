package apiserver

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/apiserver/principal"
)

// Metrics are the API's Prometheus instruments. Labels are bounded: route templates, not paths;
// environments and outcomes, never partners' order ids.
type Metrics struct {
	requests     *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	rateLimited  *prometheus.CounterVec
	authFailures *prometheus.CounterVec
	// statusLabels are the status codes 100-599 as label values, formatted once.
	statusLabels [600]string
}

// statusLabel is status as a label value.
func (m *Metrics) statusLabel(status int) string {
	if status >= 100 && status < len(m.statusLabels) {
		return m.statusLabels[status]
	}
	return strconv.Itoa(status)
}

// NewMetrics registers the API's instruments on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codeport_http_requests_total", Help: "HTTP requests by environment, route template, method and status.",
		}, []string{"environment", "route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "codeport_http_request_duration_seconds",
			Help:    "HTTP request latency by environment, route template and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"environment", "route", "method"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codeport_rate_limited_total", Help: "Requests refused with 429, by environment and bucket kind (key or ip).",
		}, []string{"environment", "bucket"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codeport_auth_failures_total", Help: "Requests refused by the access pipeline, by environment and reason.",
		}, []string{"environment", "reason"}),
	}
	for status := 100; status < len(m.statusLabels); status++ {
		m.statusLabels[status] = strconv.Itoa(status)
	}
	reg.MustRegister(m.requests, m.latency, m.rateLimited, m.authFailures)
	return m
}

// Reasons the access pipeline refuses a request.
const (
	authMissing     = "missing_key"
	authInvalid     = "invalid_key"
	authIPDenied    = "ip_not_allowed"
	authSuspended   = "suspended"
	authUnavailable = "lookup_failed"
)

func (s *Server) countAuthFailure(reason string) {
	if s.metrics != nil {
		s.metrics.authFailures.WithLabelValues(s.cfg.Environment, reason).Inc()
	}
}

func (s *Server) countRateLimited(bucket string) {
	if s.metrics != nil {
		s.metrics.rateLimited.WithLabelValues(s.cfg.Environment, bucket).Inc()
	}
}

// HeaderRequestID carries the request id, accepted from clients and echoed on every response.
const HeaderRequestID = "X-Request-Id"

// maxRequestIDLength is the longest X-Request-Id taken from a client.
const maxRequestIDLength = 128

// validRequestID says whether a client's X-Request-Id is kept: 1 to 128 of A-Z a-z 0-9 . _ : -,
// which can be logged and echoed as they are.
func validRequestID(id []byte) bool {
	if len(id) == 0 || len(id) > maxRequestIDLength {
		return false
	}
	for _, c := range id {
		alphanumeric := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alphanumeric && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

// requestIDs issues the ids of requests that came without one: a random per-process prefix and
// a counter, unique across replicas without asking the kernel for randomness per request.
type requestIDs struct {
	prefix string
	issued atomic.Uint64
}

func newRequestIDs() *requestIDs {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &requestIDs{prefix: hex.EncodeToString(b) + "-"}
}

// issuedIDSize holds an issued id: the 17-character prefix and a 64-bit counter in hex.
const issuedIDSize = 17 + 16

// appendNext appends a new id to dst.
func (r *requestIDs) appendNext(dst []byte) []byte {
	return strconv.AppendUint(append(dst, r.prefix...), r.issued.Add(1), 16)
}

// beginAnswer gives every answer what it carries whatever it says: the request's id (the
// client's X-Request-Id when it is valid, else a new one appended to issued) and the protective
// headers. It returns the id, which aliases the request or issued and lives as long as the request.
func (s *Server) beginAnswer(req *fasthttp.RequestHeader, resp *fasthttp.ResponseHeader, issued []byte) []byte {
	id := req.Peek(HeaderRequestID)
	if !validRequestID(id) {
		id = s.requestIDs.appendNext(issued)
	}
	resp.SetBytesV(HeaderRequestID, id)
	setProtectiveHeaders(resp)
	return id
}

// methodName is method as a string that outlives the request: the constant for the methods the
// API serves, a copy for any other.
func methodName(method string) string {
	switch method {
	case fiber.MethodGet:
		return fiber.MethodGet
	case fiber.MethodPost:
		return fiber.MethodPost
	case fiber.MethodHead:
		return fiber.MethodHead
	case fiber.MethodOptions:
		return fiber.MethodOptions
	}
	return strings.Clone(method)
}

// observe assigns the request id and, when the request is done, counts it and writes one
// structured log line. Only metadata is logged: never headers or bodies, so keys, codes and
// secrets cannot leak into logs.
func (s *Server) observe(c *fiber.Ctx) error {
	start := time.Now()
	var issued [issuedIDSize]byte
	id := s.beginAnswer(&c.Request().Header, &c.Response().Header, issued[:0])
	endSpan := s.startSpan(c, id)
	err := c.Next()
	if err != nil {
		if herr := s.app.Config().ErrorHandler(c, err); herr != nil {
			_ = c.SendStatus(fiber.StatusInternalServerError)
		}
	}
	status := c.Response().StatusCode()
	// Fiber's strings alias buffers reused by the next request: copy what outlives this one.
	method := methodName(c.Method())
	// Requests refused by the access pipeline never reach their route: they count under the
	// group's prefix (/v2, /v1), and their line names the path they were sent to.
	matched, registered := s.routePaths[c.Route().Path]
	route := matched.name
	if !registered || route == "/" && c.Path() != "/" {
		route = unmatchedRoute
	}
	var path []byte
	if !registered || !matched.endpoint {
		path = c.Request().URI().PathOriginal()
	}
	end := time.Now()
	endSpan(route, status)
	s.finished(id, &requestRecord{at: end, caller: principal.FromRequest(c), method: method, route: route,
		path: path, status: status, elapsed: end.Sub(start), clientIP: s.clientIP(c)})
	return nil
}

// routePath is a path of the route table; endpoint when a handler of the API serves it, not only
// middleware (a group's prefix, the app's /).
type routePath struct {
	name     string
	endpoint bool
}

// setProtectiveHeaders marks every answer as not to be stored by any cache (answers carry
// redemption codes, balances and per-partner prices) and as JSON that must not be sniffed as
// another type.
func setProtectiveHeaders(h *fasthttp.ResponseHeader) {
	h.Set(fiber.HeaderCacheControl, "no-store")
	h.Set(fiber.HeaderXContentTypeOptions, "nosniff")
}

// unmatchedRoute is the route under which requests that no route of the table took count.
const unmatchedRoute = "unmatched"

// finished counts the finished request id and writes its log line.
func (s *Server) finished(id []byte, r *requestRecord) {
	if s.metrics != nil {
		s.metrics.requests.WithLabelValues(s.cfg.Environment, r.route, r.method, s.metrics.statusLabel(r.status)).Inc()
		s.metrics.latency.WithLabelValues(s.cfg.Environment, r.route, r.method).Observe(r.elapsed.Seconds())
	}
	if s.requestLog != nil {
		s.requestLog.write(id, r)
	}
}

// refuseUnknownMethods passes to next the requests whose method the router knows and refuses the
// others with the contract's 405 (Fiber would answer them with a plain-text 400 before any
// middleware). They count under method "other": the method is the client's free text, and a label
// value per text would let clients grow the metrics without bound.
func (s *Server) refuseUnknownMethods(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	known := map[string]bool{}
	for _, m := range s.app.Config().RequestMethods {
		known[m] = true
	}
	return func(ctx *fasthttp.RequestCtx) {
		if known[string(ctx.Method())] {
			next(ctx)
			return
		}
		if allow := s.methods.allow(string(ctx.Path())); allow != "" {
			ctx.Response.Header.Set(fiber.HeaderAllow, allow)
		}
		s.refuseBeforeRouting(ctx, "other", apierror.MethodNotAllowed())
	}
}

// refuseUnreadable answers a request fasthttp could not read: a body over the limit, headers too
// large, a read timeout, or malformed HTTP.
func (s *Server) refuseUnreadable(ctx *fasthttp.RequestCtx, err error) {
	var e *apierror.Error
	var netErr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = apierror.BodyTooLarge(s.cfg.BodyLimit)
	case errors.As(err, new(*fasthttp.ErrSmallBuffer)):
		e = apierror.New(fasthttp.StatusRequestHeaderFieldsTooLarge, "Request header fields too large")
	case errors.As(err, &netErr) && netErr.Timeout():
		e = apierror.New(fasthttp.StatusRequestTimeout, "Request timeout")
	default:
		e = apierror.New(fasthttp.StatusBadRequest, "Malformed HTTP request")
	}
	method := "other"
	if m := string(ctx.Method()); slices.Contains(s.app.Config().RequestMethods, m) {
		method = methodName(m)
	}
	s.refuseBeforeRouting(ctx, method, e)
}

// refuseBeforeRouting answers a request that never reaches the route table as every other
// answer goes out: the contract's error body, an X-Request-Id, and the X-RateLimit-* headers.
// Like requests refused before a key is established, it counts against its client IP's bucket,
// which answers 429 once exhausted. It is counted and logged under route unmatchedRoute, its
// line naming the path.
func (s *Server) refuseBeforeRouting(ctx *fasthttp.RequestCtx, method string, e *apierror.Error) {
	start := time.Now()
	var issued [issuedIDSize]byte
	id := s.beginAnswer(&ctx.Request.Header, &ctx.Response.Header, issued[:0])
	ip := s.clientIPOf(ctx.RemoteIP(), ctx.Request.Header.PeekAll(fiber.HeaderXForwardedFor))
	if d, err := s.limiter.Allow(ctx, "ip:"+ip.String(), s.cfg.UnauthenticatedRatePerMinute, start); err != nil {
		s.log.WarnContext(ctx, "rate limiter unavailable", slog.Any("err", err))
	} else {
		setRateLimitHeaders(&ctx.Response.Header, d)
		if !d.Allowed {
			s.countRateLimited("ip")
			retry := d.RetryAfter(start)
			ctx.Response.Header.Set(fiber.HeaderRetryAfter, strconv.FormatInt(retry, 10))
			e = apierror.RateLimited(retry)
		}
	}
	// The error's fields are plain strings and an integer: encoding cannot fail.
	body, _ := json.Marshal(e)
	ctx.SetStatusCode(e.Status)
	ctx.SetContentType(fiber.MIMEApplicationJSON)
	ctx.SetBody(body)
	end := time.Now()
	s.finished(id, &requestRecord{at: end, method: method, route: unmatchedRoute, path: ctx.URI().PathOriginal(),
		status: e.Status, elapsed: end.Sub(start), clientIP: ip})
}
