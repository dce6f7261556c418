//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
)

const (
	// dbCluster is the chart's CloudNativePG Cluster of the release.
	dbCluster = release + "-db"
	// dbInstances is the Cluster's size: a primary and two standbys, one of them synchronous.
	dbInstances = 3
	// backupSecret holds the object store's credentials in the release's namespace, under the
	// keys the chart's values name by default (testdata/objectstore.yaml).
	backupSecret = "objectstore-credentials"
	// probeCurrency is a currency of the production wallet the load never spends: its balance
	// moves only by the top-ups the test makes, so every replica's answer can be compared with it.
	probeCurrency = "USD"
)

// TestDatabaseFailover runs the chart with database.cnpg.enabled (a CloudNativePG Cluster of
// three instances, synchronous replication, the PgBouncer pooler, WAL archived to an object
// store) under order load from several clients, and loses the primary three ways: its Pod
// deleted, its postgres killed on the node, a planned switchover. After each it measures what a
// partner saw (the seconds of refusals), checks that no acknowledged order was lost, and that a
// key revoked and a top-up made while the primary was gone reach every API replica. Then it
// recovers the database to an instant between two orders, as docs/operations.md says, and
// checks what the restored platform serves.
func TestDatabaseFailover(t *testing.T) {
	e := loadEnv(t)
	e.requireCNPG(t)
	k := newKube(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()

	installCNPG(ctx, t, e, k)
	// Three instances, the three of a recovered Cluster, and spares for a replaced instance.
	localVolumes(ctx, t, e, k, 8, "2Gi")
	k.createNamespace(ctx, t, namespace)
	k.createNamespace(ctx, t, partnersNS)
	logs := watchLogs(ctx, t, k)
	t.Cleanup(func() {
		cleanup(t, e, k)
		cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer ccancel()
		removeLocalVolumes(cctx, e, k)
	})
	defer checkLogs(t, e, logs)

	store := startObjectStore(ctx, t, e, k)
	installWithCNPG(ctx, t, e, k, store)
	primary, err := k.waitHealthy(ctx, dbCluster, dbInstances, "", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Cluster %s healthy, primary %s", dbCluster, primary)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checkAlertMetrics(ctx, t, k, root, primary)
	m := onboard(ctx, t, e, k, appSecret{name: dbCluster + "-app", key: "uri"})

	f := newFailoverLoad(ctx, 4, m.production, m.sandbox)
	watch := startCatalogWatch(ctx, m.production)
	var stalled time.Duration
	events := []failoverEvent{
		{name: "primary Pod deleted", trigger: func(primary string) error {
			return k.k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: primary}})
		}},
		{name: "primary's postgres killed (SIGKILL)", trigger: func(primary string) error {
			return k.killPostmaster(ctx, primary)
		}},
		{name: "planned switchover", trigger: func(primary string) error {
			target, err := k.readyReplica(ctx, dbCluster, primary)
			if err != nil {
				return err
			}
			return k.switchover(ctx, dbCluster, target)
		}},
		// What asynchronous replication can lose: commits the primary acknowledged while its
		// standbys could not receive them. Synchronous replication must lose none of them.
		{name: "primary cut off from its standbys, then lost", mayLose: !synchronous(), trigger: func(primary string) error {
			var err error
			stalled, err = k.loseCutOffPrimary(ctx, primary, standbyCutFor)
			return err
		}, check: func(t *testing.T) {
			t.Helper()
			// The alert's condition, on the real exporter; its `for` is promtool's to test.
			switch {
			case stalled > 0:
				t.Logf("the primary's exporter met CodeportSynchronousStandbysMissing's condition %s into the cut",
					stalled.Round(100*time.Millisecond))
			case synchronous():
				t.Errorf("the primary's exporter never met CodeportSynchronousStandbysMissing's condition "+
					"in %s without standbys", standbyCutFor)
			}
		}},
	}
	var report []string
	for i, ev := range events {
		ok := t.Run(ev.name, func(t *testing.T) {
			r := loseThePrimary(ctx, t, e, k, logs, m, f, i, primary, ev)
			if ev.check != nil {
				ev.check(t)
			}
			primary = r.primary
			report = append(report, r.String(ev.name))
		})
		if !ok {
			break
		}
	}
	catalogFailures := watch.stop()
	resent, refused := f.stop()
	t.Run("every acknowledged order kept, once, with its money", func(t *testing.T) {
		auditAcknowledged(ctx, t, k, f)
	})
	if catalogFailures > 0 {
		t.Errorf("the catalog failed %d times while the primary was lost (it is served from memory)", catalogFailures)
	}
	t.Logf("failover under load: %d orders acknowledged, %d refused and resent by their clients (%d refusals)",
		f.ackedCount(), resent, refused)
	for _, line := range report {
		t.Log(line)
	}
	t.Run("point-in-time recovery", func(t *testing.T) { pointInTimeRecovery(ctx, t, e, k, m, store) })
}

// failoverEvent is one way of losing the primary.
type failoverEvent struct {
	name    string
	trigger func(primary string) error
	// mayLose is set where losing acknowledged orders is what the event shows, not a failure: the
	// price of asynchronous replication.
	mayLose bool
	// check, when set, runs once the Cluster has recovered.
	check func(t *testing.T)
}

// standbyCutFor is how long the primary is cut off from its standbys before it is lost: long
// enough for placements to reach their deadline (10 s) while their commits wait for a standby,
// and for the primary's exporter to show it: its walsenders give up after wal_sender_timeout
// (CloudNativePG's 5 s), and it reruns the queries behind pg_replication only once their results
// are older than metricsQueriesTTL (30 s by default).
const standbyCutFor = 40 * time.Second

// synchronous is the replication the test installs the Cluster with: the chart's default,
// synchronous, unless E2E_CNPG_SYNCHRONOUS=false asks for CloudNativePG's asynchronous one, to
// measure what it loses.
func synchronous() bool { return envOr("E2E_CNPG_SYNCHRONOUS", "true") != "false" }

// appSecret names the Secret and key holding a database URL.
type appSecret struct{ name, key string }

// installWithCNPG installs the chart as docs/operations.md's CloudNativePG setup does, on this
// node's local volumes, with the PostgreSQL image built for it and WAL archived to the store.
func installWithCNPG(ctx context.Context, t *testing.T, e env, k *kube, store objectStore) {
	t.Helper()
	k.createSecret(ctx, t, "codeport-codes-key", map[string]string{"key": randomKey(t)})
	k.createSecret(ctx, t, "codeport-redis", map[string]string{"url": e.redisURL})
	repo, tag, _ := strings.Cut(e.image, ":")
	start := time.Now()
	_, err := run(ctx, e, e.helm, "install", release, e.chart, "-n", namespace,
		"--set", "image.repository="+repo, "--set", "image.tag="+tag,
		"--set", "operator.replicas=2", "--set", "api.production.replicas=2",
		"--set", "redis.existingSecret=codeport-redis",
		"--set", "database.cnpg.enabled=true",
		"--set", "database.cnpg.instances="+strconv.Itoa(dbInstances),
		"--set", "database.cnpg.imageName="+e.cnpg.postgresImage,
		"--set", "database.cnpg.pooler.imageName="+e.cnpg.pgbouncerImage,
		"--set", "database.cnpg.storage.storageClass="+localStorageClass,
		"--set", "database.cnpg.storage.size=1Gi",
		// Three instances and two PgBouncers on a 2-CPU node beside everything else.
		"--set", "database.cnpg.resources.requests.cpu=100m",
		"--set", "database.cnpg.resources.requests.memory=256Mi",
		"--set", "database.cnpg.pooler.resources.requests.cpu=20m",
		"--set", "database.cnpg.synchronous.enabled="+strconv.FormatBool(synchronous()),
		"--set", "database.cnpg.backup.enabled=true",
		"--set", "database.cnpg.backup.method=barmanObjectStore",
		"--set", "database.cnpg.backup.barmanObjectStore.destinationPath="+store.destination,
		"--set", "database.cnpg.backup.barmanObjectStore.endpointURL="+store.endpoint,
		"--set", "database.cnpg.backup.barmanObjectStore.s3Credentials.existingSecret="+backupSecret,
		"--wait", "--timeout", "15m")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install --wait with a CloudNativePG Cluster (synchronous=%t) took %s", synchronous(),
		time.Since(start).Round(100*time.Millisecond))
}

// failoverLoad places orders from a few clients through both Services for the whole test, as
// partners following the contract do: an order refused with a retryable answer (502, or no
// answer at all) is sent again with the same externalOrderCode until it is accepted.
type failoverLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// acked is every order answered 202 (or 200: an earlier attempt of it was accepted).
	acked []ackedOrder
	// refusals are the retryable refusals, when each was answered.
	refusals []time.Time
	// failures are answers the contract does not allow here.
	failures []string
	resent   int
	placed   atomic.Int64
}

type ackedOrder struct {
	code string
	at   time.Time
}

func newFailoverLoad(ctx context.Context, workers int, targets ...target) *failoverLoad {
	ctx, cancel := context.WithCancel(ctx)
	f := &failoverLoad{cancel: cancel}
	for w := range workers {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				tg := targets[(w+n)%len(targets)]
				f.place(ctx, tg, fmt.Sprintf("failover-%d-%d", w, n))
				select {
				case <-ctx.Done():
				case <-time.After(loadPace):
				}
			}
		}()
	}
	return f
}

// place sends one order until it is accepted or refused for good.
func (f *failoverLoad) place(ctx context.Context, tg target, code string) {
	body := map[string]any{"externalOrderCode": code, "currency": "EUR",
		"orderProducts": []map[string]any{{"productCode": tg.product, "quantity": 1, "price": tg.price}}}
	for attempt := 0; ; attempt++ {
		ans, err := tg.api.do(ctx, *tg.api.key.Load(), http.MethodPost, "/v2/orders", body)
		if ctx.Err() != nil {
			return
		}
		f.mu.Lock()
		switch {
		case err == nil && (ans.status == http.StatusAccepted || ans.status == http.StatusOK):
			f.acked = append(f.acked, ackedOrder{code: code, at: time.Now()})
			f.placed.Add(1)
			if attempt > 0 {
				f.resent++
			}
			f.mu.Unlock()
			return
		case ans.status == 0 || ans.status == http.StatusBadGateway || ans.status == http.StatusTooManyRequests:
			f.refusals = append(f.refusals, time.Now())
		default:
			f.failures = append(f.failures, fmt.Sprintf("order %s: %d %s", code, ans.status, ans.body))
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second)):
		}
	}
}

// refusedBetween is the first and last retryable refusal answered in [from, to), and how many.
func (f *failoverLoad) refusedBetween(from, to time.Time) (first, last time.Time, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.refusals {
		if r.Before(from) || !r.Before(to) {
			continue
		}
		if n == 0 {
			first = r
		}
		last = r
		n++
	}
	return first, last, n
}

func (f *failoverLoad) ackedCodes() []ackedOrder {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.acked)
}

// forget drops orders from the acknowledged ones, once their loss is reported.
func (f *failoverLoad) forget(codes []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acked = slices.DeleteFunc(f.acked, func(o ackedOrder) bool { return slices.Contains(codes, o.code) })
}

func (f *failoverLoad) ackedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.acked)
}

// stop ends the load; it returns how many orders were accepted only when sent again, and how
// many refusals there were.
func (f *failoverLoad) stop() (resent, refused int) {
	f.cancel()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resent, len(f.refusals)
}

// catalogWatch reads the production catalog every 200 ms and counts the answers that are not 200.
type catalogWatch struct {
	cancel   context.CancelFunc
	done     chan struct{}
	failures atomic.Int64
}

func startCatalogWatch(ctx context.Context, tg target) *catalogWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &catalogWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			ans, err := tg.api.do(ctx, *tg.api.key.Load(), http.MethodGet, "/v2/catalog/products?take=10", nil)
			if ctx.Err() == nil && (err != nil || ans.status != http.StatusOK) {
				w.failures.Add(1)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *catalogWatch) stop() int64 {
	w.cancel()
	<-w.done
	return w.failures.Load()
}

// failoverResult is what one loss of the primary cost, as measured.
type failoverResult struct {
	primary, was string
	// refused is how many order attempts were refused, and window the time from the first
	// refusal to the last: what a partner saw of the event.
	refused int
	window  time.Duration
	// healthy is the time until the Cluster ran three instances again with a new primary.
	healthy time.Duration
	// lastRefusal is the time from the event to the last refusal, promoted to the new primary's
	// promotion (CloudNativePG's status.currentPrimaryTimestamp), writable to the first moment
	// the primary streamed to a standby it may commit with again: the floor of the refusals,
	// since a commit waits for that standby.
	lastRefusal, promoted, writable time.Duration
	// revoked and credited are the times until every API replica refused the key deleted and
	// showed the top-up made during the event.
	revoked, credited time.Duration
	lost              int
}

func (r failoverResult) String(name string) string {
	if name != "" {
		name = fmt.Sprintf("%-38s ", name+":")
	}
	s := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
	return fmt.Sprintf("%sprimary %s -> %s: %d refusals over %s, the last %s after the event; promoted after %s, "+
		"writable (a standby to commit with) after %s, Cluster healthy after %s; "+
		"key revoked on every replica after %s, top-up shown after %s; acknowledged orders lost: %d",
		name, r.was, r.primary, r.refused, s(r.window), s(r.lastRefusal), s(r.promoted), s(r.writable),
		s(r.healthy), s(r.revoked), s(r.credited), r.lost)
}

// loseThePrimary triggers one event under the running load, revokes a key and makes a top-up
// while the primary is gone, waits for the Cluster to recover, and measures.
//
//nolint:thelper // a phase of the end-to-end test, not a helper: a failure names its own line
func loseThePrimary(ctx context.Context, t *testing.T, e env, k *kube, logs *logWatch, m *mission,
	f *failoverLoad, n int, primary string, ev failoverEvent,
) failoverResult {
	r := failoverResult{was: primary}
	restarts := restartCounts(ctx, t, k)
	doomed := prepareRevocableKey(ctx, t, k, n)
	before := f.placed.Load()
	if err := poll.Wait(ctx, pollPause, 2*time.Minute, "orders flowing before the event", func() (bool, string) {
		return f.placed.Load() >= before+20, fmt.Sprintf("%d placed", f.placed.Load()-before)
	}); err != nil {
		t.Fatal(err)
	}
	balance := probeBalance(ctx, t, m)
	restartsBefore, err := k.postgresRestarts(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	writable := watchWritable(ctx, e, k, at)
	if err := ev.trigger(primary); err != nil {
		t.Fatal(err)
	}
	// While the primary is gone: the key is deleted (the operator revokes it) and a top-up made.
	revoked := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: partnersNS, Name: doomed.name}}
	if err := k.k8s.Delete(ctx, revoked); err != nil {
		t.Errorf("delete ApiKey %s: %v", doomed.name, err)
	}
	topUp := &v1alpha1.WalletTopUp{
		ObjectMeta: metav1.ObjectMeta{Namespace: partnersNS, Name: fmt.Sprintf("failover-%d", n)},
		Spec: v1alpha1.WalletTopUpSpec{WalletRef: v1alpha1.LocalObjectReference{Name: "acme-production"},
			ID: fmt.Sprintf("failover-%d", n), Currency: probeCurrency, Amount: "1.00", Note: "failover test"}}
	if err := k.k8s.Create(ctx, topUp); err != nil {
		t.Errorf("top up during the event: %v", err)
	}
	newPrimary, err := k.waitRecovered(ctx, primary, restartsBefore, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r.primary, r.healthy = newPrimary, time.Since(at)
	r.promoted = promotedAfter(ctx, k, at)
	r.revoked = measure(ctx, t, at, "key "+doomed.name+" refused on every API replica", func() (bool, string) {
		return everyReplica(ctx, t, k, func(api *partnerAPI) (bool, string) {
			ans, err := api.do(ctx, doomed.key, http.MethodGet, "/v2/ping", nil)
			return err == nil && ans.status == http.StatusUnauthorized, fmt.Sprintf("%d %v", ans.status, err)
		})
	})
	want := balance + 1
	r.credited = measure(ctx, t, at, "the top-up shown by every API replica", func() (bool, string) {
		return everyReplica(ctx, t, k, func(api *partnerAPI) (bool, string) {
			got, err := walletBalance(ctx, api, *m.productionKey.Load(), probeCurrency)
			return err == nil && got == want, fmt.Sprintf("%s %v, want %v (%v)", probeCurrency, got, want, err)
		})
	})
	// Orders flow again before the window is closed, so that it holds every refusal.
	after := f.placed.Load()
	if err := poll.Wait(ctx, pollPause, 2*time.Minute, "orders accepted after the event", func() (bool, string) {
		return f.placed.Load() >= after+20, fmt.Sprintf("%d placed", f.placed.Load()-after)
	}); err != nil {
		t.Error(err)
	}
	r.writable = writable()
	first, last, refused := f.refusedBetween(at, time.Now())
	r.refused = refused
	if refused > 0 {
		r.window, r.lastRefusal = last.Sub(first), last.Sub(at)
	}
	lost := lostOrders(ctx, t, k, f)
	switch r.lost = len(lost); {
	case r.lost > 0 && ev.mayLose:
		t.Logf("%d acknowledged orders are not in the database after the event, as asynchronous replication allows: %v",
			r.lost, lost)
		f.forget(lost)
	case r.lost > 0:
		t.Errorf("%d acknowledged orders are not in the database after the event (RPO must be 0): %v", r.lost, lost)
	}
	checkNoRestarts(ctx, t, k, restarts)
	// A message repeated by every failed request is written once every 10 seconds (serve.go). The
	// operator's lines are bounded by its objects and their retries' backoff, not by the load.
	for _, r := range logs.repeated(apiPod, at, time.Now(), int(time.Since(at)/(10*time.Second))+2) {
		t.Errorf("logged again and again while the primary was lost: %s", r)
	}
	t.Log(r.String(""))
	return r
}

// watchWritable polls, once a second from the event on, whether the Cluster's primary streams
// to a standby it may commit with (a synchronous one, under synchronous replication). The
// function it returns stops it and gives the time from at until the primary did again after it
// had not (0: it never stopped, or has not yet come back).
func watchWritable(ctx context.Context, e env, k *kube, at time.Time) func() time.Duration {
	ctx, cancel := context.WithCancel(ctx)
	query := "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
	if synchronous() {
		query += " AND sync_state IN ('sync', 'quorum')"
	}
	done := make(chan time.Duration, 1)
	go func() {
		interrupted, back := false, time.Duration(0)
		for ctx.Err() == nil && back == 0 {
			writable := false
			if s, err := k.clusterState(ctx, dbCluster); err == nil && s.currentPrimary == s.targetPrimary {
				out, err := psql(ctx, e, s.currentPrimary, query)
				writable = err == nil && out != "" && out != "0"
			}
			switch {
			case !writable:
				interrupted = true
			case interrupted:
				back = time.Since(at)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		done <- back
	}()
	return func() time.Duration { cancel(); return <-done }
}

// promotedAfter is the time from at to the promotion of the Cluster's current primary, as
// CloudNativePG records it (0 when it does not say, or promoted it before at).
func promotedAfter(ctx context.Context, k *kube, at time.Time) time.Duration {
	c, err := k.cluster(ctx, dbCluster)
	if err != nil {
		return 0
	}
	stamp, _, _ := unstructured.NestedString(c.Object, "status", "currentPrimaryTimestamp")
	promoted, err := time.Parse("2006-01-02T15:04:05.999999Z", stamp)
	if err != nil || promoted.Before(at) {
		return 0
	}
	return promoted.Sub(at)
}

// revocableKey is an ApiKey the test deletes while the primary is gone.
type revocableKey struct{ name, key string }

func prepareRevocableKey(ctx context.Context, t *testing.T, k *kube, n int) revocableKey {
	t.Helper()
	name := fmt.Sprintf("acme-failover-%d", n)
	ak := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: partnersNS, Name: name},
		Spec: v1alpha1.ApiKeySpec{PartnerRef: v1alpha1.LocalObjectReference{Name: "acme"},
			Environment: v1alpha1.EnvironmentProduction, Type: v1alpha1.ApiKeyTypeAPIKey, SecretName: name + "-key"}}
	if err := k.k8s.Create(ctx, ak); err != nil {
		t.Fatal(err)
	}
	key, err := k.waitKey(ctx, name+"-key", "")
	if err != nil {
		t.Fatal(err)
	}
	err = poll.Wait(ctx, pollPause, 2*time.Minute, "key "+name+" accepted on every API replica", func() (bool, string) {
		return everyReplica(ctx, t, k, func(api *partnerAPI) (bool, string) {
			ans, err := api.do(ctx, key, http.MethodGet, "/v2/ping", nil)
			return err == nil && ans.status == http.StatusOK, fmt.Sprintf("%d %v", ans.status, err)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return revocableKey{name: name, key: key}
}

// everyReplica asks each ready production API Pod directly.
func everyReplica(ctx context.Context, t testing.TB, k *kube, ask func(*partnerAPI) (bool, string)) (bool, string) {
	t.Helper()
	pods, err := k.pods(ctx, "api-production")
	if err != nil {
		return false, err.Error()
	}
	var waiting []string
	for i := range pods {
		if !podReady(&pods[i]) {
			continue
		}
		api := newPartnerAPI(t, fmt.Sprintf("http://%s:8080", pods[i].Status.PodIP), nil)
		if ok, why := ask(api); !ok {
			waiting = append(waiting, pods[i].Name+": "+why)
		}
	}
	return len(waiting) == 0, strings.Join(waiting, "; ")
}

// measure waits for cond and returns the time since at; a condition that never holds fails the
// test.
func measure(ctx context.Context, t *testing.T, at time.Time, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	if err := poll.Wait(ctx, pollPause, 5*time.Minute, what, cond); err != nil {
		t.Error(err)
		return 0
	}
	return time.Since(at)
}

func walletBalance(ctx context.Context, api *partnerAPI, key, currency string) (float64, error) {
	ans, err := api.do(ctx, key, http.MethodGet, "/v2/wallet", nil)
	if err != nil {
		return 0, err
	}
	if ans.status != http.StatusOK {
		return 0, fmt.Errorf("wallet: %d %s", ans.status, ans.body)
	}
	var w struct {
		Balances map[string]float64 `json:"balances"`
	}
	if err := json.Unmarshal(ans.body, &w); err != nil {
		return 0, fmt.Errorf("wallet: %w", err)
	}
	return w.Balances[currency], nil
}

func probeBalance(ctx context.Context, t *testing.T, m *mission) float64 {
	t.Helper()
	b, err := walletBalance(ctx, m.production.api, *m.productionKey.Load(), probeCurrency)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lostOrders are the acknowledged orders the database does not hold. The acknowledgements are
// read first: an order acknowledged while the database is read may not be in what was read.
func lostOrders(ctx context.Context, t *testing.T, k *kube, f *failoverLoad) []string {
	t.Helper()
	acked := f.ackedCodes()
	var stored map[string]storetest.AuditedOrder
	err := poll.Wait(ctx, pollPause, 2*time.Minute, "the orders in the database", func() (bool, string) {
		db, err := k.appDB(ctx, dbCluster)
		if err != nil {
			return false, err.Error()
		}
		defer db.Close(context.WithoutCancel(ctx))
		a, err := storetest.AuditMoney(ctx, db)
		if err != nil {
			return false, err.Error()
		}
		stored = a.ByCode()
		return true, ""
	})
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, o := range acked {
		if _, ok := stored[o.code]; !ok {
			lost = append(lost, o.code)
		}
	}
	return lost
}

// auditAcknowledged waits until no order is processing, then checks the money of every order
// and that each acknowledged one is stored once.
//
//nolint:thelper // a phase of the end-to-end test, not a helper: a failure names its own line
func auditAcknowledged(ctx context.Context, t *testing.T, k *kube, f *failoverLoad) {
	a := auditDatabase(ctx, t, k)
	for _, finding := range a.Findings {
		t.Error(finding)
	}
	stored := a.ByCode()
	for _, o := range f.ackedCodes() {
		s, ok := stored[o.code]
		switch {
		case !ok:
			t.Errorf("order %s acknowledged at %s is not in the database", o.code, o.at.Format("15:04:05.000"))
		case s.Status != "completed" && s.Status != "failed":
			t.Errorf("order %s is %s", o.code, s.Status)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, failure := range f.failures {
		t.Errorf("answer outside the contract's retryable ones: %s", failure)
	}
}

// apiPod tells the API replicas' Pods by name.
func apiPod(name string) bool {
	return strings.HasPrefix(name, release+"-production-") || strings.HasPrefix(name, release+"-sandbox-")
}

// restartCounts are the restarts of every API container, by Pod and container.
func restartCounts(ctx context.Context, t *testing.T, k *kube) map[string]int32 {
	t.Helper()
	counts := map[string]int32{}
	for _, component := range []string{"api-production", "api-sandbox"} {
		pods, err := k.pods(ctx, component)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			for _, c := range p.Status.ContainerStatuses {
				counts[p.Name+"/"+c.Name] = c.RestartCount
			}
		}
	}
	return counts
}

// checkNoRestarts: losing the database primary restarts no API container (no liveness probe
// depends on the database), whatever the first install's wait for the schema did. The operator
// is left out: it leaves when it loses its Lease, which a loaded API server may cause.
func checkNoRestarts(ctx context.Context, t *testing.T, k *kube, before map[string]int32) {
	t.Helper()
	for name, n := range restartCounts(ctx, t, k) {
		if n > before[name] {
			t.Errorf("%s restarted %d times while the primary was lost", name, n-before[name])
		}
	}
}

// startObjectStore runs testdata/objectstore.yaml in the release's namespace with credentials of
// the run, and waits until the store answers.
func startObjectStore(ctx context.Context, t *testing.T, e env, k *kube) objectStore {
	t.Helper()
	s := objectStore{accessKey: randomHex(t), secretKey: randomHex(t),
		endpoint:    fmt.Sprintf("http://objectstore.%s.svc:7070", namespace),
		destination: "s3://codeport-backups/"}
	src, err := os.ReadFile("testdata/objectstore.yaml")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"OBJECTSTORE_IMAGE": e.cnpg.objectStoreImage,
		"ACCESS_KEY_ID": s.accessKey, "ACCESS_SECRET_KEY": s.secretKey}
	manifest := filepath.Join(t.TempDir(), "objectstore.yaml")
	expanded := os.Expand(string(src), func(v string) string { return vars[v] })
	if err := os.WriteFile(manifest, []byte(expanded), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run(ctx, e, e.kubectl, "-n", namespace, "apply", "-f", manifest); err != nil {
		t.Fatal(err)
	}
	if _, err := run(ctx, e, e.kubectl, "-n", namespace, "rollout", "status", "deployment/objectstore",
		"--timeout=3m"); err != nil {
		t.Fatal(err)
	}
	return s
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
