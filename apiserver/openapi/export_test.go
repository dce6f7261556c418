package openapi

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"
)

// rendererLock records which release of the renderer is embedded and its digest: only the tests
// that keep the two in step read it.
//
//go:embed ui/scalar.lock
var rendererLock string

// RendererRelease is the package and version of the embedded renderer, from its lock file.
func RendererRelease() (pkg, version string) {
	return lockField("package"), lockField("version")
}

// VerifyRenderer checks the embedded renderer against the digest its lock file records.
func VerifyRenderer() error {
	raw, err := Renderer()
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	got, want := hex.EncodeToString(sum[:]), lockField("sha256")
	if got != want {
		return fmt.Errorf("embedded renderer has sha256 %s, ui/scalar.lock records %q", got, want)
	}
	return nil
}

func lockField(name string) string {
	for line := range strings.SplitSeq(rendererLock, "\n") {
		if value, ok := strings.CutPrefix(line, name+" "); ok {
			return value
		}
	}
	return ""
}
