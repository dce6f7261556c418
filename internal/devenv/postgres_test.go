package devenv

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestEmbeddedPostgresRestart starts the embedded server twice on one state directory: the second
// start must reuse the data (codeport dev keeps orders and balances across restarts).
func TestEmbeddedPostgresRestart(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	ctx := context.Background()

	pg, err := StartEmbeddedPostgres(state, io.Discard, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		_ = pg.Stop()
		t.Fatalf("connect: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = conn.Close(ctx)
	if err := pg.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}

	pg, err = StartEmbeddedPostgres(state, io.Discard, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer func() { _ = pg.Stop() }()
	conn, err = pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("data after restart: v=%d err=%v", v, err)
	}
}
