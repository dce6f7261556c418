package controllers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
)

// readinessKinds are the kinds whose Ready condition the readiness gauges report, by the kind
// label they carry.
var readinessKinds = []struct {
	kind string
	list func() client.ObjectList
}{
	{"Partner", func() client.ObjectList { return &v1alpha1.PartnerList{} }},
	{"Catalog", func() client.ObjectList { return &v1alpha1.CatalogList{} }},
	{"ApiKey", func() client.ObjectList { return &v1alpha1.ApiKeyList{} }},
	{"Wallet", func() client.ObjectList { return &v1alpha1.WalletList{} }},
	{"WalletTopUp", func() client.ObjectList { return &v1alpha1.WalletTopUpList{} }},
}

// readinessCollector reports, at scrape time from the manager's cache (no API server request),
// how many resources of each kind are Ready and how long the longest-waiting one has not been.
// A stuck resource then shows as an age that grows, per kind; which one it is, kubectl says.
// Labels are bounded by the five kinds.
type readinessCollector struct {
	reader    client.Reader
	namespace string
	now       func() time.Time

	resources *prometheus.Desc
	notReady  *prometheus.Desc
}

// newReadinessCollector reads through reader, in namespace ("" for every namespace the cache
// holds).
func newReadinessCollector(reader client.Reader, namespace string) *readinessCollector {
	return &readinessCollector{reader: reader, namespace: namespace, now: time.Now,
		resources: prometheus.NewDesc("codeport_operator_resources",
			"Resources by kind and Ready condition status (true, false, unknown: no Ready condition yet "+
				"or status Unknown).", []string{"kind", "ready"}, nil),
		notReady: prometheus.NewDesc("codeport_operator_oldest_not_ready_seconds",
			"How long the resource of this kind that has been not Ready longest has been so (since its "+
				"Ready condition last changed, or since creation without one); 0 when all are Ready.",
			[]string{"kind"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *readinessCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.resources
	ch <- c.notReady
}

// Collect implements prometheus.Collector. A kind whose list fails (the cache not synced yet)
// is left out of this scrape rather than reported as empty, which would read as healthy.
func (c *readinessCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := c.now()
	for _, k := range readinessKinds {
		list := k.list()
		if err := c.reader.List(ctx, list, client.InNamespace(c.namespace)); err != nil {
			ctrl.Log.WithName("metrics").Error(err, "list resources for the readiness gauges", "kind", k.kind)
			continue
		}
		counts := map[string]int{"true": 0, "false": 0, "unknown": 0}
		var oldest time.Duration
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			obj, ok := o.(client.Object)
			if !ok {
				return nil
			}
			ready, since := readiness(obj)
			counts[ready]++
			if ready != "true" && !notReadyByDesign(obj) {
				oldest = max(oldest, now.Sub(since))
			}
			return nil
		})
		for _, ready := range []string{"true", "false", "unknown"} {
			ch <- prometheus.MustNewConstMetric(c.resources, prometheus.GaugeValue, float64(counts[ready]), k.kind, ready)
		}
		ch <- prometheus.MustNewConstMetric(c.notReady, prometheus.GaugeValue, oldest.Seconds(), k.kind)
	}
}

// readiness is obj's Ready status as a label value and when it took it: the condition's last
// transition, or the object's creation while it has none.
func readiness(obj client.Object) (ready string, since time.Time) {
	conditions := conditionsOf(obj)
	var c *metav1.Condition
	if conditions != nil {
		c = meta.FindStatusCondition(*conditions, v1alpha1.ConditionReady)
	}
	switch {
	case c == nil:
		return "unknown", obj.GetCreationTimestamp().Time
	case c.Status == metav1.ConditionTrue:
		return "true", c.LastTransitionTime.Time
	case c.Status == metav1.ConditionFalse:
		return "false", c.LastTransitionTime.Time
	}
	return "unknown", c.LastTransitionTime.Time
}

// notReadyByDesign tells a resource that is not Ready because its spec says so (a Catalog
// outside its validity window, scheduled or expired) from one stuck on a fault: it is counted,
// but does not age the oldest-not-ready gauge its alert reads.
func notReadyByDesign(obj client.Object) bool {
	conditions := conditionsOf(obj)
	if conditions == nil {
		return false
	}
	c := meta.FindStatusCondition(*conditions, v1alpha1.ConditionReady)
	return c != nil && c.Reason == v1alpha1.ReasonOutsideValidityWindow
}
