// Package charts tests the Helm chart and the kustomize deployment against a real kube-apiserver.
package charts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const chart = "codeport"

func helmBinary(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		t.Fatal("HELM is not set: run `make test`, or export HELM=\"$(hack/helm.sh)\"")
	}
	return h
}

// renderKubeVersion is the Kubernetes version helm template renders for unless a test says
// otherwise: without a cluster, Helm 3 assumes 1.20, which the chart's kubeVersion refuses.
const renderKubeVersion = "1.36.0"

// helm runs the helm binary; it returns combined output and the error.
func helm(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	if len(args) > 0 && args[0] == "template" && !slices.Contains(args, "--kube-version") {
		args = append(args, "--kube-version", renderKubeVersion)
	}
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// objects splits rendered manifests into unstructured objects.
func objects(t *testing.T, manifests string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		var u unstructured.Unstructured
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("rendered YAML: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, &u)
		}
	}
}

func TestLint(t *testing.T) {
	t.Parallel()
	for _, values := range []string{"", "codeport/ci/production-values.yaml"} {
		args := []string{"lint", "--strict", chart}
		if values != "" {
			args = append(args, "-f", values)
		}
		if out, err := helm(t, nil, args...); err != nil {
			t.Fatalf("helm lint %s: %v\n%s", values, err, out)
		}
	}
}

// TestTemplate renders the chart with default and production-like values and checks the objects
// and the hardening of every container.
func TestTemplate(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		values string
		want   []string
	}{
		"defaults": {"", []string{
			"Deployment/codeport-operator", "Deployment/codeport-production", "Deployment/codeport-sandbox",
			"Service/codeport-production", "Service/codeport-sandbox", "Job/codeport-migrate", "ClusterRole/codeport-operator",
			"ServiceAccount/codeport", "Role/codeport-leader-election",
		}},
		"production": {"codeport/ci/production-values.yaml", []string{"HorizontalPodAutoscaler/codeport-production",
			"Ingress/codeport-production", "Ingress/codeport-sandbox",
			"PodDisruptionBudget/codeport-production", "PodDisruptionBudget/codeport-sandbox"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			args := []string{"template", "codeport", chart, "--namespace", "codeport-system"}
			if tc.values != "" {
				args = append(args, "-f", tc.values)
			}
			out, err := helm(t, nil, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			seen := map[string]*unstructured.Unstructured{}
			for _, o := range objects(t, out) {
				seen[o.GetKind()+"/"+o.GetName()] = o
				checkPodHardening(t, o)
			}
			for _, w := range tc.want {
				if seen[w] == nil {
					t.Errorf("%s not rendered", w)
				}
			}
			if name == "production" {
				op := seen["Deployment/codeport-operator"]
				args, _, _ := unstructured.NestedSlice(op.Object, "spec", "template", "spec", "containers")
				if !strings.Contains(fmt.Sprint(args), "--production-base-url=https://api.codeport.example/v2") {
					t.Errorf("operator does not write the ingress base URL into key Secrets: %v", args)
				}
			}
		})
	}
}

// TestWebhooksStayOffPrivateNetworks: the API replicas refuse webhook URLs that reach the
// cluster's own network unless the install asks otherwise.
func TestWebhooksStayOffPrivateNetworks(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{false, true} {
		out, err := helm(t, nil, "template", "codeport", chart,
			"--set", fmt.Sprintf("webhooks.allowPrivateNetworks=%t", allow))
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		apis := 0
		for _, o := range objects(t, out) {
			if o.GetKind() != "Deployment" || o.GetName() == "codeport-operator" {
				continue
			}
			apis++
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if got := strings.Contains(fmt.Sprint(containers), "--webhook-allow-private-networks"); got != allow {
				t.Errorf("allowPrivateNetworks=%t: %s passes --webhook-allow-private-networks: %t", allow, o.GetName(), got)
			}
		}
		if apis != 2 {
			t.Fatalf("%d API deployments rendered, want 2", apis)
		}
	}
}

func checkPodHardening(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	path := []string{"spec", "template", "spec"}
	if o.GetKind() == "Pod" {
		path = []string{"spec"}
	}
	if o.GetKind() == "Job" || o.GetKind() == "Deployment" || o.GetKind() == "Pod" {
		containers, _, _ := unstructured.NestedSlice(o.Object, append(path, "containers")...)
		for _, c := range containers {
			m := c.(map[string]any)
			sc, _ := m["securityContext"].(map[string]any)
			caps, _ := sc["capabilities"].(map[string]any)
			seccomp, _ := sc["seccompProfile"].(map[string]any)
			if sc["readOnlyRootFilesystem"] != true || sc["runAsNonRoot"] != true || sc["allowPrivilegeEscalation"] != false ||
				fmt.Sprint(caps["drop"]) != "[ALL]" || seccomp["type"] != "RuntimeDefault" {
				t.Errorf("%s/%s container %v: securityContext %v", o.GetKind(), o.GetName(), m["name"], sc)
			}
			if res, ok := m["resources"].(map[string]any); !ok || res["requests"] == nil || res["limits"] == nil {
				t.Errorf("%s/%s container %v: resources %v", o.GetKind(), o.GetName(), m["name"], m["resources"])
			}
			if o.GetKind() == "Deployment" && (m["livenessProbe"] == nil || m["readinessProbe"] == nil) {
				t.Errorf("%s/%s container %v without probes", o.GetKind(), o.GetName(), m["name"])
			}
		}
	}
}

func TestValuesSchemaRejectsBadValues(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		set  []string
		want string
	}{
		"unknown key":            {[]string{"api.production.replica=2"}, "replica"},
		"unknown top-level key":  {[]string{"databse.existingSecret=x"}, "databse"},
		"wrong type":             {[]string{"api.production.replicas=many"}, "replicas"},
		"bad pull policy":        {[]string{"image.pullPolicy=Sometimes"}, "pullPolicy"},
		"replicas without redis": {[]string{"api.production.replicas=2"}, "redis"},
		"autoscaling w/o redis":  {[]string{"api.sandbox.autoscaling.enabled=true"}, "redis"},
		"no database secret":     {[]string{"database.existingSecret="}, "existingSecret"},
		"bad redis url":          {[]string{"redis.url=localhost:6379"}, "url"},
		"bad topup role flag":    {[]string{"rbac.walletTopUpRole=maybe"}, "walletTopUpRole"},
		"namespace not a list":   {[]string{"operator.watchNamespaces=team-a"}, "watchNamespaces"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			args := []string{"template", "codeport", chart}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, err := helm(t, nil, args...)
			if err == nil {
				t.Fatalf("accepted: %s", tc.set)
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("error does not mention %q:\n%s", tc.want, out)
			}
		})
	}
	// Several replicas with Redis are fine.
	if out, err := helm(t, nil, "template", "codeport", chart,
		"--set", "api.production.replicas=2", "--set", "redis.url=redis://redis:6379/0"); err != nil {
		t.Fatalf("replicas with redis refused: %v\n%s", err, out)
	}
}

// TestInstallUpgradeUninstall installs the chart into a real kube-apiserver. There are no
// kubelets, so pods never run and the migration hook would wait forever: hooks are skipped here
// (their rendering is covered by TestTemplate). The server is the test's own: the test checks
// that the release installs codeport's CRDs and leaves them behind, which the shared server has
// installed already.
func TestInstallUpgradeUninstall(t *testing.T) {
	t.Parallel()
	s := freshAPIServer(t)
	c, env := s.client, helmEnv(t, s.kubeconfig)
	ctx := context.Background()
	if out, err := helm(t, env, "install", "codeport", chart,
		"-n", "codeport-system", "--create-namespace", "--no-hooks", "--timeout", "2m"); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	for _, crd := range []string{"partners", "catalogs", "catalogshards", "apikeys", "wallets", "wallettopups"} {
		var o apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: crd + ".codeport.dev"}, &o); err != nil {
			t.Errorf("CRD %s: %v", crd, err)
		}
	}
	for _, name := range []string{"codeport-operator", "codeport-production", "codeport-sandbox"} {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: "codeport-system", Name: name}, &d); err != nil {
			t.Errorf("deployment %s: %v", name, err)
		}
	}
	for _, name := range []string{"codeport-production", "codeport-sandbox"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: "codeport-system", Name: name}, &corev1.Service{}); err != nil {
			t.Errorf("service %s: %v", name, err)
		}
	}
	var role rbacv1.ClusterRole
	if err := c.Get(ctx, client.ObjectKey{Name: "codeport-operator"}, &role); err != nil || len(role.Rules) == 0 {
		t.Fatalf("operator ClusterRole: %v %v", err, role.Rules)
	}
	sa := client.ObjectKey{Namespace: "codeport-system", Name: "codeport"}
	if err := c.Get(ctx, sa, &corev1.ServiceAccount{}); err != nil {
		t.Fatalf("service account: %v", err)
	}

	if out, err := helm(t, env, "upgrade", "codeport", chart,
		"-n", "codeport-system", "--no-hooks", "--set", "api.sandbox.enabled=false"); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, out)
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: "codeport-system", Name: "codeport-sandbox"}, &appsv1.Deployment{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("sandbox API after upgrade disabling it: %v", err)
	}

	if out, err := helm(t, env, "uninstall", "codeport",
		"-n", "codeport-system", "--no-hooks", "--wait", "--timeout", "1m"); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Get(ctx, client.ObjectKey{Namespace: "codeport-system", Name: "codeport-operator"}, &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("operator deployment still there after uninstall: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// CRDs (and with them every partner's resources) survive an uninstall.
	crd := client.ObjectKey{Name: "partners.codeport.dev"}
	if err := c.Get(ctx, crd, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		t.Fatalf("CRD removed by uninstall: %v", err)
	}
}

// TestKustomizeDefaultAppliesServerSide renders config/default and applies every object with a
// server-side dry run against a real kube-apiserver: an apply, not a create, because the shared
// server already serves codeport's CRDs.
func TestKustomizeDefaultAppliesServerSide(t *testing.T) {
	s, _ := sharedAPIServer(t)
	c := s.client
	ctx := context.Background()
	objs := kustomize(t, "default")
	// The namespace must exist for namespaced objects to be validated; everything else is a dry run.
	createNamespace(t, c, "codeport-system")
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() == "CustomResourceDefinition" && o.GetLabels()["app.kubernetes.io/part-of"] != "codeport" {
			t.Errorf("CRD %s lacks app.kubernetes.io/part-of=codeport, which the README deletes CRDs by", o.GetName())
		}
		if o.GetKind() == "Namespace" {
			continue
		}
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.DryRunAll,
			client.FieldOwner("codeport-charts-test"), client.ForceOwnership)
		if err != nil {
			t.Errorf("%s/%s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if kinds["CustomResourceDefinition"] != 6 || kinds["Deployment"] != 3 || kinds["Service"] != 2 ||
		kinds["ClusterRole"] < 1 {
		t.Fatalf("rendered kinds: %v", kinds)
	}
}

// TestDashboardUsesExportedMetrics renders the Grafana dashboard ConfigMap and checks that every
// codeport metric it queries is one the code defines, so the dashboard cannot drift from the
// instruments.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	t.Parallel()
	out, err := helm(t, nil, "template", "codeport", chart, "--show-only", "templates/dashboard.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	objs := objects(t, out)
	if len(objs) != 1 || objs[0].GetLabels()["grafana_dashboard"] != "1" {
		t.Fatalf("dashboard ConfigMap: %v", objs)
	}
	data, _, _ := unstructured.NestedString(objs[0].Object, "data", "codeport.json")
	var dashboard map[string]any
	if err := json.Unmarshal([]byte(data), &dashboard); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	defined := definedMetrics(t, "../apiserver", "../internal", "../controllers")
	used := regexp.MustCompile(`codeport_[a-z_]+`).FindAllString(data, -1)
	if len(used) < 5 {
		t.Fatalf("dashboard queries only %v", used)
	}
	for _, name := range used {
		base := strings.TrimSuffix(name, "_bucket")
		if !defined[base] {
			t.Errorf("dashboard queries %s, which no code exports", name)
		}
	}
}

// definedMetrics reads the names of the codeport metrics the Go code under dirs defines, in
// every package at any depth: a metric may live in a package of its own.
func definedMetrics(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	defined := map[string]bool{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range metricName.FindAllStringSubmatch(string(src), -1) {
				defined[m[1]] = true
			}
			return nil
		})
		if err != nil {
			t.Fatalf("read metric definitions: %v", err)
		}
	}
	return defined
}

var metricName = regexp.MustCompile(`(?:Name:\s+|NewDesc\()"(codeport_[a-z_]+)"`)
