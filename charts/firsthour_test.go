package charts_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestHelmRendersWithoutKubeVersion: the helm the tests use is built as a released helm is
// (hack/helm.sh), so `helm template` without --kube-version assumes a current Kubernetes and
// the chart's kubeVersion accepts it, as it does for a user's helm.
func TestHelmRendersWithoutKubeVersion(t *testing.T) {
	// Not through helm(): it adds --kube-version to every template.
	out, err := exec.Command(helmBinary(t), "template", "codeport", chart).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template without --kube-version: %v\n%s", err, out)
	}
}

// TestMoreThanOneReplicaAsksForRedis: an API with more than one replica (or autoscaled) and no
// Redis fails with a message that says what to set, not the schema's "'allOf' failed".
func TestMoreThanOneReplicaAsksForRedis(t *testing.T) {
	for _, c := range []struct{ set, env string }{
		{"api.production.replicas=3", "production"},
		{"api.sandbox.autoscaling.enabled=true", "sandbox"},
	} {
		out, err := helm(t, nil, "template", "codeport", chart, "--set", c.set)
		want := "api." + c.env + " runs more than one replica: set redis.url or redis.existingSecret " +
			"so that rate limits are shared between replicas"
		if err == nil || !strings.Contains(out, want) || strings.Contains(out, "allOf") {
			t.Errorf("--set %s: %v\n%s\nwant: %s", c.set, err, out, want)
		}
	}
	if out, err := helm(t, nil, "template", "codeport", chart, "--set", "api.production.replicas=3",
		"--set", "redis.url=redis://redis:6379/0"); err != nil {
		t.Errorf("three replicas with Redis: %v\n%s", err, out)
	}
}
