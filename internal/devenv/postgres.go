package devenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	embeddedpostgres "github.com/fergusstrange/embedded-postgres"
)

// EmbeddedPostgres is a PostgreSQL server private to `codeport dev`, started from the PostgreSQL
// binaries installed on the machine (nothing is downloaded). Its data persists in the state
// directory, so orders and balances survive restarts of `codeport dev`.
type EmbeddedPostgres struct {
	server *embeddedpostgres.EmbeddedPostgres
	URL    string
}

// unprivilegedUser is who runs PostgreSQL when codeport dev runs as root: postgres refuses root.
const unprivilegedUser = "postgres"

// StartEmbeddedPostgres starts (or resumes) the server whose files live under stateDir, writing
// the server's output to pgLog and warnings for dev's user to log. The caller holds the
// state directory's lock (LockStateDir): a server found running there was left by a dev that
// died, and is stopped first.
func StartEmbeddedPostgres(stateDir string, pgLog io.Writer, log *slog.Logger) (*EmbeddedPostgres, error) {
	bindir, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	stateDir, err = filepath.Abs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	binaries := filepath.Dir(bindir)
	dataDir := dataDirOf(stateDir)
	runtimeDir := filepath.Join(stateDir, "postgres", "runtime")
	if err := os.MkdirAll(filepath.Dir(dataDir), 0o750); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	if os.Geteuid() == 0 {
		// embedded-postgres executes <binaries>/bin/{initdb,pg_ctl}: point it at wrappers that
		// drop to an unprivileged user and hand that user the directories it needs.
		binaries, err = rootWrappers(stateDir, bindir, runtimeDir, dataDir)
		if err != nil {
			return nil, err
		}
		if err := handOver(stateDir, filepath.Join(stateDir, "postgres")); err != nil {
			return nil, err
		}
	} else if filepath.Base(bindir) != "bin" {
		return nil, fmt.Errorf("unexpected PostgreSQL layout: %s is not a bin directory", bindir)
	}
	// pg_ctl start would refuse the data directory while that server holds it.
	if err := stopLeftover(stateDir, log); err != nil {
		return nil, err
	}

	cfg := embeddedpostgres.DefaultConfig().
		// The version only decides whether an existing data directory is reused; it must name
		// the installed major version or every start would wipe the data.
		Version(embeddedpostgres.PostgresVersion(fmt.Sprintf("%d.0.0", versionOf(bindir)))).
		Port(port).
		Username("codeport").Password("codeport").Database("codeport").
		BinariesPath(binaries).
		RuntimePath(runtimeDir).
		DataPath(dataDir).
		StartTimeout(60 * time.Second).
		StartParameters(map[string]string{"unix_socket_directories": "/tmp", "listen_addresses": "127.0.0.1"}).
		Logger(pgLog)
	server := embeddedpostgres.NewDatabase(cfg)
	if err := server.Start(); err != nil {
		return nil, fmt.Errorf("start embedded PostgreSQL: %w", err)
	}
	return &EmbeddedPostgres{
		server: server,
		URL:    fmt.Sprintf("postgres://codeport:codeport@127.0.0.1:%d/codeport?sslmode=disable", port),
	}, nil
}

// Stop shuts the server down cleanly.
func (p *EmbeddedPostgres) Stop() error {
	if err := p.server.Stop(); err != nil {
		return fmt.Errorf("stop embedded PostgreSQL: %w", err)
	}
	return nil
}

// dataDirOf is the server's data directory in stateDir.
func dataDirOf(stateDir string) string {
	return filepath.Join(stateDir, "postgres", "data")
}

// wrappersDir holds, when dev runs as root, wrappers that run PostgreSQL's tools as the
// unprivileged user, in a bin directory as embedded-postgres expects.
func wrappersDir(stateDir string) string {
	return filepath.Join(stateDir, "postgres", "bin-wrappers")
}

// pgCtlOf is the pg_ctl that manages stateDir's server: as root, the wrapper StartEmbeddedPostgres
// wrote, since pg_ctl refuses to run as root.
func pgCtlOf(stateDir string) (string, error) {
	if os.Geteuid() == 0 {
		return filepath.Join(wrappersDir(stateDir), "bin", "pg_ctl"), nil
	}
	bindir, err := postgresBinDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(bindir, "pg_ctl"), nil
}

// stopLeftover stops the server running on stateDir's data directory, if any: the caller holds
// the state directory's lock, so the dev that started it is gone. A fast shutdown (sessions
// ended, a checkpoint written) comes first; should it not finish in time, an immediate one
// (crash recovery at the next start, no data lost).
func stopLeftover(stateDir string, log *slog.Logger) error {
	dataDir := dataDirOf(stateDir)
	pid := runningPostmaster(dataDir)
	if pid == 0 {
		return nil
	}
	log.Warn("stopping the embedded PostgreSQL of a codeport dev that ended without stopping it",
		slog.Int("pid", pid), slog.String("data_dir", dataDir))
	pgCtl, err := pgCtlOf(stateDir)
	if err != nil {
		return fmt.Errorf("stop embedded PostgreSQL (pid %d): %w", pid, err)
	}
	var failures []string
	for _, mode := range []string{"fast", "immediate"} {
		//nolint:gosec // pg_ctl of the installed PostgreSQL, or dev's wrapper of it
		stop := exec.CommandContext(context.Background(), pgCtl, "stop", "-D", dataDir, "-m", mode, "-w", "-t", "60")
		out, err := stop.CombinedOutput()
		if runningPostmaster(dataDir) == 0 {
			return nil
		}
		failures = append(failures, fmt.Sprintf("%s: %v: %s", mode, err, bytes.TrimSpace(out)))
	}
	return fmt.Errorf("stop the embedded PostgreSQL (pid %d) a codeport dev left running in %s: %s",
		pid, dataDir, strings.Join(failures, "; "))
}

// runningPostmaster returns the PID of the server that holds dataDir, 0 when none does. The PID
// comes from postmaster.pid, which a server killed outright leaves behind: it counts only while
// that process runs and is a postgres (the PID may have been reused since).
func runningPostmaster(dataDir string) int {
	raw, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 || !processRunning(pid) {
		return 0
	}
	if comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); err == nil &&
		strings.TrimSpace(string(comm)) != "postgres" {
		return 0
	}
	return pid
}

// postgresBinDir finds the installed server binaries: pg_config --bindir first, then the
// Debian layout /usr/lib/postgresql/<version>/bin, newest version first.
func postgresBinDir() (string, error) {
	if out, err := exec.CommandContext(context.Background(), "pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
	}
	candidates, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(candidates, func(i, j int) bool { return versionOf(candidates[i]) > versionOf(candidates[j]) })
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries found (install postgresql, or pass --database-url)")
}

// versionOf reads the major version of the server binaries in bindir.
func versionOf(bindir string) int {
	//nolint:gosec // bindir comes from pg_config or the distribution layout
	out, err := exec.CommandContext(context.Background(), filepath.Join(bindir, "postgres"), "--version").Output()
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(out)) // "postgres (PostgreSQL) 15.18 (Debian ...)"
	if len(fields) < 3 {
		return 0
	}
	major, _, _ := strings.Cut(fields[2], ".")
	v, _ := strconv.Atoi(major)
	return v
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&0o111 != 0
}

func rootWrappers(stateDir, bindir, runtimeDir, dataDir string) (string, error) {
	if _, err := user.Lookup(unprivilegedUser); err != nil {
		useradd := exec.CommandContext(context.Background(),
			"useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", unprivilegedUser)
		if out, err := useradd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("create user %s to run PostgreSQL (it refuses to run as root): %w: %s",
				unprivilegedUser, err, bytes.TrimSpace(out))
		}
	}
	root := wrappersDir(stateDir)
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil { //nolint:gosec // the postgres user runs these wrappers
		return "", fmt.Errorf("create wrappers: %w", err)
	}
	for _, tool := range []string{"initdb", "pg_ctl", "postgres"} {
		// embedded-postgres creates the runtime directory and its password file as the calling
		// user (root); give them to the server's user before every call.
		script := fmt.Sprintf("#!/bin/sh\n"+
			"chown -R %[1]s %[2]q 2>/dev/null\n"+
			"[ -d %[3]q ] && chown -R %[1]s %[3]q\n"+
			"exec runuser -u %[1]s -- %[4]q \"$@\"\n",
			unprivilegedUser, runtimeDir, dataDir, filepath.Join(bindir, tool))
		wrapper := filepath.Join(bin, tool)
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil { //nolint:gosec // wrappers must be executable
			return "", fmt.Errorf("write wrapper %s: %w", tool, err)
		}
	}
	return root, nil
}

// handOver gives the unprivileged user the PostgreSQL directory and search access on its parents.
func handOver(stateDir, pgDir string) error {
	u, err := user.Lookup(unprivilegedUser)
	if err != nil {
		return fmt.Errorf("look up %s: %w", unprivilegedUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := filepath.Walk(pgDir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(path, filepath.Join(pgDir, "bin-wrappers")) {
			return nil
		}
		return os.Lchown(path, uid, gid) //nolint:gosec // our own state directory, created just before
	}); err != nil {
		return fmt.Errorf("hand %s to %s: %w", pgDir, unprivilegedUser, err)
	}
	for dir := stateDir; dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("stat %s: %w", dir, err)
		}
		if st.Mode()&0o001 == 0 {
			if err := os.Chmod(dir, st.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("allow %s to reach %s: %w", unprivilegedUser, dir, err)
			}
		}
	}
	return nil
}

func freePort() (uint32, error) {
	l, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	port, err := strconv.ParseUint(strconv.Itoa(l.Addr().(*net.TCPAddr).Port), 10, 16)
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	return uint32(port), nil
}
