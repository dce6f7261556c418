package charts_test

import (
	"os/exec"
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
