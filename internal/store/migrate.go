package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// riverSchemaVersion is the goose version that installs River's job tables. River's own schema is
// pinned to the migration version its pinned release ships, so upgrading River later means adding
// a new goose step rather than silently changing this one.
const (
	riverSchemaVersion      = 7
	riverMigrationTarget    = 7
	migrationsVersionsTable = "codeport_schema_versions"
)

// MigrationStatus is one migration step and whether it is applied.
type MigrationStatus struct {
	Version int64
	Source  string
	Applied bool
}

// Migrator applies the embedded schema migrations (ours and River's) to one database.
type Migrator struct {
	provider *goose.Provider
	db       *sql.DB
	// notes are each step's annotations (upgrade.go), by version.
	notes map[int64]stepNotes
}

// migrateLockID names the session-level advisory lock a migration holds, so that two migrate
// Jobs at once (a retried Helm hook, two releases' upgrades) apply each step once: the second
// waits, then finds nothing pending.
const migrateLockID = 0x636f6465706f7274 // "codeport"

// NewMigrator prepares the embedded migrations for db. The caller keeps ownership of db, which
// needs at least two connections: one holds the lock, another runs River's step.
func NewMigrator(db *sql.DB) (*Migrator, error) {
	migrationsFS, err := fs.Sub(embeddedMigrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	return newMigrator(db, migrationsFS)
}

func newMigrator(db *sql.DB, migrationsFS fs.FS) (*Migrator, error) {
	notes, err := readNotes(migrationsFS)
	if err != nil {
		return nil, err
	}
	// Polled each second for as long as migrate's own deadline allows.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrateLockID), lock.WithLockTimeout(1, 600))
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	river := goose.NewGoMigration(riverSchemaVersion,
		&goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
			return migrateRiver(ctx, db, rivermigrate.DirectionUp, riverMigrationTarget)
		}},
		&goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
			return migrateRiver(ctx, db, rivermigrate.DirectionDown, -1)
		}},
	)
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrationsFS,
		goose.WithGoMigrations(river),
		goose.WithDisableGlobalRegistry(true),
		goose.WithTableName(migrationsVersionsTable),
		goose.WithSessionLocker(locker),
	)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return &Migrator{provider: provider, db: db, notes: notes}, nil
}

// migrateRiver runs River's migrations outside one enclosing transaction: one of them adds an
// enum value, which PostgreSQL refuses to use in the transaction that added it. River applies
// each of its versions in a transaction of its own and records it, so a rerun resumes cleanly.
func migrateRiver(ctx context.Context, db *sql.DB, direction rivermigrate.Direction, target int) error {
	migrator, err := rivermigrate.New(riverdatabasesql.New(db), nil)
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, direction, &rivermigrate.MigrateOpts{TargetVersion: target}); err != nil {
		return fmt.Errorf("river migrations %s: %w", direction, err)
	}
	return nil
}

// Up applies every pending migration and returns the versions applied.
func (m *Migrator) Up(ctx context.Context) ([]int64, error) {
	results, err := m.provider.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate up: %w", err)
	}
	return appliedVersions(results), nil
}

// Down rolls back the most recent migration. It returns goose.ErrNoNextVersion-wrapped
// ErrNothingToRollBack when the database is already empty.
func (m *Migrator) Down(ctx context.Context) (int64, error) {
	result, err := m.provider.Down(ctx)
	if errors.Is(err, goose.ErrNoNextVersion) {
		return 0, ErrNothingToRollBack
	}
	if err != nil {
		return 0, fmt.Errorf("migrate down: %w", err)
	}
	return result.Source.Version, nil
}

// DownTo rolls back every migration above version (0 removes the whole schema).
func (m *Migrator) DownTo(ctx context.Context, version int64) ([]int64, error) {
	results, err := m.provider.DownTo(ctx, version)
	if err != nil {
		return nil, fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return appliedVersions(results), nil
}

// Version is the highest applied migration version (0 for an empty database).
func (m *Migrator) Version(ctx context.Context) (int64, error) {
	v, err := m.provider.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Status lists every known migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]MigrationStatus, error) {
	statuses, err := m.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	out := make([]MigrationStatus, 0, len(statuses))
	for _, s := range statuses {
		source := s.Source.Path
		if source == "" {
			source = "river job queue schema"
		}
		out = append(out, MigrationStatus{Version: s.Source.Version, Source: source, Applied: s.State == goose.StateApplied})
	}
	return out, nil
}

// ErrNothingToRollBack is returned by Down on a database with no applied migrations.
var ErrNothingToRollBack = errors.New("no migration to roll back")

func appliedVersions(results []*goose.MigrationResult) []int64 {
	versions := make([]int64, 0, len(results))
	for _, r := range results {
		versions = append(versions, r.Source.Version)
	}
	return versions
}
