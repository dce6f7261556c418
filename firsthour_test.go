package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// TestErrorsSayCauseThenWhatToDo runs the binary as a newcomer would and checks the first line
// it writes to stderr, and its exit code: the cause first, once, then what to do.
func TestErrorsSayCauseThenWhatToDo(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	server, err := url.Parse(os.Getenv("TEST_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	// The test server has no TLS: with sslmode=prefer, pgx's first attempt is refused TLS.
	missing := *server
	missing.Path, missing.RawQuery = "/no_such_database", "sslmode=prefer"
	refused := *server
	refused.Host, refused.RawQuery = closedPort(t), ""
	apiServer := "https://" + closedPort(t)
	kubeconfig := writeKubeconfig(t, apiServer)
	home := t.TempDir()
	key := strings.Repeat("ab", 32)
	operator := []string{"operator", "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--database-url", db.URL, "--codes-key", key}
	codesFile := filepath.Join(t.TempDir(), "codes.txt")
	if err := os.WriteFile(codesFile, []byte("FIRSTHOUR-1\nFIRSTHOUR-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name      string
		args      []string
		env       []string
		code      int
		firstLine string
	}{
		{"unknown command", []string{"bogus"}, nil, 1, `codeport: unknown command "bogus" for "codeport"`},
		{"unknown migrate subcommand", []string{"migrate", "upp"}, nil, 1,
			`codeport: unknown command "upp" for "codeport migrate"; did you mean "up"? (see 'codeport migrate --help')`},
		{"unknown codes subcommand", []string{"codes", "bogus"}, nil, 1,
			`codeport: unknown command "bogus" for "codeport codes" (see 'codeport codes --help')`},
		{"a group alone prints its help", []string{"migrate"}, nil, 0, ""},
		{"database missing, TLS refused first", []string{"migrate", "status", "--database-url", missing.String()}, nil, 1,
			`codeport: cannot connect to database "no_such_database" on ` + server.Host + ` as user "` +
				server.User.Username() + `": database "no_such_database" does not exist; ` +
				"check --database-url (or CODEPORT_DATABASE_URL)"},
		{"database server down", []string{"migrate", "up"}, []string{"CODEPORT_DATABASE_URL=" + refused.String()}, 1,
			`codeport: cannot connect to database "` + strings.TrimPrefix(server.Path, "/") + `" on ` + refused.Host +
				` as user "` + server.User.Username() + `": connection refused; check --database-url (or CODEPORT_DATABASE_URL)`},
		{"kubeconfig missing", append(operator, "--kubeconfig", "/nonexistent/kubeconfig"), nil, 1,
			"codeport: kubeconfig /nonexistent/kubeconfig (--kubeconfig) does not exist; without --kubeconfig and " +
				"$KUBECONFIG the operator uses the in-cluster configuration, else " + home + "/.kube/config"},
		{"no kubeconfig anywhere", operator, nil, 1,
			"codeport: no Kubernetes configuration: not in a cluster (no in-cluster service account), " +
				"--kubeconfig and $KUBECONFIG unset, and " + home + "/.kube/config does not exist; pass --kubeconfig PATH"},
		{"operator without database connections", append(operator, "--database-max-conns", "0"), nil, 1,
			"codeport: --database-max-conns must be at least 1"},
		{"API server unreachable", operator, []string{"KUBECONFIG=" + kubeconfig}, 1,
			"codeport: cannot reach the Kubernetes API server at " + apiServer + ": connection refused"},
		{"codes for a product in no catalog", []string{"codes", "import", "--product", "12345678901234", codesFile},
			[]string{"CODEPORT_DATABASE_URL=" + db.URL, "CODEPORT_CODES_KEY=" + key}, 0,
			"warning: product 12345678901234 is in no catalog: no partner can order these codes until a Catalog " +
				"lists it (check --product)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runBinary(t, home, c.env, c.args...)
			first, _, _ := strings.Cut(stderr, "\n")
			// Components (serve, operator) log JSON only, their last error too: the line a person
			// reads is its msg.
			if component := c.args[0] == "operator" || c.args[0] == "serve"; component {
				var line struct{ Level, Msg string }
				if err := json.Unmarshal([]byte(first), &line); err != nil || line.Level != "ERROR" {
					t.Fatalf("%s's last error is not a JSON ERROR line: %s", c.args[0], first)
				}
				first = line.Msg
			}
			if code != c.code || first != c.firstLine {
				t.Errorf("exit %d, first line of stderr:\n%s\nwant exit %d and:\n%s\nstderr:\n%s",
					code, first, c.code, c.firstLine, stderr)
			}
		})
	}
}

// TestSMTPFromHelpShowsOneDefault: a flag whose default comes from the environment says so in
// its usage; a declared default would show as a second one (and would show the environment's
// value).
func TestSMTPFromHelpShowsOneDefault(t *testing.T) {
	t.Parallel()
	_, stdout, _ := runBinary(t, t.TempDir(), []string{"CODEPORT_SMTP_FROM=ops@example.com"}, "serve", "--help")
	for line := range strings.SplitSeq(stdout, "\n") {
		if strings.Contains(line, "--smtp-from") {
			if strings.Count(line, "(default") != 1 || strings.Contains(line, "ops@example.com") {
				t.Fatalf("--smtp-from help: %s", line)
			}
			return
		}
	}
	t.Fatalf("serve --help lacks --smtp-from:\n%s", stdout)
}

// TestDevLogsRequests: dev writes one short line for each request beside its banner.
func TestDevLogsRequests(t *testing.T) {
	t.Parallel()
	dev := startDevProcess(t, t.TempDir())
	dev.serves(t)
	line := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{3} sandbox GET /v2/catalog/products 200 \d+\.\dms partners/acme$`)
	poll.Until(t, time.Minute, "dev logged the request", func() (bool, string) {
		return line.MatchString(dev.Log()), dev.Log()
	})
	dev.stop(t)
}

// TestMakeRunStopsCleanlyOnInterrupt: Ctrl-C (SIGINT to the terminal's whole process group) on
// `make run` stops dev, which exits 0, so make reports no error. The binary is this test's own
// (BIN_DIR), and make does not rebuild it (-o build).
func TestMakeRunStopsCleanlyOnInterrupt(t *testing.T) {
	t.Parallel()
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Fatal("make is not installed: apt-get install make")
	}
	bin := t.TempDir()
	if err := os.Symlink(os.Args[0], filepath.Join(bin, "codeport")); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	run := testprocess.Start(t, &testprocess.Process{Name: "make run", Binary: makePath,
		Args: []string{"--no-print-directory", "-o", "build", "run", "BIN_DIR=" + bin,
			"DEV_FLAGS=--state-dir " + state + " --production-addr 127.0.0.1:0 --sandbox-addr 127.0.0.1:0"},
		Environ: childEnv(t.TempDir()), Env: []string{runMainEnv + "=1"}, Group: true})
	waitForDev(t, state, run.Log, run.Exited(), run.Wait)
	postmaster := postmasterPID(t, state)

	if err := run.SignalGroup(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = run.Wait()
	// make itself got the SIGINT too: once its recipe has ended, it ends by that signal, quietly.
	var exit *exec.ExitError
	interrupted := errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT
	if err != nil && !interrupted {
		t.Errorf("make run on SIGINT: %v", err)
	}
	if text := run.Log(); strings.Contains(text, "make: ***") || !strings.Contains(text, "codeport dev: stopped") {
		t.Errorf("make run on SIGINT did not stop cleanly:\n%s", text)
	}
	waitForExit(t, postmaster, "the PostgreSQL of make run")
}

// runBinary runs this test binary as codeport (TestMain) with args, HOME home and the
// environment's CODEPORT_ and Kubernetes variables replaced by env, and returns its exit code,
// stdout and stderr.
func runBinary(t *testing.T, home string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(append(childEnv(home), runMainEnv+"=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("run %v: %v", args, err)
	return 0, "", ""
}

// childEnv is this process's environment without what would let a child find a database, a
// codes key or a cluster other than the ones a test gives it, nor the variables of a make that
// runs the tests (a make started under it would prefix its lines with its level, make[2]), and
// with HOME home.
func childEnv(home string) []string {
	env := []string{"HOME=" + home}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "CODEPORT_") || strings.HasPrefix(name, "KUBERNETES_") ||
			strings.HasPrefix(name, "MAKE") || name == "MFLAGS" || name == "KUBECONFIG" || name == "HOME" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// closedPort is a loopback address nothing listens on: a port just released.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// writeKubeconfig writes a kubeconfig whose cluster is server.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	config := "apiVersion: v1\nkind: Config\ncurrent-context: test\n" +
		"clusters:\n- name: test\n  cluster:\n    server: " + strconv.Quote(server) + "\n" +
		"    insecure-skip-tls-verify: true\n" +
		"users:\n- name: test\n  user:\n    token: test\n" +
		"contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n"
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOperatorStartsAgainstAReachableAPIServer: the start-up probe lets the operator through to
// a kube-apiserver it can reach, with the kubeconfig named by --kubeconfig: it becomes ready.
func TestOperatorStartsAgainstAReachableAPIServer(t *testing.T) {
	t.Parallel()
	kubeconfig, _ := startKubeAPIServer(t)
	db := storetest.New(t)
	probes := closedPort(t)
	testprocess.Start(t, &testprocess.Process{Name: "operator", Binary: os.Args[0],
		Args: []string{"operator", "--kubeconfig", kubeconfig, "--database-url", db.URL,
			"--codes-key", strings.Repeat("ab", 32), "--metrics-bind-address", "0", "--health-probe-bind-address", probes},
		Environ: childEnv(t.TempDir()), Env: []string{runMainEnv + "=1"},
		ReadyURL: "http://" + probes + "/readyz", ReadyTimeout: 2 * time.Minute})
}
