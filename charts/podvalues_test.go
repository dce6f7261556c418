package charts_test

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// component is a Deployment of the chart and where its values are.
type component struct {
	values, deployment, serviceAccount, selector string
}

var components = []component{
	{"operator", "codeport-operator", "codeport", "operator"},
	{"api.production", "codeport-production", "codeport-production", "api-production"},
	{"api.sandbox", "codeport-sandbox", "codeport-sandbox", "api-sandbox"},
}

// deployment reads a rendered Deployment into its type.
func deployment(t *testing.T, objs rendered, name string) appsv1.Deployment {
	t.Helper()
	o := objs["Deployment/"+name]
	if o == nil {
		t.Fatalf("Deployment %s not rendered", name)
	}
	var d appsv1.Deployment
	if err := runtimeConvert(o.Object, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPodValues: each Deployment takes the Pod values a platform team sets beside other charts'
// (annotations, labels, a priority class, topology spread, its ServiceAccount's annotations),
// and podLabels never change the labels the chart selects the Pods by.
//
//nolint:gocognit // one table of values, each checked on all three components
func TestPodValues(t *testing.T) {
	t.Parallel()
	for _, c := range components {
		t.Run(c.values, func(t *testing.T) {
			t.Parallel()
			objs := render(t,
				c.values+".podAnnotations.example\\.com/owner=payments",
				c.values+".podLabels.team=payments",
				c.values+".priorityClassName=codeport-critical",
				c.values+".serviceAccount.annotations.iam\\.gke\\.io/gcp-service-account=codeport@example.iam.gserviceaccount.com",
				c.values+".topologySpreadConstraints[0].maxSkew=1",
				c.values+".topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
				c.values+".topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
				c.values+".topologySpreadConstraints[1].maxSkew=2",
				c.values+".topologySpreadConstraints[1].topologyKey=kubernetes.io/hostname",
				c.values+".topologySpreadConstraints[1].whenUnsatisfiable=ScheduleAnyway",
				c.values+".topologySpreadConstraints[1].labelSelector.matchLabels.team=payments")
			d := deployment(t, objs, c.deployment)
			pod := d.Spec.Template
			selector := map[string]string{"app.kubernetes.io/name": "codeport", "app.kubernetes.io/instance": "codeport",
				"app.kubernetes.io/component": c.selector}
			if fmt.Sprint(d.Spec.Selector.MatchLabels) != fmt.Sprint(selector) {
				t.Errorf("selector %v", d.Spec.Selector.MatchLabels)
			}
			wantLabels := map[string]string{"team": "payments"}
			for k, v := range selector {
				wantLabels[k] = v
			}
			if fmt.Sprint(pod.Labels) != fmt.Sprint(wantLabels) {
				t.Errorf("Pod labels %v, want %v", pod.Labels, wantLabels)
			}
			if pod.Annotations["example.com/owner"] != "payments" {
				t.Errorf("Pod annotations %v", pod.Annotations)
			}
			if pod.Spec.PriorityClassName != "codeport-critical" {
				t.Errorf("priorityClassName %q", pod.Spec.PriorityClassName)
			}
			spread := pod.Spec.TopologySpreadConstraints
			if len(spread) != 2 || spread[0].TopologyKey != "topology.kubernetes.io/zone" ||
				spread[0].WhenUnsatisfiable != corev1.DoNotSchedule || spread[0].MaxSkew != 1 ||
				fmt.Sprint(spread[0].LabelSelector.MatchLabels) != fmt.Sprint(selector) ||
				fmt.Sprint(spread[1].LabelSelector.MatchLabels) != "map[team:payments]" {
				t.Errorf("topologySpreadConstraints %+v", spread)
			}
			if pod.Spec.ServiceAccountName != c.serviceAccount {
				t.Errorf("Pods run as %q, want %q", pod.Spec.ServiceAccountName, c.serviceAccount)
			}
			sa := objs["ServiceAccount/"+c.serviceAccount]
			if sa == nil || sa.GetAnnotations()["iam.gke.io/gcp-service-account"] != "codeport@example.iam.gserviceaccount.com" {
				t.Fatalf("ServiceAccount %s: %v", c.serviceAccount, sa)
			}
			// The other components' ServiceAccounts keep their own (none).
			for _, other := range components {
				if other != c && len(objs["ServiceAccount/"+other.serviceAccount].GetAnnotations()) != 0 {
					t.Errorf("%s's annotations reached ServiceAccount %s", c.values, other.serviceAccount)
				}
			}

			for key := range selector {
				out, err := renderErr(t, c.values+".podLabels."+strings.ReplaceAll(key, ".", `\.`)+"=other")
				if err == nil || !strings.Contains(out, c.values+".podLabels may not set "+key) {
					t.Errorf("podLabels overriding %s: %v\n%s", key, err, out)
				}
			}
		})
	}
}

// TestPodValuesDefaults: by default each API spreads its replicas over nodes without ever
// leaving one Pending (ScheduleAnyway), counting its own Pods; the operator, one active replica,
// is not spread; nothing else is set, and the APIs' ServiceAccounts mount no credentials.
func TestPodValuesDefaults(t *testing.T) {
	t.Parallel()
	objs := render(t, "redis.url=redis://redis:6379/0", "api.production.replicas=2")
	for _, c := range components {
		pod := deployment(t, objs, c.deployment).Spec.Template
		spread := pod.Spec.TopologySpreadConstraints
		if c.values == "operator" {
			if len(spread) != 0 {
				t.Errorf("the operator spreads: %+v", spread)
			}
		} else if len(spread) != 1 || spread[0].MaxSkew != 1 || spread[0].TopologyKey != "kubernetes.io/hostname" ||
			spread[0].WhenUnsatisfiable != corev1.ScheduleAnyway || spread[0].LabelSelector == nil ||
			fmt.Sprint(spread[0].LabelSelector.MatchLabels) != fmt.Sprint(pod.Labels) {
			t.Errorf("%s: topologySpreadConstraints %+v", c.values, spread)
		}
		if pod.Spec.PriorityClassName != "" || len(pod.Annotations) != 0 || len(pod.Labels) != 3 {
			t.Errorf("%s: priorityClassName %q, annotations %v, labels %v", c.values, pod.Spec.PriorityClassName,
				pod.Annotations, pod.Labels)
		}
		if c.values == "operator" {
			continue
		}
		o := objs["ServiceAccount/"+c.serviceAccount]
		if o == nil {
			t.Fatalf("%s: no ServiceAccount %s", c.values, c.serviceAccount)
		}
		var sa corev1.ServiceAccount
		if err := runtimeConvert(o.Object, &sa); err != nil {
			t.Fatal(err)
		}
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken ||
			pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
			t.Errorf("%s mounts Kubernetes credentials", c.values)
		}
	}
	noSpread := deployment(t, render(t, "api.production.topologySpreadConstraints=null"), "codeport-production")
	if len(noSpread.Spec.Template.Spec.TopologySpreadConstraints) != 0 {
		t.Errorf("topologySpreadConstraints=null kept %v", noSpread.Spec.Template.Spec.TopologySpreadConstraints)
	}

	for name, set := range map[string]string{
		"unknown whenUnsatisfiable":  "api.production.topologySpreadConstraints[0].whenUnsatisfiable=Sometimes",
		"no topologyKey":             "operator.topologySpreadConstraints[0].maxSkew=1",
		"priority class not a name":  "operator.priorityClassName=Critical Stuff",
		"unknown ServiceAccount key": "api.sandbox.serviceAccount.name=other",
	} {
		if out, err := renderErr(t, set); err == nil {
			t.Errorf("%s accepted: %s\n%s", name, set, out)
		}
	}
}
