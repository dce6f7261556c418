package apiserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/apiserver/ratelimit"
	v1 "github.com/codeport/codeport/apiserver/v1"
	v2 "github.com/codeport/codeport/apiserver/v2"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/catalog"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/orders"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/wallet"
)

// Config is what varies between deployments of the API.
type Config struct {
	// Environment is "sandbox" or "production": the only keys this server accepts.
	Environment    string
	TrustedProxies []netip.Prefix
	// UnauthenticatedRatePerMinute limits, per client IP, requests that fail authentication.
	UnauthenticatedRatePerMinute int
	BodyLimit                    int
	ReadTimeout                  time.Duration
	WriteTimeout                 time.Duration
	IdleTimeout                  time.Duration
	// Estimate predicts estimatedReadyAt; its Slow is also how long the sandbox Slow product takes.
	Estimate orders.Estimate
	// SandboxTimeoutDelay is how long the sandbox's timeout scenario waits before its 504 (at
	// most MaxSandboxTimeoutDelay).
	SandboxTimeoutDelay time.Duration
	// V1Lifecycle is announced on every answer of the legacy v1 interface.
	V1Lifecycle Lifecycle
	// PublicBaseURL is the scheme and host partners reach this environment at (no path, e.g.
	// https://sandbox.api.example.com): the server the OpenAPI documents name. Empty, they name
	// the server each request reached, as the request (or a trusted proxy) gives it.
	PublicBaseURL string
	// DatabaseOutageGrace is how long /readyz keeps a replica ready after the database last
	// answered it. Every replica shares the database: were each to leave its Service when the
	// primary fails over, partners would meet refused connections instead of the contract's
	// retryable 502, and the catalog, served from memory, would go down with the database. A
	// replica cut off for longer than the grace leaves, so that replicas that still reach the
	// database take its requests. A replica that never reached it is not ready.
	DatabaseOutageGrace time.Duration
}

// DefaultConfig returns production-ready defaults for env.
func DefaultConfig(env string) Config {
	return Config{
		Environment:                  env,
		UnauthenticatedRatePerMinute: 60,
		BodyLimit:                    1 << 20,
		ReadTimeout:                  10 * time.Second,
		WriteTimeout:                 30 * time.Second,
		IdleTimeout:                  120 * time.Second,
		Estimate:                     orders.DefaultEstimate(),
		SandboxTimeoutDelay:          10 * time.Second,
		V1Lifecycle:                  Lifecycle{Deprecation: DefaultV1Deprecation, Docs: DefaultLifecycleDocs},
		// Above a CloudNativePG failover or switchover under load (measured up to two minutes
		// until the database answered again, on a loaded 2-CPU node).
		DatabaseOutageGrace: 3 * time.Minute,
	}
}

// Deps are the shared services a server uses; the caller owns their lifecycles.
type Deps struct {
	DB      *store.DB
	Limiter ratelimit.Limiter
	Cipher  *codes.Cipher
	// Notifier, when set, raises webhooks and low-balance e-mails.
	Notifier *notify.Notifier
	// Metrics and OrderMetrics, when set, receive the API's instruments (one set per process,
	// shared by its listeners).
	Metrics      *Metrics
	OrderMetrics *OrderMetrics
	// Tracing provides the spans of requests; nil means tracing off.
	Tracing trace.TracerProvider
	Logger  *slog.Logger
	// RequestLog receives a JSON line per finished request, shaped as Logger's JSON lines are;
	// nil, requests are not logged. If it has a Flush method, the line of a 5xx answer is
	// flushed at once.
	RequestLog io.Writer
	// CompactRequestLog makes the request lines short text for a person at a terminal
	// (codeport dev) instead of JSON for a log pipeline.
	CompactRequestLog bool
}

// Server is the partner API of one environment, with its in-memory caches.
type Server struct {
	cfg      Config
	db       *store.DB
	keys     *auth.Directory
	catalogs *catalog.Cache
	limiter  ratelimit.Limiter
	metrics  *Metrics
	tracer   trace.Tracer
	log      *slog.Logger
	app      *fiber.App
	// requestIDs names the requests that arrive without an X-Request-Id.
	requestIDs *requestIDs
	// routePaths are the paths of the route table, each once: a request's route names outlive it
	// without a copy.
	routePaths map[string]routePath
	methods    methodTable
	// requestLog writes the line of every finished request; nil when requests are not logged.
	requestLog *requestLog
	// databaseAnswered is when the database last answered a readiness ping (Unix nanoseconds;
	// 0: never).
	databaseAnswered atomic.Int64
}

// New builds the server and its route table.
func New(cfg Config, deps Deps) *Server {
	s := &Server{cfg: cfg, db: deps.DB, limiter: deps.Limiter, log: deps.Logger, metrics: deps.Metrics,
		keys:       auth.NewDirectory(deps.DB, cfg.Environment),
		catalogs:   catalog.NewCache(deps.DB, tenancy.Environment(cfg.Environment)),
		requestIDs: newRequestIDs()}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With(slog.String("environment", cfg.Environment))
	if deps.RequestLog != nil {
		s.requestLog = newRequestLog(deps.RequestLog, cfg.Environment)
		s.requestLog.compact = deps.CompactRequestLog
	}
	// No tracer when spans would go nowhere (no provider, or a no-op one).
	if _, off := deps.Tracing.(noop.TracerProvider); deps.Tracing != nil && !off {
		s.tracer = deps.Tracing.Tracer("github.com/codeport/codeport/apiserver")
	}
	orderService := orders.NewService(deps.DB, s.catalogs, deps.Cipher, cfg.Estimate, s.log)
	if deps.Notifier != nil {
		orderService.OnLowBalance = deps.Notifier.BalanceCrossedBelow
	}
	if deps.OrderMetrics != nil {
		orderService.OnPlaced = deps.OrderMetrics.Placed
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "codeport",
		DisableStartupMessage: true,
		BodyLimit:             cfg.BodyLimit,
		ReadTimeout:           cfg.ReadTimeout,
		WriteTimeout:          cfg.WriteTimeout,
		IdleTimeout:           cfg.IdleTimeout,
		ReadBufferSize:        16 << 10,
		// Room for the headers and a catalog page together: a body that does not fit behind the
		// headers costs a second write system call, which was a third of a list request's CPU.
		WriteBufferSize: 16 << 10,
		// Idle keep-alive connections (partners' client pools) hand their buffers back instead of
		// holding 32 KB each until they close. fasthttp flushes the writer before handing it back
		// since v1.78; v1.51 did not when pipelined requests were waiting, and lost answers.
		ReduceMemoryUsage: true,
		// A multipart body would be parsed as the request is read, before the key is checked,
		// and answered 400 when malformed: every POST of the API takes JSON, which the handler
		// asks for (415) after the key was checked (401).
		DisablePreParseMultipartForm: true,
		ErrorHandler:                 s.errorHandler,
	})
	notifier := deps.Notifier
	if notifier == nil {
		notifier = notify.NewNotifier(false, notify.DefaultRetry())
	}
	current := v2.NewHandlers(cfg.Environment, s.catalogs, orderService, wallet.NewService(deps.DB),
		int(cfg.Estimate.Slow/time.Second))
	current.Log = s.log
	s.routes(current, v1.NewHandlers(s.catalogs), v2.NewWebhooks(notify.NewEvents(deps.DB, notifier, cfg.Environment)))
	s.routePaths = map[string]routePath{}
	for _, r := range s.app.GetRoutes() {
		s.routePaths[r.Path] = routePath{name: r.Path, endpoint: s.routePaths[r.Path].endpoint}
	}
	for _, r := range s.app.GetRoutes(true) {
		s.routePaths[r.Path] = routePath{name: r.Path, endpoint: true}
	}
	s.methods = newMethodTable(s.app.GetRoutes(true), s.app.Config().RequestMethods)
	// Requests the router never sees get the same answer as any other.
	s.app.Server().Handler = s.recoverPanics(s.refuseUnknownMethods(s.app.Server().Handler))
	s.app.Server().ErrorHandler = s.refuseUnreadable
	return s
}

// routes is the whole route table of the API.
func (s *Server) routes(h *v2.Handlers, legacy *v1.Handlers, webhooks *v2.Webhooks) {
	app := s.app
	app.Use(s.observe, s.recoverHandler)

	app.Get("/healthz", refuseEncodedBody, func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	app.Get("/readyz", refuseEncodedBody, s.ready)

	// The contract and its reference page need no key.
	s.docsRoutes()

	api := app.Group("/v2", s.access(apiKeyCredential), refuseEncodedBody, s.storableQuery, s.sandboxScenario)
	api.Get("/ping", h.Ping)
	api.Get("/catalog/products", withETag(h.ListProducts))
	api.Get("/catalog/products/:productCode", withETag(h.GetProduct))
	api.Post("/orders", h.PlaceOrder)
	api.Get("/orders/:reference", h.GetOrder)
	api.Get("/wallet", h.Wallet)
	// Additions to the contract: order history and statements, cursor-paged.
	api.Get("/orders", h.ListOrders)
	api.Get("/wallet/transactions", h.Statement)
	if tenancy.Environment(s.cfg.Environment) == tenancy.Sandbox {
		// The production API has no such resource: its document lists no such path.
		api.Get("/sandbox/scenarios", h.SandboxScenarios)
	}
	api.Get("/webhooks/events", webhooks.Events)
	api.Post("/webhooks/replay", webhooks.Replay)
	// Paths no route takes still answer in the contract's error shape, with rate-limit headers.
	api.Use(s.unrouted)

	old := app.Group("/v1", announceLifecycle(s.cfg.V1Lifecycle), s.access(bearerCredential), refuseEncodedBody,
		s.storableQuery, s.sandboxScenario)
	old.Get("/catalog", withETag(legacy.Catalog))
	old.Get("/catalog/products", withETag(legacy.Products))
	old.Get("/catalog/product", withETag(legacy.Product))
	old.Use(s.unrouted)
}

// unrouted answers a request no route took: 405 with an Allow header when the path is served
// for other methods, else 404.
func (s *Server) unrouted(c *fiber.Ctx) error {
	if allow := s.methods.allow(c.Path()); allow != "" {
		c.Set(fiber.HeaderAllow, allow)
		return apierror.MethodNotAllowed()
	}
	return apierror.RouteNotFound(c.Method(), c.Path())
}

func (s *Server) ready(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	if err := s.db.Ping(ctx); err != nil {
		answered := s.databaseAnswered.Load()
		if answered == 0 || time.Since(time.Unix(0, answered)) > s.cfg.DatabaseOutageGrace {
			return apierror.Unavailable("database unreachable")
		}
		return c.JSON(fiber.Map{"status": "ready", "database": "unreachable"})
	}
	s.databaseAnswered.Store(time.Now().UnixNano())
	return c.JSON(fiber.Map{"status": "ready"})
}

// Run keeps the caches fresh from the database's configuration notifications until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	return s.keys.Run(ctx, s.catalogs)
}

// App exposes the Fiber application, e.g. for Listener or Test.
func (s *Server) App() *fiber.App { return s.app }

// Listen serves on addr until Shutdown.
func (s *Server) Listen(addr string) error { return s.app.Listen(addr) }

// Shutdown stops accepting connections and waits for in-flight requests up to ctx's deadline.
func (s *Server) Shutdown(ctx context.Context) error { return s.app.ShutdownWithContext(ctx) }

// Serve serves on an existing listener until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.app.Listener(ln) }
