package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestMakeBenchHistoryMeasuresEverySize: make bench-history, run bare, measures at the bench's
// default sizes of history, not only the first of them (a default written inside make's
// $(or ...) is split at its commas).
func TestMakeBenchHistoryMeasuresEverySize(t *testing.T) {
	cmd := exec.Command("make", "--no-print-directory", "-n", "-C", "../..", "bench-history")
	// Run as a user would: no sizes of their own, nothing inherited from a make above.
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "HISTORY_POINTS", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n bench-history: %v\n%s", err, out)
	}
	var points string
	if m := regexp.MustCompile(`-history-points\s+(\S+)`).FindSubmatch(out); m != nil {
		points = string(m[1])
	}
	if points != defaultHistoryPoints {
		t.Fatalf("make bench-history passes -history-points %q, want %q:\n%s", points, defaultHistoryPoints, out)
	}
}
