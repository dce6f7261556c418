package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Statements and order history read an account's rows newest first, a page at a time, by
// keyset on (created_at, id) through the indexes of migration 00018: a page starts strictly
// below the last row of the previous one, so rows inserted meanwhile (newer, hence above it)
// neither shift nor repeat what follows.

// LedgerKey is the position of a ledger entry in a statement.
type LedgerKey struct {
	At time.Time
	ID int64
}

// StatementFilter selects an account's ledger entries.
type StatementFilter struct {
	AccountID uuid.UUID
	// Currency, when set, keeps the entries of one currency.
	Currency string
	// From (inclusive) and To (exclusive) bound created_at when set.
	From, To *time.Time
	// Before, when set, keeps the entries strictly older than it (the cursor of a page).
	Before *LedgerKey
	// NotBefore, when set, keeps the entries at or above it (a page's last key).
	NotBefore *LedgerKey
	// Limit caps the rows read; 0 reads all that match.
	Limit int
}

// StatementEntry is a ledger entry as a statement shows it, with the order it belongs to
// (AccountID is not read).
type StatementEntry struct {
	WalletEntry
	// OrderID and ExternalOrderCode are set on order debits and refunds.
	OrderID           *uuid.UUID
	ExternalOrderCode *string
}

// Key is the entry's position.
func (e *StatementEntry) Key() LedgerKey { return LedgerKey{At: e.CreatedAt, ID: e.ID} }

// where builds the filter's conditions on wallet_entries e, its arguments numbered from 1.
func (f *StatementFilter) where() (string, []any) {
	var w whereBuilder
	w.add("e.account_id = $%d", pgUUID(f.AccountID))
	if f.Currency != "" {
		w.add("e.currency = $%d", f.Currency)
	}
	if f.From != nil {
		w.add("e.created_at >= $%d", *f.From)
	}
	if f.To != nil {
		w.add("e.created_at < $%d", *f.To)
	}
	if f.Before != nil {
		w.add2("(e.created_at, e.id) < ($%d, $%d)", f.Before.At, f.Before.ID)
	}
	if f.NotBefore != nil {
		w.add2("(e.created_at, e.id) >= ($%d, $%d)", f.NotBefore.At, f.NotBefore.ID)
	}
	return w.String(), w.args
}

// Order debits and refunds name their order by id; the cast is reached only for those kinds,
// whose references are order ids, so the join is a primary-key lookup per entry.
const statementSQL = `
SELECT e.id, e.currency, e.kind, e.reference, e.amount, e.balance_after, e.note, e.created_at,
       o.id, o.external_order_code
FROM wallet_entries e
LEFT JOIN orders o ON o.account_id = e.account_id
    AND o.id = CASE WHEN e.kind IN ('order_debit', 'refund') THEN e.reference::uuid END
WHERE `

// StatementEntries calls fn with each entry of the filter, newest first, as the rows arrive.
func StatementEntries(ctx context.Context, q Querier, f StatementFilter, fn func(*StatementEntry) error) error {
	where, args := f.where()
	query := statementSQL + where + ` ORDER BY e.created_at DESC, e.id DESC` + limitClause(f.Limit)
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("read statement: %w", err)
	}
	var e StatementEntry
	_, err = pgx.ForEachRow(rows, []any{&e.ID, &e.Currency, &e.Kind, &e.Reference, &e.Amount, &e.BalanceAfter,
		&e.Note, &e.CreatedAt, &e.OrderID, &e.ExternalOrderCode}, func() error { return fn(&e) })
	if err != nil {
		return fmt.Errorf("read statement: %w", err)
	}
	return nil
}

// StatementKeys returns the keys of the filter's entries, newest first: where a page ends,
// before its rows are read.
func StatementKeys(ctx context.Context, q Querier, f StatementFilter) ([]LedgerKey, error) {
	where, args := f.where()
	rows, err := q.Query(ctx, `SELECT e.created_at, e.id FROM wallet_entries e WHERE `+where+
		` ORDER BY e.created_at DESC, e.id DESC`+limitClause(f.Limit), args...)
	if err != nil {
		return nil, fmt.Errorf("read statement keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[LedgerKey])
	if err != nil {
		return nil, fmt.Errorf("read statement keys: %w", err)
	}
	return keys, nil
}

// OrderKey is the position of an order in the history.
type OrderKey struct {
	At time.Time
	ID uuid.UUID
}

// OrderFilter selects an account's orders.
type OrderFilter struct {
	AccountID         uuid.UUID
	Status            string
	ExternalOrderCode string
	// From (inclusive) and To (exclusive) bound created_at when set.
	From, To *time.Time
	// Before, when set, keeps the orders strictly older than it (the cursor of a page).
	Before *OrderKey
	Limit  int
}

// HistoryOrders returns the filter's orders with their lines, newest first.
func HistoryOrders(ctx context.Context, q Querier, f OrderFilter) ([]Order, error) {
	var w whereBuilder
	w.add("account_id = $%d", pgUUID(f.AccountID))
	w.conds = append(w.conds, "archived_at IS NULL")
	if f.Status != "" {
		w.add("status = $%d", f.Status)
	}
	if f.ExternalOrderCode != "" {
		w.add("external_order_code = $%d", f.ExternalOrderCode)
	}
	if f.From != nil {
		w.add("created_at >= $%d", *f.From)
	}
	if f.To != nil {
		w.add("created_at < $%d", *f.To)
	}
	if f.Before != nil {
		w.add2("(created_at, id) < ($%d, $%d)", f.Before.At, pgUUID(f.Before.ID))
	}
	rows, err := q.Query(ctx, `SELECT `+orderColumns+` FROM orders WHERE `+w.String()+
		` ORDER BY created_at DESC, id DESC`+limitClause(f.Limit), w.args...)
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByNameLax[Order])
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	if len(list) == 0 {
		return list, nil
	}
	return list, attachLines(ctx, q, list)
}

// attachLines loads the lines of orders in one statement.
func attachLines(ctx context.Context, q Querier, list []Order) error {
	ids := make([]uuid.UUID, len(list))
	at := make(map[uuid.UUID]int, len(list))
	for i := range list {
		ids[i], at[list[i].ID] = list[i].ID, i
	}
	rows, err := q.Query(ctx, `SELECT order_id, line_no, product_code, unit_price, quantity, currency, sku
		FROM order_lines WHERE order_id = ANY($1) ORDER BY order_id, line_no`, ids)
	if err != nil {
		return fmt.Errorf("load order lines: %w", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowToStructByName[OrderLine])
	if err != nil {
		return fmt.Errorf("load order lines: %w", err)
	}
	for _, l := range lines {
		o := &list[at[l.OrderID]]
		o.Lines = append(o.Lines, l)
	}
	return nil
}

// whereBuilder joins conditions with AND, numbering their placeholders in order.
type whereBuilder struct {
	conds []string
	args  []any
}

func (w *whereBuilder) add(cond string, arg any) {
	w.args = append(w.args, arg)
	w.conds = append(w.conds, fmt.Sprintf(cond, len(w.args)))
}

func (w *whereBuilder) add2(cond string, a, b any) {
	w.args = append(w.args, a, b)
	w.conds = append(w.conds, fmt.Sprintf(cond, len(w.args)-1, len(w.args)))
}

func (w *whereBuilder) String() string { return strings.Join(w.conds, " AND ") }

func limitClause(limit int) string {
	if limit <= 0 {
		return ""
	}
	return " LIMIT " + strconv.Itoa(limit)
}
