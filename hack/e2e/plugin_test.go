//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeport/codeport/internal/kubectlplugin"
)

// checkPlugin runs `kubectl codeport status` and `report` against the cluster, as a platform
// engineer would with the admin kubeconfig: the screen shows the samples' partner with the key
// the test holds, and the bundle has real logs of the operator and the APIs, `migrate status`
// from an API Pod, and neither of the partner's keys.
//
//nolint:thelper // a phase of the end-to-end test, not a helper: a failure names its own line
func checkPlugin(ctx context.Context, t *testing.T, e env, m *mission) {
	plugin := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		cmd := kubectlplugin.NewCommand(&out, &errOut)
		cmd.SetArgs(append([]string{"--kubeconfig", e.kubeconfig, "-n", partnersNS}, args...))
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("kubectl codeport %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.String()
	}
	productionKey, sandboxKey := *m.productionKey.Load(), *m.sandboxKey.Load()

	var st kubectlplugin.Status
	if err := json.Unmarshal([]byte(plugin("status", "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Namespaces) != 1 {
		t.Fatalf("status: %+v", st)
	}
	prefixes := map[string]bool{}
	for _, k := range st.Namespaces[0].APIKeys {
		prefixes[k.Prefix] = true
	}
	for _, key := range []string{productionKey, sandboxKey} {
		if !prefixes[key[:12]] {
			t.Errorf("status shows the key prefixes %v, not %s", prefixes, key[:12])
		}
	}
	if len(st.Namespaces[0].Partners) == 0 || len(st.Namespaces[0].Wallets) == 0 {
		t.Errorf("status: %+v", st.Namespaces[0])
	}
	t.Logf("kubectl codeport status:\n%s", plugin("status"))

	bundle := filepath.Join(t.TempDir(), "bundle.tar.gz")
	plugin("report", "--system-namespace", namespace, "-o", bundle)
	files := unpack(ctx, t, e, bundle)
	logs := map[string]int{}
	for name, data := range files {
		for _, key := range []string{productionKey, sandboxKey} {
			if bytes.Contains(data, []byte(key)) || bytes.Contains(data, []byte(key[12:len(key)-6])) {
				t.Errorf("%s holds a partner's key", name)
			}
		}
		if strings.HasPrefix(name, "codeport-report/logs/") && len(data) > 0 {
			logs[strings.Split(name, "/")[2]] = len(data)
		}
	}
	for _, component := range []string{release + "-operator", release + "-production", release + "-sandbox"} {
		found := false
		for pod := range logs {
			found = found || strings.Contains(pod, component)
		}
		if !found {
			t.Errorf("the bundle has no log of a %s Pod: %v\nNOTES.txt:\n%s", component, logs,
				string(files["codeport-report/NOTES.txt"]))
		}
	}
	if s := string(files["codeport-report/migrate-status.txt"]); !strings.Contains(s, "VERSION") {
		t.Errorf("the bundle has no migrate status:\n%s\nNOTES.txt:\n%s", s, string(files["codeport-report/NOTES.txt"]))
	}
}

// unpack extracts a bundle as a support engineer would, with tar, and returns each file's
// content by its path in the archive.
func unpack(ctx context.Context, t *testing.T, e env, bundle string) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	if _, err := run(ctx, e, "tar", "-xzf", bundle, "-C", dir); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		name, err := filepath.Rel(dir, path)
		files[filepath.ToSlash(name)] = data
		return err
	})
	if err != nil {
		t.Fatalf("unpack %s: %v", bundle, err)
	}
	return files
}
