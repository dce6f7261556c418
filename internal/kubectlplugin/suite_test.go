package kubectlplugin

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver"
	"github.com/codeport/codeport/apiserver/ratelimit"
	"github.com/codeport/codeport/controllers"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// suite is a real kube-apiserver and etcd (envtest) with the CRDs, a real database, the
// operator running in process against both (so that statuses are the operator's own), and the
// sandbox API serving from the database, for orders whose codes a bundle must not carry.
var suite struct {
	cluster    *cluster
	kubeconfig string
	sandboxURL string
}

const timeout = 60 * time.Second

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
	database, err := storetest.Create(ctx, "kubectlplugin", true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test database:", err)
		return 1
	}
	defer func() { _ = database.Drop(context.Background()) }()
	te := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		// envtest's 20 s per attempt is too short for a kube-apiserver on a busy machine.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	if _, err := te.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		return 1
	}
	defer func() { _ = te.Stop() }()
	code, err := runWith(ctx, m, te, database.URL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

func runWith(ctx context.Context, m *testing.M, te *envtest.Environment, databaseURL string) (int, error) {
	cfg := te.Config
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return 0, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return 0, err
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return 0, err
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	suite.cluster = &cluster{namespace: "default", config: cfg, client: k8s, core: core}
	user, err := te.AddUser(envtest.User{Name: "platform-engineer", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return 0, fmt.Errorf("envtest user: %w", err)
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return 0, fmt.Errorf("kubeconfig: %w", err)
	}
	dir, err := os.MkdirTemp("", "kubectlplugin")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	suite.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(suite.kubeconfig, raw, 0o600); err != nil {
		return 0, err
	}

	db, err := store.Open(ctx, databaseURL, store.Options{MaxConns: 10})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	key, err := codes.NewKey()
	if err != nil {
		return 0, err
	}
	rawKey, err := codes.ParseKey(key)
	if err != nil {
		return 0, err
	}
	cipher, err := codes.NewCipher(rawKey)
	if err != nil {
		return 0, err
	}
	prov, err := testfixture.NewProvisioner(db, cipher)
	if err != nil {
		return 0, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: controllers.CacheOptions(false)})
	if err != nil {
		return 0, err
	}
	if err := controllers.Setup(mgr, controllers.Options{Provisioner: prov, Metrics: prometheus.NewRegistry(),
		NotReadyRetry: 500 * time.Millisecond, StockRefresh: time.Second,
		BaseURLs: map[string]string{"sandbox": "https://sandbox.api.example/v2", "production": "https://api.example/v2"},
	}); err != nil {
		return 0, err
	}
	mgrCtx, stopManager := context.WithCancel(ctx)
	managerDone := make(chan struct{})
	go func() {
		defer close(managerDone)
		if err := mgr.Start(mgrCtx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	defer func() { stopManager(); <-managerDone }()

	srv := apiserver.New(apiserver.DefaultConfig("sandbox"),
		apiserver.Deps{DB: db, Limiter: ratelimit.NewMemory(), Cipher: cipher})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	go func() { _ = srv.Serve(ln) }()
	go func() { _ = srv.Run(mgrCtx) }()
	defer func() { _ = srv.Shutdown(context.Background()) }()
	// Fulfilment, so that the report's order completes and its codes can be sought in the bundle.
	workers, err := fulfilment.StartWorkers(mgrCtx, db, fulfilment.NewFulfiller(db, cipher, time.Second, nil),
		fulfilment.DefaultWorkerConfig("sandbox"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = workers.Stop(context.Background()) }()
	suite.sandboxURL = "http://" + ln.Addr().String() + "/v2"
	return m.Run(), nil
}

// namespace creates a namespace for one test.
func namespace(t *testing.T, suffix string) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name+"-"+suffix, "-")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := suite.cluster.client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := suite.cluster.client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func get(t *testing.T, ns, name string, obj client.Object) {
	t.Helper()
	err := suite.cluster.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if err != nil {
		t.Fatalf("get %T %s/%s: %v", obj, ns, name, err)
	}
}

// kubectl runs `kubectl codeport` with args against the suite's cluster, as a user would, through
// a kubeconfig file and -n.
func kubectl(t *testing.T, ns string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(&out, &errOut)
	cmd.SetArgs(append([]string{"--kubeconfig", suite.kubeconfig, "-n", ns}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errOut.String(), err
}
