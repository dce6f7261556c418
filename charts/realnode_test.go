package charts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// rbacKinds are the kinds that make up the operator's identity and permissions.
var rbacKinds = map[string]bool{
	"ServiceAccount": true, "Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true,
}

// TestLeaderElectionRecordsItsEventUnderTheShippedRBAC grants the operator's ServiceAccount
// exactly the RBAC the chart and config/default ship, then runs controller-runtime's leader
// election as that ServiceAccount and waits for the LeaderElection event it records. A Role
// that lacks the events API the election records through leaves no event (and a denial in the
// operator's log on every leader change, as a real node showed).
func TestLeaderElectionRecordsItsEventUnderTheShippedRBAC(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, serviceAccount string
		objs                 func(t *testing.T) []*unstructured.Unstructured
	}{
		{"chart", "codeport", func(t *testing.T) []*unstructured.Unstructured {
			t.Helper()
			var objs []*unstructured.Unstructured
			for _, o := range render(t) {
				objs = append(objs, o)
			}
			return objs
		}},
		{"config/default", "codeport-operator", func(t *testing.T) []*unstructured.Unstructured {
			t.Helper()
			return kustomize(t, "default")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Its own server: the RBAC objects are cluster-scoped and named as a release's.
			s := freshAPIServer(t)
			c, cfg := s.client, s.cfg
			ctx := context.Background()
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "codeport-system"}}); err != nil {
				t.Fatal(err)
			}
			for _, o := range tc.objs(t) {
				if !rbacKinds[o.GetKind()] {
					continue
				}
				if err := c.Create(ctx, o); err != nil {
					t.Fatalf("%s/%s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			electAs(t, serviceAccountConfig(cfg, "codeport-system", tc.serviceAccount))
			poll.Until(t, time.Minute, "the LeaderElection event", func() (bool, string) {
				var events corev1.EventList
				if err := c.List(ctx, &events, client.InNamespace("codeport-system")); err != nil {
					return false, err.Error()
				}
				for _, e := range events.Items {
					if e.Reason == "LeaderElection" {
						return true, ""
					}
				}
				return false, fmt.Sprintf("%d events, none of reason LeaderElection", len(events.Items))
			})
		})
	}
}

// serviceAccountConfig is cfg impersonating a ServiceAccount, with the groups its token carries.
func serviceAccountConfig(cfg *rest.Config, namespace, name string) *rest.Config {
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return sa
}

// electAs runs a manager with the operator's leader-election settings as cfg's user until the
// test ends.
func electAs(t *testing.T, cfg *rest.Config) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        "operator.codeport.dev",
		LeaderElectionNamespace: "codeport-system",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// TestMigrationJobFailsWithItsReason checks what makes a failed migration visible: the hook Job
// retries a bounded number of times, its Pods put their last log lines into their status, a
// failed Job is replaced by the next install or upgrade, and a database that accepts
// connections but never answers (as one behind a dropped route) fails an attempt, run as the
// Job runs it, with the reason on its last line (the termination message), rather than waiting
// out the command's five-minute limit while Helm's own timeout runs out.
func TestMigrationJobFailsWithItsReason(t *testing.T) {
	t.Parallel()
	job := render(t)["Job/codeport-migrate"]
	if job == nil {
		t.Fatal("no migration hook Job")
	}
	if policy := job.GetAnnotations()["helm.sh/hook-delete-policy"]; policy != "before-hook-creation,hook-succeeded" {
		t.Errorf("hook-delete-policy %q", policy)
	}
	var spec batchv1.JobSpec
	raw, _, _ := unstructured.NestedMap(job.Object, "spec")
	if err := runtimeConvert(raw, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.BackoffLimit == nil || *spec.BackoffLimit > 3 {
		t.Errorf("backoffLimit %v", spec.BackoffLimit)
	}
	c := spec.Template.Spec.Containers[0]
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("terminationMessagePolicy %q", c.TerminationMessagePolicy)
	}
	docs, err := os.ReadFile(filepath.Join("..", "docs", "operator.md"))
	if err != nil {
		t.Fatal(err)
	}
	// docs/operator.md finds the Job and its Pods by these.
	for _, want := range []string{"-l app.kubernetes.io/component=" + spec.Template.Labels["app.kubernetes.io/component"],
		"job/" + job.GetName()} {
		if !strings.Contains(string(docs), want) {
			t.Errorf("docs/operator.md lacks %q", want)
		}
	}
	env := []string{"CODEPORT_DATABASE_URL="}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Close() }()
	go func() {
		// Connections are held open and never answered, until the listener goes.
		var held []net.Conn
		defer func() {
			for _, conn := range held {
				_ = conn.Close()
			}
		}()
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, conn)
		}
	}()
	migrate := exec.Command(testprocess.Binary(t), append(c.Args, "--database-url",
		"postgres://codeport:codeport@"+silent.Addr().String()+"/codeport")...)
	migrate.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	migrate.Stderr = &stderr
	if err := migrate.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- migrate.Wait() }()
	select {
	case err := <-exited:
		last := strings.TrimSpace(stderr.String())
		if err == nil || !strings.Contains(last, silent.Addr().String()) || !strings.Contains(last, "timeout") {
			t.Fatalf("migrate up against a silent database: %v\n%s", err, last)
		}
		// The Job's lines reach the same log pipeline as the components': JSON too.
		if !json.Valid([]byte(last)) {
			t.Errorf("the migration Job's error is not a JSON line: %s", last)
		}
	case <-time.After(2 * time.Minute):
		_ = migrate.Process.Kill()
		t.Fatalf("migrate up still waits on a silent database under the Job's environment %v", env)
	}
}

// TestPodsStartWithoutProbeFailures checks every Deployment of the chart and of config/default:
// a startup probe holds the readiness and liveness probes back until the process listens (on a
// real node, each Pod start otherwise recorded a "Readiness probe failed: connection refused"
// event), checking the port and path the liveness probe checks, and a failing process leaves its
// last log lines in the Pod's status.
func TestPodsStartWithoutProbeFailures(t *testing.T) {
	t.Parallel()
	deployments := ofKind(render(t), "Deployment")
	for _, o := range kustomize(t, "default") {
		if o.GetKind() == "Deployment" {
			deployments = append(deployments, o)
		}
	}
	if len(deployments) < 6 {
		t.Fatalf("%d Deployments", len(deployments))
	}
	for _, d := range deployments {
		var spec corev1.PodSpec
		raw, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
		if err := runtimeConvert(raw, &spec); err != nil {
			t.Fatal(err)
		}
		for _, c := range spec.Containers {
			start, live := c.StartupProbe, c.LivenessProbe
			switch {
			case start == nil || start.HTTPGet == nil || live == nil || live.HTTPGet == nil:
				t.Errorf("%s/%s: startup probe %v, liveness probe %v", d.GetName(), c.Name, start, live)
			case start.HTTPGet.Port != live.HTTPGet.Port || start.HTTPGet.Path != live.HTTPGet.Path:
				t.Errorf("%s/%s: the startup probe checks %s%s, the liveness probe %s%s", d.GetName(), c.Name,
					start.HTTPGet.Port.String(), start.HTTPGet.Path, live.HTTPGet.Port.String(), live.HTTPGet.Path)
			case start.InitialDelaySeconds < 1 || start.PeriodSeconds*start.FailureThreshold < 60:
				t.Errorf("%s/%s: the startup probe gives up after %ds", d.GetName(), c.Name,
					start.PeriodSeconds*start.FailureThreshold)
			}
			if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
				t.Errorf("%s/%s: terminationMessagePolicy %q", d.GetName(), c.Name, c.TerminationMessagePolicy)
			}
		}
	}
}

// TestSamplesAdmitCallersInsideTheCluster applies what the operator does to the sample Partner's
// allowlists and checks who may call: on a real node the first call through a Service came from
// a Pod address and answered 403. Both environments admit the cluster's Pod network; only the
// sandbox admits every private network, and neither admits an arbitrary public address.
func TestSamplesAdmitCallersInsideTheCluster(t *testing.T) {
	t.Parallel()
	var partners []v1alpha1.Partner
	for _, o := range kustomize(t, "samples") {
		if o.GetKind() == "Partner" {
			var p v1alpha1.Partner
			if err := runtimeConvert(o.Object, &p); err != nil {
				t.Fatal(err)
			}
			partners = append(partners, p)
		}
	}
	if len(partners) != 1 {
		t.Fatalf("%d sample Partners", len(partners))
	}
	for _, tc := range []struct {
		environment tenancy.Environment
		admitted    []string
		refused     []string
	}{
		{tenancy.Production, []string{"10.88.0.7", "10.244.1.9", "127.0.0.1", "203.0.113.9"},
			[]string{"172.17.0.2", "192.168.1.10", "198.51.100.7", "2001:db8::1"}},
		{tenancy.Sandbox, []string{"10.88.0.7", "172.17.0.2", "192.168.1.10", "fd00::5", "::1"},
			[]string{"198.51.100.7", "2001:db8::1"}},
	} {
		entries, err := provisioning.NormalizeWhitelist(
			provisioning.EffectivePolicy(&partners[0].Spec, string(tc.environment)).IPWhitelist)
		if err != nil {
			t.Fatal(err)
		}
		account := auth.Account{}
		for _, e := range entries {
			account.IPWhitelist = append(account.IPWhitelist, netip.MustParsePrefix(e))
		}
		for _, ip := range tc.admitted {
			if !account.Allows(netip.MustParseAddr(ip)) {
				t.Errorf("%s refuses %s: %v", tc.environment, ip, entries)
			}
		}
		for _, ip := range tc.refused {
			if account.Allows(netip.MustParseAddr(ip)) {
				t.Errorf("%s admits %s: %v", tc.environment, ip, entries)
			}
		}
	}
}
