package retention_test

import (
	"context"
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
// orders word for word, as an operator would: the archive dumped by its pg_dump command and
// deleted, loaded back by its pg_restore command, and two of three archived orders put back online
// by its SQL. Those two then answer as they did before archival, with the same codes; the third
// stays archived; and the money audit, which reconciles every order with its archived ledger
// entries, holds before the deletion and after the restore.
func TestRestoringArchivedOrdersAsDocumented(t *testing.T) {
	f := newFixture(t, 20)
	ctx := context.Background()
	acct := f.onboard(t, "acme", 30*unitPrice)
	back := map[string]uuid.UUID{"old-1": f.place(t, acct, "old-1", 2), "old-2": f.place(t, acct, "old-2", 1)}
	stays := f.place(t, acct, "stays", 1)
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
	shell(ctx, t, dir, f.db.Pool.Config().ConnString(), dumpCommand)
	dumps, err := filepath.Glob(filepath.Join(dir, "archive-*.dump"))
	if err != nil || len(dumps) != 1 {
		t.Fatalf("the dump command wrote %v (%v); want one archive-….dump", dumps, err)
	}
	const deleteArchive = `DELETE FROM order_lines_archive; DELETE FROM delivered_codes_archive;
		DELETE FROM wallet_entries_archive`
	if _, err := f.db.Pool.Exec(ctx, deleteArchive); err != nil {
		t.Fatal(err)
	}
	shell(ctx, t, dir, f.db.Pool.Config().ConnString(),
		strings.ReplaceAll(restoreCommand[1], "archive-….dump", filepath.Base(dumps[0])))
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

// shell runs a documented command with bash in dir, with CODEPORT_DATABASE_URL set as the
// document assumes and PostgreSQL's client programs on the PATH.
func shell(ctx context.Context, t *testing.T, dir, databaseURL, command string) {
	t.Helper()
	path := os.Getenv("PATH")
	if bindir, err := storetest.BinDir(ctx); err == nil {
		path = bindir + string(os.PathListSeparator) + path
	}
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+path, "CODEPORT_DATABASE_URL="+databaseURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
}
