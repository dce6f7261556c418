// Command codeport is the single binary of the codeport platform: the Kubernetes operator, the
// partner API server, the all-in-one local data plane, and the database and stock tools.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/codeport/codeport/internal/store"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cmd, err := newRootCommand().ExecuteContextC(ctx)
	stop()
	if err != nil {
		reportError(os.Stderr, cmd, err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "codeport",
		Short: "Digital code distribution platform: partner API, operator and tools",
		Long: `codeport serves the partner API for buying digital redemption codes and manages
partners declaratively through Kubernetes custom resources (Partner, Catalog, ApiKey, Wallet, WalletTopUp).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand(), newMigrateCommand(), logsJSON(newServeCommand()), newDevCommand(),
		newCodesCommand(), logsJSON(newOperatorCommand()), newDevGuardCommand(), logsJSON(newProbeCommand()))
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command group (a command with subcommands and nothing to
// run of its own) fail on an unknown subcommand: cobra only checks that on the root, and below
// it prints the group's help and exits 0, so `codeport migrate upp` in a script would pass.
// Without arguments a group still prints its help.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if cmd == cmd.Root() || !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.SuggestionsMinimumDistance = 2
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if suggestions := cmd.SuggestionsFor(args[0]); len(suggestions) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", suggestions[0])
		}
		return fmt.Errorf("%s (see '%s --help')", msg, cmd.CommandPath())
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the codeport version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "codeport %s (%s, %s/%s)\n",
				version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}

// databaseURLFlag binds --database-url, defaulting to $CODEPORT_DATABASE_URL so that secrets can
// come from the environment instead of the command line.
func databaseURLFlag(cmd *cobra.Command, target *string) {
	credentialFlag(cmd.PersistentFlags(), target, "database-url", "CODEPORT_DATABASE_URL",
		"PostgreSQL URL, e.g. postgres://user:pass@host:5432/codeport (default $CODEPORT_DATABASE_URL)")
}

// credentialFlag binds a flag whose value may hold a credential, defaulting to the environment
// variable env. The flag's declared default stays empty: --help prints a flag's default, and
// the environment's value must not reach a terminal or a log that way.
func credentialFlag(f *pflag.FlagSet, target *string, name, env, usage string) {
	f.StringVar(target, name, "", usage)
	*target = os.Getenv(env)
}

func newMigrateCommand() *cobra.Command {
	var databaseURL string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Manage the database schema (embedded migrations, including the job queue's)",
		Long: `Apply or roll back the schema migrations embedded in this binary. The job queue's tables
are one of the steps, so 'migrate up' prepares everything the API and workers need.`,
	}
	databaseURLFlag(cmd, &databaseURL)

	withMigrator := func(ctx context.Context, run func(context.Context, *store.Migrator) error) error {
		if databaseURL == "" {
			return errors.New("--database-url (or CODEPORT_DATABASE_URL) is required")
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		db, err := openDatabase(ctx, databaseURL, store.Options{MaxConns: 2})
		if err != nil {
			return err
		}
		defer db.Close()
		m, err := store.NewMigrator(db.SQL)
		if err != nil {
			return err
		}
		return run(ctx, m)
	}
	cmd.AddCommand(newMigrateUpCommand(withMigrator), newMigrateDownCommand(withMigrator),
		newMigrateStatusCommand(withMigrator))
	return cmd
}

// withMigratorFunc runs a migrate subcommand's work against the database --database-url names.
type withMigratorFunc func(ctx context.Context, run func(context.Context, *store.Migrator) error) error

func newMigrateUpCommand(withMigrator withMigratorFunc) *cobra.Command {
	var logJSON, force bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration",
		Args:  cobra.NoArgs,
		PreRun: func(cmd *cobra.Command, _ []string) {
			// In a cluster the migration runs as a Job whose lines go to the same log pipeline
			// as the components': the error it may end with must be JSON too.
			if logJSON {
				logsJSON(cmd)
			}
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withMigrator(cmd.Context(), func(ctx context.Context, m *store.Migrator) error {
				if !force {
					if err := m.CheckUp(ctx); err != nil {
						return err
					}
				}
				applied, err := m.Up(ctx)
				if err != nil {
					return err
				}
				v, err := m.Version(ctx)
				if err != nil {
					return err
				}
				if logJSON {
					slog.New(slog.NewJSONHandler(cmd.OutOrStdout(), nil)).Info("migrated",
						"applied", len(applied), "schemaVersion", v)
					return nil
				}
				fmt.Fprintf(cmd.OutOrStdout(), "applied %d migration(s); schema version %d\n", len(applied), v)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&logJSON, "log-json", false,
		"write the result and any error as JSON lines (for a Job whose logs a pipeline parses)")
	cmd.Flags().BoolVar(&force, "force", false,
		"apply a contract step even while binaries built for an older schema run (they break)")
	return cmd
}

func newMigrateDownCommand(withMigrator withMigratorFunc) *cobra.Command {
	var downTo int64
	var force bool
	down := &cobra.Command{
		Use:   "down",
		Short: "Roll back the latest migration (or every migration above --to)",
		Long: `Roll back the most recent migration. With --to N, roll back every migration above version N;
--to 0 removes the whole schema, including the job queue's tables. Orders and ledger rows are lost
with it: this is for development and recovery, not for production rollbacks.

Before it changes anything it counts what each step would destroy (rows of the tables it drops,
values other than the default in the columns it drops) and refuses, naming the step and the row
count, if anything would be lost; it refuses too while a running binary needs a step it would
undo. --force rolls back anyway.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withMigrator(cmd.Context(), func(ctx context.Context, m *store.Migrator) error {
				if cmd.Flags().Changed("to") {
					if !force {
						if err := m.CheckDown(ctx, downTo); err != nil {
							return err
						}
					}
					rolled, err := m.DownTo(ctx, downTo)
					if err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "rolled back %d migration(s); schema version %d\n", len(rolled), downTo)
					return nil
				}
				if !force {
					if err := m.CheckDownOne(ctx); err != nil {
						return err
					}
				}
				v, err := m.Down(ctx)
				if errors.Is(err, store.ErrNothingToRollBack) {
					fmt.Fprintln(cmd.OutOrStdout(), "nothing to roll back; schema version 0")
					return nil
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "rolled back migration %d\n", v)
				return nil
			})
		},
	}
	down.Flags().Int64Var(&downTo, "to", 0, "roll back every migration above this version")
	down.Flags().BoolVar(&force, "force", false,
		"roll back even if data is destroyed or running binaries need the schema")
	return down
}

func newMigrateStatusCommand(withMigrator withMigratorFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List migrations and whether each is applied, and the running binaries' compatibility",
		Long: `List the migrations embedded in this binary and whether each is applied, then the codeport
processes running on the database (serve, operator, dev; each refreshes its row every few
seconds) and whether each is compatible with the schema: built for a schema that no applied
contract step breaks, and no newer than the database's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withMigrator(cmd.Context(), func(ctx context.Context, m *store.Migrator) error {
				statuses, err := m.Status(ctx)
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "VERSION\tAPPLIED\tMIGRATION")
				for _, s := range statuses {
					fmt.Fprintf(w, "%d\t%t\t%s\n", s.Version, s.Applied, s.Source)
				}
				if err := w.Flush(); err != nil {
					return err
				}
				return printCompatibility(ctx, cmd.OutOrStdout(), m)
			})
		},
	}
}

// requireSchema refuses to start on a database whose schema is older than this binary's (see
// store.CheckSchema) and warns about a newer one, which is expected only while an upgrade rolls
// out or after a rollback.
func requireSchema(ctx context.Context, db *store.DB, log *slog.Logger) error {
	have, need, err := store.CheckSchema(ctx, db.Pool)
	if err != nil {
		return err
	}
	if have > need {
		log.Warn("database schema is newer than this binary: fine while an upgrade rolls out, "+
			"otherwise run the newer codeport", slog.Int64("schema_version", have), slog.Int64("binary_schema_version", need))
	}
	return nil
}

// registerInstance records this process in the database's registry of running binaries
// (store.Heartbeat) until stop is called or ctx ends; stop waits until its row is removed, so
// call it before the database closes. `migrate` reads the registry to tell whether a migration
// would break a running binary.
func registerInstance(ctx context.Context, db *store.DB, component string, log *slog.Logger) (stop func(), err error) {
	schema, err := store.LatestSchemaVersion()
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	in := store.Instance{ID: uuid.New(), Component: component, Version: version, SchemaVersion: schema, Host: host}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		store.Heartbeat(ctx, db.Pool, in, log)
	}()
	return func() { cancel(); <-done }, nil
}

// openDatabase opens the database of --database-url (store.Open) and, when no connection can
// be made, says so in one line: the server and database tried and the cause of the last attempt.
// pgx reports every attempt, and with sslmode=prefer (the default) the first is a TLS attempt
// that a server without TLS refuses, so its report leads with a TLS refusal that is no cause.
func openDatabase(ctx context.Context, url string, opts store.Options) (*store.DB, error) {
	db, err := store.Open(ctx, url, opts)
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return nil, &databaseConnectError{err: connect}
	}
	return db, err
}

// defaultDatabaseWait is how long serve and the operator wait at start for an unavailable
// database: longer than a failover takes (docs/operations.md measures them), so that a process
// started during one serves once it ends.
const defaultDatabaseWait = 3 * time.Minute

// databaseWaitFlag binds --database-wait, of the long-running components.
func databaseWaitFlag(f *pflag.FlagSet, target *time.Duration) {
	f.DurationVar(target, "database-wait", defaultDatabaseWait,
		"how long to wait at start while the database is unavailable (a failover, a pooler without a "+
			"server) before exiting; an unknown database or a refused login exits at once")
}

// waitLogInterval is how often a process waiting for the database says so.
const waitLogInterval = 30 * time.Second

// openDatabaseWaiting is openDatabase for serve and the operator: while the database is
// unavailable (store.IsUnavailable) it tries again for up to wait, logging once every
// waitLogInterval. Exiting instead would put the process into its restart back-off, which keeps
// it down for minutes after the database is back.
func openDatabaseWaiting(
	ctx context.Context, url string, opts store.Options, wait time.Duration, log *slog.Logger,
) (*store.DB, error) {
	deadline := time.Now().Add(wait)
	pause, logged := 200*time.Millisecond, time.Time{}
	for {
		db, err := openDatabase(ctx, url, opts)
		if err == nil || !store.IsUnavailable(err) || time.Now().Add(pause).After(deadline) {
			return db, err
		}
		if time.Since(logged) >= waitLogInterval {
			log.WarnContext(ctx, "waiting for the database", slog.Any("err", err),
				slog.Time("until", deadline.Round(time.Second)))
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// databaseConnectError is a failed connection to the database, described in one line.
type databaseConnectError struct{ err *pgconn.ConnectError }

func (e *databaseConnectError) Error() string {
	c := e.err.Config
	return fmt.Sprintf(
		"cannot connect to database %q on %s as user %q: %s; check --database-url (or CODEPORT_DATABASE_URL)",
		c.Database, net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), c.User, connectCause(e.err))
}

func (e *databaseConnectError) Unwrap() error { return e.err }

// connectCause is the cause of the last connection attempt in err, without the address every
// attempt repeats.
func connectCause(err *pgconn.ConnectError) string {
	attempt := lastAttempt(errors.Unwrap(err))
	var pgErr *pgconn.PgError
	switch {
	case attempt == nil:
		return "no address to connect to"
	case errors.As(attempt, &pgErr):
		return pgErr.Message
	case errors.Is(attempt, context.DeadlineExceeded):
		return "no answer within the connect timeout"
	}
	if cause := networkCause(attempt); cause != attempt.Error() {
		return cause
	}
	// An attempt's text starts with the address it dialled, which the line already names.
	if inner := errors.Unwrap(attempt); inner != nil {
		return inner.Error()
	}
	return attempt.Error()
}

// lastAttempt is the last of the connection attempts pgx joins (errors.Join) into its error,
// looking through one wrapping error around them.
func lastAttempt(err error) error {
	for err != nil {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			attempts := joined.Unwrap()
			if len(attempts) == 0 {
				return err
			}
			err = attempts[len(attempts)-1]
			continue
		}
		inner := errors.Unwrap(err)
		if _, ok := inner.(interface{ Unwrap() []error }); !ok {
			return err
		}
		err = inner
	}
	return err
}

// networkCause names what failed in a network error in a few words (no such host, connection
// refused, a timeout), else is err's own text.
func networkCause(err error) string {
	var dnsErr *net.DNSError
	var errno syscall.Errno
	var timeout interface{ Timeout() bool }
	switch {
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("cannot resolve host %s: %s", dnsErr.Name, dnsErr.Err)
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &timeout) && timeout.Timeout():
		return "timed out"
	}
	return err.Error()
}

// printCompatibility lists the running binaries after the migrations, each compatible with the
// database's schema or not and why; the last line sums it up for a script or a person.
func printCompatibility(ctx context.Context, out io.Writer, m *store.Migrator) error {
	schema, running, err := m.Compatibility(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nrunning binaries (schema version %d):\n", schema)
	if len(running) == 0 {
		_, err := fmt.Fprintln(out, "none registered")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "COMPONENT\tVERSION\tHOST\tBUILT FOR SCHEMA\tLAST SEEN\tCOMPATIBLE")
	incompatible := 0
	for _, c := range running {
		verdict := "compatible"
		if !c.Compatible {
			verdict = "incompatible: " + c.Reason
			incompatible++
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s ago\t%s\n", c.Component, c.Version, c.Host, c.SchemaVersion,
			time.Since(c.LastSeen).Round(time.Second), verdict)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if incompatible > 0 {
		_, err = fmt.Fprintf(out, "%d of %d running binaries are incompatible with the schema\n", incompatible, len(running))
		return err
	}
	_, err = fmt.Fprintf(out, "all %d running binaries are compatible with the schema\n", len(running))
	return err
}
