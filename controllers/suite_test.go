package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver"
	"github.com/codeport/codeport/apiserver/ratelimit"
	"github.com/codeport/codeport/controllers"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/contracttest"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// suite is a real kube-apiserver and etcd (envtest) with the CRDs installed, a real PostgreSQL
// database, the operator's manager running against both, and the production and sandbox APIs
// serving from the same database. Each test works in a namespace of its own.
type suite struct {
	metrics *prometheus.Registry
	cfg     *rest.Config
	scheme  *runtime.Scheme
	k8s     client.Client
	db      *store.DB
	// cipher is the codes key the operators and the data plane share.
	cipher *codes.Cipher
	apiURL map[string]string
	// mgr is the first operator's manager (its cache is what the operator holds in memory).
	mgr ctrl.Manager
	// writes counts the operators' write requests to the API server, by method and path.
	writes requestCounter
	// managers tracks the running managers, so that teardown stops them before the database
	// and the API server they use go away.
	managers sync.WaitGroup
}

// requestCounter counts the write requests (anything but GET, LIST and WATCH) that the operators
// send to the API server, by "METHOD path".
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			c.mu.Lock()
			if c.counts == nil {
				c.counts = map[string]int{}
			}
			c.counts[req.Method+" "+req.URL.Path]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// count returns how many METHOD requests were sent to path.
func (c *requestCounter) count(method, path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[method+" "+path]
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

var env suite

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr,
			"KUBEBUILDER_ASSETS is not set: run `make test`, or export KUBEBUILDER_ASSETS=\"$(hack/envtest.sh)\"")
		return 1
	}
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	database, err := storetest.Create(ctx, "controllers", true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test database:", err)
		return 1
	}
	defer func() { _ = database.Drop(context.Background()) }()
	te := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		// envtest's 20 s per attempt is too short for a kube-apiserver on a busy machine.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	cfg, err := te.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		return 1
	}
	defer func() { _ = te.Stop() }()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	env.cfg, env.scheme = cfg, scheme
	if env.k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if env.db, err = store.Open(ctx, database.URL, store.Options{MaxConns: 20}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.db.Close()

	env.metrics = prometheus.NewRegistry()
	key, _ := codes.NewKey()
	raw, _ := codes.ParseKey(key)
	env.cipher, _ = codes.NewCipher(raw)
	if err := startManager(ctx, env.metrics); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	env.apiURL = map[string]string{}
	var servers []*apiserver.Server
	defer func() {
		for _, srv := range servers {
			_ = srv.Shutdown(context.Background())
		}
	}()
	for _, e := range []string{"sandbox", "production"} {
		srv := apiserver.New(apiserver.DefaultConfig(e),
			apiserver.Deps{DB: env.db, Limiter: ratelimit.NewMemory(), Cipher: env.cipher})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() { _ = srv.Serve(ln) }()
		go func() { _ = srv.Run(ctx) }()
		servers = append(servers, srv)
		env.apiURL[e] = "http://" + ln.Addr().String() + "/v2"
	}
	code := m.Run()
	cancel()
	env.managers.Wait()
	return code
}

// scopedNamespaces are left to the namespaced operator of TestWatchNamespaces: the cluster-wide
// operators of the suite do not see them, so that what happens there is that operator's doing.
var scopedNamespaces = []string{"scoped-watched", "scoped-unwatched"}

// startManager runs an operator (manager with every reconciler) until ctx ends. Tests start a
// second one to play a concurrent replica or a restart.
// The operators' requests are counted in env.writes; the first manager is env.mgr.
func startManager(ctx context.Context, reg prometheus.Registerer) error {
	return startManagerIn(ctx, reg, nil)
}

// startManagerIn runs an operator limited to namespaces, as --watch-namespaces does; nil is a
// cluster-wide operator, blind only to scopedNamespaces.
func startManagerIn(ctx context.Context, reg prometheus.Registerer, namespaces []string) error {
	cfg := rest.CopyConfig(env.cfg)
	cfg.WrapTransport = env.writes.wrap
	cacheOpts := controllers.CacheOptions(false, namespaces...)
	if namespaces == nil {
		var outside []fields.Selector
		for _, ns := range scopedNamespaces {
			outside = append(outside, fields.OneTermNotEqualSelector("metadata.namespace", ns))
		}
		cacheOpts.DefaultNamespaces = map[string]cache.Config{
			cache.AllNamespaces: {FieldSelector: fields.AndSelectors(outside...)},
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cacheOpts, Controller: config.Controller{SkipNameValidation: ptr(true)}})
	if err != nil {
		return err
	}
	if env.mgr == nil {
		env.mgr = mgr
	}
	prov, err := testfixture.NewProvisioner(env.db, env.cipher)
	if err != nil {
		return err
	}
	err = controllers.Setup(mgr, controllers.Options{
		Provisioner:     prov,
		Metrics:         reg,
		WatchNamespaces: namespaces,
		NotReadyRetry:   500 * time.Millisecond,
		// Stock is counted on a timer; a short one lets TestCatalogStockStatus see it run.
		StockRefresh: time.Second,
		BaseURLs: map[string]string{
			"sandbox": "https://sandbox.api.example/v2", "production": "https://api.example/v2",
		},
	})
	if err != nil {
		return err
	}
	env.managers.Add(1)
	go func() {
		defer env.managers.Done()
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return nil
}

// namespace creates a namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// update changes a resource the operator also writes: it reads it afresh, applies change and
// writes it, again when the operator wrote in between.
func update(t *testing.T, ns, name string, obj client.Object, change func()) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			return err
		}
		change()
		return env.k8s.Update(context.Background(), obj)
	})
	if err != nil {
		t.Fatalf("update %T %s: %v", obj, name, err)
	}
}

func get(t *testing.T, ns, name string, obj client.Object) bool {
	t.Helper()
	err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if err != nil && client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	return err == nil
}

// ping calls the partner API with a key and returns the status code.
func ping(t *testing.T, environment, key string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, env.apiURL[environment]+"/ping", http.NoBody)
	req.Header.Set("x-api-key", key)
	resp, err := apiClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func getJSON(t *testing.T, environment, path, key string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, env.apiURL[environment]+path, http.NoBody)
	req.Header.Set("x-api-key", key)
	resp, err := apiClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out
}

func ptr[T any](v T) *T { return &v }

// apiContracts hold the package's exchanges with the partner APIs TestMain serves to the
// documents those serve; the servers live as long as the package's tests.
var apiContracts = contracttest.New()

// apiClient is a client of the partner APIs whose contract violations fail t.
func apiClient(t testing.TB) *http.Client {
	t.Helper()
	return apiContracts.Wrap(t, &http.Client{Timeout: 10 * time.Second})
}

func newRequest(method, url, body string) (*http.Request, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// keyEvents reads the operator's key event counter for production keys.
func keyEvents(t *testing.T, event string) float64 {
	t.Helper()
	families, err := env.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "codeport_operator_key_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["environment"] == "production" && labels["event"] == event {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
