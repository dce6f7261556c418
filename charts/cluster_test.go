package charts_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// apiServer is a running envtest kube-apiserver and etcd, with an administrator's client, REST
// config and kubeconfig file (for helm).
type apiServer struct {
	env        *envtest.Environment
	client     client.Client
	cfg        *rest.Config
	kubeconfig string
	dir        string
}

// startEnv starts a kube-apiserver with the given CRD directories installed.
func startEnv(crdDirs ...string) (*apiServer, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run `make test`, " +
			"or export KUBEBUILDER_ASSETS=\"$(hack/envtest.sh)\"")
	}
	s := &apiServer{env: &envtest.Environment{
		CRDDirectoryPaths: crdDirs, ErrorIfCRDPathMissing: len(crdDirs) > 0,
		// envtest's 20 s per attempt is too short for a kube-apiserver on a busy machine.
		ControlPlaneStartTimeout: 2 * time.Minute, ControlPlaneStopTimeout: time.Minute,
	}}
	cfg, err := s.env.Start()
	if err != nil {
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	if err := s.connect(cfg); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *apiServer) connect(cfg *rest.Config) error {
	user, err := s.env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return fmt.Errorf("add admin user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	if s.dir, err = os.MkdirTemp("", "codeport-charts-"); err != nil {
		return fmt.Errorf("kubeconfig directory: %w", err)
	}
	s.kubeconfig = filepath.Join(s.dir, "kubeconfig")
	if err := os.WriteFile(s.kubeconfig, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	s.cfg = user.Config()
	if s.client, err = client.New(s.cfg, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	return nil
}

func (s *apiServer) stop() {
	_ = s.env.Stop()
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// sharedServer is the package's one kube-apiserver, started by the first test that asks for it
// and stopped by TestMain: starting one costs seconds of CPU, several times what most tests do
// with it. It serves codeport's CRDs from config/crd/bases, installed once, so that releases of
// the chart on it set crds.enabled=false (a CRD belongs to one release, and the tests' releases
// come and go).
type sharedServer struct {
	once   sync.Once
	server *apiServer
	err    error
}

func (s *sharedServer) get(t *testing.T) *apiServer {
	t.Helper()
	s.once.Do(func() { s.server, s.err = startEnv(filepath.Join("..", "config", "crd", "bases")) })
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.server
}

func (s *sharedServer) stop() {
	if s.server != nil {
		s.server.stop()
	}
}

// shared is the one piece of package state: TestMain owns the server's lifetime.
var shared sharedServer

func TestMain(m *testing.M) {
	code := m.Run()
	shared.stop()
	os.Exit(code)
}

// sharedAPIServer returns the package's kube-apiserver and a namespace of the test's own there.
// Tests on it keep to their namespace; the cluster-scoped objects a release of the chart creates
// are named after the release (always codeport, the names the tests check), so tests that
// install one, or use this server at all, run one after the other (no t.Parallel) and installChart
// uninstalls it when the test ends. Tests that only render, or start a server of their own
// (freshAPIServer), run in parallel.
func sharedAPIServer(t *testing.T) (*apiServer, string) {
	t.Helper()
	s := shared.get(t)
	return s, createNamespace(t, s.client, testNamespaceName(t))
}

// freshAPIServer starts a kube-apiserver for one test, stopped when the test ends, for the tests
// that check what the chart does with cluster-scoped objects another test would share: its own
// CRDs (which the shared server has installed already) in particular.
func freshAPIServer(t *testing.T) *apiServer {
	t.Helper()
	s, err := startEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9]+`)

// testNamespaceName is a namespace name that says which test made it and is unique.
func testNamespaceName(t *testing.T) string {
	t.Helper()
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	name := strings.Trim(notDNSLabel.ReplaceAllString(strings.ToLower(strings.TrimPrefix(t.Name(), "Test")), "-"), "-")
	return fmt.Sprintf("%.40s-%s", name, hex.EncodeToString(suffix))
}

// createNamespace creates a namespace, or finds it there. envtest runs no namespace controller,
// so a deleted namespace would stay Terminating: namespaces are never deleted.
func createNamespace(t *testing.T, c client.Client, name string) string {
	t.Helper()
	err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("namespace %s: %v", name, err)
	}
	return name
}

// deleteWhenDone deletes a cluster-scoped object the test created when the test ends: the
// chart's releases on the shared server create objects of the same names.
func deleteWhenDone(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s: %v", o.GetName(), err)
		}
	})
}

// installChart installs the chart as release codeport into namespace with helm's extra
// arguments, without hooks (envtest has no kubelet to run them) or CRDs (see sharedServer), and
// uninstalls it when the test ends so that the next test's release can take the cluster-scoped
// names. It returns the helm environment for further helm commands.
func installChart(t *testing.T, s *apiServer, namespace string, args ...string) []string {
	t.Helper()
	env := helmEnv(t, s.kubeconfig)
	args = append([]string{"install", "codeport", chart, "-n", namespace, "--no-hooks",
		"--set", "crds.enabled=false"}, args...)
	if out, err := helm(t, env, args...); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		out, err := helm(t, env, "uninstall", "codeport", "-n", namespace, "--no-hooks", "--wait", "--ignore-not-found")
		if err != nil {
			t.Errorf("uninstall: %v\n%s", err, out)
		}
	})
	return env
}
