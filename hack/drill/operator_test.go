package drill

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// namespace holds the drill's custom resources.
const namespace = "drill"

// kube is envtest's kube-apiserver with codeport's CRDs: where the custom resources live, which
// a restore of the database leaves as they are.
type kube struct {
	client     client.Client
	kubeconfig string
}

// startKubernetes starts envtest in the background, since it mostly waits while the binary
// builds; the function it returns waits for it.
func startKubernetes(t *testing.T) func() *kube {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal(`KUBEBUILDER_ASSETS is not set: run make test, or export KUBEBUILDER_ASSETS="$(hack/envtest.sh)"`)
	}
	// The test's own clients have nothing to say; the operators' output is kept by testprocess.
	ctrllog.SetLogger(logr.Discard())
	te := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		// envtest's 20 s per attempt is too short for a kube-apiserver on a busy machine.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	type started struct {
		k   *kube
		err error
	}
	done := make(chan started, 1)
	go func() {
		k, err := startEnvtest(te, kubeconfig)
		done <- started{k, err}
	}()
	t.Cleanup(func() {
		<-done
		if err := te.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	return func() *kube {
		t.Helper()
		s := <-done
		done <- s
		if s.err != nil {
			t.Fatal(s.err)
		}
		return s.k
	}
}

// startEnvtest starts te and writes a kubeconfig of a system:masters user to kubeconfig, for
// the operator processes.
func startEnvtest(te *envtest.Environment, kubeconfig string) (*kube, error) {
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("start envtest: %w", err)
	}
	user, err := te.AddUser(envtest.User{Name: "codeport-operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("envtest user: %w", err)
	}
	config, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if err := os.WriteFile(kubeconfig, config, 0o600); err != nil {
		return nil, fmt.Errorf("write kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &kube{client: c, kubeconfig: kubeconfig}, nil
}

// startOperator runs the operator on databaseURL until stopped or the test ends.
func (k *kube) startOperator(t *testing.T, binary, databaseURL, keyring string) *testprocess.Process {
	t.Helper()
	probes := testprocess.Addr(t)
	return testprocess.Start(t, &testprocess.Process{Name: "operator on " + databaseURL, Binary: binary,
		Args: []string{"operator", "--kubeconfig", k.kubeconfig, "--database-url", databaseURL, "--codes-key", keyring,
			"--codes-current-key-id", "", "--metrics-bind-address", "0", "--health-probe-bind-address", probes},
		ReadyURL: "http://" + probes + "/readyz"})
}

func (k *kube) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k.client.Create(t.Context(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// onboard creates partner acme's resources (its catalog, the partner with loopback alone on its
// allowlist, a production key, a funded wallet), waits until the operator has provisioned them,
// and returns the key.
func (k *kube) onboard(t *testing.T) string {
	t.Helper()
	k.create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		testfixture.Catalog("main", testfixture.InNamespace(namespace), testfixture.WithProducts(
			testfixture.Product(plentiful), testfixture.Product(scarce, testfixture.WithPrice(500)))),
		testfixture.Partner("acme", testfixture.InNamespace(namespace), testfixture.WithCatalogRef("main"),
			testfixture.WithAllowlist("127.0.0.1/32"), testfixture.WithRateLimit(1_000_000)),
		testfixture.APIKey("acme", "production", testfixture.InNamespace(namespace)),
		testfixture.Wallet("acme", "production", testfixture.InNamespace(namespace),
			testfixture.WithTopUps(testfixture.TopUp("opening", "EUR", "1000000.00"))))
	k.waitReady(t, "Partner", "acme")
	k.waitReady(t, "Wallet", "acme-production")
	return k.key(t, "acme-production")
}

// waitReady waits until the object of kind (codeport.dev) is Ready at its generation.
func (k *kube) waitReady(t *testing.T, kind, name string) {
	t.Helper()
	poll.Until(t, time.Minute, kind+" "+name+" ready", func() (bool, string) {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion(v1alpha1.GroupVersion.String())
		o.SetKind(kind)
		if err := k.client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, o); err != nil {
			return false, err.Error()
		}
		conditions, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		for _, c := range conditions {
			c, _ := c.(map[string]any)
			if c["type"] == v1alpha1.ConditionReady {
				return c["status"] == "True" && fmt.Sprint(c["observedGeneration"]) == fmt.Sprint(o.GetGeneration()),
					fmt.Sprint(c)
			}
		}
		return false, "no Ready condition"
	})
}

// key is the plaintext of ApiKey name, from its Secret, once the ApiKey is Ready.
func (k *kube) key(t *testing.T, name string) string {
	t.Helper()
	k.waitReady(t, "ApiKey", name)
	var s corev1.Secret
	if err := k.client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name + "-key"}, &s); err != nil {
		t.Fatal(err)
	}
	return string(s.Data["apiKey"])
}
