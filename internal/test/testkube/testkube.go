package testkube

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/codeport/codeport/api/v1alpha1"
)

// Cluster is a running kube-apiserver with codeport's CRDs.
type Cluster struct {
	Config *rest.Config
	// Client reads and writes core and codeport objects.
	Client client.WithWatch
	// Kubeconfig is a file naming a system:masters user, for an operator process.
	Kubeconfig string
}

// Start starts the server with the CRDs of crdDir (config/crd/bases, relative to the test's
// package), writes the kubeconfig into dir, and stops the server when the test ends.
func Start(t testing.TB, crdDir, dir string) *Cluster {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal(`KUBEBUILDER_ASSETS is not set: export KUBEBUILDER_ASSETS="$(hack/envtest.sh)", or run the make target`)
	}
	// The test's own Kubernetes clients have nothing to say; the processes log to their files.
	ctrllog.SetLogger(logr.Discard())
	te := &envtest.Environment{CRDDirectoryPaths: []string{crdDir}, ErrorIfCRDPathMissing: true,
		// envtest's 20 s per attempt is too short for a kube-apiserver on a busy machine.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	user, err := te.AddUser(envtest.User{Name: "codeport-operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("envtest user: %v", err)
	}
	raw, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	c := &Cluster{Config: cfg, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	if err := os.WriteFile(c.Kubeconfig, raw, 0o600); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if c.Client, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatalf("kubernetes client: %v", err)
	}
	return c
}

// ReadyNow reports whether conditions hold Ready=True for generation, and describes the Ready
// condition for a test's failure message.
func ReadyNow(conditions []metav1.Condition, generation int64) (bool, string) {
	cond := meta.FindStatusCondition(conditions, v1alpha1.ConditionReady)
	if cond == nil {
		return false, "no Ready condition"
	}
	return cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == generation,
		fmt.Sprintf("Ready %s %s: %s", cond.Status, cond.Reason, cond.Message)
}
