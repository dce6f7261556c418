package controllers_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/controllers"
	"github.com/codeport/codeport/internal/test/poll"
)

// gauges gathers reg as "name{label=value,...}" -> value.
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestReadinessMetrics: an ApiKey waiting for a Partner that does not exist counts as not Ready,
// with an age that grows; once the Partner exists and every resource is Ready, the counts say
// so and the age is back to 0. The collector reads the operator's cache, limited to the test's
// namespace so that other tests' resources do not move its figures.
func TestReadinessMetrics(t *testing.T) {
	ns := namespace(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(controllers.NewReadinessCollector(env.mgr.GetCache(), ns))
	count := func(kind, ready string) string {
		return "codeport_operator_resources{kind=" + kind + ",ready=" + ready + "}"
	}
	age := func(kind string) string { return "codeport_operator_oldest_not_ready_seconds{kind=" + kind + "}" }

	create(t, apiKeyObj(ns, "early", "sandbox", v1alpha1.ApiKeyTypeAPIKey))
	poll.Until(t, timeout, "the waiting ApiKey counted as not Ready, for a while", func() (bool, string) {
		g := gauges(t, reg)
		return g[count("ApiKey", "false")] == 1 && g[count("ApiKey", "true")] == 0 && g[age("ApiKey")] >= 1,
			fmt.Sprint(g)
	})
	if g := gauges(t, reg); g[count("Partner", "true")]+g[count("Partner", "false")]+g[count("Partner", "unknown")] != 0 ||
		g[age("Partner")] != 0 {
		t.Fatalf("Partners counted in a namespace without one: %v", g)
	}

	onboard(t, ns)
	poll.Until(t, timeout, "every resource Ready", func() (bool, string) {
		g := gauges(t, reg)
		return g[count("ApiKey", "true")] == 3 && g[count("ApiKey", "false")] == 0 && g[age("ApiKey")] == 0 &&
			g[count("Partner", "true")] == 1 && g[count("Catalog", "true")] == 1, fmt.Sprint(g)
	})
}
