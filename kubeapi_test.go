package main

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// startKubeAPIServer starts a kube-apiserver with codeport's CRDs for this test and writes a
// kubeconfig of a cluster admin for it; stop ends the server early (once, whoever calls it:
// the test or its cleanup). The operator tests here need a server of their own, because one of
// them stops it underneath the operator.
func startKubeAPIServer(t *testing.T) (kubeconfig string, stop func() error) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal(`KUBEBUILDER_ASSETS is not set: run make test, or export KUBEBUILDER_ASSETS="$(hack/envtest.sh)"`)
	}
	te := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		// envtest's 20 s per attempt is too short for a kube-apiserver on a busy machine.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() { stopErr = te.Stop() })
		return stopErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	user, err := te.AddUser(envtest.User{Name: "codeport-operator", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, stop
}
