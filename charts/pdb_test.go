package charts_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// TestPodDisruptionBudgetNeverBlocksDrains: an API with a single pod gets no budget (one with
// minAvailable 1 would make every node drain wait forever), one with several pods gets a budget
// that lets a pod go, and a minAvailable that would keep every pod is refused.
func TestPodDisruptionBudgetNeverBlocksDrains(t *testing.T) {
	t.Parallel()
	const redis = "redis.url=redis://redis:6379/0"
	cases := []struct {
		name string
		set  []string
		// want is the production budget's spec fields, nil for no budget.
		want map[string]any
	}{
		{"one replica", nil, nil},
		{"disabled", []string{redis, "api.production.replicas=3", "api.production.podDisruptionBudget.enabled=false"}, nil},
		{"two replicas", []string{redis, "api.production.replicas=2"}, map[string]any{"maxUnavailable": int64(1)}},
		{"autoscaling from two", []string{redis, "api.production.autoscaling.enabled=true",
			"api.production.autoscaling.minReplicas=2"}, map[string]any{"maxUnavailable": int64(1)}},
		{"autoscaling from one", []string{redis, "api.production.autoscaling.enabled=true",
			"api.production.autoscaling.minReplicas=1", "api.production.replicas=5"}, nil},
		{"minAvailable below replicas", []string{redis, "api.production.replicas=3",
			"api.production.podDisruptionBudget.minAvailable=2"}, map[string]any{"minAvailable": int64(2)}},
		{"minAvailable percentage", []string{redis, "api.production.replicas=2",
			"api.production.podDisruptionBudget.minAvailable=50%"}, map[string]any{"minAvailable": "50%"}},
		{"maxUnavailable percentage", []string{redis, "api.production.replicas=4",
			"api.production.podDisruptionBudget.maxUnavailable=25%"}, map[string]any{"maxUnavailable": "25%"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkBudget(t, render(t, tc.set...), tc.want)
		})
	}

	const pdb = "api.production.podDisruptionBudget."
	refused := map[string][]string{
		"minAvailable = replicas": {redis, "api.production.replicas=2", pdb + "minAvailable=2"},
		"minAvailable = autoscaler's min": {redis, "api.sandbox.autoscaling.enabled=true",
			"api.sandbox.podDisruptionBudget.minAvailable=2"},
		"minAvailable 99% of two": {redis, "api.production.replicas=2", pdb + "minAvailable=99%"},
		"maxUnavailable 0":        {redis, "api.production.replicas=2", pdb + "maxUnavailable=0"},
	}
	for name, set := range refused {
		t.Run(name, func(t *testing.T) {
			out, err := renderErr(t, set...)
			if err == nil || (!strings.Contains(out, "podDisruptionBudget") && !strings.Contains(out, "maxUnavailable")) {
				t.Fatalf("accepted, or refused without naming the budget: %v\n%s", err, out)
			}
		})
	}
}

// checkBudget compares the production API's budget with want (its spec fields; nil: no budget)
// and checks that it selects that API's pods only.
func checkBudget(t *testing.T, objs rendered, want map[string]any) {
	t.Helper()
	if objs["PodDisruptionBudget/codeport-sandbox"] != nil {
		t.Errorf("the single-replica sandbox API has a PodDisruptionBudget")
	}
	pdb := objs["PodDisruptionBudget/codeport-production"]
	if want == nil {
		if pdb != nil {
			t.Fatalf("PodDisruptionBudget rendered: %v", pdb.Object["spec"])
		}
		return
	}
	if pdb == nil {
		t.Fatal("no PodDisruptionBudget")
	}
	spec, _, _ := unstructured.NestedMap(pdb.Object, "spec")
	for _, f := range []string{"minAvailable", "maxUnavailable"} {
		if fmt.Sprint(spec[f]) != fmt.Sprint(want[f]) {
			t.Errorf("spec.%s = %v, want %v", f, spec[f], want[f])
		}
	}
	sel, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
	for name, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		podLabels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		if got, want := labels.SelectorFromSet(sel).Matches(labels.Set(podLabels)),
			name == "Deployment/codeport-production"; got != want {
			t.Errorf("budget selects %s's pods: %t", name, got)
		}
	}
}
