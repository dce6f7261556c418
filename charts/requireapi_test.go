package charts_test

import (
	"strings"
	"testing"
)

// monitoringAPI tells helm template that the Prometheus Operator's CRDs are there.
const monitoringAPI = "--api-versions=monitoring.coreos.com/v1"

// TestOptInNeedsItsAPI: a value whose objects are of another project's kinds renders them when
// their API is visible, and otherwise stops the render with the --api-versions flag that makes it
// visible, so that helm template, Argo CD and Flux, which render without the cluster's APIs,
// never install a release that silently lacks its monitoring (or its database). Off, the value
// needs nothing.
func TestOptInNeedsItsAPI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value, api, kind string
	}{
		{"serviceMonitor.enabled", "monitoring.coreos.com/v1", "ServiceMonitor"},
		{"prometheusRules.enabled", "monitoring.coreos.com/v1", "PrometheusRule"},
		{"database.cnpg.enabled", "postgresql.cnpg.io/v1", "Cluster"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Parallel()
			out, err := renderErr(t, tc.value+"=true")
			if err == nil {
				t.Fatalf("%s rendered without %s:\n%s", tc.value, tc.api, out)
			}
			for _, want := range []string{tc.value, "--api-versions " + tc.api} {
				if !strings.Contains(out, want) {
					t.Errorf("the error does not say %q:\n%s", want, out)
				}
			}
			if n := len(ofKind(render(t, tc.value+"=true", "--api-versions="+tc.api), tc.kind)); n == 0 {
				t.Errorf("%s with %s rendered no %s", tc.value, tc.api, tc.kind)
			}
			if n := len(ofKind(render(t, tc.value+"=false"), tc.kind)); n != 0 {
				t.Errorf("%s=false rendered %d %s", tc.value, n, tc.kind)
			}
		})
	}
}
