package retention_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/orders"
	"github.com/codeport/codeport/internal/store/storetest"
)

// TestRestoringArchivedOrdersAsDocumented follows docs/operations.md's procedure for archived
// orders word for word, as an operator would: the archive dumped and deleted by its script while
// archival moves another order into it, loaded back by its pg_restore command, and two of three
// archived orders put back online by its SQL. The order archived during the dump is neither in
// the dump nor deleted; the two put back answer as they did before archival, with the same codes;
// the third stays archived; and the money audit, which reconciles every order with its archived
// ledger entries, holds after archival and after the restore.
func TestRestoringArchivedOrdersAsDocumented(t *testing.T) {
	f := newFixture(t, 20)
	ctx := context.Background()
	acct := f.onboard(t, "acme", 30*unitPrice)
	back := map[string]uuid.UUID{"old-1": f.place(t, acct, "old-1", 2), "old-2": f.place(t, acct, "old-2", 1)}
	stays := f.place(t, acct, "stays", 1)
	late := f.place(t, acct, "late", 1)
	before := map[string]orders.View{}
	for code := range back {
		v, err := f.service.Get(ctx, acct, code)
		if err != nil {
			t.Fatal(err)
		}
		before[code] = v
	}
	f.backdate(t, back["old-1"], back["old-2"], stays)
	if done, err := f.archiver(10).RunOnce(ctx, time.Now()); err != nil || done.Orders != 3 {
		t.Fatalf("archived %+v, %v; want 3 orders", done, err)
	}
	f.audit(t, "after archival")

	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	dumpCommand := fencedAfter(t, string(doc), "To take the archive itself", "sh")
	restoreCommand := regexp.MustCompile("`(pg_restore [^`]+)`").FindStringSubmatch(
		after(t, string(doc), "**Restoring archived orders**"))
	if restoreCommand == nil {
		t.Fatal("operations.md gives no pg_restore command for archived orders")
	}
	putBack := fencedAfter(t, string(doc), "**Restoring archived orders**", "sql")

	dir := t.TempDir()
	databaseURL := f.db.Pool.Config().ConnString()
	paused := pausedPgDump(ctx, t)
	dumped := make(chan error, 1)
	go func() { dumped <- runShell(ctx, dir, databaseURL, dumpCommand, paused.dir) }()
	paused.waitStarted(t, dumped)
	f.backdate(t, late)
	if done, err := f.archiver(10).RunOnce(ctx, time.Now()); err != nil || done.Orders != 1 {
		t.Fatalf("archived %+v during the dump, %v; want 1 order", done, err)
	}
	paused.resume(t)
	if err := <-dumped; err != nil {
		t.Fatalf("operations.md's dump and delete: %v", err)
	}
	dumps, err := filepath.Glob(filepath.Join(dir, "archive-*.dump"))
	if err != nil || len(dumps) != 1 {
		t.Fatalf("the dump command wrote %v (%v); want one archive-….dump", dumps, err)
	}
	if left := archivedRows(ctx, t, f, late); left != "0 0 0 / 1 1 1" {
		t.Errorf("archive rows of the orders dumped / of the order archived during the dump (lines, "+
			"codes, ledger): %s; want 0 0 0 / 1 1 1", left)
	}
	// A dump holding the late order's rows would fail here on their primary keys.
	shell(ctx, t, dir, databaseURL, strings.ReplaceAll(restoreCommand[1], "archive-….dump", filepath.Base(dumps[0])))
	if all := archivedRows(ctx, t, f, late); all != "3 4 3 / 1 1 1" {
		t.Errorf("archive rows after the restore: %s; want 3 4 3 / 1 1 1", all)
	}
	f.audit(t, "after the dump was loaded back")

	ids := make([]string, 0, len(back))
	for _, id := range back {
		ids = append(ids, "'"+id.String()+"'")
	}
	if !strings.Contains(putBack, "('…')") {
		t.Fatalf("operations.md's SQL has no ('…') for the orders to put back:\n%s", putBack)
	}
	if _, err := f.db.Pool.Exec(ctx, strings.ReplaceAll(putBack, "('…')", "("+strings.Join(ids, ", ")+")")); err != nil {
		t.Fatalf("operations.md's SQL: %v", err)
	}
	f.audit(t, "after the orders were put back online")

	for code, want := range before {
		got, err := f.service.Get(ctx, acct, code)
		if err != nil {
			t.Errorf("%s after it was put back: %v", code, err)
			continue
		}
		if got.Status != want.Status || !reflect.DeepEqual(got.Products, want.Products) {
			t.Errorf("%s after it was put back:\n%+v\nbefore archival:\n%+v", code, got, want)
		}
	}
	_, err = f.service.Get(ctx, acct, "stays")
	if status, message := answer(t, err); status != 404 {
		t.Errorf("the order not put back answers %d %q; want 404", status, message)
	}
}

// after is the text of doc after marker.
func after(t *testing.T, doc, marker string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, marker)
	if !ok {
		t.Fatalf("operations.md no longer says %q", marker)
	}
	return rest
}

// fencedAfter is the first fenced block of the language lang after marker in doc.
func fencedAfter(t *testing.T, doc, marker, lang string) string {
	t.Helper()
	_, block, ok := strings.Cut(after(t, doc, marker), "```"+lang+"\n")
	if !ok {
		t.Fatalf("operations.md has no %s block after %q", lang, marker)
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatalf("operations.md's %s block after %q is not closed", lang, marker)
	}
	return block
}

// archivedRows counts the archive's rows (lines, codes, ledger entries) of the orders other than
// late, then of late: "lines codes entries / lines codes entries".
func archivedRows(ctx context.Context, t *testing.T, f *fixture, late uuid.UUID) string {
	t.Helper()
	var n [6]int
	if err := f.db.Pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM order_lines_archive WHERE order_id <> $1),
			(SELECT count(*) FROM delivered_codes_archive WHERE order_id <> $1),
			(SELECT count(*) FROM wallet_entries_archive WHERE reference <> $1::text),
			(SELECT count(*) FROM order_lines_archive WHERE order_id = $1),
			(SELECT count(*) FROM delivered_codes_archive WHERE order_id = $1),
			(SELECT count(*) FROM wallet_entries_archive WHERE reference = $1::text)`, late).
		Scan(&n[0], &n[1], &n[2], &n[3], &n[4], &n[5]); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d %d %d / %d %d %d", n[0], n[1], n[2], n[3], n[4], n[5])
}

// pausedDump is a pg_dump that, once started, waits for the test to resume it, so that the test
// can write while a documented command is dumping.
type pausedDump struct{ dir string }

// pausedPgDump writes a pg_dump into a directory of its own, to put first on the PATH, which
// runs PostgreSQL's pg_dump once resumed.
func pausedPgDump(ctx context.Context, t *testing.T) pausedDump {
	t.Helper()
	pgDump, err := exec.LookPath("pg_dump")
	if bindir, dirErr := storetest.BinDir(ctx); dirErr == nil {
		pgDump, err = filepath.Join(bindir, "pg_dump"), nil
	}
	if err != nil {
		t.Fatal(err)
	}
	p := pausedDump{dir: t.TempDir()}
	script := fmt.Sprintf("#!/bin/sh\n: > %[1]s/started\n"+
		"while [ ! -e %[1]s/resume ]; do sleep 0.05; done\nexec %[2]s \"$@\"\n", p.dir, pgDump)
	if err := os.WriteFile(filepath.Join(p.dir, "pg_dump"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitStarted waits until pg_dump has started, failing if the command ends first.
func (p pausedDump) waitStarted(t *testing.T, ended <-chan error) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if _, err := os.Stat(filepath.Join(p.dir, "started")); err == nil {
			return
		}
		select {
		case err := <-ended:
			t.Fatalf("the command ended before it ran pg_dump: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatal("pg_dump did not start within a minute")
}

func (p pausedDump) resume(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(p.dir, "resume"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// shell runs a documented command with bash in dir (see runShell).
func shell(ctx context.Context, t *testing.T, dir, databaseURL, command string) {
	t.Helper()
	if err := runShell(ctx, dir, databaseURL, command); err != nil {
		t.Fatal(err)
	}
}

// runShell runs a documented command with bash in dir, with CODEPORT_DATABASE_URL set as the
// document assumes and PostgreSQL's client programs on the PATH, after the directories of first.
func runShell(ctx context.Context, dir, databaseURL, command string, first ...string) error {
	path := os.Getenv("PATH")
	if bindir, err := storetest.BinDir(ctx); err == nil {
		path = bindir + string(os.PathListSeparator) + path
	}
	path = strings.Join(append(first, path), string(os.PathListSeparator))
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+path, "CODEPORT_DATABASE_URL="+databaseURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", command, err, out)
	}
	return nil
}
