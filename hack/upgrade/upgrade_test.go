//go:build upgrade

package upgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/contracttest"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/test/testkube"
	"github.com/codeport/codeport/internal/test/testprocess"
)

const (
	// codesKey seals the stock; both releases' processes and the import share it.
	codesKey  = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	namespace = "partners"
	product   = "10000000000001"
	price     = 2000
	// stock is more than the run orders: every order completes, so a lost code shows.
	stock = 20000
)

// TestUpgradeUnderLoad performs the documented upgrade (docs/operations.md, "Upgrading") under
// partner traffic: migrate, then each API replica, then the operator, from the pinned previous
// release to this tree.
func TestUpgradeUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	began := time.Now()
	u := newUpgrade(ctx, t)
	t.Logf("built the previous release %s and this tree in %s", u.previous[:12], time.Since(began).Round(time.Second))

	u.run(ctx, u.oldBinary, "migrate", "up")
	oldSchema := u.schemaVersion(ctx)
	replicas := []*replica{u.startServe(ctx, "api-a"), u.startServe(ctx, "api-b")}
	operator := u.startOperator(ctx, replicas[0].base)
	partners := u.onboard(ctx, 0, 1, 2, 3)
	stockFile := u.stockFile(stock)
	t.Logf("%s", u.run(ctx, u.oldBinary, "codes", "import", "--product", product, "--database-url", u.dbURL,
		"--codes-key", codesKey, stockFile))
	t.Logf("previous release up on schema %d with %d partners after %s", oldSchema, len(partners),
		time.Since(began).Round(time.Second))

	l := newLoad(t, replicas, partners)
	loadDone := l.start(ctx, 4)
	steps := []string{}
	step := func(format string, args ...any) {
		steps = append(steps, fmt.Sprintf("%6.1fs ", time.Since(l.began).Seconds())+fmt.Sprintf(format, args...))
	}
	l.runFor(ctx, t, 5*time.Second)
	step("previous release under load: %d orders", l.acked.Load())

	out := u.run(ctx, u.newBinary, "migrate", "up")
	newSchema := u.schemaVersion(ctx)
	if newSchema <= oldSchema {
		t.Fatalf("migrate up of this tree left the schema at %d (was %d): the test needs a migration the "+
			"previous release lacks, or it proves nothing (%s)", newSchema, oldSchema, out)
	}
	step("this tree's migrate up: schema %d -> %d (%s)", oldSchema, newSchema, strings.TrimSpace(out))
	l.runFor(ctx, t, 8*time.Second)
	step("previous release on the new schema: %d orders", l.acked.Load())

	for _, r := range replicas {
		drained := u.roll(ctx, t, l, r)
		step("rolled %s (drained in %s): %d orders", r.name, drained.Round(time.Millisecond), l.acked.Load())
		l.runFor(ctx, t, 5*time.Second)
	}
	operator.Stop(30 * time.Second)
	operator.Binary = u.newBinary
	if err := operator.Start(ctx); err != nil {
		t.Fatal(err)
	}
	step("rolled the operator: %d orders", l.acked.Load())

	// The new operator reconciles what the old one provisioned and what is new: a top-up of
	// an existing wallet and a partner onboarded after the roll, who then orders too.
	topUp := testfixture.WalletTopUp(keyName(0), testfixture.TopUp("after-upgrade", "EUR", "50.00"))
	topUp.Namespace = namespace
	if err := u.k8s.Create(ctx, topUp); err != nil {
		t.Fatalf("create WalletTopUp: %v", err)
	}
	l.addPartners(u.onboard(ctx, 4)...)
	if err := poll.Wait(ctx, pollPause, 90*time.Second, "WalletTopUp applied", func() (bool, string) {
		if err := u.k8s.Get(ctx, client.ObjectKeyFromObject(topUp), topUp); err != nil {
			return false, err.Error()
		}
		return topUp.Status.Applied, "not applied"
	}); err != nil {
		t.Fatal(err)
	}
	step("the new operator applied a top-up and onboarded a partner: %d orders", l.acked.Load())

	// Every process now runs this tree and registers itself; migrate status says so.
	status := u.waitStatus(ctx, regexp.MustCompile(`all 3 running binaries are compatible with the schema`))
	step("migrate status: %s", lastLine(status))
	var allNew time.Time
	if err := u.db.Pool.QueryRow(ctx, `SELECT now()`).Scan(&allNew); err != nil {
		t.Fatal(err)
	}
	l.runFor(ctx, t, 5*time.Second)
	l.stop()
	<-loadDone
	step("load stopped: %d orders acknowledged", l.acked.Load())

	f := &findings{}
	l.check(f)
	u.checkDatabase(ctx, l, f)
	u.checkStockLeaves(ctx, allNew, stockFile, f)
	for _, s := range steps {
		t.Log(s)
	}
	t.Logf("%d requests, %d orders acknowledged; wall time %s", l.requests(), l.acked.Load(),
		time.Since(began).Round(time.Second))
	if len(f.lines) > 0 {
		t.Errorf("the upgrade did not hold:\n%s", strings.Join(f.lines, "\n"))
	}
}

// upgrade is the run's topology: a database, a kube-apiserver, both releases' binaries and the
// processes started from them.
type upgrade struct {
	t                    *testing.T
	dir                  string
	previous             string
	oldBinary, newBinary string
	dbURL                string
	db                   *store.DB
	k8s                  client.Client
	kubeconfig           string
	serial               atomic.Int32
}

func newUpgrade(ctx context.Context, t *testing.T) *upgrade {
	t.Helper()
	dir, err := os.MkdirTemp("", "codeport-upgrade-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("UPGRADE_KEEP") != "" {
			t.Logf("process logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	u := &upgrade{t: t, dir: dir}
	u.previous = previousRelease(t)
	if u.oldBinary, err = previousBinary(ctx, u.previous); err != nil {
		t.Fatal(err)
	}
	if u.newBinary, err = testprocess.Build(ctx, dir); err != nil {
		t.Fatal(err)
	}
	d, err := storetest.Create(ctx, "upgrade", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Drop(context.Background()) })
	u.dbURL = d.URL
	if u.db, err = store.Open(ctx, d.URL, store.Options{MaxConns: 4}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.db.Close)
	u.startKubernetes()
	return u
}

// previousRelease is the pinned commit of the previous release (UPGRADE_FROM overrides it).
func previousRelease(t *testing.T) string {
	t.Helper()
	if from := os.Getenv("UPGRADE_FROM"); from != "" {
		return from
	}
	pin, err := os.ReadFile("previous-release")
	if err != nil {
		t.Fatalf("read the pinned previous release: %v", err)
	}
	return strings.TrimSpace(string(pin))
}

// previousBinary is the binary of commit, built once per commit and Go version into the user's
// cache directory: a commit's source never changes, and building it costs a minute on two CPUs
// (its dependencies come from the build cache; the module's own packages are compiled again,
// from a directory of their own).
func previousBinary(ctx context.Context, commit string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	dir := filepath.Join(cache, "codeport", "upgrade", commit+"-"+goruntime.Version())
	binary := filepath.Join(dir, "codeport")
	if _, err := os.Stat(binary); err == nil {
		return binary, nil
	}
	// Built beside the cache entry and renamed into place, so that a run killed mid-build
	// leaves no half entry behind.
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	building, err := os.MkdirTemp(filepath.Dir(dir), "building-")
	if err != nil {
		return "", fmt.Errorf("cache directory: %w", err)
	}
	defer os.RemoveAll(building)
	if _, err := buildRelease(ctx, commit, building); err != nil {
		return "", err
	}
	_ = os.RemoveAll(filepath.Join(building, "src"))
	if err := os.Rename(building, dir); err != nil && !os.IsExist(err) {
		if _, statErr := os.Stat(binary); statErr != nil {
			return "", fmt.Errorf("cache the previous release: %w", err)
		}
	}
	return binary, nil
}

// buildRelease builds the codeport binary of commit into dir from the repository's history,
// leaving the work tree alone.
func buildRelease(ctx context.Context, commit, dir string) (string, error) {
	top, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("find the repository: %w", err)
	}
	repo := strings.TrimSpace(string(top))
	check := exec.CommandContext(ctx, "git", "-C", repo, "cat-file", "-e", commit+"^{commit}")
	if out, err := check.CombinedOutput(); err != nil {
		return "", fmt.Errorf("the previous release %s (hack/upgrade/previous-release) is not in this clone's "+
			"history: fetch it (git fetch --unshallow, or the tag) and run again: %w\n%s", commit, err, out)
	}
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o750); err != nil {
		return "", fmt.Errorf("source directory: %w", err)
	}
	tarball := filepath.Join(dir, "src.tar")
	archive := exec.CommandContext(ctx, "git", "-C", repo, "archive", "-o", tarball, commit)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %w\n%s", commit, err, out)
	}
	if out, err := exec.CommandContext(ctx, "tar", "-xf", tarball, "-C", src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("unpack %s: %w\n%s", commit, err, out)
	}
	binary := filepath.Join(dir, "codeport")
	build := exec.CommandContext(ctx, "go", "build", "-o", binary,
		"-ldflags", "-X main.version="+commit[:12], ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the previous release %s: %w\n%s", commit, err, out)
	}
	return binary, nil
}

// run runs binary with args to completion and returns its output, failing the test on an error.
func (u *upgrade) run(ctx context.Context, binary string, args ...string) string {
	u.t.Helper()
	if args[0] == "migrate" {
		args = append(args, "--database-url", u.dbURL)
	}
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	if err != nil {
		u.t.Fatalf("%s %s: %v\n%s", filepath.Base(filepath.Dir(binary)), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (u *upgrade) schemaVersion(ctx context.Context) int64 {
	u.t.Helper()
	v, err := store.SchemaVersion(ctx, u.db.Pool)
	if err != nil {
		u.t.Fatal(err)
	}
	return v
}

// waitStatus polls this tree's `migrate status` until its output matches want.
func (u *upgrade) waitStatus(ctx context.Context, want *regexp.Regexp) string {
	u.t.Helper()
	var out string
	err := poll.Wait(ctx, pollPause, 60*time.Second, "migrate status", func() (bool, string) {
		out = u.run(ctx, u.newBinary, "migrate", "status")
		return want.MatchString(out), out
	})
	if err != nil {
		u.t.Fatal(err)
	}
	return out
}

func (u *upgrade) process(name, ready string, args ...string) *testprocess.Process {
	n := u.serial.Add(1)
	p := &testprocess.Process{Name: name, Binary: u.oldBinary, Args: args, ReadyURL: ready,
		LogFile: filepath.Join(u.dir, fmt.Sprintf("%02d-%s.log", n, name))}
	u.t.Cleanup(func() { p.Stop(5 * time.Second) })
	return p
}

// replica is an API process behind the load's balancing, on a fixed address.
type replica struct {
	name, base string
	proc       *testprocess.Process
	// draining takes the replica out of the balancing; inflight counts its requests.
	draining atomic.Bool
	inflight atomic.Int32
}

func (u *upgrade) startServe(ctx context.Context, name string) *replica {
	u.t.Helper()
	addr, err := testprocess.FreeAddr()
	if err != nil {
		u.t.Fatal(err)
	}
	r := &replica{name: name, base: "http://" + addr}
	r.proc = u.process(name, r.base+"/readyz", "serve", "--environment", string(tenancy.Production), "--addr", addr,
		"--metrics-addr", "", "--database-url", u.dbURL, "--redis-url", "", "--codes-key", codesKey,
		"--workers=true", "--fulfilment-rescue-after", "10s")
	if err := r.proc.Start(ctx); err != nil {
		u.t.Fatal(err)
	}
	return r
}

// roll replaces the replica's process with this tree's as a Deployment's rolling update does:
// out of the load balancing, its requests in flight finished, SIGTERM, the new process on the
// same address, back in once ready. It returns how long the drain took.
func (u *upgrade) roll(ctx context.Context, t *testing.T, l *load, r *replica) time.Duration {
	t.Helper()
	start := time.Now()
	r.draining.Store(true)
	if err := poll.Wait(ctx, pollPause, 30*time.Second, r.name+" drained", func() (bool, string) {
		n := r.inflight.Load()
		return n == 0, fmt.Sprintf("%d requests in flight", n)
	}); err != nil {
		t.Fatal(err)
	}
	drained := time.Since(start)
	r.proc.Stop(30 * time.Second)
	r.proc.Binary = u.newBinary
	if err := r.proc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	l.contracts.Forget(r.base)
	r.draining.Store(false)
	return drained
}

func (u *upgrade) startOperator(ctx context.Context, base string) *testprocess.Process {
	u.t.Helper()
	probes, err := testprocess.FreeAddr()
	if err != nil {
		u.t.Fatal(err)
	}
	p := u.process("operator", "http://"+probes+"/readyz", "operator", "--kubeconfig", u.kubeconfig,
		"--database-url", u.dbURL, "--codes-key", codesKey, "--metrics-bind-address", "0",
		"--health-probe-bind-address", probes, "--production-base-url", base, "--sandbox-base-url", base)
	if err := p.Start(ctx); err != nil {
		u.t.Fatal(err)
	}
	return p
}

// startKubernetes starts envtest's kube-apiserver and etcd with the CRDs, a namespace for the
// partners and their catalog.
func (u *upgrade) startKubernetes() {
	t := u.t
	kube := testkube.Start(t, filepath.Join("..", "..", "config", "crd", "bases"), u.dir)
	u.k8s, u.kubeconfig = kube.Client, kube.Kubeconfig
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := u.k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	catalog := testfixture.Catalog("main", testfixture.InNamespace(namespace), testfixture.WithDescription("Upgrade", 0),
		testfixture.WithProducts(testfixture.Product(product, testfixture.WithName("Credit 20 EUR", "Upgrade"),
			testfixture.WithPrice(price), func(p *v1alpha1.CatalogProduct) {
				p.MainCategory, p.Tags = "Gaming", []string{"gaming"}
				p.Languages = []v1alpha1.ProductLanguage{{LanguageCode: "en", Name: "English"}}
			})))
	if err := u.k8s.Create(context.Background(), catalog); err != nil {
		t.Fatal(err)
	}
}

func partnerName(i int) string { return fmt.Sprintf("p%02d", i) }
func keyName(i int) string     { return partnerName(i) + "-" + string(tenancy.Production) }

// limitedPartner orders under a daily spend limit it never reaches: both releases check it on
// every order, the previous one by summing the day's orders, this one from the day's running
// total, which the previous release's orders and refunds must keep right while it still runs.
const limitedPartner = 0

// partner is an onboarded partner: its production key and account.
type partner struct {
	name    string
	key     string
	account uuid.UUID
}

// onboard creates partners with a production key and wallet through the Kubernetes API and
// waits until the operator running now has provisioned them.
func (u *upgrade) onboard(ctx context.Context, indexes ...int) []*partner {
	u.t.Helper()
	on := true
	for _, i := range indexes {
		opening := testfixture.TopUp("opening", "EUR", "1000000.00")
		ordering := &v1alpha1.OrderingSpec{Enabled: &on, WalletEnabled: &on}
		if i == limitedPartner {
			ordering.Limits = &v1alpha1.OrderLimits{DailySpend: map[string]int64{"EUR": 100_000_000_000}}
		}
		for _, o := range []client.Object{
			testfixture.Partner(partnerName(i), testfixture.InNamespace(namespace),
				testfixture.WithContact("Partner "+partnerName(i), partnerName(i)+"@upgrade.example"),
				testfixture.WithCatalogRef("main"), testfixture.WithAllowlist("127.0.0.1/32"),
				testfixture.WithRateLimit(1_000_000), testfixture.WithOrdering(ordering)),
			testfixture.APIKey(partnerName(i), string(tenancy.Production), testfixture.InNamespace(namespace)),
			testfixture.Wallet(partnerName(i), string(tenancy.Production), testfixture.InNamespace(namespace),
				testfixture.WithTopUps(opening)),
		} {
			if err := u.k8s.Create(ctx, o); err != nil {
				u.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
			}
		}
	}
	var out []*partner
	for _, i := range indexes {
		p := &partner{name: partnerName(i)}
		var pr v1alpha1.Partner
		err := poll.Wait(ctx, pollPause, 90*time.Second, "partner "+p.name+" ready", func() (bool, string) {
			if err := u.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: p.name}, &pr); err != nil {
				return false, err.Error()
			}
			return testkube.ReadyNow(pr.Status.Conditions, pr.Generation)
		})
		if err != nil {
			u.t.Fatal(err)
		}
		if p.account, err = uuid.Parse(pr.Status.Accounts.Production); err != nil {
			u.t.Fatalf("partner %s account: %v", p.name, err)
		}
		err = poll.Wait(ctx, pollPause, 90*time.Second, "key "+keyName(i), func() (bool, string) {
			var k v1alpha1.ApiKey
			if err := u.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: keyName(i)}, &k); err != nil {
				return false, err.Error()
			}
			if ok, detail := testkube.ReadyNow(k.Status.Conditions, k.Generation); !ok {
				return false, detail
			}
			var s corev1.Secret
			if err := u.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: k.Spec.SecretName}, &s); err != nil {
				return false, err.Error()
			}
			p.key = string(s.Data["apiKey"])
			return p.key != "", "empty Secret"
		})
		if err != nil {
			u.t.Fatal(err)
		}
		u.waitWallet(ctx, keyName(i), 1)
		out = append(out, p)
	}
	return out
}

// waitWallet waits until the Wallet is Ready with at least applied top-ups.
func (u *upgrade) waitWallet(ctx context.Context, name string, applied int32) {
	u.t.Helper()
	err := poll.Wait(ctx, pollPause, 90*time.Second, "wallet "+name, func() (bool, string) {
		var w v1alpha1.Wallet
		if err := u.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &w); err != nil {
			return false, err.Error()
		}
		if ok, detail := testkube.ReadyNow(w.Status.Conditions, w.Generation); !ok {
			return false, detail
		}
		return w.Status.AppliedTopUps >= applied, fmt.Sprintf("%d top-ups applied", w.Status.AppliedTopUps)
	})
	if err != nil {
		u.t.Fatal(err)
	}
}

// stockFile writes n distinct codes to a file for `codes import`.
func (u *upgrade) stockFile(n int) string {
	u.t.Helper()
	file, err := testfixture.WriteCodes(u.dir, "UPGRADE-"+uuid.NewString()[:8], n)
	if err != nil {
		u.t.Fatal(err)
	}
	return file
}

// load places orders with a few workers across the replicas not draining.
type load struct {
	replicas []*replica
	partners atomic.Pointer[[]*partner]
	client   *http.Client
	// contracts hold the orders to the documents the replicas serve (a rolled one, to its new).
	contracts *contracttest.Contracts
	serial    atomic.Int64
	acked     atomic.Int64
	began     time.Time
	cancel    context.CancelFunc

	mu   sync.Mutex
	sent []*sent
}

// sent is one order request and its answer.
type sent struct {
	partner *partner
	code    string
	replica string
	at      time.Duration
	status  int // 0: no answer
	err     string
	body    string
	orderID string
}

func newLoad(t *testing.T, replicas []*replica, partners []*partner) *load {
	t.Helper()
	l := &load{replicas: replicas, began: time.Now(), contracts: contracttest.New()}
	l.client = l.contracts.Wrap(t,
		&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}})
	l.partners.Store(&partners)
	return l
}

func (l *load) addPartners(more ...*partner) {
	all := append(slices.Clone(*l.partners.Load()), more...)
	l.partners.Store(&all)
}

// start runs workers until stop; the channel closes when all have returned.
func (l *load) start(ctx context.Context, workers int) <-chan struct{} {
	ctx, l.cancel = context.WithCancel(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil {
				l.place(ctx, rng)
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	return done
}

func (l *load) stop() { l.cancel() }

// place sends one order to a replica that takes traffic, and records its answer.
func (l *load) place(ctx context.Context, rng *rand.Rand) {
	partners := *l.partners.Load()
	p := partners[rng.IntN(len(partners))]
	var r *replica
	for _, i := range rng.Perm(len(l.replicas)) {
		if !l.replicas[i].draining.Load() {
			r = l.replicas[i]
			break
		}
	}
	if r == nil {
		return
	}
	r.inflight.Add(1)
	defer r.inflight.Add(-1)
	if r.draining.Load() {
		return // taken out between the pick and the count: a balancer would not have sent it
	}
	s := &sent{partner: p, code: fmt.Sprintf("up-%s-%d", p.name, l.serial.Add(1)), replica: r.name,
		at: time.Since(l.began)}
	body, _ := json.Marshal(map[string]any{"externalOrderCode": s.code, "currency": "EUR",
		"orderProducts": []map[string]any{{"productCode": product, "quantity": 1, "price": price}}})
	// The request outlives the load's stop: an order sent is answered.
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, r.base+"/v2/orders",
		bytes.NewReader(body))
	if err != nil {
		s.err = err.Error()
	} else {
		req.Header.Set("x-api-key", p.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := l.client.Do(req)
		if err != nil {
			s.err = err.Error()
		} else {
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			s.status, s.body = resp.StatusCode, buf.String()
			var parsed struct {
				OrderID string `json:"orderId"`
			}
			if json.Unmarshal(buf.Bytes(), &parsed) == nil && resp.StatusCode == http.StatusAccepted {
				s.orderID = parsed.OrderID
				l.acked.Add(1)
			}
		}
	}
	l.mu.Lock()
	l.sent = append(l.sent, s)
	l.mu.Unlock()
}

func (l *load) requests() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sent)
}

// runFor lets the load run for d and fails the test unless orders were acknowledged meanwhile:
// each step of the upgrade is judged under traffic, not in a lull.
func (l *load) runFor(ctx context.Context, t *testing.T, d time.Duration) {
	t.Helper()
	before := l.acked.Load()
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(d):
	}
	if err := poll.Wait(ctx, pollPause, time.Minute, "orders acknowledged", func() (bool, string) {
		return l.acked.Load() > before, fmt.Sprintf("%d acknowledged, as many as %s before", l.acked.Load(), d)
	}); err != nil {
		f := &findings{}
		l.check(f)
		t.Fatalf("%v\n%s", err, strings.Join(f.lines, "\n"))
	}
}

// findings are the failed assertions, a few examples of each kind.
type findings struct {
	lines  []string
	counts map[string]int
}

func (f *findings) add(kind, format string, args ...any) {
	if f.counts == nil {
		f.counts = map[string]int{}
	}
	f.counts[kind]++
	if f.counts[kind] <= 5 {
		f.lines = append(f.lines, kind+": "+fmt.Sprintf(format, args...))
	}
}

// check asserts that every request was answered 202 with an order id: no 5xx, no refusal, no
// connection error from a replica taken out of the balancing before it stopped.
func (l *load) check(f *findings) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.sent {
		if s.status != http.StatusAccepted || s.orderID == "" {
			f.add("request failed", "%s on %s at %.1fs: status %d %s%s", s.code, s.replica, s.at.Seconds(),
				s.status, s.err, truncate(s.body, 200))
		}
	}
}

// checkDatabase waits until every order is terminal, then asserts that each acknowledged order
// is stored once under its id and nothing else is; that each was debited exactly once and
// refunded exactly what it did not deliver; that no code went out twice; and that every balance
// equals its ledger, the top-ups applied once.
func (u *upgrade) checkDatabase(ctx context.Context, l *load, f *findings) {
	q := u.db.Pool
	if err := poll.Wait(ctx, pollPause, 2*time.Minute, "every order terminal", func() (bool, string) {
		var n int64
		err := q.QueryRow(ctx, `SELECT count(*) FROM orders WHERE status = $1`, store.OrderProcessing).Scan(&n)
		if err != nil {
			return false, err.Error()
		}
		return n == 0, fmt.Sprintf("%d orders processing", n)
	}); err != nil {
		f.add("orders not terminal", "%v", err)
	}
	stored := u.checkOrders(ctx, f)
	l.mu.Lock()
	acked := map[string]string{}
	for _, s := range l.sent {
		if s.orderID != "" {
			acked[s.code] = s.orderID
		}
	}
	l.mu.Unlock()
	for code, id := range acked {
		if stored[code] != id {
			f.add("acknowledged order lost or stored under another id", "%s: answered %s, stored %q", code, id, stored[code])
		}
	}
	for code := range stored {
		if _, ok := acked[code]; !ok {
			f.add("order stored although never acknowledged", "%s", code)
		}
	}
	u.checkLedger(ctx, *l.partners.Load(), f)
	u.checkDailySpend(ctx, f)
}

// checkStockLeaves asserts that the codes the previous release delivered kept their stock rows
// (it refuses a duplicate import by them) until no process of it ran, that codes delivered after
// that left the stock, that the purge then takes out the rows left, and that an import of the
// first stock file again adds nothing: every code of it is delivered or in stock.
func (u *upgrade) checkStockLeaves(ctx context.Context, allNew time.Time, stockFile string, f *findings) {
	q := u.db.Pool
	var kept, after, afterKept int64
	if err := q.QueryRow(ctx, `SELECT (SELECT count(*) FROM code_stock WHERE order_id IS NOT NULL),
			(SELECT count(*) FROM delivered_codes WHERE delivered_at > $1),
			(SELECT count(*) FROM delivered_codes d JOIN code_stock s ON s.id = d.stock_id WHERE d.delivered_at > $1)`,
		allNew).Scan(&kept, &after, &afterKept); err != nil {
		u.t.Fatalf("read the stock: %v", err)
	}
	if kept == 0 || after == 0 || afterKept > 0 {
		f.add("delivered codes did not leave the stock once only this tree ran", "%d stock rows marked delivered "+
			"(want some: the previous release's); %d codes delivered after it stopped, %d of them still in stock "+
			"(want some, none)", kept, after, afterKept)
	}
	for {
		n, err := store.PurgeDeliveredStock(ctx, q, 1000)
		if err != nil {
			u.t.Fatal(err)
		}
		if n < 1000 {
			break
		}
	}
	var left, available int64
	if err := q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE order_id IS NOT NULL),
		count(*) FILTER (WHERE order_id IS NULL) FROM code_stock`).Scan(&left, &available); err != nil {
		u.t.Fatalf("read the stock: %v", err)
	}
	if left > 0 {
		f.add("purge left delivered codes in the stock", "%d rows", left)
	}
	out := u.run(ctx, u.newBinary, "codes", "import", "--product", product, "--database-url", u.dbURL,
		"--codes-key", codesKey, stockFile)
	if want := fmt.Sprintf("imported 0 codes for %s (%d duplicates skipped); %d in stock", product, stock,
		available); !strings.Contains(out, want) {
		f.add("import took back a delivered code", "%q, want %q", strings.TrimSpace(out), want)
	}
}

// checkDailySpend asserts that every daily spend total this tree recounted equals its day's
// orders, though the previous release placed and refunded orders around the recount, and that
// the limited partner's was recounted.
func (u *upgrade) checkDailySpend(ctx context.Context, f *findings) {
	rows, err := u.db.Pool.Query(ctx, `SELECT p.name, s.day::text, s.spent, COALESCE(o.spent, 0)::bigint, s.counted
		FROM daily_spend s JOIN accounts a ON a.id = s.account_id JOIN partners p ON p.id = a.partner_id
		LEFT JOIN LATERAL (SELECT sum(total_price - refunded_amount) AS spent FROM orders
			WHERE account_id = s.account_id AND currency = s.currency
			AND (created_at AT TIME ZONE 'UTC')::date = s.day) o ON true`)
	if err != nil {
		u.t.Fatal(err)
	}
	defer rows.Close()
	recounted := false
	for rows.Next() {
		var name, day string
		var total, orders int64
		var counted bool
		if err := rows.Scan(&name, &day, &total, &orders, &counted); err != nil {
			u.t.Fatal(err)
		}
		if counted && total != orders {
			f.add("daily spend total differs from its orders", "%s on %s: %d, orders %d", name, day, total, orders)
		}
		recounted = recounted || (counted && name == partnerName(limitedPartner))
	}
	if err := rows.Err(); err != nil {
		u.t.Fatal(err)
	}
	if !recounted {
		f.add("daily spend never recounted", "%s ordered under its limit on this tree without a recount",
			partnerName(limitedPartner))
	}
}

// ordersSQL reads every order with its ledger entries and delivered codes.
const ordersSQL = `
WITH e AS (SELECT reference, kind, count(*) AS n, sum(amount)::bigint AS amount FROM wallet_entries
           WHERE kind IN ('order_debit', 'refund') GROUP BY reference, kind),
     d AS (SELECT order_id, count(*) AS n, count(DISTINCT digest) AS distinct_codes
           FROM delivered_codes GROUP BY order_id)
SELECT o.id::text, o.external_order_code, o.status, o.total_price, o.refunded_amount, o.total_quantity,
       COALESCE(db.n, 0), COALESCE(-db.amount, 0), COALESCE(rf.n, 0), COALESCE(rf.amount, 0),
       COALESCE(d.n, 0), COALESCE(d.distinct_codes, 0)
FROM orders o
LEFT JOIN e db ON db.reference = o.id::text AND db.kind = 'order_debit'
LEFT JOIN e rf ON rf.reference = o.id::text AND rf.kind = 'refund'
LEFT JOIN d ON d.order_id = o.id`

// checkOrders asserts each stored order's debit, refund, codes and status agree, and returns
// the stored orders' ids by externalOrderCode.
func (u *upgrade) checkOrders(ctx context.Context, f *findings) map[string]string {
	t := u.t
	rows, err := u.db.Pool.Query(ctx, ordersSQL)
	if err != nil {
		t.Fatalf("read orders: %v", err)
	}
	stored := map[string]string{}
	for rows.Next() {
		var id, code, status string
		var total, refunded, debitSum, refundSum int64
		var quantity, debits, refunds, delivered, distinct int64
		if err := rows.Scan(&id, &code, &status, &total, &refunded, &quantity, &debits, &debitSum, &refunds,
			&refundSum, &delivered, &distinct); err != nil {
			t.Fatalf("read orders: %v", err)
		}
		stored[code] = id
		where := fmt.Sprintf("order %s (%s)", code, id)
		want := store.OrderPartiallyCompleted
		switch delivered {
		case quantity:
			want = store.OrderCompleted
		case 0:
			want = store.OrderFailed
		}
		undelivered := (quantity - delivered) * (total / max(quantity, 1))
		switch {
		case status != want:
			f.add("order status disagrees with its codes", "%s: %s with %d of %d codes", where, status, delivered, quantity)
		case debits != 1 || debitSum != total:
			f.add("order not debited exactly once", "%s: %d debits of %d for a total of %d", where, debits, debitSum, total)
		case refunded != undelivered || refundSum != refunded || refunds > 1 || (refunded > 0) != (refunds == 1):
			f.add("order not refunded exactly its undelivered value", "%s: undelivered %d, refunded %d in %d entries of %d",
				where, undelivered, refunded, refunds, refundSum)
		case distinct != delivered:
			f.add("code delivered twice", "%s: %d codes, %d distinct", where, delivered, distinct)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read orders: %v", err)
	}
	var reused int64
	if err := u.db.Pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT stock_id FROM delivered_codes
		WHERE stock_id IS NOT NULL GROUP BY stock_id HAVING count(*) > 1) s`).Scan(&reused); err != nil {
		t.Fatalf("read delivered codes: %v", err)
	}
	if reused > 0 {
		f.add("stock code delivered twice", "%d stock rows delivered more than once", reused)
	}
	return stored
}

// checkLedger asserts every balance equals the sum of its ledger entries, and that each
// partner's top-ups (the opening one; partner 0's WalletTopUp too) were applied once.
func (u *upgrade) checkLedger(ctx context.Context, partners []*partner, f *findings) {
	t := u.t
	balances, err := u.db.Pool.Query(ctx, `SELECT b.account_id::text, b.currency, b.balance,
		COALESCE((SELECT sum(amount) FROM wallet_entries e
		          WHERE e.account_id = b.account_id AND e.currency = b.currency), 0)::bigint,
		(SELECT count(*) FROM wallet_entries e WHERE e.account_id = b.account_id AND e.kind = 'top_up')
		FROM wallet_balances b`)
	if err != nil {
		t.Fatalf("read balances: %v", err)
	}
	topUps := map[string]int64{}
	for balances.Next() {
		var account, currency string
		var balance, sum, n int64
		if err := balances.Scan(&account, &currency, &balance, &sum, &n); err != nil {
			t.Fatalf("read balances: %v", err)
		}
		topUps[account] = n
		if balance != sum {
			f.add("balance differs from its ledger", "account %s %s: balance %d, ledger %d", account, currency, balance, sum)
		}
	}
	if err := balances.Err(); err != nil {
		t.Fatalf("read balances: %v", err)
	}
	for _, p := range partners {
		want := int64(1)
		if p.name == partnerName(0) {
			want = 2
		}
		if got := topUps[p.account.String()]; got != want {
			f.add("top-ups not applied exactly once", "%s: %d top-up entries, want %d", p.name, got, want)
		}
	}
}

func truncate(s string, n int) string {
	if s == "" {
		return ""
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return ": " + s
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// pollPause is the pause between two looks of poll.Wait.
const pollPause = 100 * time.Millisecond
