package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUninstallDocsNameTheLease: the uninstall steps delete the Lease the operator elects its
// leader with, by name.
func TestUninstallDocsNameTheLease(t *testing.T) {
	docs, err := os.ReadFile(filepath.Join("docs", "operator.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "kubectl -n codeport-system delete lease " + leaderElectionID; !strings.Contains(string(docs), want) {
		t.Errorf("docs/operator.md lacks %q", want)
	}
}
