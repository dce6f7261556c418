package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/codeport/codeport/internal/retention"
	"github.com/codeport/codeport/internal/tenancy"
)

// B8: order placement while archival moves orders past retention to the archive
// (internal/retention), against placement alone in the same run: each round fills the funded
// partners' accounts with orders that finished 40 days ago, places B3's load once with nothing
// else running and once with an archiver working through the filled orders, and the figure is
// the ratio of the two p99s (medians of -rounds). It also reports the disk the archived orders
// took online and take in the archive, after a VACUUM FULL of the tables they left.

// archivalFillPerAccount is how many past-retention orders a round adds to each funded account:
// enough to keep the archiver busy for the whole measurement.
const archivalFillPerAccount = 4000

// archivalBatch is the archiver's batch, the default of a serving process.
const archivalBatch = retention.DefaultBatch

// fillArchivableSQL adds $3 completed orders of one unit at $4 minor units to account $1, with
// external order codes $2 followed by a counter, each with its line, one delivered code (random
// bytes of a sealed code's size) and its debit, finished and debited 40 days ago. The debits
// chain from the balance $6, which is lowered by their sum, as placements would have left it;
// nothing else writes the account meanwhile.
const fillArchivableSQL = `
WITH o AS (
    INSERT INTO orders (account_id, external_order_code, payload_hash, currency, total_price, total_quantity,
                        debited_amount, status, delivered, estimated_ready_at, created_at, finished_at)
    SELECT $1, $2 || g, sha256(($2 || g)::bytea), 'EUR', $4, 1, $4, 'completed', 1,
           now() - interval '40 days', now() - interval '40 days', now() - interval '40 days'
    FROM generate_series(1, $3::int) g
    RETURNING id, external_order_code
), l AS (
    INSERT INTO order_lines (order_id, line_no, product_code, unit_price, quantity, currency)
    SELECT id, 0, $5, $4, 1, 'EUR' FROM o
), c AS (
    INSERT INTO delivered_codes (order_id, line_no, unit_no, ciphertext, digest, delivered_at)
    SELECT id, 0, 0, decode(md5(random()::text) || md5(random()::text) || md5(random()::text), 'hex'),
           sha256(decode(md5(random()::text) || md5(id::text), 'hex')), now() - interval '40 days'
    FROM o
), e AS (
    INSERT INTO wallet_entries (id, account_id, currency, kind, reference, amount, balance_after, created_at)
    SELECT nextval('wallet_entries_id_seq'), $1, 'EUR', 'order_debit', s.id::text, -$4, $6::bigint - s.rn * $4,
           now() - interval '40 days'
    FROM (SELECT o.id, row_number() OVER (ORDER BY o.external_order_code) AS rn FROM o ORDER BY rn) s
)
UPDATE wallet_balances SET balance = balance - $3::bigint * $4 WHERE account_id = $1 AND currency = 'EUR'`

// hotAndArchiveSQL is the size, tables with their indexes and TOAST, of the tables an order's
// details leave and of those they go to.
const hotAndArchiveSQL = `SELECT
    pg_total_relation_size('order_lines') + pg_total_relation_size('delivered_codes') +
        pg_total_relation_size('wallet_entries'),
    pg_total_relation_size('order_lines_archive') + pg_total_relation_size('delivered_codes_archive') +
        pg_total_relation_size('wallet_entries_archive')`

// archivalFigures measures B8 when the run wants it.
func archivalFigures(ctx context.Context, cfg config, t *tenants, binary string) ([]row, error) {
	if !cfg.wants("archival") {
		return nil, nil
	}
	production := string(tenancy.Production)
	api, err := startServe(binary, t.database.URL, production, "--workers=false")
	if err != nil {
		return nil, err
	}
	defer api.stop()
	accounts, err := fundedAccounts(ctx, t, cfg.funded)
	if err != nil {
		return nil, err
	}
	archiver := retention.NewArchiver(t.db, retention.Policy{Environment: production, After: retention.Minimum,
		Batch: archivalBatch}, slog.New(slog.DiscardHandler))
	var quiet, busy []result
	var archivedPerSecond []float64
	for round := range cfg.rounds {
		if err := fillArchivable(ctx, t, accounts, fmt.Sprintf("b8-fill-%d-", round)); err != nil {
			return nil, err
		}
		progress("B8 placement alone, round %d of %d", round+1, cfg.rounds)
		alone, err := placeOrders(api.base, t.keys[:cfg.funded], cfg.clients, cfg.duration, fmt.Sprintf("b8q-%d-", round))
		if err != nil {
			return nil, err
		}
		progress("B8 placement during archival, round %d of %d", round+1, cfg.rounds)
		archCtx, stop := context.WithCancel(ctx)
		finished := make(chan archivalRun, 1)
		go func() { finished <- runArchival(archCtx, archiver) }()
		during, err := placeOrders(api.base, t.keys[:cfg.funded], cfg.clients, cfg.duration,
			fmt.Sprintf("b8a-%d-", round))
		stop()
		run := <-finished
		if err != nil {
			return nil, err
		}
		if run.err != nil {
			return nil, fmt.Errorf("archival during B8: %w", run.err)
		}
		if run.elapsed < cfg.duration {
			progress("B8 archival finished after %s, before the load: fill more orders", run.elapsed.Round(time.Millisecond))
		}
		quiet, busy = append(quiet, alone), append(busy, during)
		archivedPerSecond = append(archivedPerSecond, float64(run.orders)/run.elapsed.Seconds())
	}
	// Whatever the rounds left online goes now, for the sizes below.
	if _, err := archiver.RunOnce(ctx, time.Now()); err != nil {
		return nil, err
	}
	sizes, err := archivalSizes(ctx, t, accounts)
	if err != nil {
		return nil, err
	}
	alone, during := median(quiet), median(busy)
	figure := fmt.Sprintf("B8 POST /orders during archival (batches of %d), %d clients", archivalBatch, cfg.clients)
	rows := []row{
		{figure + ": p99 (ms)", during.p99, alone.p99, "<= 1.5x", during.p99 <= latencyRatio*alone.p99},
		{figure + ": orders/s", during.max, alone.max, "", true},
		{"B8 orders archived per second beside the load", medianOf(archivedPerSecond, func(v float64) float64 { return v }),
			0, "", true},
	}
	return append(rows, sizes...), nil
}

// archivalRun is what an archiver did until it ran out of orders or was stopped.
type archivalRun struct {
	orders  int64
	elapsed time.Duration
	err     error
}

// runArchival runs the archiver until nothing is left to archive or ctx ends.
func runArchival(ctx context.Context, archiver *retention.Archiver) archivalRun {
	started := time.Now()
	var run archivalRun
	for ctx.Err() == nil {
		done, err := archiver.RunOnce(ctx, time.Now())
		run.orders += done.Orders
		if err != nil && ctx.Err() == nil {
			run.err = err
			break
		}
		if done.Orders == 0 {
			break
		}
	}
	run.elapsed = time.Since(started)
	return run
}

// fundedAccounts are the production accounts of the first funded partners.
func fundedAccounts(ctx context.Context, t *tenants, funded int) ([]string, error) {
	rows, err := t.db.Pool.Query(ctx, `SELECT a.id::text FROM accounts a JOIN partners p ON p.id = a.partner_id
		WHERE a.environment = $1 AND p.name = ANY($2) ORDER BY p.name`,
		string(tenancy.Production), partnerNames(funded))
	if err != nil {
		return nil, fmt.Errorf("funded accounts: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("funded accounts: %w", err)
		}
		ids = append(ids, id)
	}
	if len(ids) != funded {
		return nil, fmt.Errorf("funded accounts: %d of %d found", len(ids), funded)
	}
	return ids, rows.Err()
}

func partnerNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = partnerName(i)
	}
	return names
}

// fillArchivable adds archivalFillPerAccount past-retention orders to each account.
func fillArchivable(ctx context.Context, t *tenants, accounts []string, prefix string) error {
	progress("B8 filling %d accounts with %d orders each, finished 40 days ago", len(accounts), archivalFillPerAccount)
	for i, account := range accounts {
		var balance int64
		if err := t.db.Pool.QueryRow(ctx, `SELECT balance FROM wallet_balances WHERE account_id = $1 AND currency = 'EUR'`,
			account).Scan(&balance); err != nil {
			return fmt.Errorf("balance of account %s: %w", account, err)
		}
		if _, err := t.db.Pool.Exec(ctx, fillArchivableSQL, account, fmt.Sprintf("%s%d-", prefix, i),
			archivalFillPerAccount, orderUnitPrice, orderProduct, balance); err != nil {
			return fmt.Errorf("fill account %s: %w", account, err)
		}
	}
	return nil
}

// archivalSizes fills the accounts once more, with nothing else running, and measures the
// tables an order's details leave, filled, then after archival and a VACUUM FULL (which returns
// their free space to the system; autovacuum only makes it reusable), and the archive's growth.
func archivalSizes(ctx context.Context, t *tenants, accounts []string) ([]row, error) {
	size := func() (hot, archive int64, err error) {
		if _, err := t.db.Pool.Exec(ctx, `VACUUM FULL order_lines, delivered_codes, wallet_entries,
				order_lines_archive, delivered_codes_archive, wallet_entries_archive`); err != nil {
			return 0, 0, fmt.Errorf("vacuum: %w", err)
		}
		err = t.db.Pool.QueryRow(ctx, hotAndArchiveSQL).Scan(&hot, &archive)
		return hot, archive, err
	}
	emptyHot, emptyArchive, err := size()
	if err != nil {
		return nil, err
	}
	if err := fillArchivable(ctx, t, accounts, "b8-size-"); err != nil {
		return nil, err
	}
	filledHot, _, err := size()
	if err != nil {
		return nil, err
	}
	done, err := retention.NewArchiver(t.db, retention.Policy{Environment: string(tenancy.Production),
		After: retention.Minimum}, slog.New(slog.DiscardHandler)).RunOnce(ctx, time.Now())
	if err != nil {
		return nil, err
	}
	archivedHot, archived, err := size()
	if err != nil {
		return nil, err
	}
	n := float64(done.Orders)
	perOrder := func(bytes int64) float64 { return float64(bytes) / n }
	return []row{
		{fmt.Sprintf("B8 lines, codes and ledger online per order, %d orders filled (bytes)", done.Orders),
			perOrder(filledHot - emptyHot), 0, "", true},
		{"B8 the same, left online after archival and VACUUM FULL (bytes per order)",
			perOrder(archivedHot - emptyHot), 0, "", true},
		{"B8 the archive's growth (bytes per order)", perOrder(archived - emptyArchive), 0, "", true},
	}, nil
}
