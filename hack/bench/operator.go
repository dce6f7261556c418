package main

// The operator figures (-figures operator): real `codeport operator` processes against
// envtest's kube-apiserver and etcd (KUBEBUILDER_ASSETS, else hack/envtest.sh builds them) and a
// database of their own on the real PostgreSQL server (TEST_DATABASE_URL), migrations applied.
//
//	O1 cold start: a fresh operator brings N Partners (each with the Catalog ref, a sandbox and a
//	   production ApiKey, a production Wallet) to Ready, with M unrelated Secrets in the cluster;
//	   then a restart on the Ready set, until every object was reconciled once.
//	O2 the operator's resident memory (VmHWM, VmRSS from /proc): after the cold start; after a
//	   restart with the unrelated Secrets and without them; and the same restart with every
//	   Secret and ConfigMap cached in full (the hidden --cache-all-secrets: the operator's
//	   caching before the label selector).
//	O3 failover: two operators with --leader-elect; the leader is SIGKILLed when half of the
//	   ApiKeys have a key; everything still reaches Ready, and every ApiKey has exactly one key
//	   registered, the one in its Secret.
//
// Times are reported, never asserted; the failover's key check is a correctness check and fails
// the run.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/test/testprocess"
)

const (
	tenantNamespace = "partners"
	noiseNamespace  = "unrelated"
	// leaseNamespace holds the leader-election Lease (the operator's own namespace in a cluster).
	leaseNamespace = "default"
)

// operatorFigures measures O1-O3.
func operatorFigures(ctx context.Context, cfg config, binary string) ([]row, error) {
	ctrl.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "codeport-bench-operator-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	rows, err := coldStartFigures(ctx, cfg, binary, dir)
	if err != nil {
		return nil, err
	}
	failover, err := failoverFigures(ctx, cfg, binary, dir)
	if err != nil {
		return nil, err
	}
	return append(rows, failover...), nil
}

func coldStartFigures(ctx context.Context, cfg config, binary, dir string) ([]row, error) {
	c, err := startCluster(ctx, filepath.Join(dir, "coldstart"))
	if err != nil {
		return nil, err
	}
	defer c.stop()
	progress("O1 creating %d unrelated Secrets of %d bytes", cfg.noiseSecrets, cfg.noiseBytes)
	started := time.Now()
	if err := c.createNoise(ctx, cfg.noiseSecrets, cfg.noiseBytes); err != nil {
		return nil, err
	}
	progress("O1 created in %s; creating %d partners with their catalog, keys and wallets",
		time.Since(started).Round(time.Millisecond), cfg.operatorPartners)
	started = time.Now()
	if err := c.createTenants(ctx, cfg.operatorPartners); err != nil {
		return nil, err
	}
	progress("O1 created in %s; starting the operator", time.Since(started).Round(time.Millisecond))

	op, err := c.startOperator(binary, "cold")
	if err != nil {
		return nil, err
	}
	coldStart, err := c.waitReady(ctx, op.started, cfg.operatorPartners, op)
	if err != nil {
		op.stop()
		return nil, err
	}
	coldHWM, coldRSS, err := op.memory()
	op.stop()
	if err != nil {
		return nil, err
	}
	progress("O1 cold start %s, VmHWM %.1f MB", coldStart.Round(100*time.Millisecond), coldHWM)

	restart := func(name string, extra ...string) (time.Duration, float64, float64, error) {
		op, err := c.startOperator(binary, name, extra...)
		if err != nil {
			return 0, 0, 0, err
		}
		defer op.stop()
		pass, err := op.waitFullPass(ctx, cfg.operatorPartners)
		if err != nil {
			return 0, 0, 0, err
		}
		hwm, rss, err := op.memory()
		progress("O2 %s: every object reconciled in %s, VmHWM %.1f MB, VmRSS %.1f MB",
			name, pass.Round(100*time.Millisecond), hwm, rss)
		return pass, hwm, rss, err
	}
	pass, hwm, rss, err := restart("restart")
	if err != nil {
		return nil, err
	}
	_, allHWM, allRSS, err := restart("restart, every Secret cached", "--cache-all-secrets")
	if err != nil {
		return nil, err
	}
	progress("O2 deleting the unrelated Secrets")
	if err := c.k8s.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(noiseNamespace)); err != nil {
		return nil, fmt.Errorf("delete unrelated secrets: %w", err)
	}
	_, quietHWM, quietRSS, err := restart("restart, no unrelated Secrets")
	if err != nil {
		return nil, err
	}

	set := fmt.Sprintf("%d partners (%d ApiKeys, %d Wallets), %d unrelated Secrets of %d B", cfg.operatorPartners,
		2*cfg.operatorPartners, cfg.operatorPartners, cfg.noiseSecrets, cfg.noiseBytes)
	return []row{
		{"O1 cold start to all Ready, " + set + " (s)", coldStart.Seconds(), 0, "", true},
		{"O1 restart on the Ready set: every object reconciled once (s)", pass.Seconds(), 0, "", true},
		{"O2 operator VmHWM after the cold start (MB)", coldHWM, 0, "", true},
		{"O2 operator VmRSS after the cold start (MB)", coldRSS, 0, "", true},
		{"O2 operator VmHWM after a restart, vs every Secret and ConfigMap cached (MB)", hwm, allHWM, "", true},
		{"O2 operator VmRSS after a restart, vs every Secret and ConfigMap cached (MB)", rss, allRSS, "", true},
		{"O2 operator VmHWM after a restart, vs the same without the unrelated Secrets (MB)", hwm, quietHWM, "", true},
		{"O2 operator VmRSS after a restart, vs the same without the unrelated Secrets (MB)", rss, quietRSS, "", true},
	}, nil
}

// failoverFigures runs O3 on a cluster and database of its own.
func failoverFigures(ctx context.Context, cfg config, binary, dir string) ([]row, error) {
	c, err := startCluster(ctx, filepath.Join(dir, "failover"))
	if err != nil {
		return nil, err
	}
	defer c.stop()
	a, err := c.startOperator(binary, "replica-a", "--leader-elect", "--leader-election-namespace", leaseNamespace)
	if err != nil {
		return nil, err
	}
	defer a.stop()
	if err := poll.Wait(ctx, pollPause, time.Minute, "replica-a leads", a.leads); err != nil {
		return nil, err
	}
	b, err := c.startOperator(binary, "replica-b", "--leader-elect", "--leader-election-namespace", leaseNamespace)
	if err != nil {
		return nil, err
	}
	defer b.stop()
	if err := poll.Wait(ctx, pollPause, 30*time.Second, "replica-b up", b.up); err != nil {
		return nil, err
	}

	progress("O3 onboarding %d partners; the leader is killed when half of the ApiKeys have a key", cfg.operatorPartners)
	start := time.Now()
	var killedAt time.Time
	var killErr error
	var once sync.Once
	watchdog, stopWatchdog := context.WithCancel(ctx)
	defer stopWatchdog()
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		half := cfg.operatorPartners // of 2N ApiKeys
		for watchdog.Err() == nil {
			issued, err := c.issuedKeys(watchdog)
			if err == nil && issued >= half {
				once.Do(func() {
					killedAt = time.Now()
					killErr = a.kill()
					progress("O3 SIGKILLed the leader after %s (%d keys issued)",
						killedAt.Sub(start).Round(100*time.Millisecond), issued)
				})
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	if err := c.createTenants(ctx, cfg.operatorPartners); err != nil {
		return nil, err
	}
	created := time.Since(start)
	select {
	case <-killed:
	case <-time.After(10 * time.Minute):
		return nil, errors.New("O3: half of the keys were never issued")
	}
	if killErr != nil {
		return nil, fmt.Errorf("kill the leader: %w", killErr)
	}
	if err := poll.Wait(ctx, pollPause, 2*time.Minute, "replica-b takes over", b.leads); err != nil {
		return nil, err
	}
	takeover := time.Since(killedAt)
	progress("O3 replica-b leads %s after the kill", takeover.Round(100*time.Millisecond))
	total, err := c.waitReady(ctx, start, cfg.operatorPartners, b)
	if err != nil {
		return nil, err
	}
	if err := c.checkOneKeyEach(ctx, 2*cfg.operatorPartners); err != nil {
		return nil, fmt.Errorf("O3: %w", err)
	}
	progress("O3 all Ready %s after onboarding began; every ApiKey has exactly one key, the one in its Secret",
		total.Round(100*time.Millisecond))
	keys := float64(2 * cfg.operatorPartners)
	return []row{
		{fmt.Sprintf("O3 failover: onboarding %d partners, objects created in (s)", cfg.operatorPartners),
			created.Seconds(), 0, "", true},
		{"O3 failover: leader SIGKILLed at (s)", killedAt.Sub(start).Seconds(), 0, "", true},
		{"O3 failover: takeover after the kill, 15 s lease (s)", takeover.Seconds(), 0, "", true},
		{"O3 failover: all Ready, from onboarding start (s)", total.Seconds(), 0, "", true},
		{"O3 failover: all Ready, from the kill (s)", total.Seconds() - killedAt.Sub(start).Seconds(), 0, "", true},
		{"O3 failover: ApiKeys with exactly one key, the one in their Secret", keys, keys, "all", true},
	}, nil
}

// cluster is envtest's kube-apiserver and etcd with the CRDs, a kubeconfig for the operator
// processes, and a database: its own, or one it shares and leaves behind.
type cluster struct {
	dir        string
	te         *envtest.Environment
	k8s        client.Client
	kubeconfig string
	database   *storetest.Database
	// namespace holds the tenants; the operator keys what it writes to the database by
	// namespace and name, so clusters sharing a database use namespaces of their own.
	namespace    string
	ownsDatabase bool
}

// startCluster starts a cluster whose tenants are in tenantNamespace, on a database of its own.
func startCluster(ctx context.Context, dir string) (*cluster, error) {
	return startClusterOn(ctx, dir, tenantNamespace, nil)
}

// startClusterOn starts a cluster whose tenants are in namespace, on database, or on a database
// of its own when database is nil.
func startClusterOn(ctx context.Context, dir, namespace string, database *storetest.Database) (*cluster, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		out, err := exec.CommandContext(context.Background(), "hack/envtest.sh").Output()
		if err != nil {
			return nil, fmt.Errorf(
				"KUBEBUILDER_ASSETS is not set and hack/envtest.sh failed (run from the repository root): %w", err)
		}
		if err := os.Setenv("KUBEBUILDER_ASSETS", strings.TrimSpace(string(out))); err != nil {
			return nil, err
		}
	}
	crds := filepath.Join("config", "crd", "bases")
	if _, err := os.Stat(crds); err != nil {
		return nil, fmt.Errorf("CRDs not found at %s: run the bench from the repository root", crds)
	}
	te := &envtest.Environment{CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true}
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest: %w", err)
	}
	c := &cluster{dir: dir, te: te, namespace: namespace, database: database}
	fail := func(err error) (*cluster, error) { c.stop(); return nil, err }
	user, err := te.AddUser(envtest.User{Name: "codeport-operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fail(fmt.Errorf("envtest user: %w", err))
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return fail(fmt.Errorf("kubeconfig: %w", err))
	}
	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.kubeconfig, kubeconfig, 0o600); err != nil {
		return fail(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	cfg.QPS, cfg.Burst = -1, 0 // as the operator runs: no client-side rate limit
	if c.k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fail(err)
	}
	for _, ns := range []string{namespace, noiseNamespace} {
		if err := c.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fail(fmt.Errorf("namespace %s: %w", ns, err))
		}
	}
	if c.database == nil {
		if c.database, err = storetest.Create(ctx, "bench_operator", true); err != nil {
			return fail(fmt.Errorf("operator database: %w", err))
		}
		c.ownsDatabase = true
	}
	return c, nil
}

func (c *cluster) stop() {
	if c.ownsDatabase {
		_ = c.database.Drop(context.Background())
	}
	_ = c.te.Stop()
}

// createAll creates objs with 32 clients at once.
func (c *cluster) createAll(ctx context.Context, objs <-chan client.Object) error {
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for obj := range objs {
				if err := c.k8s.Create(ctx, obj); err != nil && firstErr.Load() == nil {
					firstErr.Store(fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err))
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	return nil
}

// createNoise creates n Secrets of size bytes each that have nothing to do with codeport.
func (c *cluster) createNoise(ctx context.Context, n, size int) error {
	objs := make(chan client.Object)
	go func() {
		defer close(objs)
		for i := range n {
			data := make([]byte, size)
			_, _ = rand.Read(data)
			objs <- &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: noiseNamespace,
					Name:      fmt.Sprintf("unrelated-%05d", i),
					Labels:    map[string]string{"app": "something-else"},
				},
				Data: map[string][]byte{"tls.key": data},
			}
		}
	}()
	return c.createAll(ctx, objs)
}

func benchPartnerName(i int) string { return fmt.Sprintf("p%04d", i) }

// createTenants creates the catalog and n partners, each with a sandbox and a production ApiKey
// and a production Wallet, the partner first.
func (c *cluster) createTenants(ctx context.Context, n int) error {
	catalog := testfixture.Catalog("main", testfixture.InNamespace(c.namespace), testfixture.WithDiscount("5"),
		testfixture.WithProducts(testfixture.Product("10000000000001", testfixture.WithName("Credit 20", ""))))
	if err := c.k8s.Create(ctx, catalog); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	objs := make(chan client.Object)
	go func() {
		defer close(objs)
		for i := range n {
			name := benchPartnerName(i)
			ns := testfixture.InNamespace(c.namespace)
			objs <- testfixture.Partner(name, ns, testfixture.WithContact("Partner "+name, "ops@"+name+".example"),
				testfixture.WithCatalogRef("main"), testfixture.WithAllowlist("127.0.0.1/32"))
			for _, e := range provisioning.Environments() {
				objs <- testfixture.APIKey(name, e, ns)
			}
			objs <- testfixture.Wallet(name, "production", ns, testfixture.Named(name), testfixture.WithThreshold("10.00"),
				testfixture.WithTopUps(testfixture.TopUp("initial", "EUR", "100.00")))
		}
	}()
	return c.createAll(ctx, objs)
}

// readyCount counts the objects of the tenant namespace whose Ready condition is True for
// their current generation.
func (c *cluster) readyCount(ctx context.Context) (int, string, error) {
	isReady := func(conditions []metav1.Condition, generation int64) bool {
		r := meta.FindStatusCondition(conditions, v1alpha1.ConditionReady)
		return r != nil && r.Status == metav1.ConditionTrue && r.ObservedGeneration == generation
	}
	var partners v1alpha1.PartnerList
	var keys v1alpha1.ApiKeyList
	var wallets v1alpha1.WalletList
	var catalogs v1alpha1.CatalogList
	for _, l := range []client.ObjectList{&partners, &keys, &wallets, &catalogs} {
		if err := c.k8s.List(ctx, l, client.InNamespace(c.namespace)); err != nil {
			return 0, "", err
		}
	}
	var p, k, w, cat int
	for i := range partners.Items {
		if isReady(partners.Items[i].Status.Conditions, partners.Items[i].Generation) {
			p++
		}
	}
	for i := range keys.Items {
		if isReady(keys.Items[i].Status.Conditions, keys.Items[i].Generation) {
			k++
		}
	}
	for i := range wallets.Items {
		if isReady(wallets.Items[i].Status.Conditions, wallets.Items[i].Generation) {
			w++
		}
	}
	for i := range catalogs.Items {
		if isReady(catalogs.Items[i].Status.Conditions, catalogs.Items[i].Generation) {
			cat++
		}
	}
	return p + k + w + cat, fmt.Sprintf("catalogs %d, partners %d, keys %d, wallets %d Ready", cat, p, k, w), nil
}

// waitReady waits until the catalog and n partners with their keys and wallets are Ready, and
// returns the time since start.
func (c *cluster) waitReady(ctx context.Context, start time.Time, n int, op *operator) (time.Duration, error) {
	const limit = 30 * time.Minute
	want := 1 + 4*n
	deadline := time.Now().Add(limit)
	last := ""
	for time.Now().Before(deadline) {
		got, detail, err := c.readyCount(ctx)
		if err == nil && got == want {
			return time.Since(start), nil
		}
		if !op.running() {
			return 0, fmt.Errorf("operator %s exited (log: %s)", op.name, op.log)
		}
		last = detail
		time.Sleep(500 * time.Millisecond)
	}
	return 0, fmt.Errorf("not all Ready within %s: %s (log: %s)", limit, last, op.log)
}

// issuedKeys counts the ApiKeys with a key in their status.
func (c *cluster) issuedKeys(ctx context.Context) (int, error) {
	var keys v1alpha1.ApiKeyList
	if err := c.k8s.List(ctx, &keys, client.InNamespace(c.namespace)); err != nil {
		return 0, err
	}
	n := 0
	for i := range keys.Items {
		if keys.Items[i].Status.KeyPrefix != "" {
			n++
		}
	}
	return n, nil
}

// checkOneKeyEach checks that each of the n ApiKeys has exactly one key registered in the
// database (none issued twice), active, and that it is the key in the ApiKey's Secret (none
// lost).
func (c *cluster) checkOneKeyEach(ctx context.Context, n int) error {
	conn, err := pgx.Connect(ctx, c.database.URL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT source, count(*), count(*) FILTER (WHERE revoked_at IS NULL),
		(array_agg(digest))[1] FROM api_keys GROUP BY source`)
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	type state struct {
		rows, active int
		digest       []byte
	}
	bySource := map[string]state{}
	for rows.Next() {
		var source string
		var s state
		if err := rows.Scan(&source, &s.rows, &s.active, &s.digest); err != nil {
			return err
		}
		bySource[source] = s
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var keys v1alpha1.ApiKeyList
	if err := c.k8s.List(ctx, &keys, client.InNamespace(c.namespace)); err != nil {
		return err
	}
	if len(keys.Items) != n || len(bySource) != n {
		return fmt.Errorf("%d ApiKeys and %d key sources, want %d", len(keys.Items), len(bySource), n)
	}
	for i := range keys.Items {
		k := &keys.Items[i]
		s := bySource[k.Namespace+"/"+k.Name]
		if s.rows != 1 || s.active != 1 {
			return fmt.Errorf("ApiKey %s: %d keys registered, %d active; want exactly one", k.Name, s.rows, s.active)
		}
		var secret corev1.Secret
		if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: k.Spec.SecretName}, &secret); err != nil {
			return fmt.Errorf("ApiKey %s: %w", k.Name, err)
		}
		digest := sha256.Sum256(secret.Data["apiKey"])
		if !bytes.Equal(digest[:], s.digest) {
			return fmt.Errorf("ApiKey %s: the key in its Secret is not the registered one", k.Name)
		}
	}
	return nil
}

// operator is a running `codeport operator` process; its logs go to a file.
type operator struct {
	name, log, metrics string
	proc               *testprocess.Process
	started            time.Time
}

func (c *cluster) startOperator(binary, name string, extra ...string) (*operator, error) {
	addrs, err := testprocess.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	metrics, probes := addrs[0], addrs[1]
	logPath := filepath.Join(c.dir, strings.NewReplacer(" ", "-", ",", "").Replace(name)+".log")
	args := append([]string{"operator",
		"--kubeconfig", c.kubeconfig, "--database-url", c.database.URL, "--codes-key", codesKey,
		"--metrics-bind-address", metrics, "--metrics-secure=false", "--health-probe-bind-address", probes,
		"--sandbox-base-url", "https://sandbox.api.example/v2", "--production-base-url", "https://api.example/v2",
	}, extra...)
	// Started without waiting for readiness: the cold start is measured from the start.
	proc := &testprocess.Process{Name: "operator " + name, Binary: binary, Args: args, LogFile: logPath}
	if err := proc.Start(context.Background()); err != nil {
		return nil, err
	}
	started := time.Now()
	return &operator{name: name, log: logPath, metrics: "http://" + metrics + "/metrics", proc: proc, started: started},
		nil
}

func (o *operator) running() bool { return o.proc.Running() }

// stop ends the process the way Kubernetes does (SIGTERM), and waits.
func (o *operator) stop() { o.proc.Stop(30 * time.Second) }

// kill ends the process with SIGKILL: no lease release, no cleanup.
func (o *operator) kill() error {
	if err := o.proc.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-o.proc.Exited()
	return nil
}

// memory reads VmHWM and VmRSS of the process, in MB.
func (o *operator) memory() (hwm, rss float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", o.proc.PID()))
	if err != nil {
		return 0, 0, fmt.Errorf("read status: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmHWM:":
			hwm = kb / 1024
		case "VmRSS:":
			rss = kb / 1024
		}
	}
	if hwm == 0 || rss == 0 {
		return 0, 0, fmt.Errorf("no VmHWM/VmRSS for %d", o.proc.PID())
	}
	return hwm, rss, s.Err()
}

// scrape returns the process's metrics as "name{labels}" → value.
func (o *operator) scrape() (map[string]float64, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, o.metrics, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", o.metrics, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out, s.Err()
}

func (o *operator) up() (bool, string) {
	_, err := o.scrape()
	return err == nil, fmt.Sprint(err)
}

func (o *operator) leads() (bool, string) {
	m, err := o.scrape()
	if err != nil {
		return false, err.Error()
	}
	return m[`leader_election_master_status{name="operator.codeport.dev"}`] == 1, "not the leader"
}

var controllerLabel = regexp.MustCompile(`controller="([a-z]+)"`)

// waitFullPass waits until the operator has reconciled every object of the tenant set at least
// once and its work queues are empty, and returns the time since it started.
func (o *operator) waitFullPass(ctx context.Context, n int) (time.Duration, error) {
	const limit = 15 * time.Minute
	want := map[string]float64{"catalog": 1, "partner": float64(n), "apikey": float64(2 * n), "wallet": float64(n)}
	var detail string
	err := poll.Wait(ctx, pollPause, limit, "every object reconciled once", func() (bool, string) {
		if !o.running() {
			return false, "exited"
		}
		m, err := o.scrape()
		if err != nil {
			return false, err.Error()
		}
		done := map[string]float64{}
		depth := 0.0
		for k, v := range m {
			match := controllerLabel.FindStringSubmatch(k)
			if match != nil && strings.HasPrefix(k, "controller_runtime_reconcile_total{") {
				done[match[1]] += v
			}
			if strings.HasPrefix(k, "workqueue_depth{") {
				depth += v
			}
		}
		detail = fmt.Sprintf("reconciled %v, queued %v", done, depth)
		for kind, w := range want {
			if done[kind] < w {
				return false, detail
			}
		}
		return depth == 0, detail
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w (log: %s)", o.name, err, o.log)
	}
	return time.Since(o.started), nil
}

// pollPause is the pause between two looks of poll.Wait: the waits the figures time last
// seconds, which a look every 100 ms resolves.
const pollPause = 100 * time.Millisecond
