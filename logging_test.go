package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/codeport/codeport/internal/poll"
	"github.com/codeport/codeport/internal/store/storetest"
)

// TestOperatorWritesOnlyJSON runs the operator as a process of its own into what made it write
// text on a real node: its database closed to connections (the ledger refresh warned through
// the standard library's logger) and its API server gone (client-go's reflectors and leader
// election wrote klog lines), until it stops with an error. Every line it wrote must be JSON.
func TestOperatorWritesOnlyJSON(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, or export KUBEBUILDER_ASSETS=\"$(hack/envtest.sh)\"")
	}
	te := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("config", "crd", "bases")},
		ErrorIfCRDPathMissing: true}
	cfg, err := te.Start()
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = te.Stop()
		}
	})
	user, err := te.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	db := storetest.New(t)

	operator := exec.Command(os.Args[0], "operator", "--kubeconfig", kubeconfigPath,
		"--leader-elect", "--leader-election-namespace", "default", "--leader-elect-lease-duration", "4s",
		"--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "1s",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	operator.Env = append(os.Environ(), runMainEnv+"=1", "CODEPORT_DATABASE_URL="+db.URL,
		"CODEPORT_CODES_KEY="+strings.Repeat("ab", 32))
	var out syncBuffer
	operator.Stdout, operator.Stderr = &out, &out
	if err := operator.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- operator.Wait() }()
	t.Cleanup(func() {
		_ = operator.Process.Kill()
		<-exited
	})
	wrote := func(what string) func() (bool, string) {
		return func() (bool, string) { return strings.Contains(out.String(), what), out.String() }
	}
	poll.Until(t, 2*time.Minute, "the operator to lead", wrote("cquired lease"))

	storetest.SetConnectable(t, db.Name, false)
	defer storetest.SetConnectable(t, db.Name, true)
	poll.Until(t, time.Minute, "a failed ledger refresh", wrote("ledger refresh"))

	if err := te.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	select {
	case err := <-exited:
		exited <- err
		if err == nil {
			t.Error("the operator ended without an error when it lost its API server")
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the operator still runs without its API server:\n%s", out.String())
	}

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, line := range lines {
		var record map[string]any
		if err := json.Unmarshal([]byte(line), &record); err != nil {
			t.Errorf("not JSON: %s", line)
		}
	}
	if !strings.Contains(out.String(), "leader election lost") {
		t.Errorf("no line says the operator lost its lease:\n%s", out.String())
	}
}
