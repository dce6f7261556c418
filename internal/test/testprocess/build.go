package testprocess

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Package is the import path of the codeport binary.
const Package = "github.com/codeport/codeport"

// Build compiles the codeport binary into dir and returns its path.
func Build(ctx context.Context, dir string) (string, error) {
	path := filepath.Join(dir, "codeport")
	//nolint:gosec // the go command on this module's own package, into a directory the caller owns
	out, err := exec.CommandContext(ctx, "go", "build", "-o", path, Package).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", Package, err, out)
	}
	return path, nil
}

// Binary is the codeport binary of this checkout.
//
// It lives in one directory per checkout under the user's cache directory rather than in a
// test's own: go build leaves a binary whose build inputs have not changed as it is, so every test
// package of a run, and every later run, shares one link (seconds of CPU each) instead of
// repeating it. A file lock makes concurrent test binaries build one after the other; the
// binary is never rebuilt while a test runs it unless the sources changed under the run.
func Binary(t testing.TB) string {
	t.Helper()
	dir, err := checkoutBuildDir()
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := lockFile(filepath.Join(dir, "build.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	path, err := Build(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// checkoutBuildDir is the build directory of the checkout the tests run in, named by a digest of
// its go.mod's path so that two checkouts of different sources never share a binary.
func checkoutBuildDir() (string, error) {
	out, err := exec.CommandContext(context.Background(), "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the codeport module (go env GOMOD is %q)", gomod)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cache directory for test binaries: %w", err)
	}
	sum := sha256.Sum256([]byte(gomod))
	dir := filepath.Join(cache, "codeport", "testbin", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("test binary directory: %w", err)
	}
	return dir, nil
}

// lockFile takes an exclusive lock on path, waiting for it, and returns its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open build lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("take build lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
