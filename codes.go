package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

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
	cmd.AddCommand(newCodesImportCommand())
	return cmd
}

func newCodesImportCommand() *cobra.Command {
	var databaseURL, product, batch, codesKey string
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
			if databaseURL == "" {
				return errors.New("--database-url (or CODEPORT_DATABASE_URL) is required")
			}
			cipher, err := loadCipher(codesKey)
			if err != nil {
				return err
			}
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
			db, err := store.Open(cmd.Context(), databaseURL, store.Options{MaxConns: 2})
			if err != nil {
				return err
			}
			defer db.Close()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if err := requireSchema(cmd.Context(), db, log); err != nil {
				return err
			}
			if cipher, err = attachCodesKey(cmd.Context(), db, cipher, codesKeySource); err != nil {
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
