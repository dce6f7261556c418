package testfixture

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WriteCodes writes n codes, prefix-0000 on, one a line as `codeport codes import` reads them, to
// prefix.txt in dir, and returns its path.
func WriteCodes(dir, prefix string, n int) (string, error) {
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, "%s-%04d\n", prefix, i)
	}
	path := filepath.Join(dir, prefix+".txt")
	if err := os.WriteFile(path, []byte(lines.String()), 0o600); err != nil {
		return "", fmt.Errorf("write codes: %w", err)
	}
	return path, nil
}
