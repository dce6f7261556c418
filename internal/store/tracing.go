package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// queryTracer records a span per statement, pipelined or not. Only the SQL text (with
// placeholders) is recorded, never the arguments, so keys and codes stay out of traces.
type queryTracer struct {
	tracer trace.Tracer
}

type spanKey struct{}

// batchSpan is the span of a pipelined batch and when its last result arrived.
type batchSpan struct {
	span trace.Span
	ctx  context.Context
	last time.Time
}

type batchKey struct{}

// traced reports whether ctx belongs to traced work (a request, a job): only its statements
// are worth a span.
func traced(ctx context.Context) bool { return trace.SpanFromContext(ctx).SpanContext().IsValid() }

func (q *queryTracer) start(
	ctx context.Context, name, statement string, opts ...trace.SpanStartOption,
) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{attribute.String("db.system", "postgresql")}
	if statement != "" {
		attrs = append(attrs, attribute.String("db.statement", statement))
	}
	opts = append(opts, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return q.tracer.Start(ctx, name, opts...)
}

func end(span trace.Span, err error, opts ...trace.SpanEndOption) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "statement failed")
	}
	span.End(opts...)
}

func (q *queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !traced(ctx) {
		return ctx
	}
	ctx, span := q.start(ctx, "db.query", data.SQL)
	return context.WithValue(ctx, spanKey{}, span)
}

func (q *queryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if span, ok := ctx.Value(spanKey{}).(trace.Span); ok {
		end(span, data.Err)
	}
}

// TraceBatchStart opens a span for a pipelined batch; each of its statements becomes a db.query
// child span, lasting from the previous result's arrival to its own.
func (q *queryTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	if !traced(ctx) {
		return ctx
	}
	ctx, span := q.start(ctx, "db.batch", "")
	return context.WithValue(ctx, batchKey{}, &batchSpan{span: span, ctx: ctx, last: time.Now()})
}

func (q *queryTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	b, ok := ctx.Value(batchKey{}).(*batchSpan)
	if !ok {
		return
	}
	now := time.Now()
	_, span := q.start(b.ctx, "db.query", data.SQL, trace.WithTimestamp(b.last))
	end(span, data.Err, trace.WithTimestamp(now))
	b.last = now
}

func (q *queryTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	if b, ok := ctx.Value(batchKey{}).(*batchSpan); ok {
		end(b.span, data.Err)
	}
}
