package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/store"
)

func newCodesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "codes",
		Short: "Manage the production stock of redemption codes",
	}
	cmd.AddCommand(newCodesImportCommand(), newCodesRekeyCommand(), newCodesKeysCommand())
	return cmd
}

// openCodesDatabase opens the database a codes command works on, checks its schema and binds
// the keyring to it.
func openCodesDatabase(cmd *cobra.Command, databaseURL string, keyring codesKeyring) (*store.DB, *codes.Cipher, error) {
	if databaseURL == "" {
		return nil, nil, errors.New("--database-url (or CODEPORT_DATABASE_URL) is required")
	}
	cipher, err := keyring.load()
	if err != nil {
		return nil, nil, err
	}
	db, err := openDatabase(cmd.Context(), databaseURL, store.Options{MaxConns: 2})
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	if err := requireSchema(cmd.Context(), db, log); err != nil {
		db.Close()
		return nil, nil, err
	}
	if cipher, err = attachCodesKey(cmd.Context(), db, cipher, codesKeySource); err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, cipher, nil
}

func newCodesRekeyCommand() *cobra.Command {
	var databaseURL string
	var codesKey codesKeyring
	var batch int
	var report bool
	cmd := &cobra.Command{
		Use:   "rekey",
		Short: "Re-encrypt codes and webhook secrets under the current codes key",
		Long: `Seal every code and webhook secret encrypted under an older key of the keyring again under the
current key, in short transactions of --batch rows, while orders go on. Killed, it is run again
and goes on where it stopped. It prints a line per batch on standard error and ends with what each
key of the database still encrypts: a key that encrypts nothing may leave the keyring. It fails
when codes are left under an older key of the keyring. --report only prints that last part.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if batch <= 0 {
				return fmt.Errorf("--batch must be above 0, not %d", batch)
			}
			db, cipher, err := openCodesDatabase(cmd, databaseURL, codesKey)
			if err != nil {
				return err
			}
			defer db.Close()
			if !report {
				errOut := cmd.ErrOrStderr()
				moved, err := cipher.Rekey(cmd.Context(), db.Pool, batch, func(p codes.RekeyProgress) {
					fmt.Fprintf(errOut, "re-encrypted %d rows of %s from codes key %s (%d in all)\n",
						p.Rows, p.Table, p.Key, p.Done)
				})
				if err != nil {
					return fmt.Errorf("rekey stopped after %d ciphertexts (run it again to go on): %w", moved, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "re-encrypted %d ciphertexts under codes key %s\n", moved, cipher.KeyID())
			}
			return printRemaining(cmd, db, cipher)
		},
	}
	f := cmd.Flags()
	databaseURLFlag(cmd, &databaseURL)
	codesKeyFlag(f, &codesKey)
	f.IntVar(&batch, "batch", 500, "ciphertexts re-encrypted per transaction")
	f.BoolVar(&report, "report", false, "only report what each codes key encrypts")
	return cmd
}

func newCodesKeysCommand() *cobra.Command {
	var databaseURL string
	var codesKey codesKeyring
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "List the codes keys the database records and what each encrypts",
		Long: `Print each codes key the database records, by its id (a fingerprint, never the key), with the
number of codes and webhook secrets encrypted under it. With a keyring (--codes-key or
CODEPORT_CODES_KEY) it also says which key is current, which are older keys of the keyring and
which the keyring lacks. It needs no key, records none and writes nothing: run it before and
after each step of a rotation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if databaseURL == "" {
				return errors.New("--database-url (or CODEPORT_DATABASE_URL) is required")
			}
			var ring *codes.Cipher
			if codesKey.keys != "" {
				var err error
				if ring, err = codesKey.load(); err != nil {
					return err
				}
			}
			db, err := openDatabase(cmd.Context(), databaseURL, store.Options{MaxConns: 2})
			if err != nil {
				return err
			}
			defer db.Close()
			if err := requireSchema(cmd.Context(), db, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))); err != nil {
				return err
			}
			counts, err := codes.KeyCounts(cmd.Context(), db.Pool, ring)
			if err != nil {
				return err
			}
			return printKeys(cmd.OutOrStdout(), counts, ring != nil)
		},
	}
	f := cmd.Flags()
	databaseURLFlag(cmd, &databaseURL)
	codesKeyFlag(f, &codesKey)
	return cmd
}

// printKeys writes a table of the keys: id, ciphertexts and, with a keyring, its part in it.
func printKeys(out io.Writer, keys []codes.KeyCount, withRing bool) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KEY ID\tCIPHERTEXTS\tKEYRING")
	for _, k := range keys {
		role := "-"
		switch {
		case !withRing:
		case k.Current:
			role = "current"
		case k.InRing:
			role = "older"
		default:
			role = "absent"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\n", k.Key, k.Count, role)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("print keys: %w", err)
	}
	return nil
}

// printRemaining prints what each codes key of the database encrypts, and fails when an older
// key of the keyring still encrypts something.
func printRemaining(cmd *cobra.Command, db *store.DB, cipher *codes.Cipher) error {
	left, err := cipher.Remaining(cmd.Context(), db.Pool)
	if err != nil {
		return err
	}
	var older int64
	for _, k := range left {
		note := "not in the keyring"
		switch {
		case k.Current:
			note = "current"
		case k.InRing && k.Count == 0:
			note = "older, encrypts nothing: may leave the keyring"
		case k.InRing:
			note = "older"
			older += k.Count
		}
		if _, err := fmt.Fprintf(cmd.OutOrStdout(), "codes key %s: %d ciphertexts (%s)\n", k.Key, k.Count, note); err != nil {
			return err
		}
	}
	if older > 0 {
		return fmt.Errorf("%d ciphertexts are still encrypted under older keys of the keyring: run codes rekey", older)
	}
	return nil
}

func newCodesImportCommand() *cobra.Command {
	var databaseURL, product, batch string
	var codesKey codesKeyring
	cmd := &cobra.Command{
		Use:   "import --product CODE FILE",
		Short: "Load codes for a product into the production stock, encrypted",
		Long: `Read codes from FILE ("-" for standard input): one per line, or CSV whose first column is
the code (a "code" header line is skipped). Each code is encrypted with the codes key (AES-256-GCM)
before it reaches the database; a key other than the one the database's codes are encrypted with
is refused. Codes already in stock, or repeated in the file, are skipped and counted; the import
can be re-run safely.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("open codes file: %w", err)
				}
				defer f.Close()
				in = f
			}
			if batch == "" {
				batch = filepath.Base(args[0])
			}
			db, cipher, err := openCodesDatabase(cmd, databaseURL, codesKey)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := warnUncatalogued(cmd.Context(), db, product, cmd.ErrOrStderr()); err != nil {
				return err
			}
			progress := func(codes.ImportResult) {}
			if term.IsTerminal(int(os.Stderr.Fd())) {
				progress = func(r codes.ImportResult) {
					fmt.Fprintf(os.Stderr, "\rimporting %s: %d imported, %d duplicates", product, r.Imported, r.Duplicates)
				}
			}
			res, err := codes.Import(cmd.Context(), db.Pool, cipher, product, batch, in, progress)
			if term.IsTerminal(int(os.Stderr.Fd())) {
				fmt.Fprintln(os.Stderr)
			}
			if err != nil {
				return fmt.Errorf("import stopped after %d codes: %w", res.Imported, err)
			}
			stock, err := store.StockCount(cmd.Context(), db.Pool, product)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "imported %d codes for %s (%d duplicates skipped); %d in stock\n",
				res.Imported, product, res.Duplicates, stock)
			return err
		},
	}
	f := cmd.Flags()
	databaseURLFlag(cmd, &databaseURL)
	f.StringVar(&product, "product", "", "14-digit productCode the codes belong to (required)")
	f.StringVar(&batch, "batch", "", "batch label recorded with the codes (default: the file name)")
	codesKeyFlag(f, &codesKey)
	_ = cmd.MarkFlagRequired("product")
	return cmd
}

// warnUncatalogued warns when no catalog lists product: its codes are imported all the same
// (stock may come before the Catalog that sells it), but a mistyped product code would
// otherwise fill a stock nobody can order from, without a word.
func warnUncatalogued(ctx context.Context, db *store.DB, product string, out io.Writer) error {
	listed, err := store.ProductCatalogued(ctx, db.Pool, product)
	if err != nil {
		return err
	}
	if !listed {
		_, err = fmt.Fprintf(out, "warning: product %s is in no catalog: no partner can order these codes "+
			"until a Catalog lists it (check --product)\n", product)
	}
	return err
}
