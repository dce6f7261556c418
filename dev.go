package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/codeport/codeport/apiserver"
	"github.com/codeport/codeport/apiserver/ratelimit"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/devenv"
	"github.com/codeport/codeport/internal/fulfilment"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
)

func newDevCommand() *cobra.Command {
	var databaseURL, manifests, stateDir, productionAddr, sandboxAddr, smtpURL, smtpFrom string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole data plane on this machine, no cluster needed",
		Long: `Run both environments' APIs, the fulfilment workers and a database in one process.
Without --database-url an embedded PostgreSQL (the locally installed binaries) keeps its data in
the state directory. The Partner, Catalog, ApiKey and Wallet manifests in --manifests are
admitted as the cluster admits them (the CRDs' schemas, CEL rules and defaults; dev refuses to
start on a manifest the cluster would refuse; a manifest admitted by an earlier run is admitted as an
update of it, immutable fields included) and provisioned the way the operator would; the keys
they ask for are written to <state-dir>/credentials.json and stay the same across restarts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd.Context(), cmd.OutOrStdout(), devOptions{databaseURL: databaseURL, manifests: manifests,
				stateDir: stateDir, smtpURL: smtpURL, smtpFrom: smtpFrom,
				addrs: map[string]string{string(tenancy.Production): productionAddr, string(tenancy.Sandbox): sandboxAddr}})
		},
	}
	f := cmd.Flags()
	databaseURLFlag(cmd, &databaseURL)
	f.StringVar(&manifests, "manifests", "config/samples",
		"directory of Partner, Catalog, ApiKey and Wallet manifests to provision")
	f.StringVar(&stateDir, "state-dir", ".codeport", "directory for the embedded database, keys and credentials.json")
	f.StringVar(&productionAddr, "production-addr", "127.0.0.1:8080", "listen address of the production API")
	f.StringVar(&sandboxAddr, "sandbox-addr", "127.0.0.1:8081", "listen address of the sandbox API")
	smtpFlags(f, &smtpURL, &smtpFrom)
	return cmd
}

type devOptions struct {
	databaseURL, manifests, stateDir string
	smtpURL, smtpFrom                string
	addrs                            map[string]string
}

func runDev(ctx context.Context, out io.Writer, opts devOptions) error {
	log := newDevLogger()
	stateDir, err := filepath.Abs(opts.stateDir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	lock, err := devenv.LockStateDir(ctx, stateDir, opts.stateDir, log)
	if err != nil {
		return err
	}
	defer logFailure(log, "release state directory", lock.Release)
	m, err := devenv.LoadManifests(ctx, opts.manifests, stateDir)
	if err != nil {
		return err
	}
	cipher, err := devCipher(stateDir)
	if err != nil {
		return err
	}
	databaseURL := opts.databaseURL
	if databaseURL == "" {
		fmt.Fprintln(out, "codeport dev: starting embedded PostgreSQL in", filepath.Join(stateDir, "postgres"))
		pgLog, err := os.OpenFile(filepath.Join(stateDir, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("postgres log: %w", err)
		}
		defer pgLog.Close()
		// The guard stops the server should dev die without stopping it; it is released (and
		// told so) after the deferred pg.Stop below.
		guard, err := devenv.StartGuard(stateDir, lock, log)
		if err != nil {
			return err
		}
		defer logFailure(log, "embedded PostgreSQL guard", guard.Release)
		pg, err := devenv.StartEmbeddedPostgres(stateDir, pgLog, log)
		if err != nil {
			return err
		}
		defer logFailure(log, "stop embedded PostgreSQL", pg.Stop)
		databaseURL = pg.URL
	}
	db, err := openDatabase(ctx, databaseURL, store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	migrator, err := store.NewMigrator(db.SQL)
	if err != nil {
		return err
	}
	if _, err := migrator.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	unregister, err := registerInstance(ctx, db, "dev", log)
	if err != nil {
		return err
	}
	defer unregister()
	cipher, err = attachCodesKey(ctx, db, cipher, "CODEPORT_CODES_KEY, else "+filepath.Join(stateDir, "codes.key"))
	if err != nil {
		return err
	}
	mail, err := notify.ParseSMTP(opts.smtpURL, opts.smtpFrom)
	if err != nil {
		return err
	}
	var listeners []apiserver.Listener
	for _, env := range provisioning.Environments() {
		listeners = append(listeners, apiserver.Listener{Config: apiserver.DefaultConfig(env), Addr: opts.addrs[env]})
	}
	workers := fulfilment.DefaultWorkerConfig(provisioning.Environments()...)
	// A developer's webhook receiver runs on this machine or their network.
	delivery := notify.Delivery{SMTP: mail, Retry: notify.DefaultRetry(), AllowPrivateNetworks: true}
	// One notifier for the process: the data plane raises order and balance events with it, the
	// provisioning of the dev manifest its catalogs' product events.
	notifier := notify.NewNotifier(delivery.SMTP != nil, delivery.Retry)
	prov, err := provisioning.New(db, cipher, notifier)
	if err != nil {
		return err
	}
	plane := &apiserver.DataPlane{
		// Each request is a line beside the banner, so that a developer sees what their client did.
		Deps: apiserver.Deps{DB: db, Limiter: ratelimit.NewMemory(), Cipher: cipher, Logger: log,
			Notifier: notifier, RequestLog: out, CompactRequestLog: true},
		Listeners: listeners,
		Workers:   &workers,
		Delivery:  delivery,
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var provisionErr error
	err = plane.Run(runCtx, func(addrs map[string]string) {
		baseURLs := map[string]string{}
		for env, addr := range addrs {
			baseURLs[env] = "http://" + dialable(addr)
		}
		creds, warnings, err := devenv.Provision(runCtx, prov, m, stateDir, baseURLs)
		if err != nil {
			provisionErr = err
			cancel()
			return
		}
		for _, w := range warnings {
			fmt.Fprintln(out, "codeport dev: warning:", w)
		}
		printDevBanner(out, baseURLs, creds, m, filepath.Join(stateDir, "credentials.json"))
		printDevDatabase(out, devDatabase{url: databaseURL, embedded: opts.databaseURL == "",
			codesKeyFile: devCodesKeyFile(stateDir)})
	})
	if provisionErr != nil {
		return provisionErr
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "codeport dev: stopped")
	return nil
}

// newDevGuardCommand is the hidden process dev starts to stop its embedded PostgreSQL should dev
// die without doing so (see devenv.StartGuard).
func newDevGuardCommand() *cobra.Command {
	return &cobra.Command{
		Use:    devenv.GuardCommand + " STATE_DIR",
		Short:  "Stop the embedded PostgreSQL of codeport dev once dev is gone (started by dev)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return devenv.RunGuard(args[0], newDevLogger())
		},
	}
}

// logFailure runs a deferred shutdown step and logs its failure, which must not replace the
// run's own result.
func logFailure(log *slog.Logger, what string, step func() error) {
	if err := step(); err != nil {
		log.Error(what, slog.Any("err", err))
	}
}

// newDevLogger is the log of dev and its guard: warnings and errors on stderr, beside the banner.
func newDevLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// dialable turns a listen address into one a client can call (":8080" -> "127.0.0.1:8080").
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// devCodesKeyFile is the file of the codes key dev uses, or "" when it uses CODEPORT_CODES_KEY.
func devCodesKeyFile(stateDir string) string {
	if os.Getenv("CODEPORT_CODES_KEY") != "" {
		return ""
	}
	return filepath.Join(stateDir, "codes.key")
}

// devCipher uses CODEPORT_CODES_KEY (a key or a keyring, with CODEPORT_CODES_CURRENT_KEY_ID)
// when set, else a key kept in the state directory.
func devCipher(stateDir string) (*codes.Cipher, error) {
	current := os.Getenv("CODEPORT_CODES_CURRENT_KEY_ID")
	if key := os.Getenv("CODEPORT_CODES_KEY"); key != "" {
		return codesKeyring{keys: key, current: current}.load()
	}
	path := filepath.Join(stateDir, "codes.key")
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key, err := codes.NewKey()
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("write codes key: %w", err)
		}
		raw = []byte(key)
	} else if err != nil {
		return nil, fmt.Errorf("read codes key: %w", err)
	}
	return codesKeyring{keys: string(raw), current: current}.load()
}

func printDevBanner(
	out io.Writer, baseURLs map[string]string, creds *devenv.Credentials, m *devenv.Manifests, credsPath string,
) {
	fmt.Fprintf(out, "codeport dev: production API %s/v2, sandbox API %s/v2 (legacy /v1 on both)\n",
		baseURLs[string(tenancy.Production)], baseURLs[string(tenancy.Sandbox)])
	fmt.Fprintf(out,
		"codeport dev: provisioned %d partner(s), %d catalog(s), %d key(s), %d wallet(s); credentials in %s\n",
		len(m.Partners), len(m.Catalogs), len(m.APIKeys), len(m.Wallets), credsPath)
	partners := make([]string, 0, len(creds.Partners))
	for p := range creds.Partners {
		partners = append(partners, p)
	}
	sort.Strings(partners)
	for _, p := range partners {
		if ep := creds.Partners[p][string(tenancy.Sandbox)]; ep != nil && ep.APIKey != "" {
			fmt.Fprintf(out, "codeport dev: try it (%s, sandbox):\n"+
				"  curl -s -H 'x-api-key: %s' '%s/catalog/products?take=5'\n", p, ep.APIKey, ep.BaseURL)
			break
		}
	}
	if len(m.Skipped) > 0 {
		fmt.Fprintln(out, "codeport dev: ignored:", strings.Join(m.Skipped, "; "))
	}
}

// devDatabase is the database dev runs on, and the codes key its codes are encrypted with.
type devDatabase struct {
	url      string
	embedded bool
	// codesKeyFile holds the codes key; "" when dev has it from CODEPORT_CODES_KEY.
	codesKeyFile string
}

// printDevDatabase says which database dev runs on and how to run codeport's other commands
// against it, ready to paste: the embedded database's URL (its password is dev's own, and its
// port new each start) is found nowhere else. A URL dev was given is shown without its password.
func printDevDatabase(out io.Writer, db devDatabase) {
	var exports []string
	if db.embedded {
		fmt.Fprintf(out, "codeport dev: database %s (embedded PostgreSQL, on a new port each start)\n", db.url)
		exports = append(exports, "CODEPORT_DATABASE_URL="+shellQuote(db.url))
	} else {
		shown := "given by --database-url"
		if u, err := url.Parse(db.url); err == nil && u.Scheme != "" {
			shown = u.Redacted() + " (--database-url)"
		}
		fmt.Fprintf(out, "codeport dev: database %s; set CODEPORT_DATABASE_URL to it\n", shown)
	}
	if db.codesKeyFile != "" {
		exports = append(exports, `CODEPORT_CODES_KEY="$(cat `+shellQuote(db.codesKeyFile)+`)"`)
	}
	fmt.Fprintln(out, "codeport dev: other commands reach it while dev runs, e.g. in another terminal:")
	if len(exports) > 0 {
		fmt.Fprintf(out, "  export %s\n", strings.Join(exports, " "))
	}
	self := shellQuote(os.Args[0])
	fmt.Fprintf(out, "  %s migrate status\n  %s codes import --product PRODUCT_CODE FILE\n", self, self)
}

// shellQuote quotes s for a POSIX shell, leaving alone what needs no quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:@,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
