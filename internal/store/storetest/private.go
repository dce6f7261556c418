package storetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeport/codeport/internal/test/testprocess"
)

// PrivateServer is a PostgreSQL server of one test alone, for what no shared server may suffer:
// being stopped and started, or settings that would stall every other package's commits.
type PrivateServer struct {
	t                  testing.TB
	bindir, data, port string
	runAs              []string
}

// BinDir is the directory of the installed PostgreSQL's programs, as pg_config names it.
func BinDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "pg_config", "--bindir").Output()
	if err != nil {
		return "", fmt.Errorf("pg_config --bindir: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// StartPrivateServer initialises and starts a server on a free loopback port, with each of
// settings ("name = 'value'") written to its postgresql.conf (so that ALTER SYSTEM can still
// change it), and stops it when the test ends.
func StartPrivateServer(t testing.TB, settings ...string) *PrivateServer {
	t.Helper()
	bindir, err := BinDir(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir(): its parent is private to the user running the test, and the server, run as
	// user postgres when that is root, must reach its data directory.
	dir, err := os.MkdirTemp("", "codeport-pg-") //nolint:usetesting // see above
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	_, port, _ := net.SplitHostPort(testprocess.Addr(t))
	p := &PrivateServer{t: t, bindir: bindir, data: filepath.Join(dir, "data"), port: port}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		p.runAs = []string{"runuser", "-u", "postgres", "--"}
		//nolint:gosec // the server, run as user postgres, must reach its data directory
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	p.run("initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "--no-instructions")
	conf := "fsync = off\n" + strings.Join(settings, "\n") + "\n"
	f, err := os.OpenFile(filepath.Join(p.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(conf); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(func() { p.run("pg_ctl", "-D", p.data, "-m", "immediate", "stop") })
	return p
}

func (p *PrivateServer) run(tool string, args ...string) {
	p.t.Helper()
	cmd := append(append([]string{}, p.runAs...), append([]string{filepath.Join(p.bindir, tool)}, args...)...)
	//nolint:gosec // the server's own tools, from pg_config
	if out, err := exec.CommandContext(context.Background(), cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
		p.t.Fatalf("%s: %v\n%s", tool, err, out)
	}
}

// Start starts the server again after Stop.
func (p *PrivateServer) Start() {
	p.t.Helper()
	p.run("pg_ctl", "-D", p.data, "-w", "-l", p.LogPath(), "-o",
		fmt.Sprintf("-h 127.0.0.1 -p %s -k /tmp", p.port), "start")
}

// Stop shuts the server down (fast: sessions are ended, nothing is lost).
func (p *PrivateServer) Stop() {
	p.t.Helper()
	p.run("pg_ctl", "-D", p.data, "-m", "fast", "-w", "stop")
}

// URL connects to the server's postgres database as its superuser.
func (p *PrivateServer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", p.port)
}

// LogPath is the server's log file.
func (p *PrivateServer) LogPath() string { return filepath.Join(p.data, "log") }
