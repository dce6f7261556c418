package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel/trace"
)

// DB bundles the views of one connection pool: pgx for the data plane, River and LISTEN, and
// database/sql for migrations and for the operator's configuration writes (GORM, in
// internal/provisioning/configdb, opened over SQL). They share connections, so a process holds
// one pool however many subsystems use the database.
type DB struct {
	Pool *pgxpool.Pool
	SQL  *sql.DB
}

// Querier runs statements: the pool (each statement on its own), or a transaction.
// *pgxpool.Pool, pgx.Tx and *pgx.Conn are Queriers.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Tx is a transaction InTx opens. The packages that call store name it, not pgx's: pgx is how
// store runs statements, and no other package runs any.
type Tx = pgx.Tx

// TxBeginner starts transactions: a pool.
type TxBeginner interface {
	Begin(ctx context.Context) (Tx, error)
}

// InTx runs fn in a transaction, committed when fn returns nil and rolled back otherwise.
func (db *DB) InTx(ctx context.Context, fn func(tx Tx) error) error {
	return BeginFunc(ctx, db.Pool, fn)
}

// BeginFunc runs fn in a transaction of db, as InTx does on the process's pool.
func BeginFunc(ctx context.Context, db TxBeginner, fn func(tx Tx) error) error {
	return pgx.BeginFunc(ctx, db, fn)
}

// DefaultMaxConns is the pool size of a serving process. Requests and the fulfilment workers
// (20 at once by default) share it; pgx's own default, max(4, CPUs), would leave them queueing
// for a connection on small nodes.
const DefaultMaxConns = 20

// Options tune the pool. Zero values take defaults suited to one API replica.
type Options struct {
	// MaxConns caps the pool; zero means pool_max_conns of the URL, else DefaultMaxConns.
	MaxConns int32
	// MinIdleConns are kept open and idle, so a burst of requests after a start or a quiet
	// spell does not wait for new connections; Warm opens them before serving.
	MinIdleConns int32
	// ConnectTimeout bounds establishing a connection, so an unreachable database fails requests
	// quickly instead of hanging them.
	ConnectTimeout time.Duration
	// Tracing, when set, records a span per statement of traced work.
	Tracing trace.TracerProvider
}

// Open connects to the database at url and verifies it answers.
func Open(ctx context.Context, url string, opts Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(url, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns
	}
	if opts.MinIdleConns > 0 {
		cfg.MinIdleConns = min(opts.MinIdleConns, cfg.MaxConns)
	}
	if opts.ConnectTimeout > 0 {
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	} else if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	refuseCancelRequests(&cfg.ConnConfig.Config)
	if opts.Tracing != nil {
		cfg.ConnConfig.Tracer = &queryTracer{tracer: opts.Tracing.Tracer("github.com/codeport/codeport/internal/store")}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return &DB{Pool: pool, SQL: stdlib.OpenDBFromPool(pool)}, nil
}

// Close releases every connection.
func (db *DB) Close() {
	_ = db.SQL.Close()
	db.Pool.Close()
}

// Warm waits, at most warmLimit, until the pool holds its minimum of idle connections
// (Options.MinIdleConns), which the pool opens in the background from its creation on, so that
// a process that starts listening does not make its first requests wait for connections. It
// gives up quietly: a cold pool is slower, not broken.
func (db *DB) Warm(ctx context.Context) {
	want := db.Pool.Config().MinIdleConns
	deadline := time.Now().Add(warmLimit)
	for db.Pool.Stat().IdleConns() < want && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// warmLimit bounds how long Warm waits for connections.
const warmLimit = 5 * time.Second

// Ping reports whether the database answers, for readiness probes.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}
