//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/poll"
)

const (
	// release and its namespace, as the README installs it.
	release   = "codeport"
	namespace = "codeport-system"
	// partnersNS is where config/samples puts the sample partner.
	partnersNS = "partners"
)

// env is what the test is pointed at; every field comes from the environment.
type env struct {
	kubeconfig string
	helm       string
	kubectl    string
	chart      string
	samples    string
	// image is the codeport image as repository:tag, present on (or pullable by) the nodes.
	image string
	// netcheckImage is hack/e2e/netcheck's image, on the nodes: the NetworkPolicy test's probe.
	netcheckImage string
	// databaseURL and redisURL are reachable from the Pods.
	databaseURL string
	redisURL    string
	// callerCIDRs are the addresses this test's requests reach the APIs from; they are added to
	// the sample partner's allowlist, as a partner's own addresses would be.
	callerCIDRs []string
	// auditLog is the API server's audit log (JSON lines), when this machine can read it.
	auditLog string
	// cnpg is what TestDatabaseFailover runs CloudNativePG with.
	cnpg cnpgEnv
}

// cnpgEnv is what hack/e2e/images.sh built for CloudNativePG, and where the node's local
// volumes go.
type cnpgEnv struct {
	version          string
	manifest         string // CloudNativePG's release manifest, applied as it is
	postgresImage    string // PostgreSQL 15 with Barman's cloud client
	pgbouncerImage   string // the Pooler's
	objectStoreImage string
	volumes          string // directory of the local PersistentVolumes' directories
}

func loadEnv(t *testing.T) env {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	e := env{
		kubeconfig:    os.Getenv("KUBECONFIG"),
		helm:          os.Getenv("HELM"),
		kubectl:       envOr("KUBECTL", "kubectl"),
		chart:         envOr("E2E_CHART", filepath.Join(root, "charts", "codeport")),
		samples:       filepath.Join(root, "config", "samples"),
		image:         envOr("E2E_IMAGE", "ghcr.io/codeport/codeport:e2e"),
		netcheckImage: os.Getenv("E2E_NETCHECK_IMAGE"),
		databaseURL:   os.Getenv("E2E_DATABASE_URL"),
		redisURL:      os.Getenv("E2E_REDIS_URL"),
		// The samples admit 10.0.0.0/8 (this cluster's Pods are in 10.88.0.0/16); a cluster
		// whose Pods call from elsewhere names its ranges here.
		callerCIDRs: strings.FieldsFunc(os.Getenv("E2E_CALLER_CIDRS"), func(r rune) bool { return r == ',' }),
		auditLog:    os.Getenv("E2E_AUDIT_LOG"),
		cnpg: cnpgEnv{
			version:          os.Getenv("CNPG_VERSION"),
			manifest:         os.Getenv("CNPG_MANIFEST"),
			postgresImage:    os.Getenv("POSTGRES_IMAGE"),
			pgbouncerImage:   os.Getenv("PGBOUNCER_IMAGE"),
			objectStoreImage: os.Getenv("OBJECTSTORE_IMAGE"),
			volumes:          filepath.Join(envOr("E2E_RUN_DIR", "/run/codeport-e2e"), "volumes"),
		},
	}
	for name, v := range map[string]string{"KUBECONFIG": e.kubeconfig, "HELM": e.helm,
		"E2E_DATABASE_URL": e.databaseURL, "E2E_REDIS_URL": e.redisURL, "E2E_NETCHECK_IMAGE": e.netcheckImage} {
		if v == "" {
			t.Fatalf("%s is not set: run make test-e2e, or see docs/operator.md (End-to-end cluster)", name)
		}
	}
	return e
}

// requireCNPG fails a test that needs what hack/e2e/images.sh builds for CloudNativePG when it
// is missing: never a silent skip.
func (e env) requireCNPG(t *testing.T) {
	t.Helper()
	for name, v := range map[string]string{"CNPG_VERSION": e.cnpg.version, "CNPG_MANIFEST": e.cnpg.manifest,
		"POSTGRES_IMAGE": e.cnpg.postgresImage, "PGBOUNCER_IMAGE": e.cnpg.pgbouncerImage,
		"OBJECTSTORE_IMAGE": e.cnpg.objectStoreImage} {
		if v == "" {
			t.Fatalf("%s is not set: run make test-e2e (hack/e2e/cluster.sh up prints it)", name)
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// kube holds the clients; k8s reads and writes every kind, cs streams logs.
type kube struct {
	k8s client.WithWatch
	cs  kubernetes.Interface
}

func newKube(t *testing.T, e env) *kube {
	t.Helper()
	// The test's clients have nothing to say; without a logger controller-runtime prints a stack
	// to say so.
	ctrllog.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", e.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return &kube{k8s: k8s, cs: cs}
}

// run runs a command (helm, kubectl) with the test's KUBECONFIG and returns its output; the
// output is part of the error.
func run(ctx context.Context, e env, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// pollPause is the pause between two looks of poll.Wait: most look through the cluster's API
// server, on a machine that is shared and slow at times.
const pollPause = 250 * time.Millisecond

// createNamespace creates a namespace that enforces the restricted Pod Security profile, as a
// platform team's namespaces do; one left by an earlier run is deleted first.
func (k *kube) createNamespace(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{}
	if err := k.k8s.Get(ctx, client.ObjectKey{Name: name}, ns); err == nil {
		t.Fatalf("namespace %s exists: the cluster is not fresh (delete it, or the earlier release)", name)
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if err := k.k8s.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func (k *kube) createSecret(ctx context.Context, t *testing.T, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, StringData: data}
	if err := k.k8s.Create(ctx, s); err != nil {
		t.Fatalf("create secret %s: %v", name, err)
	}
}

func randomKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// pods lists the release's Pods of one component (api-production, api-sandbox, operator).
func (k *kube) pods(ctx context.Context, component string) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := k.k8s.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{
		"app.kubernetes.io/instance": release, "app.kubernetes.io/component": component})
	if err != nil {
		return nil, fmt.Errorf("list %s pods: %w", component, err)
	}
	return list.Items, nil
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyPods waits until a component has exactly n Ready Pods and no other, and returns them.
func (k *kube) readyPods(ctx context.Context, component string, n int) ([]corev1.Pod, error) {
	var ready []corev1.Pod
	err := poll.Wait(ctx, pollPause, 5*time.Minute, fmt.Sprintf("%d ready %s pods", n, component), func() (bool, string) {
		pods, err := k.pods(ctx, component)
		if err != nil {
			return false, err.Error()
		}
		ready = ready[:0]
		for i := range pods {
			if podReady(&pods[i]) {
				ready = append(ready, pods[i])
			}
		}
		return len(ready) == n && len(pods) == n, fmt.Sprintf("%d of %d ready", len(ready), len(pods))
	})
	return ready, err
}
