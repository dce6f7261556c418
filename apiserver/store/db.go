// Package store owns the PostgreSQL schema (embedded goose migrations), the GORM models and every
// SQL statement of the data plane. Other packages call its functions rather than writing SQL.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// DB bundles the three views of one connection pool: pgx for River and LISTEN, database/sql for
// migrations, and GORM for the data plane's queries. They share connections, so a process holds
// one pool however many subsystems use the database.
type DB struct {
	Pool *pgxpool.Pool
	SQL  *sql.DB
	Gorm *gorm.DB
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
	if opts.Tracing != nil {
		cfg.ConnConfig.Tracer = &queryTracer{tracer: opts.Tracing.Tracer("github.com/codeport/codeport/apiserver/store")}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	gormDB, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		TranslateError:         true,
	})
	if err != nil {
		_ = sqlDB.Close()
		pool.Close()
		return nil, fmt.Errorf("open gorm: %w", err)
	}
	return &DB{Pool: pool, SQL: sqlDB, Gorm: gormDB}, nil
}

// Close releases every connection.
func (db *DB) Close() {
	_ = db.SQL.Close()
	db.Pool.Close()
}

// Warm opens the pool's minimum of idle connections (Options.MinIdleConns) and waits until they
// are established, so that a process that reports ready does not make its first requests wait for
// connections.
func (db *DB) Warm(ctx context.Context) error {
	n := int(db.Pool.Config().MinIdleConns)
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	type acquired struct {
		conn *pgxpool.Conn
		err  error
	}
	results := make(chan acquired, n)
	for range n {
		go func() {
			c, err := db.Pool.Acquire(ctx)
			results <- acquired{c, err}
		}()
	}
	var errs []error
	for range n {
		r := <-results
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		conns = append(conns, r.conn)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("open %d database connections: %w", n, err)
	}
	return nil
}

// Ping reports whether the database answers, for readiness probes.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}
