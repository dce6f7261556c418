package charts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestHelmRendersWithoutKubeVersion: the helm the tests use is built as a released helm is
// (hack/helm.sh), so `helm template` without --kube-version assumes a current Kubernetes and
// the chart's kubeVersion accepts it, as it does for a user's helm.
func TestHelmRendersWithoutKubeVersion(t *testing.T) {
	t.Parallel()
	// Not through helm(): it adds --kube-version to every template.
	out, err := exec.Command(helmBinary(t), "template", "codeport", chart).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template without --kube-version: %v\n%s", err, out)
	}
}

// TestMoreThanOneReplicaAsksForRedis: an API with more than one replica (or autoscaled) and no
// Redis fails with a message that says what to set, not the schema's "'allOf' failed".
func TestMoreThanOneReplicaAsksForRedis(t *testing.T) {
	t.Parallel()
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

// TestNotesNameEverySampleAndNoExternalURL: the notes printed after install show how to apply
// every sample of config/samples from a clone, and link to nothing outside the installation.
func TestNotesNameEverySampleAndNoExternalURL(t *testing.T) {
	t.Parallel()
	notes, err := os.ReadFile(filepath.Join(chart, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(notes)
	if strings.Contains(text, "://") {
		t.Errorf("NOTES.txt holds a URL:\n%s", text)
	}
	if !strings.Contains(text, "kubectl apply -k config/samples") {
		t.Errorf("NOTES.txt does not apply config/samples:\n%s", text)
	}
	samples, err := filepath.Glob("../config/samples/*.yaml")
	if err != nil || len(samples) == 0 {
		t.Fatalf("samples: %v %v", samples, err)
	}
	for _, path := range samples {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Kind string }
		if err := yaml.Unmarshal([]byte(strings.SplitN(string(raw), "\n---", 2)[0]), &doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc.Kind != "Kustomization" && !strings.Contains(text, doc.Kind) {
			t.Errorf("NOTES.txt does not name the %s of %s", doc.Kind, filepath.Base(path))
		}
	}
}
