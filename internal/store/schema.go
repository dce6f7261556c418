package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"
)

// SchemaBehindError says that the database's schema is older than the one this binary was built
// for. Its text is the one line an operator sees when a process refuses to start.
type SchemaBehindError struct {
	// Have is the database's schema version (0 for a database never migrated); Need is the newest
	// migration embedded in this binary.
	Have, Need int64
}

// Error implements error.
func (e *SchemaBehindError) Error() string {
	return fmt.Sprintf("database schema is at version %d, this binary needs %d: run `codeport migrate up`", e.Have, e.Need)
}

// LatestSchemaVersion is the newest migration embedded in this binary: the schema version it
// needs. It reads the embedded file names only, so it needs no database.
func LatestSchemaVersion() (int64, error) {
	latest := int64(riverSchemaVersion)
	entries, err := fs.ReadDir(embeddedMigrations, "migrations")
	if err != nil {
		return 0, fmt.Errorf("read embedded migrations: %w", err)
	}
	for _, e := range entries {
		if path.Ext(e.Name()) != ".sql" {
			continue
		}
		v, err := goose.NumericComponent(e.Name())
		if err != nil {
			return 0, fmt.Errorf("embedded migration %s: %w", e.Name(), err)
		}
		latest = max(latest, v)
	}
	return latest, nil
}

// SchemaVersion reads the database's schema version, 0 when it was never migrated. Unlike
// Migrator.Version it only reads: goose would create its version table, and the roles the API
// and the operator run as need not be allowed to.
func SchemaVersion(ctx context.Context, q Querier) (int64, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, migrationsVersionsTable).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int64
	err := q.QueryRow(ctx,
		`SELECT coalesce(max(version_id), 0) FROM `+pgx.Identifier{migrationsVersionsTable}.Sanitize()).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// CheckSchema compares the database's schema with this binary's. An older schema is a
// *SchemaBehindError: the binary would fail on every query that touches what is missing, so the
// process must not start. A newer one is allowed (ahead reports it, for a warning): migrations
// only add what older binaries do not use, and during a rolling upgrade the migration runs before
// the new pods while old ones keep running and restarting; refusing them would turn every upgrade
// into an outage and a Deployment rollback into a crash loop.
func CheckSchema(ctx context.Context, q Querier) (have, need int64, err error) {
	if need, err = LatestSchemaVersion(); err != nil {
		return 0, 0, err
	}
	if have, err = SchemaVersion(ctx, q); err != nil {
		return 0, 0, err
	}
	if have < need {
		return have, need, &SchemaBehindError{Have: have, Need: need}
	}
	return have, need, nil
}

// MigrationsDigest identifies the schema the embedded migrations build: a hash of every
// migration file and of the River schema version they install. Tests name the migrated template
// database they clone after it, so a changed migration gets a template of its own.
func MigrationsDigest() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "river %d %d\n", riverSchemaVersion, riverMigrationTarget)
	err := fs.WalkDir(embeddedMigrations, "migrations", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := fs.ReadFile(embeddedMigrations, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(src))
		h.Write(src)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash embedded migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
