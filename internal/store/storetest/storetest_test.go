package storetest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

// TestDatabasesAreMigratedCopiesOfTheTemplate: every migrated test database, however many are
// created at once, starts at the newest schema version with nothing in it, and the template is
// named after the migrations it holds.
func TestDatabasesAreMigratedCopiesOfTheTemplate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	template, err := storetest.Template(ctx)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := store.MigrationsDigest()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(template, digest[:16]) {
		t.Errorf("template %s is not named after the migrations' digest %s", template, digest)
	}
	latest, err := store.LatestSchemaVersion()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		t.Run("parallel", func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := storetest.Open(t, store.Options{MaxConns: 2})
			version, err := store.SchemaVersion(ctx, db.Pool)
			if err != nil || version != latest {
				t.Fatalf("copy %d: schema version %d (%v), want %d", i, version, err, latest)
			}
			// A copy is the test's own: what it writes stays out of the template and the others.
			if _, err := db.Pool.Exec(ctx, "CREATE TABLE scratch (id int)"); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		url, err := storetest.ServerURL()
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, strings.Replace(url, "/postgres?", "/"+template+"?", 1))
		if err != nil {
			t.Fatalf("connect to template: %v", err)
		}
		defer conn.Close(ctx)
		var scratch bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass('scratch') IS NOT NULL").Scan(&scratch); err != nil || scratch {
			t.Errorf("a test database's table reached the template: %t %v", scratch, err)
		}
	})
}
