package charts_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGlobalValuesForSubchartUse: as a subchart, codeport receives its parent's global values,
// which the schema must accept, while it still rejects every other unknown key.
func TestGlobalValuesForSubchartUse(t *testing.T) {
	t.Parallel()
	if out, err := renderErr(t, "global.imageRegistry=registry.example", "global.storageClass=fast"); err != nil {
		t.Fatalf("global values refused: %v\n%s", err, out)
	}
	out, err := renderErr(t, "globals.imageRegistry=registry.example")
	if err == nil || !strings.Contains(out, "globals") {
		t.Fatalf("an unknown top-level key next to global was accepted: %v\n%s", err, out)
	}

	// A parent chart with codeport in charts/ and globals of its own.
	parent := filepath.Join(t.TempDir(), "platform")
	if err := os.CopyFS(filepath.Join(parent, "charts", chart), os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: platform\nversion: 1.0.0\n",
		"values.yaml": "global:\n  imageRegistry: registry.example\n  labels: {team: payments}\n" +
			"codeport:\n  api:\n    sandbox:\n      enabled: false\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(parent, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err = helm(t, nil, "template", "platform", parent)
	if err != nil {
		t.Fatalf("codeport as a subchart with global values: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, o := range objects(t, out) {
		seen[o.GetKind()+"/"+o.GetName()] = true
	}
	if !seen["Deployment/platform-codeport-production"] || seen["Deployment/platform-codeport-sandbox"] {
		t.Fatalf("subchart rendered with the parent's values ignored: %v", seen)
	}
	out, err = helm(t, nil, "template", "platform", parent, "--set", "codeport.replicaz=2")
	if err == nil || !strings.Contains(out, "replicaz") {
		t.Fatalf("a typo in the subchart's values was accepted: %v\n%s", err, out)
	}
}
