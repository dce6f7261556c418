package store_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
)

// TestAbandonedCommitWaitsForTheStandby: on a server whose commits wait for a standby that is
// not there (synchronous replication with every standby cut off), a transaction whose caller
// gives up during COMMIT is neither revealed nor lost. While no standby has it, no other session
// sees it and its backend still waits for one: nothing cancelled the wait, which would have made
// it visible on the primary alone. Once the server stops asking for a standby, it is there.
func TestAbandonedCommitWaitsForTheStandby(t *testing.T) {
	pg := storetest.StartPrivateServer(t, `synchronous_standby_names = 'cut_off_standby'`)
	ctx := t.Context()
	observer, err := pgx.Connect(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = observer.Close(context.Background()) }()
	// The observer's own commits must not wait for the standby either.
	if _, err := observer.Exec(ctx, `SET synchronous_commit = local`); err != nil {
		t.Fatal(err)
	}
	if _, err := observer.Exec(ctx, `CREATE TABLE acknowledged (id int)`); err != nil {
		t.Fatal(err)
	}

	db, err := store.Open(ctx, pg.URL(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO acknowledged VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	commitCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = tx.Commit(commitCtx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("COMMIT without a standby, past its deadline: got %v, want the deadline", err)
	}
	// Whatever the driver sends when it gives up on a connection has been sent once this closes.
	<-conn.Conn().PgConn().CleanupDone()
	conn.Release()

	visible := func() int {
		t.Helper()
		var n int
		if err := observer.QueryRow(ctx, `SELECT count(*) FROM acknowledged`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waiting := func() int {
		t.Helper()
		var n int
		if err := observer.QueryRow(ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A cancel request reaches the backend within milliseconds; watch it for longer than that.
	for range 20 {
		if n := visible(); n != 0 {
			log, _ := os.ReadFile(pg.LogPath())
			t.Fatalf("the abandoned commit became visible with no standby holding it (%d rows); server log:\n%s", n, log)
		}
		if n := waiting(); n != 1 {
			t.Fatalf("%d backends wait for the standby, want the abandoned commit's 1", n)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if _, err := observer.Exec(ctx, `ALTER SYSTEM SET synchronous_standby_names = ''`); err != nil {
		t.Fatal(err)
	}
	if _, err := observer.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, 30*time.Second, "the commit, released by the server, to be visible",
		func() bool { return visible() == 1 })
	if log, _ := os.ReadFile(pg.LogPath()); strings.Contains(string(log), "canceling wait for synchronous replication") {
		t.Fatalf("the server cancelled a wait for synchronous replication:\n%s", log)
	}
}
