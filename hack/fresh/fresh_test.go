package fresh

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/test/testprocess"
)

// scenario is one install step checked as a fresh machine would run it.
type scenario struct {
	name string
	// purge lists dpkg name patterns: every installed package they match is purged in the
	// sandbox before the script runs, as if the machine never had it.
	purge []string
	// want is what the script must ask apt-get to install, in any order.
	want []string
	// script runs in the sandbox from the repository's root: the step under test, then checks of
	// what it resolved. It fails (non-zero) when a check fails, saying which.
	script func(t *testing.T) string
}

// absent is the shell check, run first in each scenario, that the sandbox really lacks a
// command: a check that passed on a machine that kept it would prove nothing.
const absent = `gone() {
  for c in "$@"; do if command -v "$c" >/dev/null; then echo "still installed: $c"; exit 1; fi; done
}
`

var scenarios = []scenario{{
	// hack/e2e/cluster.sh up: containerd, runc, the CNI plugins, iptables, conntrack, ipset and
	// mmdebstrap (hack/e2e/deps.sh), then the directory of the CNI plugins and of PostgreSQL's
	// server.
	name:  "e2e node",
	purge: []string{"containerd", "runc", "containernetworking-plugins", "iptables", "conntrack", "ipset", "mmdebstrap"},
	want:  []string{"containerd", "runc", "containernetworking-plugins", "iptables", "conntrack", "ipset", "mmdebstrap"},
	script: func(*testing.T) string {
		return absent + `gone containerd ctr runc iptables conntrack ipset mmdebstrap
for d in /usr/lib/cni /opt/cni/bin; do
  if [[ -e "$d/bridge" ]]; then echo "still installed: $d/bridge"; exit 1; fi
done
paths="$(hack/e2e/cluster.sh paths)"
echo "resolved: ${paths//$'\n'/ }"
eval "${paths}"
for p in bridge host-local loopback portmap; do
  [[ -x "${CNI_BIN}/${p}" ]] || { echo "CNI_BIN=${CNI_BIN} has no ${p} plugin"; exit 1; }
done
[[ -x "${PG_BINDIR}/initdb" ]] || { echo "PG_BINDIR=${PG_BINDIR} has no initdb"; exit 1; }
for c in containerd ctr runc iptables conntrack ipset mmdebstrap; do
  command -v "$c" >/dev/null || { echo "not installed: $c"; exit 1; }
done
`
	},
}, {
	// hack/deps.sh, then hack/testenv.sh starting its throwaway servers from what it installed.
	name:  "test servers",
	purge: []string{"postgresql*", "redis-server", "redis-tools"},
	want:  []string{"postgresql", "postgresql-contrib", "postgresql-client", "redis-server"},
	script: func(t *testing.T) string {
		t.Helper()
		addrs, err := testprocess.FreeAddrs(2)
		if err != nil {
			t.Fatal(err)
		}
		return absent + fmt.Sprintf(`gone psql pg_restore redis-server redis-cli
if compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then echo "still installed: initdb"; exit 1; fi
hack/deps.sh
state="$(mktemp -d)"
exports="$(TESTENV_REUSE=0 XDG_CACHE_HOME="${state}" CODEPORT_TEST_PG_PORT=%s CODEPORT_TEST_REDIS_PORT=%s \
  hack/testenv.sh)"
echo "resolved: ${exports//$'\n'/ }"
eval "${exports}"
psql "${TEST_DATABASE_URL}" -Atqc 'select 1' >/dev/null || { echo "no PostgreSQL at ${TEST_DATABASE_URL}"; exit 1; }
[[ "$(redis-cli -u "${TEST_REDIS_URL}" ping)" == PONG ]] || { echo "no Redis at ${TEST_REDIS_URL}"; exit 1; }
compgen -G '/usr/lib/postgresql/*/bin/pg_restore' >/dev/null || { echo "no pg_restore beside the server"; exit 1; }
`, port(t, addrs[0]), port(t, addrs[1]))
	},
}}

// TestScriptsInstallBeforeTheyLook runs each scenario in a sandbox with its packages purged.
func TestScriptsInstallBeforeTheyLook(t *testing.T) {
	requireRoot(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The scenarios share the cache of downloaded packages, whose lock apt-get holds while it
	// installs: they run one after the other.
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			report := t.TempDir()
			purge := installedPackages(t, sc.purge)
			args := []string{"hack/fresh/sandbox.sh", "--report", report}
			for _, p := range purge {
				args = append(args, "--purge", p)
			}
			args = append(args, "--", "bash", "-euo", "pipefail", "-c", sc.script(t))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, args[0], args[1:]...)
			cmd.Dir = root
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			runErr := cmd.Run()
			t.Logf("purged %v; output:\n%s", purge, out.String())
			if runErr != nil {
				t.Fatalf("%s on a fresh machine: %v", sc.name, runErr)
			}
			requested := lines(t, filepath.Join(report, "requested"))
			checkRequested(t, requested, sc.want)
		})
	}
}

// checkRequested fails unless every wanted package was asked for, once, and anything else asked
// for is missing on this machine too (the script rightly asked for it: `make deps` installs
// them before the tests).
func checkRequested(t *testing.T, requested, want []string) {
	t.Helper()
	for _, w := range want {
		if n := count(requested, w); n != 1 {
			t.Errorf("apt-get was asked for %s %d times, want once (asked for %v)", w, n, requested)
		}
	}
	for _, r := range requested {
		if !slices.Contains(want, r) && installed(r) {
			t.Errorf("apt-get was asked for %s, which was installed (asked for %v)", r, requested)
		}
	}
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

// installedPackages lists the installed packages matching dpkg's name patterns.
func installedPackages(t *testing.T, patterns []string) []string {
	t.Helper()
	var out []string
	for _, pattern := range patterns {
		// dpkg-query exits non-zero when a pattern matches nothing.
		b, _ := exec.Command("dpkg-query", "-W", "-f", "${db:Status-Status} ${Package}\n", pattern).Output()
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "installed "); ok && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

func installed(pkg string) bool {
	b, err := exec.Command("dpkg-query", "-W", "-f", "${db:Status-Status}", pkg).Output()
	return err == nil && string(b) == "installed"
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// requireRoot: the sandbox mounts and runs dpkg, which needs root, as make test's install step
// does. CI runs as root, so there the test always runs.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("the fresh-machine check needs root (mount namespaces, dpkg), and CI runs as root")
	}
	t.Skip("the fresh-machine check needs root (mount namespaces, dpkg); CI runs it")
}
