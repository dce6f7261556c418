package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Archival of orders past their retention (migration 00027, docs/operations.md "Order
// retention"). An archived order keeps its row in orders, with archived_at set: the row is what
// makes a re-post of its externalOrderCode a replay rather than a second order, and what daily
// spend limits sum. Its lines, delivered codes (still sealed) and ledger entries move to the
// *_archive tables, and each run of its account's ledger (one currency, consecutive by id) that
// is archived is replaced by one carried entry, so the balances, the ledger's sums and the
// chain of balance_after stay as they were.
//
// Locks. An archival batch is one transaction over one account's orders. It locks the orders it
// archives, finished ones only, with SKIP LOCKED (step 1 of the ledger's lock order), deletes
// rows nobody else writes, and takes the account's balance rows only as its very last
// statement, the insert of carried entries, whose foreign-key check takes KEY SHARE on them
// (step 2): a placement's FOR UPDATE of the balances waits for it only between that statement
// and the commit that follows it. Its lock_timeout bounds any wait of its own; a batch that
// times out is rolled back whole and tried again by the next run.

// ArchiveSchemaVersion is the migration that introduced archived orders: binaries built for an
// older schema read an archived order as an order without lines, so archival does not run while
// one of them is registered (OlderInstancesRunning).
const ArchiveSchemaVersion = 27

// carriedPrefix starts the reference of a carried ledger entry, followed by its own id; the
// ledger's append-only trigger lets archival replace exactly such entries.
const carriedPrefix = "archived:"

// archiveLockTimeout bounds how long an archival statement waits for a lock before its batch
// gives up: archival is never worth a wait.
const archiveLockTimeout = "1s"

// Archived is what an archival batch moved.
type Archived struct {
	Orders, Lines, Codes, Entries int64
	// Carried is the number of carried entries written (a carried entry that grew counts again).
	Carried int64
}

// Add sums two batches' counts.
func (a *Archived) Add(b Archived) {
	a.Orders += b.Orders
	a.Lines += b.Lines
	a.Codes += b.Codes
	a.Entries += b.Entries
	a.Carried += b.Carried
}

// OlderInstancesRunning counts the live codeport processes built for a schema below version.
func OlderInstancesRunning(ctx context.Context, q Querier, version int64) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM `+olderInstancesSQL, InstanceExpiry.Seconds(), version).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count older running binaries: %w", err)
	}
	return n, nil
}

// ArchivableAccounts returns the accounts of environment with orders finished before cutoff
// and not archived yet.
func ArchivableAccounts(ctx context.Context, q Querier, environment string, cutoff time.Time) ([]uuid.UUID, error) {
	rows, err := q.Query(ctx, `SELECT a.id FROM accounts a WHERE a.environment = $1 AND EXISTS (
			SELECT 1 FROM orders o WHERE o.account_id = a.id AND o.archived_at IS NULL AND o.finished_at < $2)
		ORDER BY a.id`, environment, cutoff)
	if err != nil {
		return nil, fmt.Errorf("find accounts with orders to archive: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("find accounts with orders to archive: %w", err)
	}
	return ids, nil
}

// pickArchivableSQL locks up to $3 of the account's orders finished before $2 and not archived,
// oldest finished first; orders another transaction holds are skipped.
const pickArchivableSQL = `SELECT id FROM orders
	WHERE account_id = $1 AND archived_at IS NULL AND finished_at IS NOT NULL AND finished_at < $2
	ORDER BY finished_at, id LIMIT $3 FOR UPDATE SKIP LOCKED`

// archiveRowsSQL copies the orders' lines, delivered codes and ledger entries into the archive
// and deletes the lines and codes. It returns the counts and the archived entries' ids by
// currency.
const archiveRowsSQL = `
WITH lines AS (
    INSERT INTO order_lines_archive (order_id, line_no, product_code, unit_price, quantity, currency, sku)
    SELECT order_id, line_no, product_code, unit_price, quantity, currency, sku
    FROM order_lines WHERE order_id = ANY($1)
    RETURNING 1
), codes AS (
    INSERT INTO delivered_codes_archive (order_id, line_no, unit_no, stock_id, key_ref, ciphertext, digest,
                                         delivered_at)
    SELECT order_id, line_no, unit_no, stock_id, key_ref, ciphertext, digest, delivered_at
    FROM delivered_codes WHERE order_id = ANY($1)
    RETURNING 1
), entries AS (
    INSERT INTO wallet_entries_archive (id, account_id, currency, kind, reference, amount, balance_after, note,
                                        created_at)
    SELECT id, account_id, currency, kind, reference, amount, balance_after, note, created_at
    FROM wallet_entries
    WHERE account_id = $2 AND kind IN ('order_debit', 'refund') AND reference = ANY($3)
    RETURNING id, currency
)
SELECT (SELECT count(*) FROM lines), (SELECT count(*) FROM codes), e.currency, array_agg(e.id ORDER BY e.id)
FROM (SELECT 1) AS one LEFT JOIN entries e ON true
GROUP BY e.currency
ORDER BY e.currency`

// ArchiveOrders archives up to limit of the account's orders finished before cutoff, in the
// transaction tx, and returns what it moved (nothing once none is left). The caller commits;
// rolled back, the batch leaves no trace, so archival resumes after a crash where it was. It
// fails, writing nothing, when the account's ledger does not chain around the entries it
// archives: a carried entry must carry exactly what it replaces.
func ArchiveOrders(ctx context.Context, tx pgx.Tx, accountID uuid.UUID, cutoff time.Time, limit int) (Archived, error) {
	var done Archived
	if _, err := tx.Exec(ctx, `SELECT set_config('codeport.ledger_archival', 'on', true),
			set_config('lock_timeout', $1, true)`, archiveLockTimeout); err != nil {
		return done, fmt.Errorf("archive orders: %w", err)
	}
	rows, err := tx.Query(ctx, pickArchivableSQL, pgUUID(accountID), cutoff, limit)
	if err != nil {
		return done, fmt.Errorf("pick orders to archive: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[pgtype.UUID])
	if err != nil {
		return done, fmt.Errorf("pick orders to archive: %w", err)
	}
	if len(ids) == 0 {
		return done, nil
	}
	done.Orders = int64(len(ids))
	entries := map[string][]int64{}
	var currencies []string
	references := make([]string, len(ids))
	for i, id := range ids {
		references[i] = uuid.UUID(id.Bytes).String()
	}
	rows, err = tx.Query(ctx, archiveRowsSQL, ids, pgUUID(accountID), references)
	if err != nil {
		return done, fmt.Errorf("archive order rows: %w", err)
	}
	var currency *string
	var entryIDs []int64
	if _, err := pgx.ForEachRow(rows, []any{&done.Lines, &done.Codes, &currency, &entryIDs}, func() error {
		if currency != nil {
			currencies = append(currencies, *currency)
			entries[*currency] = entryIDs
			done.Entries += int64(len(entryIDs))
		}
		return nil
	}); err != nil {
		return done, fmt.Errorf("archive order rows: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM delivered_codes WHERE order_id = ANY($1)`, ids); err != nil {
		return done, fmt.Errorf("delete archived codes: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM order_lines WHERE order_id = ANY($1)`, ids); err != nil {
		return done, fmt.Errorf("delete archived lines: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE orders SET archived_at = now() WHERE id = ANY($1)`, ids); err != nil {
		return done, fmt.Errorf("mark orders archived: %w", err)
	}
	var carried []carriedEntry
	for _, c := range currencies {
		runs, err := carryRuns(ctx, tx, accountID, c, entries[c])
		if err != nil {
			return done, err
		}
		carried = append(carried, runs...)
	}
	done.Carried = int64(len(carried))
	if err := writeCarried(ctx, tx, accountID, carried); err != nil {
		return done, err
	}
	return done, nil
}

// ledgerRow is an entry of one account's ledger of one currency, as carryRuns walks it.
type ledgerRow struct {
	id           int64
	amount       int64
	balanceAfter int64
	createdAt    time.Time
	// member: the entry is being archived, or is a carried entry a run may absorb.
	member bool
}

// carriedEntry replaces a run of archived entries, at its last entry's id and time.
type carriedEntry struct {
	id, amount, balanceAfter int64
	currency                 string
	createdAt                time.Time
	count                    int
}

// ledgerAroundSQL reads the account's entries of one currency strictly between the last entry
// below $3 that is not a carried one and the first such entry above $4, and that entry below
// (whose balance the first run starts from), in id order. Carried entries are few, so both ends
// are a short walk of the (account, currency, id) index.
const ledgerAroundSQL = `
WITH lo AS (
    SELECT id, balance_after FROM wallet_entries
    WHERE account_id = $1 AND currency = $2 AND id < $3 AND reference <> 'archived:' || id
    ORDER BY id DESC LIMIT 1
), hi AS (
    SELECT min(id) AS id FROM wallet_entries
    WHERE account_id = $1 AND currency = $2 AND id > $4 AND reference <> 'archived:' || id
)
SELECT e.id, e.amount, e.balance_after, e.created_at,
       e.id = ANY($5) OR (e.kind = 'adjustment' AND e.reference = 'archived:' || e.id),
       COALESCE((SELECT balance_after FROM lo), 0)
FROM wallet_entries e
WHERE e.account_id = $1 AND e.currency = $2
  AND e.id > COALESCE((SELECT id FROM lo), 0) AND e.id < COALESCE((SELECT id FROM hi), 9223372036854775807)
ORDER BY e.id`

// carryRuns deletes the account's entries of currency that are archived now (ids, ascending) or
// carried already, and returns the carried entries to write in their place: one per run of such
// entries between two that stay, holding the run's sum, unless it is zero (the entries around
// it then chain without one). It checks that the ledger chains across each run.
func carryRuns(
	ctx context.Context, tx pgx.Tx, accountID uuid.UUID, currency string, ids []int64,
) ([]carriedEntry, error) {
	rows, err := tx.Query(ctx, ledgerAroundSQL, pgUUID(accountID), currency, ids[0], ids[len(ids)-1], ids)
	if err != nil {
		return nil, fmt.Errorf("read ledger around archived entries: %w", err)
	}
	var walk []ledgerRow
	var start int64
	var r ledgerRow
	if _, err := pgx.ForEachRow(rows, []any{&r.id, &r.amount, &r.balanceAfter, &r.createdAt, &r.member, &start},
		func() error {
			walk = append(walk, r)
			return nil
		}); err != nil {
		return nil, fmt.Errorf("read ledger around archived entries: %w", err)
	}
	archivedNow := make(map[int64]bool, len(ids))
	for _, id := range ids {
		archivedNow[id] = true
	}
	var out []carriedEntry
	var gone []int64
	balance := start
	for i := 0; i < len(walk); {
		if !walk[i].member {
			if balance+walk[i].amount != walk[i].balanceAfter {
				return nil, fmt.Errorf("ledger of account %s in %s does not chain at entry %d: %d + %d is not %d",
					accountID, currency, walk[i].id, balance, walk[i].amount, walk[i].balanceAfter)
			}
			balance = walk[i].balanceAfter
			i++
			continue
		}
		run := carriedEntry{currency: currency}
		fresh := false
		var members []int64
		for ; i < len(walk) && walk[i].member; i++ {
			run.amount += walk[i].amount
			run.count++
			run.id, run.balanceAfter, run.createdAt = walk[i].id, walk[i].balanceAfter, walk[i].createdAt
			fresh = fresh || archivedNow[walk[i].id]
			members = append(members, walk[i].id)
		}
		if balance+run.amount != run.balanceAfter {
			return nil, fmt.Errorf("ledger of account %s in %s does not chain across entries %d to %d: %d + %d is not %d",
				accountID, currency, members[0], run.id, balance, run.amount, run.balanceAfter)
		}
		balance = run.balanceAfter
		if !fresh {
			continue // a carried entry that nothing archived now joins stays as it is
		}
		gone = append(gone, members...)
		if run.amount != 0 {
			out = append(out, run)
		}
	}
	if len(gone) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM wallet_entries WHERE account_id = $1 AND id = ANY($2)`,
			pgUUID(accountID), gone); err != nil {
			return nil, fmt.Errorf("delete archived ledger entries: %w", err)
		}
	}
	return out, nil
}

// writeCarried inserts the carried entries, in one statement: the batch's last, since its
// foreign-key check takes KEY SHARE on the account's balance rows, which placements lock.
func writeCarried(ctx context.Context, tx pgx.Tx, accountID uuid.UUID, carried []carriedEntry) error {
	if len(carried) == 0 {
		return nil
	}
	n := len(carried)
	ids, amounts, balances := make([]int64, n), make([]int64, n), make([]int64, n)
	currencies, references, notes := make([]string, n), make([]string, n), make([]string, n)
	at := make([]time.Time, n)
	for i, c := range carried {
		ids[i], amounts[i], balances[i], at[i] = c.id, c.amount, c.balanceAfter, c.createdAt
		currencies[i] = c.currency
		references[i] = carriedPrefix + strconv.FormatInt(c.id, 10)
		notes[i] = CarriedNote
	}
	_, err := tx.Exec(ctx, `INSERT INTO wallet_entries (id, account_id, currency, kind, reference, amount,
			balance_after, note, created_at)
		SELECT c.id, $1, c.currency, 'adjustment', c.reference, c.amount, c.balance_after, c.note, c.created_at
		FROM unnest($2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::text[], $8::timestamptz[])
			AS c (id, currency, reference, amount, balance_after, note, created_at)`,
		pgUUID(accountID), ids, currencies, references, amounts, balances, notes, at)
	if err != nil {
		return fmt.Errorf("write carried ledger entries: %w", err)
	}
	return nil
}

// CarriedNote is the note of a carried entry, which statements show as an adjustment.
const CarriedNote = "Balance carried over from entries past the retention period"

// LockAccountArchival takes, for the rest of the transaction q, the right to archive the
// account's orders, unless another transaction holds it: it reports whether it got it, without
// waiting. Placements never take this lock.
func LockAccountArchival(ctx context.Context, q Querier, accountID uuid.UUID) (bool, error) {
	var mine bool
	if err := q.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))`,
		"archive:"+accountID.String()).Scan(&mine); err != nil {
		return false, fmt.Errorf("lock archival of account %s: %w", accountID, err)
	}
	return mine, nil
}
