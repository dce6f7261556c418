package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codeport/codeport/internal/store"
)

// placementScript is the write shape of one order placement, as plain SQL: the order row, the
// wallet row locked, debited and its ledger entry appended, the order's debit recorded, its
// line, and its fulfilment job. It is what the API's placement transaction writes, without
// the API: the database's own ceiling for B3. Its format arguments are the unit price, the
// product ordered and the job's queue.
const placementScript = `\set n random(0, :accounts - 1)
BEGIN;
SELECT account_id AS acct FROM bench_accounts WHERE n = :n \gset
INSERT INTO orders (id, account_id, external_order_code, payload_hash, currency, total_price, total_quantity,
        estimated_ready_at)
    VALUES (gen_random_uuid(), :acct, 'pgbench-' || gen_random_uuid(), '\x00', 'EUR', ` + "%[1]d" + `, 1,
        now() + interval '2 seconds')
    ON CONFLICT (account_id, external_order_code) DO NOTHING RETURNING id AS order_id \gset
SELECT b.balance, b.low_balance FROM wallet_balances b JOIN accounts a ON a.id = b.account_id
    WHERE b.account_id = :acct AND b.currency = 'EUR' FOR UPDATE OF b;
WITH updated AS (
    UPDATE wallet_balances SET balance = balance - ` + "%[1]d" + `, low_balance = false, updated_at = now()
    WHERE account_id = :acct AND currency = 'EUR' RETURNING balance)
INSERT INTO wallet_entries (account_id, currency, kind, reference, amount, balance_after, note)
    SELECT :acct, 'EUR', 'order_debit', :order_id, -` + "%[1]d" + `, balance, '' FROM updated;
UPDATE orders SET debited_amount = ` + "%[1]d" + ` WHERE id = :order_id;
INSERT INTO order_lines (order_id, line_no, product_code, unit_price, quantity, currency, sku)
    VALUES (:order_id, 0, '%[2]s', ` + "%[1]d" + `, 1, 'EUR', '');
INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, scheduled_at)
    VALUES (json_build_object('orderId', :order_id::uuid, 'environment', 'production'), 'codeport.fulfil_order', 25, 1,
            '%[3]s', 'available', now());
COMMIT;
`

// fulfilmentScript is the write shape of one order's fulfilment, as plain SQL, in the
// transaction after its placement (placementScript's, same format arguments): the oldest
// available job of the queue claimed with FOR UPDATE SKIP LOCKED as River fetches, one code of
// the product claimed from the stock as store.ClaimStock claims it (oldest import first, FOR
// UPDATE SKIP LOCKED), taken out of the stock and recorded as delivered, the order completed as
// store.FinishOrders does, and the job marked completed. A client that finds no job unclaimed
// writes nothing.
const fulfilmentScript = `BEGIN;
WITH job AS (SELECT id, args->>'orderId' AS order_id FROM river_job
        WHERE state = 'available' AND queue = '%[3]s' AND scheduled_at <= now()
        ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
SELECT coalesce((SELECT id FROM job), 0) AS job_id, coalesce((SELECT order_id FROM job), '') AS job_order \gset
\if :job_id > 0
WITH stock AS (
    DELETE FROM code_stock
    WHERE id IN (SELECT id FROM code_stock WHERE product_code = '%[2]s' AND order_id IS NULL
                 ORDER BY imported_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING id, key_ref, ciphertext, digest)
INSERT INTO delivered_codes (order_id, line_no, unit_no, stock_id, key_ref, ciphertext, digest, delivered_at)
    SELECT :job_order::uuid, 0, 0, id, key_ref, ciphertext, digest, now() FROM stock;
UPDATE orders SET status = 'completed', delivered = 1, refunded_amount = 0, reason = NULL, finished_at = now()
    WHERE id = :job_order::uuid AND status = 'processing';
UPDATE river_job SET state = 'completed', attempt = attempt + 1, attempted_at = now(), finalized_at = now()
    WHERE id = :job_id;
\endif
COMMIT;
`

// pgbenchPlacements runs placementScript with pgbench against databaseURL: clients connections
// for duration, over the funded accounts. It returns transactions per second and the p99.
func pgbenchPlacements(
	ctx context.Context, db *store.DB, databaseURL string, clients int, duration time.Duration,
) (result, error) {
	script := fmt.Sprintf(placementScript, orderUnitPrice, orderProduct, "fulfilment_production")
	tps, _, latencies, err := runPgbench(ctx, db, databaseURL, script, clients, duration)
	if err != nil {
		return result{}, err
	}
	return result{max: tps, p50: percentile(latencies, 0.50), p99: percentile(latencies, 0.99)}, nil
}

// runPgbench runs script with pgbench against databaseURL: clients connections for duration,
// over the funded accounts (bench_accounts, made here once). It returns transactions (script
// runs) per second, their count, and every one's latency in milliseconds.
func runPgbench(
	ctx context.Context, db *store.DB, databaseURL, script string, clients int, duration time.Duration,
) (float64, int64, []float64, error) {
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_accounts AS
		SELECT (row_number() OVER (ORDER BY account_id) - 1)::int AS n, account_id
		FROM wallet_balances WHERE currency = 'EUR'`); err != nil {
		return 0, 0, nil, fmt.Errorf("pgbench accounts: %w", err)
	}
	var accounts int64
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM bench_accounts`).Scan(&accounts); err != nil {
		return 0, 0, nil, fmt.Errorf("pgbench accounts: %w", err)
	}
	dir, err := os.MkdirTemp("", "codeport-pgbench-")
	if err != nil {
		return 0, 0, nil, fmt.Errorf("pgbench dir: %w", err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "script.sql")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		return 0, 0, nil, fmt.Errorf("pgbench script: %w", err)
	}
	cmd := exec.CommandContext(ctx, "pgbench", "--no-vacuum", "--protocol", "prepared",
		"--file", file, "--define", fmt.Sprintf("accounts=%d", accounts),
		"--client", strconv.Itoa(clients), "--jobs", "2", "--time", strconv.Itoa(int(duration.Seconds())),
		"--log", "--log-prefix", filepath.Join(dir, "tx"), databaseURL)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, nil, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
	n := regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`).FindSubmatch(out)
	if m == nil || n == nil {
		return 0, 0, nil, fmt.Errorf("pgbench printed no tps:\n%s", out)
	}
	if failed := regexp.MustCompile(`number of failed transactions: ([1-9][0-9]*)`).FindSubmatch(out); failed != nil {
		return 0, 0, nil, fmt.Errorf("pgbench: %s transactions failed:\n%s", failed[1], out)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	count, _ := strconv.ParseInt(string(n[1]), 10, 64)
	latencies, err := pgbenchLatencies(dir)
	if err != nil {
		return 0, 0, nil, err
	}
	return tps, count, latencies, nil
}

// pgbenchLatencies reads every transaction's latency (ms) from pgbench's per-transaction logs:
// "client_id transaction_no time_us script_no epoch epoch_us".
func pgbenchLatencies(dir string) ([]float64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "tx.*"))
	if err != nil {
		return nil, fmt.Errorf("pgbench logs: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("pgbench wrote no logs in %s", dir)
	}
	var out []float64
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, fmt.Errorf("pgbench log: %w", err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			us, err := strconv.ParseFloat(fields[2], 64)
			if err != nil {
				continue
			}
			out = append(out, us/1000)
		}
		_ = fh.Close()
	}
	return out, nil
}

func percentile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return 0
	}
	slices.Sort(values)
	return values[min(int(q*float64(len(values))), len(values)-1)]
}

const (
	// pgbenchProduct is what B7's baseline orders and claims codes of; ours orders orderProduct,
	// so neither side takes the other's stock.
	pgbenchProduct = "10000000000043"
	// pgbenchQueue holds the baseline's jobs, out of the way of the production workers that run
	// meanwhile (idle) in the serve process of B7.
	pgbenchQueue = "fulfilment_pgbench"
)

// completion is one B7 measurement: orders placed and completed per second, placement latency,
// placement to completed, the fulfilment queue's depth when the load stopped and the time it
// took to drain.
type completion struct {
	placed, completed, p50, p99, toCompleted, depth, drain float64
	// during is the orders completed per second while the load ran.
	during float64
}

// pgbenchCompletions runs B7's baseline: placementScript and fulfilmentScript as one pgbench
// script, two transactions, so that each run of it places one order and completes one, with
// clients connections for duration. TPS is orders placed and completed per second; the orders
// it completed are counted too, and must be one per run.
func pgbenchCompletions(
	ctx context.Context, db *store.DB, databaseURL string, clients int, duration time.Duration,
) (completion, error) {
	const completed = `SELECT count(*) FROM river_job WHERE state = 'completed' AND queue = '` + pgbenchQueue + `'`
	var before, after int64
	if err := db.Pool.QueryRow(ctx, completed).Scan(&before); err != nil {
		return completion{}, fmt.Errorf("count completed: %w", err)
	}
	script := fmt.Sprintf(placementScript+fulfilmentScript, orderUnitPrice, pgbenchProduct, pgbenchQueue)
	tps, runs, latencies, err := runPgbench(ctx, db, databaseURL, script, clients, duration)
	if err != nil {
		return completion{}, err
	}
	if err := db.Pool.QueryRow(ctx, completed).Scan(&after); err != nil {
		return completion{}, fmt.Errorf("count completed: %w", err)
	}
	// A client that found every job claimed by others completes one order fewer than it placed;
	// the next run's clients take what it left.
	if done := after - before; done < runs*99/100 {
		return completion{}, fmt.Errorf("pgbench completed %d orders in %d runs of its script", done, runs)
	}
	elapsed := float64(runs) / tps
	p50, p99 := percentile(latencies, 0.50), percentile(latencies, 0.99)
	done := float64(after-before) / elapsed
	return completion{placed: tps, completed: done, during: done, p50: p50, p99: p99, toCompleted: p99}, nil
}
