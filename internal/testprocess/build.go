package testprocess

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Package is the import path of the codeport binary.
const Package = "github.com/codeport/codeport"

// Build compiles the codeport binary into dir, with the race detector when race is set, and
// returns its path.
func Build(ctx context.Context, dir string, race bool) (string, error) {
	name := "codeport"
	args := []string{"build", "-o"}
	if race {
		name = "codeport-race"
	}
	args = append(args, filepath.Join(dir, name))
	if race {
		args = append(args, "-race")
	}
	//nolint:gosec // the go command on this module's own package, into a directory the caller owns
	out, err := exec.CommandContext(ctx, "go", append(args, Package)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", Package, err, out)
	}
	return filepath.Join(dir, name), nil
}

// builds holds the binaries this test binary built. It is package state on purpose: a build
// takes seconds and every test of a package starting a process would otherwise pay it again.
var builds = struct {
	sync.Mutex
	dir   string
	paths map[bool]string
}{paths: map[bool]string{}}

// dirPrefix names the directories the builds go to; the PID after it says whose each is.
const dirPrefix = "codeport-testprocess-"

// Binary is the codeport binary, built on the first call of this test binary's run into a
// directory of its own; Race is the same with the race detector.
func Binary(t testing.TB) string { t.Helper(); return binary(t, false) }

// Race is Binary built with -race.
func Race(t testing.TB) string { t.Helper(); return binary(t, true) }

func binary(t testing.TB, race bool) string {
	t.Helper()
	builds.Lock()
	defer builds.Unlock()
	if path, ok := builds.paths[race]; ok {
		return path
	}
	if builds.dir == "" {
		// A test binary has no hook that runs after its last test, so a run's directory
		// outlives it; the next run removes those whose process is gone.
		removeStaleBuilds()
		dir, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			t.Fatalf("build directory: %v", err)
		}
		builds.dir = dir
	}
	path, err := Build(context.Background(), builds.dir, race)
	if err != nil {
		t.Fatal(err)
	}
	builds.paths[race] = path
	return path
}

func removeStaleBuilds() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		pid, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(dir), dirPrefix), "-")
		if !ok {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", pid)); os.IsNotExist(err) {
			_ = os.RemoveAll(dir)
		}
	}
}
