// Command codeport is the single binary of the codeport platform: the Kubernetes operator, the
// partner API server, the all-in-one local data plane, and the database and stock tools.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/codeport/codeport/internal/store"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "codeport:", err)
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
	root.AddCommand(newVersionCommand(), newMigrateCommand(), newServeCommand(), newDevCommand(), newCodesCommand(),
		newOperatorCommand(), newDevGuardCommand())
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
		db, err := store.Open(ctx, databaseURL, store.Options{MaxConns: 2})
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
	return &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withMigrator(cmd.Context(), func(ctx context.Context, m *store.Migrator) error {
				applied, err := m.Up(ctx)
				if err != nil {
					return err
				}
				v, err := m.Version(ctx)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "applied %d migration(s); schema version %d\n", len(applied), v)
				return nil
			})
		},
	}
}

func newMigrateDownCommand(withMigrator withMigratorFunc) *cobra.Command {
	var downTo int64
	down := &cobra.Command{
		Use:   "down",
		Short: "Roll back the latest migration (or every migration above --to)",
		Long: `Roll back the most recent migration. With --to N, roll back every migration above version N;
--to 0 removes the whole schema, including the job queue's tables. Orders and ledger rows are lost
with it: this is for development and recovery, not for production rollbacks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withMigrator(cmd.Context(), func(ctx context.Context, m *store.Migrator) error {
				if cmd.Flags().Changed("to") {
					rolled, err := m.DownTo(ctx, downTo)
					if err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "rolled back %d migration(s); schema version %d\n", len(rolled), downTo)
					return nil
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
	return down
}

func newMigrateStatusCommand(withMigrator withMigratorFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List migrations and whether each is applied",
		Args:  cobra.NoArgs,
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
				return w.Flush()
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
