package store_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

// TestTwoMigrationsAtOnceApplyEachStepOnce: two `migrate up` at once on an empty database (two
// migrate Jobs of a retried upgrade), each with its own pool, both succeed, and between them
// every step is applied exactly once.
func TestTwoMigrationsAtOnceApplyEachStepOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d, err := storetest.Create(ctx, t.Name(), false)
	if err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() { _ = d.Drop(context.Background()) })
	var wg sync.WaitGroup
	applied := make([][]int64, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	for i := range 2 {
		_, m := openMigrator(t, d.URL)
		// Reading the version creates goose's version table: the two runs then race for the
		// first step itself rather than for that table, whose creation goose retries a second
		// later, by when the other run may be done.
		if _, err := m.Version(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			applied[i], errs[i] = m.Up(ctx)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migration %d: %v", i+1, err)
		}
	}
	need, err := store.LatestSchemaVersion()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, versions := range applied {
		for _, v := range versions {
			seen[v]++
		}
	}
	check, m := openMigrator(t, d.URL)
	statuses, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range statuses {
		if !s.Applied || seen[s.Version] != 1 {
			t.Errorf("migration %d (%s): applied %t, by %d of the two runs; want applied by exactly one",
				s.Version, s.Source, s.Applied, seen[s.Version])
		}
	}
	if have, err := store.SchemaVersion(ctx, check.Pool); err != nil || have != need {
		t.Errorf("schema version %d, %v; want %d", have, err, need)
	}
}

// TestDownRefusesToDestroyData: a rollback that would lose rows is refused, naming the newest
// step that would and how many rows; one that loses nothing, or --force, goes ahead.
func TestDownRefusesToDestroyData(t *testing.T) {
	partner := `INSERT INTO partners (namespace, name) VALUES ('p', 'acme')`
	account := `INSERT INTO accounts (partner_id, environment) SELECT id, 'production' FROM partners`
	expiringKey := `INSERT INTO api_keys (account_id, kind, digest, key_prefix, expires_at)
		SELECT id, 'apiKey', sha256('k'::bytea), 'cp_', now() + interval '1 day' FROM accounts`
	cases := []struct {
		name  string
		setup []string
		to    int64
		// want is the one line of the refusal, empty when the rollback may go ahead.
		want string
	}{
		{name: "an empty schema rolls back to nothing", to: 0},
		{name: "partners are lost with the first step", setup: []string{partner}, to: 0,
			want: "refusing to roll back migration 1 (00001_partners_accounts_keys.sql): it would destroy 1 row(s); " +
				"pass --force to roll back anyway"},
		{name: "a rollback above the steps holding data goes ahead", setup: []string{partner, account}, to: 13},
		{name: "a key's expiry is a value the default lacks", setup: []string{partner, account, expiringKey}, to: 12,
			want: "refusing to roll back migration 13 (00013_api_key_expiry.sql): it would destroy 1 row(s); " +
				"pass --force to roll back anyway"},
		{name: "several steps are named by the newest", setup: []string{partner, account, expiringKey}, to: 0,
			want: "refusing to roll back migration 13 (00013_api_key_expiry.sql): it would destroy 1 row(s), " +
				"and 1 more step(s) would destroy more; pass --force to roll back anyway"},
		{name: "codes sealed under a second key", to: 21, setup: []string{
			`INSERT INTO code_stock (product_code, ciphertext, digest, key_ref) VALUES
				('00000000000001', 'x', sha256('a'::bytea), 2),
				('00000000000001', 'x', sha256('b'::bytea), 2), ('00000000000001', 'x', sha256('c'::bytea), 1)`},
			want: "refusing to roll back migration 22 (00022_codes_keys.sql): it would destroy 2 row(s); " +
				"pass --force to roll back anyway"},
		{name: "queued jobs are lost with River's step", to: 6, setup: []string{
			`INSERT INTO river_job (kind, queue, args, max_attempts) VALUES ('k', 'q', '{}', 1)`},
			want: "refusing to roll back migration 7 (river job queue schema): it would destroy 1 row(s); " +
				"pass --force to roll back anyway"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := storetest.Open(t, store.Options{MaxConns: 4})
			for _, sql := range tc.setup {
				if _, err := db.Pool.Exec(ctx, sql); err != nil {
					t.Fatalf("setup %s: %v", sql, err)
				}
			}
			m, err := store.NewMigrator(db.SQL)
			if err != nil {
				t.Fatal(err)
			}
			err = m.CheckDown(ctx, tc.to)
			var destroyed *store.DestroyedDataError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rollback to %d refused: %v", tc.to, err)
			case tc.want != "" && (!errors.As(err, &destroyed) || err.Error() != tc.want):
				t.Fatalf("rollback to %d: %v\nwant: %s", tc.to, err, tc.want)
			}
			// What CheckDown lets through (or --force) rolls back.
			if _, err := m.DownTo(ctx, tc.to); err != nil {
				t.Fatalf("down to %d: %v", tc.to, err)
			}
		})
	}
}

// TestEveryDestructiveDownCountsWhatItLoses: a migration whose Down drops a table or a column,
// or deletes rows, says what that loses; a new one without its count fails here.
func TestEveryDestructiveDownCountsWhatItLoses(t *testing.T) {
	// Dropped data that is derived and rebuilt (a catalog product's digest, rewritten by the next
	// reconcile, a day's spend recounted from its orders) or transient (the running binaries'
	// heartbeats).
	lossless := map[string]bool{"00016_catalog_product_digest.sql": true, "00024_running_binaries.sql": true,
		"00028_daily_spend.sql": true}
	destructive := regexp.MustCompile(`(?i)\b(DROP TABLE|DROP COLUMN|DELETE FROM)\b`)
	err := fs.WalkDir(store.EmbeddedMigrations, "migrations", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := fs.ReadFile(store.EmbeddedMigrations, name)
		if err != nil {
			return err
		}
		_, down, _ := strings.Cut(string(src), "-- +goose Down")
		base := strings.TrimPrefix(name, "migrations/")
		if destructive.MatchString(down) && !strings.Contains(down, "-- codeport:destroys ") && !lossless[base] {
			t.Errorf("%s: its Down loses data but has no `-- codeport:destroys SELECT count(*) …` line", base)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMisplacedAnnotationsAreRefused: an annotation where it would never be heeded stops the
// migrator from loading rather than being ignored.
func TestMisplacedAnnotationsAreRefused(t *testing.T) {
	for name, tc := range map[string]struct{ src, line string }{
		"destroys in Up":   {"-- +goose Up\n-- codeport:destroys SELECT 1\nSELECT 1;\n-- +goose Down\nSELECT 1;\n", "line 2"},
		"contract in Down": {"-- +goose Up\nSELECT 1;\n-- +goose Down\n-- codeport:contract 5\nSELECT 1;\n", "line 4"},
		"contract without a version": {"-- +goose Up\n-- codeport:contract soon\nSELECT 1;\n" +
			"-- +goose Down\nSELECT 1;\n", "line 2"},
	} {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{"00001_bad.sql": {Data: []byte(tc.src)}}
			want := "00001_bad.sql " + tc.line
			if _, err := store.NewMigratorFS(nil, fsys); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want one naming %s", err, want)
			}
		})
	}
}

// TestContractStepWaitsForOldBinaries: a contract step is refused while a running binary is
// built for a schema it breaks, allowed once only new ones run; `migrate status`'s verdicts
// follow; a process's row appears while it runs and goes when it stops.
func TestContractStepWaitsForOldBinaries(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, store.Options{MaxConns: 6})
	current, err := store.LatestSchemaVersion()
	if err != nil {
		t.Fatal(err)
	}
	// The embedded migrations and two steps after them: an expand step, and a contract step
	// that breaks the binaries built before the expand step.
	expand, contract := current+1, current+2
	fsys := fstest.MapFS{}
	entries, err := fs.ReadDir(store.EmbeddedMigrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		src, err := fs.ReadFile(store.EmbeddedMigrations, "migrations/"+e.Name())
		if err != nil {
			t.Fatal(err)
		}
		fsys[e.Name()] = &fstest.MapFile{Data: src}
	}
	fsys[migrationName(expand, "add_new")] = &fstest.MapFile{Data: []byte(
		"-- +goose Up\nALTER TABLE partners ADD COLUMN new_name text;\n" +
			"-- +goose Down\nALTER TABLE partners DROP COLUMN new_name;\n")}
	fsys[migrationName(contract, "drop_old")] = &fstest.MapFile{Data: []byte(
		"-- +goose Up\n-- codeport:contract " + strconv.FormatInt(expand, 10) + "\n" +
			"ALTER TABLE partners DROP COLUMN display_name;\n" +
			"-- +goose Down\nALTER TABLE partners ADD COLUMN display_name text NOT NULL DEFAULT '';\n")}
	m, err := store.NewMigratorFS(db.SQL, fsys)
	if err != nil {
		t.Fatal(err)
	}

	// A binary of the current release runs, and a newer one built for the expand step, and a
	// stale row of a process that died long ago, which must not count.
	old := heartbeat(t, db, "serve", current)
	heartbeat(t, db, "operator", expand)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO codeport_instances
		(instance_id, component, version, schema_version, host, last_seen)
		VALUES ($1, 'serve', 'ancient', 3, 'gone', now() - interval '1 hour')`,
		uuid.New()); err != nil {
		t.Fatal(err)
	}
	waitInstances(t, m, 2)

	var incompatible *store.IncompatibleError
	if err := m.CheckUp(ctx); !errors.As(err, &incompatible) || len(incompatible.Instances) != 1 ||
		incompatible.Instances[0].SchemaVersion != current {
		t.Fatalf("contract step with a serve built for schema %d running: %v; want it refused for that one", current, err)
	}
	// Expand steps go ahead while it runs (the one in between is not a contract).
	if _, err := m.UpTo(ctx, expand); err != nil {
		t.Fatal(err)
	}
	verdicts(t, m, map[string]bool{"serve": true, "operator": true})

	old() // the old serve is rolled out
	waitInstances(t, m, 1)
	if err := m.CheckUp(ctx); err != nil {
		t.Fatalf("contract step with only new binaries running: %v", err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	// A serve of the old release started again (a rollback of its Deployment) is told apart.
	heartbeat(t, db, "serve", current)
	waitInstances(t, m, 2)
	verdicts(t, m, map[string]bool{"serve": false, "operator": true})
	// And rolling the schema back below what the running operator is built for is refused.
	if err := m.CheckDown(ctx, current); !errors.As(err, &incompatible) {
		t.Fatalf("rollback below a running binary's schema: %v; want it refused", err)
	}
}

func migrationName(v int64, name string) string { return fmt.Sprintf("%05d_%s.sql", v, name) }

// heartbeat runs store.Heartbeat for a process of component built for schema until the test
// ends or the returned stop is called; stop waits for its row to be removed.
func heartbeat(t *testing.T, db *store.DB, component string, schema int64) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	in := store.Instance{ID: uuid.New(), Component: component, Version: "test", SchemaVersion: schema, Host: t.Name()}
	go func() {
		defer close(done)
		store.Heartbeat(ctx, db.Pool, in, slog.New(slog.DiscardHandler))
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// waitInstances polls until the registry lists n running binaries.
func waitInstances(t *testing.T, m *store.Migrator, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, running, err := m.Compatibility(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(running) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("running binaries: %d, want %d", len(running), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// verdicts checks Compatibility's verdict for each running component.
func verdicts(t *testing.T, m *store.Migrator, want map[string]bool) {
	t.Helper()
	_, running, err := m.Compatibility(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range running {
		if c.Compatible != want[c.Component] {
			t.Errorf("%s built for schema %d: compatible %t (%s), want %t", c.Component, c.SchemaVersion,
				c.Compatible, c.Reason, want[c.Component])
		}
	}
}
