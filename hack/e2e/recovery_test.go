//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
)

// pointInTimeRecovery runs docs/operations.md's "Restoring" with CloudNativePG: a base backup,
// an order, the recovery target, another order, then codeport stopped, the Cluster deleted and
// recovered into a new one at the target, migrated and started. The restored platform serves
// every order of before the target with the same codes and knows nothing of the order after it.
//
//nolint:thelper // a phase of the end-to-end test, not a helper: a failure names its own line
func pointInTimeRecovery(ctx context.Context, t *testing.T, e env, k *kube, m *mission, store objectStore) {
	if err := k.backup(ctx, dbCluster, "before-recovery-target"); err != nil {
		t.Fatal(err)
	}
	before := auditDatabase(ctx, t, k)
	kept := placeCompleted(ctx, t, m.production, fmt.Sprintf("pitr-kept-%d", time.Now().UnixNano()))
	time.Sleep(time.Second)
	// The node's clock is the database's: the test runs on the node.
	target := time.Now()
	time.Sleep(time.Second)
	dropped := placeCompleted(ctx, t, m.production, fmt.Sprintf("pitr-dropped-%d", time.Now().UnixNano()))
	archiveCurrentWAL(ctx, t, e, k)

	start := time.Now()
	// 1. Stop codeport.
	if _, err := run(ctx, e, e.kubectl, "-n", namespace, "scale", "deployment",
		"-l", "app.kubernetes.io/instance="+release, "--replicas=0"); err != nil {
		t.Fatal(err)
	}
	// 4. Recover into a new Cluster: the old one deleted (its object store folder kept), the
	// release upgraded with the recovery values and without hooks.
	if _, err := run(ctx, e, e.kubectl, "-n", namespace, "delete", "cluster", dbCluster, "--wait"); err != nil {
		t.Fatal(err)
	}
	// kubectl get pvc -l cnpg.io/cluster=codeport-db, until it lists none.
	if err := poll.Wait(ctx, pollPause, 5*time.Minute, "the old Cluster's claims gone", func() (bool, string) {
		out, err := run(ctx, e, e.kubectl, "-n", namespace, "get", "pvc", "-l", "cnpg.io/cluster="+dbCluster,
			"-o", "name")
		return err == nil && strings.TrimSpace(out) == "", strings.TrimSpace(out)
	}); err != nil {
		t.Fatal(err)
	}
	values := filepath.Join(t.TempDir(), "recovery.yaml")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(values, []byte(recoveryValues(t, root, store, target)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(ctx, e, e.helm, "upgrade", release, e.chart, "-n", namespace, "--reuse-values",
		"-f", values, "--no-hooks", "--timeout", "15m"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(ctx, e, e.kubectl, "-n", namespace, "wait", "cluster/"+dbCluster,
		"--for=condition=Ready", "--timeout=15m"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.waitHealthy(ctx, dbCluster, dbInstances, "", 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	// 5. Migrate, 6. start: the upgrade's hook runs migrate up, then the Deployments roll back to
	// their replicas.
	if _, err := run(ctx, e, e.helm, "upgrade", release, e.chart, "-n", namespace, "--reuse-values",
		"--wait", "--timeout", "10m"); err != nil {
		t.Fatal(err)
	}
	t.Logf("recovered to %s and serving again %s after codeport was stopped",
		target.UTC().Format(time.RFC3339Nano), time.Since(start).Round(100*time.Millisecond))

	// 7. Verify.
	after := auditDatabase(ctx, t, k)
	for _, finding := range after.Findings {
		t.Error(finding)
	}
	restored := after.ByCode()
	for _, o := range before.Orders {
		if r, ok := restored[o.ExternalOrderCode]; !ok || r.Codes != o.Codes || r.Status != o.Status {
			t.Errorf("order %s of before the target: %s with codes %q before, %s with %q restored",
				o.ExternalOrderCode, o.Status, o.Codes, r.Status, r.Codes)
		}
	}
	if len(restored) != len(before.Orders)+1 {
		t.Errorf("%d orders restored, want the %d of the backup and %s", len(restored), len(before.Orders), kept.code)
	}
	err = poll.Wait(ctx, pollPause, 3*time.Minute, "the restored platform serving orders", func() (bool, string) {
		got, status, err := readOrder(ctx, m.production.api, kept.code)
		if err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("%s: %d %v", kept.code, status, err)
		}
		if !slices.Equal(got, kept.codes) {
			return false, fmt.Sprintf("%s reads codes %v, delivered %v", kept.code, got, kept.codes)
		}
		_, status, err = readOrder(ctx, m.production.api, dropped.code)
		return err == nil && status == http.StatusNotFound,
			fmt.Sprintf("%s, placed after the target: %d %v", dropped.code, status, err)
	})
	if err != nil {
		t.Error(err)
	}
}

// recoveryValues are the recovery values docs/operations.md gives for the built-in Barman Cloud,
// read from it, with this run's object store, credentials and target in place of the example's:
// the test runs the procedure as written.
func recoveryValues(t *testing.T, root string, store objectStore, target time.Time) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var values string
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		if strings.Contains(block[1], "recovery:") && strings.Contains(block[1], "barmanObjectStore:") {
			values = block[1]
		}
	}
	example := []string{`"2026-11-26 01:00:00.000000+00"`, "s3://codeport-backups/", "https://s3.example.com",
		"{name: codeport-backups,"}
	run := []string{strconv.Quote(target.UTC().Format("2006-01-02 15:04:05.000000+00")), store.destination,
		store.endpoint, "{name: " + backupSecret + ","}
	for i, ex := range example {
		if !strings.Contains(values, ex) {
			t.Fatalf("docs/operations.md's recovery values lack %s:\n%s", ex, values)
		}
		values = strings.ReplaceAll(values, ex, run[i])
	}
	return values
}

// archiveCurrentWAL closes the primary's current WAL segment and waits until it is archived, so
// that the recovery can replay past the target.
func archiveCurrentWAL(ctx context.Context, t *testing.T, e env, k *kube) {
	t.Helper()
	s, err := k.clusterState(ctx, dbCluster)
	if err != nil {
		t.Fatal(err)
	}
	segment, err := psql(ctx, e, s.currentPrimary, "SELECT pg_walfile_name(pg_switch_wal())")
	if err != nil {
		t.Fatal(err)
	}
	err = poll.Wait(ctx, pollPause, 3*time.Minute, "WAL "+segment+" archived", func() (bool, string) {
		last, err := psql(ctx, e, s.currentPrimary, "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")
		if err != nil {
			return false, err.Error()
		}
		return last >= segment && !strings.HasSuffix(last, ".history"), "last archived " + last
	})
	if err != nil {
		t.Fatal(err)
	}
}

// auditDatabase audits the Cluster's database once no order is processing.
func auditDatabase(ctx context.Context, t *testing.T, k *kube) *storetest.Audit {
	t.Helper()
	var a *storetest.Audit
	err := poll.Wait(ctx, pollPause, 3*time.Minute, "every order terminal", func() (bool, string) {
		db, err := k.appDB(ctx, dbCluster)
		if err != nil {
			return false, err.Error()
		}
		defer db.Close(context.WithoutCancel(ctx))
		if a, err = storetest.AuditMoney(ctx, db); err != nil {
			return false, err.Error()
		}
		processing := 0
		for _, o := range a.Orders {
			if o.Status == "processing" {
				processing++
			}
		}
		return processing == 0, fmt.Sprintf("%d orders processing", processing)
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// placedOrder is an order the test placed and saw completed, with the codes it read.
type placedOrder struct {
	code  string
	codes []string
}

func placeCompleted(ctx context.Context, t *testing.T, tg target, code string) placedOrder {
	t.Helper()
	if _, _, err := tg.api.placeOrder(ctx, code, tg.product, tg.price); err != nil {
		t.Fatal(err)
	}
	if err := tg.api.waitCompleted(ctx, code); err != nil {
		t.Fatal(err)
	}
	codes, status, err := readOrder(ctx, tg.api, code)
	if err != nil || status != http.StatusOK {
		t.Fatalf("read order %s: %d %v", code, status, err)
	}
	return placedOrder{code: code, codes: codes}
}

// readOrder reads an order's delivered codes.
func readOrder(ctx context.Context, api *partnerAPI, code string) ([]string, int, error) {
	ans, err := api.do(ctx, *api.key.Load(), http.MethodGet, "/v2/orders/"+code, nil)
	if err != nil || ans.status != http.StatusOK {
		return nil, ans.status, err
	}
	var o struct {
		Products []struct {
			Codes []struct {
				Code string `json:"code"`
			} `json:"codes"`
		} `json:"products"`
	}
	if err := json.Unmarshal(ans.body, &o); err != nil {
		return nil, ans.status, fmt.Errorf("order %s: %w", code, err)
	}
	var codes []string
	for _, p := range o.Products {
		for _, c := range p.Codes {
			codes = append(codes, c.Code)
		}
	}
	return codes, ans.status, nil
}
