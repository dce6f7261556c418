package charts_test

import (
	"context"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/internal/test/poll"
)

// servicePorts lists the port names of a rendered Service.
func servicePorts(o *unstructured.Unstructured) []string {
	ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
	var names []string
	for _, p := range ports {
		names = append(names, p.(map[string]any)["name"].(string))
	}
	return names
}

// selectedServices lists the rendered Services a ServiceMonitor's selector matches.
func selectedServices(t *testing.T, objs rendered, sm *unstructured.Unstructured) []string {
	t.Helper()
	raw, _, _ := unstructured.NestedMap(sm.Object, "spec", "selector")
	var ls metav1.LabelSelector
	if err := runtimeConvert(raw, &ls); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for key, o := range objs {
		if o.GetKind() == "Service" && sel.Matches(labels.Set(o.GetLabels())) {
			names = append(names, key)
		}
	}
	slices.Sort(names)
	return names
}

// TestMetricsStayOffPartnerServices: the Services an Ingress or HTTPRoute exposes to partners
// carry the API port only; metrics have Services of their own, which the (opt-in)
// ServiceMonitors select, and nothing else.
func TestMetricsStayOffPartnerServices(t *testing.T) {
	t.Parallel()
	objs := render(t, monitoringAPI)
	for _, env := range []string{"production", "sandbox"} {
		partner := objs["Service/codeport-"+env]
		if partner == nil || !slices.Equal(servicePorts(partner), []string{"http"}) {
			t.Errorf("partner-facing Service codeport-%s: ports %v, want [http]", env, servicePorts(partner))
		}
		metrics := objs["Service/codeport-"+env+"-metrics"]
		if metrics == nil || !slices.Equal(servicePorts(metrics), []string{"metrics"}) {
			t.Fatalf("metrics Service codeport-%s-metrics: %v", env, metrics)
		}
		if metrics.GetLabels()["codeport.dev/service"] != "metrics" {
			t.Errorf("codeport-%s-metrics labels: %v", env, metrics.GetLabels())
		}
	}
	if op := objs["Service/codeport-operator-metrics"]; op == nil || op.GetLabels()["codeport.dev/service"] != "metrics" {
		t.Fatalf("operator metrics Service: %v", op)
	}
	if sms := ofKind(objs, "ServiceMonitor"); len(sms) != 0 {
		t.Errorf("ServiceMonitors rendered without serviceMonitor.enabled: %d", len(sms))
	}
	if objs["ClusterRoleBinding/codeport-metrics-reader"] != nil {
		t.Error("metrics-reader bound to nobody in particular")
	}

	objs = render(t, monitoringAPI, "serviceMonitor.enabled=true")
	want := map[string][]string{
		"ServiceMonitor/codeport-operator": {"Service/codeport-operator-metrics"},
		"ServiceMonitor/codeport-api":      {"Service/codeport-production-metrics", "Service/codeport-sandbox-metrics"},
	}
	for name, services := range want {
		sm := objs[name]
		if sm == nil {
			t.Fatalf("%s not rendered", name)
		}
		if got := selectedServices(t, objs, sm); !slices.Equal(got, services) {
			t.Errorf("%s selects %v, want %v", name, got, services)
		}
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		for _, e := range endpoints {
			port := e.(map[string]any)["port"].(string)
			for _, svc := range services {
				if !slices.Contains(servicePorts(objs[svc]), port) {
					t.Errorf("%s scrapes port %q, which %s lacks", name, port, svc)
				}
			}
		}
	}
}

// TestPrometheusMayReadOperatorMetrics installs the chart with the Prometheus Operator's CRD and
// asks the API server whether the service account named in the values may read the operator's
// authenticated /metrics, as the operator itself asks on every scrape.
func TestPrometheusMayReadOperatorMetrics(t *testing.T) {
	s, ns := sharedAPIServer(t)
	c := s.client
	installTestCRDs(t, c, "monitoring.coreos.com_servicemonitors.yaml")
	ctx := context.Background()
	values := []string{
		"serviceMonitor.enabled=true",
		"serviceMonitor.prometheusServiceAccount.name=prometheus-k8s",
		"serviceMonitor.prometheusServiceAccount.namespace=monitoring",
	}
	// The ServiceMonitors match the Prometheus Operator's schema field for field.
	sms := ofKind(render(t, append(values, monitoringAPI, "--namespace="+ns)...), "ServiceMonitor")
	if len(sms) != 2 {
		t.Fatalf("%d ServiceMonitors rendered", len(sms))
	}
	createStrictly(t, c, sms...)
	// Installed, the chart finds the CRD by itself.
	var args []string
	for _, v := range values {
		args = append(args, "--set", v)
	}
	installChart(t, s, ns, args...)
	for _, sm := range sms {
		live := sm.DeepCopy()
		if err := c.Get(ctx, client.ObjectKeyFromObject(sm), live); err != nil {
			t.Errorf("ServiceMonitor %s not installed: %v", sm.GetName(), err)
		}
	}

	mayGetMetrics := func(sa string) (bool, string) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  "system:serviceaccount:" + sa,
			Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:monitoring"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed, sar.Status.Reason
	}
	// The authorizer sees the release's bindings a moment after they are created.
	poll.Until(t, time.Minute, "Prometheus's binding to reach the authorizer", func() (bool, string) {
		return mayGetMetrics("monitoring:prometheus-k8s")
	})
	for sa, want := range map[string]bool{"monitoring:prometheus-k8s": true, "monitoring:grafana": false} {
		if allowed, reason := mayGetMetrics(sa); allowed != want {
			t.Errorf("%s may GET /metrics: %t, want %t (%s)", sa, allowed, want, reason)
		}
	}
}
