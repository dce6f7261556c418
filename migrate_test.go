package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

// runMigrate runs `codeport migrate args… --database-url url` and returns its output and error.
func runMigrate(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCommand()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(append([]string{"migrate"}, args...), "--database-url", url))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// TestMigrateDownRefusesUnlessForced: `migrate down` on a database holding a partner refuses in
// the one line that names the step and the rows, changing nothing; --force rolls back.
func TestMigrateDownRefusesUnlessForced(t *testing.T) {
	ctx := context.Background()
	d := storetest.New(t)
	db, err := store.Open(ctx, d.URL, store.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO partners (namespace, name) VALUES ('p', 'acme')`); err != nil {
		t.Fatal(err)
	}
	need, err := store.LatestSchemaVersion()
	if err != nil {
		t.Fatal(err)
	}
	_, err = runMigrate(t, d.URL, "down", "--to", "0")
	want := "refusing to roll back migration 1 (00001_partners_accounts_keys.sql): it would destroy 1 row(s); " +
		"pass --force to roll back anyway"
	if err == nil || err.Error() != want {
		t.Fatalf("migrate down --to 0: %v\nwant: %s", err, want)
	}
	if have, err := store.SchemaVersion(ctx, db.Pool); err != nil || have != need {
		t.Fatalf("schema after the refusal: %d, %v; want %d untouched", have, err, need)
	}
	if out, err := runMigrate(t, d.URL, "down", "--to", "0", "--force"); err != nil {
		t.Fatalf("migrate down --to 0 --force: %v\n%s", err, out)
	}
	if have, err := store.SchemaVersion(ctx, db.Pool); err != nil || have != 0 {
		t.Fatalf("schema after the forced rollback: %d, %v; want 0", have, err)
	}
}

// TestMigrateStatusListsRunningBinaries: `migrate status` names every registered process and
// its verdict, and sums them up in its last line.
func TestMigrateStatusListsRunningBinaries(t *testing.T) {
	d := storetest.New(t)
	out, err := runMigrate(t, d.URL, "status")
	if err != nil || !strings.Contains(out, "\nnone registered\n") {
		t.Fatalf("migrate status with nothing running: %v\n%s", err, out)
	}
	db, err := store.Open(context.Background(), d.URL, store.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	need, err := store.LatestSchemaVersion()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		store.Heartbeat(ctx, db.Pool, store.Instance{ID: uuid.New(), Component: "serve", Version: "v9.9.9",
			SchemaVersion: need + 1, Host: "api-0"}, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err = runMigrate(t, d.URL, "status")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "api-0") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Built for a schema the database does not have yet: running, but told to migrate.
	for _, want := range []string{"serve", "v9.9.9", "api-0", "incompatible: built for schema",
		"1 of 1 running binaries are incompatible with the schema"} {
		if !strings.Contains(out, want) {
			t.Errorf("migrate status lacks %q:\n%s", want, out)
		}
	}
}
