package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/codeport/codeport/internal/store"
)

// Database is a throwaway database on the test server.
type Database struct {
	// URL connects to the database itself.
	URL   string
	Name  string
	admin string
}

// ServerURL returns the admin URL of the test server or an error that says how to get one.
func ServerURL() (string, error) {
	u := os.Getenv("TEST_DATABASE_URL")
	if u == "" {
		return "", fmt.Errorf("TEST_DATABASE_URL is not set: run `make test`, or `eval \"$(hack/testenv.sh)\"` first, " +
			"which finds or starts a PostgreSQL server")
	}
	return u, nil
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// Create makes a new database whose name starts with prefix: empty, or, when migrate is true,
// a copy of the migrated template database (see Template), which is much cheaper than
// replaying every migration.
func Create(ctx context.Context, prefix string, migrate bool) (*Database, error) {
	admin, err := ServerURL()
	if err != nil {
		return nil, err
	}
	name, err := uniqueName(prefix)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("connect to test server: %w", err)
	}
	defer conn.Close(ctx)
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if migrate {
		template, err := Template(ctx)
		if err != nil {
			return nil, err
		}
		create += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
		// PostgreSQL 15 copies a template through the WAL by default, which costs twice the
		// CPU of copying its files for a template this small; the checkpoint a file copy takes
		// instead is cheap on a test server, which runs without fsync.
		if serverMajor(conn) >= 15 {
			create += " STRATEGY FILE_COPY"
		}
	}
	if err := whileInUse(ctx, func() error { _, err := conn.Exec(ctx, create); return err }); err != nil {
		return nil, fmt.Errorf("create test database %s: %w", name, err)
	}
	dbURL, err := withDatabase(admin, name)
	if err != nil {
		return nil, err
	}
	return &Database{URL: dbURL, Name: name, admin: admin}, nil
}

// serverMajor is the major version of the server conn is connected to, 0 if it does not say.
func serverMajor(conn *pgx.Conn) int {
	version := conn.PgConn().ParameterStatus("server_version")
	major, _, _ := strings.Cut(version, ".")
	n, _ := strconv.Atoi(major)
	return n
}

func uniqueName(prefix string) (string, error) {
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return "", fmt.Errorf("random database suffix: %w", err)
	}
	name := "cpt_" + unsafeName.ReplaceAllString(strings.ToLower(prefix), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	return name + "_" + hex.EncodeToString(suffix), nil
}

// templateLock is the advisory lock key that serialises building templates across every test
// binary using the server (go test runs packages in parallel, and several checkouts may share
// one server).
const templateLock = 0x636f6465706f7274 // "codeport"

// Template returns the name of the migrated template database for the migrations compiled into
// this binary, building it on first use. The name carries a digest of the migrations, so a
// checkout with different migrations gets a template of its own and never changes another's. A
// template appears under its name only once fully migrated (it is built under another name and
// renamed), so finding the name is enough to use it.
func Template(ctx context.Context) (string, error) {
	admin, err := ServerURL()
	if err != nil {
		return "", err
	}
	digest, err := store.MigrationsDigest()
	if err != nil {
		return "", err
	}
	name := "cpt_template_" + digest[:16]
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to test server: %w", err)
	}
	defer conn.Close(ctx)
	if ok, err := databaseExists(ctx, conn, name); err != nil || ok {
		return name, err
	}
	// Session-level: released when conn closes, also if this process dies while building.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(templateLock)); err != nil {
		return "", fmt.Errorf("lock template database: %w", err)
	}
	if ok, err := databaseExists(ctx, conn, name); err != nil || ok {
		return name, err
	}
	building := name + "_building"
	if err := buildTemplate(ctx, conn, admin, building); err != nil {
		return "", err
	}
	rename := "ALTER DATABASE " + pgx.Identifier{building}.Sanitize() + " RENAME TO " + pgx.Identifier{name}.Sanitize()
	if err := whileInUse(ctx, func() error { _, err := conn.Exec(ctx, rename); return err }); err != nil {
		return "", fmt.Errorf("publish template database %s: %w", name, err)
	}
	return name, nil
}

// buildTemplate migrates a new database named building, replacing what a builder that died
// half way left behind.
func buildTemplate(ctx context.Context, conn *pgx.Conn, admin, building string) error {
	id := pgx.Identifier{building}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop unfinished template database %s: %w", building, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+id); err != nil {
		return fmt.Errorf("create template database %s: %w", building, err)
	}
	url, err := withDatabase(admin, building)
	if err != nil {
		return err
	}
	db, err := store.Open(ctx, url, store.Options{MaxConns: 2})
	if err != nil {
		return fmt.Errorf("open template database: %w", err)
	}
	defer db.Close()
	m, err := store.NewMigrator(db.SQL)
	if err != nil {
		return err
	}
	if _, err := m.Up(ctx); err != nil {
		return fmt.Errorf("migrate template database: %w", err)
	}
	return nil
}

func databaseExists(ctx context.Context, conn *pgx.Conn, name string) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up database %s: %w", name, err)
	}
	return ok, nil
}

// objectInUse is PostgreSQL's SQLSTATE for "database is being accessed by other users".
const objectInUse = "55006"

// whileInUse runs op until PostgreSQL stops refusing it because a session is still connected to
// the database it copies or renames: a closed pool's server processes take a moment to exit.
func whileInUse(ctx context.Context, op func() error) error {
	for {
		err := op()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != objectInUse {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Drop removes the database, disconnecting anyone still on it.
func (d *Database) Drop(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, d.admin)
	if err != nil {
		return fmt.Errorf("connect to test server: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.Name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop test database %s: %w", d.Name, err)
	}
	return nil
}

// New creates a migrated database for one test (or benchmark) and drops it when the test ends.
// It fails the test, never skips it, when no server is available.
func New(tb testing.TB) *Database {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := Create(ctx, tb.Name(), true)
	if err != nil {
		tb.Fatalf("test database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.Drop(ctx); err != nil {
			tb.Errorf("drop test database: %v", err)
		}
	})
	return d
}

// Open creates a migrated database for one test, as New does, and opens it with opts; the pool
// is closed, then the database dropped, when the test ends.
func Open(tb testing.TB, opts store.Options) *store.DB {
	tb.Helper()
	url := New(tb).URL
	db, err := store.Open(context.Background(), url, opts)
	if err != nil {
		tb.Fatalf("open test database: %v", err)
	}
	tb.Cleanup(db.Close)
	return db
}

// packageDatabaseEnv hands the package's database to the fuzz workers the test binary starts.
const packageDatabaseEnv = "CODEPORT_TEST_PACKAGE_DATABASE"

// Main runs a package's tests against one migrated database shared by the package, for use in
// TestMain: os.Exit(storetest.Main(m, "orders", func(url string) { testDatabaseURL = url })).
func Main(m *testing.M, prefix string, use func(url string)) int {
	// Fuzzing re-executes the test binary as workers that run only the fuzz function: creating a
	// database per worker would outlast short fuzz runs, so they share the package's, which the
	// coordinator keeps until they are done (a fuzz target that needs one keeps its rows apart).
	for _, arg := range os.Args {
		if strings.HasPrefix(arg, "-test.fuzzworker") {
			if url := os.Getenv(packageDatabaseEnv); url != "" {
				use(url)
			}
			return m.Run()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	d, err := Create(ctx, prefix, true)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "test database: %v\n", err)
		return 1
	}
	use(d.URL)
	if err := os.Setenv(packageDatabaseEnv, d.URL); err != nil {
		fmt.Fprintf(os.Stderr, "test database: %v\n", err)
		return 1
	}
	code := m.Run()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Drop(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "drop test database: %v\n", err)
	}
	return code
}

// RedisURL returns TEST_REDIS_URL or an error that says how to get a server.
func RedisURL() (string, error) {
	u := os.Getenv("TEST_REDIS_URL")
	if u == "" {
		return "", fmt.Errorf("TEST_REDIS_URL is not set: run `make test`, or `eval \"$(hack/testenv.sh)\"` first, " +
			"which finds or starts a Redis server")
	}
	return u, nil
}

func withDatabase(serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("parse TEST_DATABASE_URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// Redis returns a client of the test Redis server, closed when the test ends. It fails the test,
// never skips it, when no server answers.
func Redis(tb testing.TB) *redis.Client {
	tb.Helper()
	u, err := RedisURL()
	if err != nil {
		tb.Fatal(err)
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		tb.Fatalf("TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opts)
	tb.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		tb.Fatalf("test Redis at %s: %v", u, err)
	}
	return c
}

// WaitForLockWaiter returns once a session of db's database waits for a lock, for tests that
// replay an interleaving of transactions step by step; it gives up after ten seconds.
func WaitForLockWaiter(ctx context.Context, db *store.DB) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var waiting bool
		err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting)
		if err != nil {
			return fmt.Errorf("look for a lock waiter: %w", err)
		}
		if waiting {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("no session waited for a lock within 10s")
}

// SetConnectable opens or closes the test database name to new connections and, when closing,
// drops the existing ones: whoever uses it then sees the database as down.
func SetConnectable(tb testing.TB, name string, allow bool) {
	tb.Helper()
	admin, err := ServerURL()
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident+" ALLOW_CONNECTIONS "+fmt.Sprint(allow)); err != nil {
		tb.Fatal(err)
	}
	if !allow {
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid()`, name); err != nil {
			tb.Fatal(err)
		}
	}
}
