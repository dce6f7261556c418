package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// TestIsUnavailable: what a failover or restart looks like is worth waiting out; a refused
// statement, a login the server refuses for its settings, and the caller's own deadline are not.
// The errors are real ones from a real server where a test can make them.
func TestIsUnavailable(t *testing.T) {
	ctx := t.Context()
	db := storetest.New(t)
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"the caller's deadline", fmt.Errorf("place: %w", context.DeadlineExceeded), false},
		{"the caller gave up", context.Canceled, false},
		{"a statement refused", &pgconn.PgError{Code: "23505"}, false},
		{"a deadlock (retried as transient)", &pgconn.PgError{Code: "40P01"}, false},
		{"the server shutting down", &pgconn.PgError{Code: "57P01"}, true},
		{"the server crashed", &pgconn.PgError{Code: "57P02"}, true},
		{"the server starting or promoting", &pgconn.PgError{Code: "57P03"}, true},
		{"a demoted primary", fmt.Errorf("debit: %w", &pgconn.PgError{Code: "25006"}), true},
		{"PgBouncer's query_wait_timeout", &pgconn.PgError{Code: "08P01"}, true},
		{"a connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"the connection broke", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"no server at the address", connectError(ctx, t, "postgres://u@"+testprocess.Addr(t)+"/d?connect_timeout=5"), true},
		{"a database closed to connections", closedDatabaseError(ctx, t), true},
		{"an unknown database", connectError(ctx, t, withDatabase(t, db.URL, "cpt_no_such_database")), false},
		{"a session the server ended", terminatedSessionError(ctx, t, db.URL), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := store.IsUnavailable(c.err); got != c.want {
				t.Fatalf("IsUnavailable(%v) = %t, want %t", c.err, got, c.want)
			}
		})
	}
}

func connectError(ctx context.Context, t *testing.T, url string) error {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err == nil {
		_ = conn.Close(ctx)
		t.Fatalf("connected to %s", url)
	}
	return err
}

func withDatabase(t *testing.T, url, name string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}

// closedDatabaseError is the refusal of a connection to a database that accepts none (what
// storetest.SetConnectable makes of an outage).
func closedDatabaseError(ctx context.Context, t *testing.T) error {
	t.Helper()
	closed := storetest.New(t)
	storetest.SetConnectable(t, closed.Name, false)
	t.Cleanup(func() { storetest.SetConnectable(t, closed.Name, true) })
	return connectError(ctx, t, closed.URL)
}

// terminatedSessionError is what a statement on a session the server ended returns.
func terminatedSessionError(ctx context.Context, t *testing.T, url string) error {
	t.Helper()
	victim, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = victim.Close(ctx) }()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(ctx) }()
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, victim.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	_, err = victim.Exec(ctx, `SELECT 1`)
	if err == nil {
		t.Fatal("a terminated session ran a statement")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	return err
}

// TestIsDatabaseError: the errors the server returns and failed connections to it are the
// database's; anything else, wrapped or not, is not.
func TestIsDatabaseError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"a statement refused", fmt.Errorf("upsert: %w", &pgconn.PgError{Code: "23505"}), true},
		{"a failed connection", &pgconn.ConnectError{}, true},
		{"the caller's deadline", fmt.Errorf("place: %w", context.DeadlineExceeded), false},
		{"a plain error", errors.New("bad spec"), false},
	}
	for _, c := range cases {
		if got := store.IsDatabaseError(c.err); got != c.want {
			t.Errorf("%s: IsDatabaseError(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
