package wallet

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/codeport/codeport/internal/apitime"
	"github.com/codeport/codeport/internal/listing"
	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/store"
)

// Entry is a ledger entry as a statement shows it. Amounts are signed minor units, as the
// contract writes amounts, and also decimal major units, as it writes wallet balances.
type Entry struct {
	ID                int64        `json:"id"`
	Type              string       `json:"type"`
	Currency          string       `json:"currency"`
	Amount            int64        `json:"amount"`
	AmountMajor       json.Number  `json:"amountMajor"`
	BalanceAfter      int64        `json:"balanceAfter"`
	BalanceAfterMajor json.Number  `json:"balanceAfterMajor"`
	Reference         string       `json:"reference"`
	OrderID           *uuid.UUID   `json:"orderId,omitempty"`
	ExternalOrderCode *string      `json:"externalOrderCode,omitempty"`
	Note              string       `json:"note,omitempty"`
	CreatedAt         apitime.Time `json:"createdAt"`
}

// StatementPage is one page of GET /wallet/transactions.
type StatementPage struct {
	Entries []Entry `json:"entries"`
	// NextCursor continues the statement below this page; absent on the last page.
	NextCursor string `json:"nextCursor,omitempty"`
}

func entryOf(e *store.StatementEntry) (Entry, error) {
	amount, err := money.Number(e.Amount, e.Currency)
	if err != nil {
		return Entry{}, fmt.Errorf("render entry %d: %w", e.ID, err)
	}
	after, err := money.Number(e.BalanceAfter, e.Currency)
	if err != nil {
		return Entry{}, fmt.Errorf("render entry %d: %w", e.ID, err)
	}
	return Entry{ID: e.ID, Type: e.Kind, Currency: e.Currency, Amount: e.Amount, AmountMajor: amount,
		BalanceAfter: e.BalanceAfter, BalanceAfterMajor: after, Reference: e.Reference, OrderID: e.OrderID,
		ExternalOrderCode: e.ExternalOrderCode, Note: e.Note, CreatedAt: apitime.Of(e.CreatedAt)}, nil
}

func statementFilter(account uuid.UUID, q *listing.Query) (store.StatementFilter, error) {
	before, err := listing.LedgerKey(q.Before)
	if err != nil {
		return store.StatementFilter{}, err
	}
	return store.StatementFilter{AccountID: account, Currency: q.Currency, From: q.From, To: q.To, Before: before}, nil
}

func nextCursor(account uuid.UUID, k store.LedgerKey) string {
	return listing.EncodeCursor(listing.Statement, account, listing.Cursor{At: k.At, ID: strconv.FormatInt(k.ID, 10)})
}

// Statement reads one page of the account's ledger, newest first.
func (s *Service) Statement(ctx context.Context, account uuid.UUID, query listing.Query) (StatementPage, error) {
	q := s.db.Pool
	f, err := statementFilter(account, &query)
	if err != nil {
		return StatementPage{}, err
	}
	// One row past the page says whether another page follows.
	f.Limit = query.Limit + 1
	page := StatementPage{Entries: make([]Entry, 0, min(query.Limit, 64))}
	var last store.LedgerKey
	more := false
	err = store.StatementEntries(ctx, q, f, func(e *store.StatementEntry) error {
		if len(page.Entries) == query.Limit {
			more = true
			return nil
		}
		v, err := entryOf(e)
		if err != nil {
			return err
		}
		page.Entries, last = append(page.Entries, v), e.Key()
		return nil
	})
	if err != nil {
		return StatementPage{}, err
	}
	if more {
		page.NextCursor = nextCursor(account, last)
	}
	return page, nil
}

// CSVHeader is the header row of a statement in CSV.
var CSVHeader = []string{"id", "createdAt", "type", "currency", "amount", "amountMajor", "balanceAfter",
	"balanceAfterMajor", "orderId", "externalOrderCode", "reference", "note"}

// StatementCSV prepares one page of the account's ledger as CSV: it finds where the page ends
// (the next cursor, "" on the last page) first, so the cursor can go into a header, and returns
// write, which streams the page's rows as the database returns them. The rows written are those
// between the cursor and the page's last key, so a row inserted between the two reads can only
// add to this page, never fall between it and the next.
func (s *Service) StatementCSV(
	ctx context.Context, account uuid.UUID, query listing.Query,
) (next string, write func(context.Context, io.Writer) error, err error) {
	q := s.db.Pool
	f, err := statementFilter(account, &query)
	if err != nil {
		return "", nil, err
	}
	f.Limit = query.Limit + 1
	keys, err := store.StatementKeys(ctx, q, f)
	if err != nil {
		return "", nil, err
	}
	f.Limit = 0
	if len(keys) > query.Limit {
		last := keys[query.Limit-1]
		f.NotBefore, next = &last, nextCursor(account, last)
	}
	write = func(ctx context.Context, w io.Writer) error {
		out := csv.NewWriter(w)
		// RFC 4180 ends records with CRLF.
		out.UseCRLF = true
		if err := out.Write(CSVHeader); err != nil {
			return err
		}
		err := store.StatementEntries(ctx, q, f, func(e *store.StatementEntry) error {
			v, err := entryOf(e)
			if err != nil {
				return err
			}
			return out.Write(csvRecord(&v))
		})
		out.Flush()
		return errors.Join(err, out.Error())
	}
	return next, write, nil
}

func csvRecord(e *Entry) []string {
	orderID, code := "", ""
	if e.OrderID != nil {
		orderID = e.OrderID.String()
	}
	if e.ExternalOrderCode != nil {
		code = *e.ExternalOrderCode
	}
	return []string{strconv.FormatInt(e.ID, 10), e.CreatedAt.String(), e.Type, e.Currency,
		strconv.FormatInt(e.Amount, 10), string(e.AmountMajor), strconv.FormatInt(e.BalanceAfter, 10),
		string(e.BalanceAfterMajor), orderID, SpreadsheetText(code), SpreadsheetText(e.Reference),
		SpreadsheetText(e.Note)}
}

// SpreadsheetText makes free text safe to open in a spreadsheet: a cell that begins with =, +,
// -, @, a tab or a carriage return would be read as a formula, so it gets a leading apostrophe,
// which spreadsheets show as text and do not evaluate. Numbers and amounts are not free text and
// are written as they are.
func SpreadsheetText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
