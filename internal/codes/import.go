package codes

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/codeport/codeport/internal/store"
)

// ImportResult counts what an import did.
type ImportResult struct {
	Imported int64
	// Duplicates were already in stock (or repeated within the file) and were skipped.
	Duplicates int64
}

var productCodePattern = regexp.MustCompile(`^[0-9]{14}$`)

// importBatch is how many codes go into one INSERT.
const importBatch = 1000

// ReadCodes parses a stock file: one code per line, or CSV whose first column is the code. A
// header line "code" is skipped, as are blank lines.
func ReadCodes(r io.Reader, each func(code string) error) error {
	br := bufio.NewReader(r)
	peek, _ := br.Peek(4096)
	firstLine, _, _ := strings.Cut(string(peek), "\n")
	if strings.Contains(firstLine, ",") {
		cr := csv.NewReader(br)
		cr.FieldsPerRecord = -1
		first := true
		for {
			rec, err := cr.Read()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read CSV: %w", err)
			}
			code := strings.TrimSpace(rec[0])
			if first && strings.EqualFold(code, "code") {
				first = false
				continue
			}
			first = false
			if code == "" {
				continue
			}
			if err := each(code); err != nil {
				return err
			}
		}
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for first := true; sc.Scan(); first = false {
		code := strings.TrimSpace(sc.Text())
		if first && strings.EqualFold(code, "code") {
			continue
		}
		if code != "" {
			if err := each(code); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read codes: %w", err)
	}
	return nil
}

// Import encrypts the codes read from r into the production stock of productCode, in batches
// (each batch a short transaction of its own, so a huge file never holds one long one). Codes
// already known are skipped and counted. progress, when set, is called after each batch.
func Import(
	ctx context.Context, db store.TxBeginner, c *Cipher, productCode, batch string, r io.Reader,
	progress func(ImportResult),
) (ImportResult, error) {
	if !productCodePattern.MatchString(productCode) {
		return ImportResult{}, fmt.Errorf("product code %q must be 14 digits", productCode)
	}
	var res ImportResult
	pending := make([]store.CodeStock, 0, importBatch)
	seen := map[string]bool{}
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		inserted, err := store.InsertStock(ctx, db, pending)
		if err != nil {
			return err
		}
		res.Imported += inserted
		res.Duplicates += int64(len(pending)) - inserted
		pending = pending[:0]
		if progress != nil {
			progress(res)
		}
		return nil
	}
	err := ReadCodes(r, func(code string) error {
		if len(code) > 512 {
			return fmt.Errorf("code of %d characters is too long (at most 512)", len(code))
		}
		ct, digest, err := c.Seal(code)
		if err != nil {
			return err
		}
		if seen[string(digest)] {
			res.Duplicates++
			return nil
		}
		seen[string(digest)] = true
		pending = append(pending, store.CodeStock{
			ProductCode: productCode,
			KeyRef:      c.Key(),
			Ciphertext:  ct,
			Digest:      digest,
			Batch:       batch,
			ImportedAt:  time.Now(),
		})
		if len(pending) == importBatch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	return res, flush()
}
