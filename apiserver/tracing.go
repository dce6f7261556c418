package apiserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// NewTracerProvider exports spans over OTLP/HTTP to endpoint, the collector's base URL (e.g.
// http://otel-collector:4318) as OTEL_EXPORTER_OTLP_ENDPOINT gives it: the traces path v1/traces
// is appended to it. With an empty endpoint tracing is off and a no-op provider is returned.
// Shut it down to flush.
func NewTracerProvider(
	ctx context.Context, endpoint, service string,
) (trace.TracerProvider, func(context.Context) error, error) {
	if endpoint == "" {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(TracesURL(endpoint)))
	if err != nil {
		return nil, nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res, err := sdkresource.Merge(sdkresource.Default(), sdkresource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// TracesURL is where spans go for the OTLP/HTTP base URL endpoint.
func TracesURL(endpoint string) string { return strings.TrimSuffix(endpoint, "/") + "/v1/traces" }

// headerCarrier reads and writes W3C trace context through Fiber's request headers.
type headerCarrier struct{ c *fiber.Ctx }

func (h headerCarrier) Get(key string) string { return h.c.Get(key) }
func (h headerCarrier) Set(key, value string) { h.c.Request().Header.Set(key, value) }
func (h headerCarrier) Keys() []string {
	var keys []string
	for k := range h.c.Request().Header.All() {
		keys = append(keys, string(k))
	}
	return keys
}

// startSpan opens the request's server span, continuing a caller's trace when traceparent is
// sent; handlers pass the context on, so database and fulfilment spans become its children. The
// returned func ends the span. With tracing off it does nothing at all: a no-op span still
// costs a context and its attributes on every request.
func (s *Server) startSpan(c *fiber.Ctx, requestID []byte) func(route string, status int) {
	if s.tracer == nil {
		return func(string, int) {}
	}
	ctx := propagation.TraceContext{}.Extract(c.UserContext(), headerCarrier{c})
	// The span outlives the request: it keeps a copy of the id, not a view of the request's buffer.
	ctx, span := s.tracer.Start(ctx, c.Method()+" request", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("codeport.request_id", string(requestID))))
	c.SetUserContext(ctx)
	return func(route string, status int) {
		span.SetName(c.Method() + " " + route)
		span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status),
			attribute.String("codeport.environment", s.cfg.Environment))
		span.End()
	}
}
