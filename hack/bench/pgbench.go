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

	"github.com/codeport/codeport/apiserver/store"
)

// placementScript is the write shape of one order placement, as plain SQL: the order row, the
// wallet row locked, debited and its ledger entry appended, the order's debit recorded, its
// line, and its fulfilment job. It is what the API's placement transaction writes, without
// the API: the database's own ceiling for B3.
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
    VALUES (:order_id, 0, '` + orderProduct + `', ` + "%[1]d" + `, 1, 'EUR', '');
INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, scheduled_at)
    VALUES (json_build_object('orderId', :order_id::uuid, 'environment', 'production'), 'codeport.fulfil_order', 25, 1,
            'fulfilment_production', 'available', now());
COMMIT;
`

// pgbenchPlacements runs placementScript with pgbench against databaseURL: clients connections
// for duration, over the funded accounts. It returns transactions per second and the p99.
func pgbenchPlacements(
	ctx context.Context, db *store.DB, databaseURL string, clients int, duration time.Duration,
) (result, error) {
	if err := db.Gorm.WithContext(ctx).Exec(`CREATE TABLE IF NOT EXISTS bench_accounts AS
		SELECT (row_number() OVER (ORDER BY account_id) - 1)::int AS n, account_id
		FROM wallet_balances WHERE currency = 'EUR'`).Error; err != nil {
		return result{}, fmt.Errorf("pgbench accounts: %w", err)
	}
	var accounts int64
	if err := db.Gorm.WithContext(ctx).Raw(`SELECT count(*) FROM bench_accounts`).Scan(&accounts).Error; err != nil {
		return result{}, fmt.Errorf("pgbench accounts: %w", err)
	}
	dir, err := os.MkdirTemp("", "codeport-pgbench-")
	if err != nil {
		return result{}, fmt.Errorf("pgbench dir: %w", err)
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "placement.sql")
	if err := os.WriteFile(script, fmt.Appendf(nil, placementScript, orderUnitPrice), 0o600); err != nil {
		return result{}, fmt.Errorf("pgbench script: %w", err)
	}
	cmd := exec.CommandContext(ctx, "pgbench", "--no-vacuum", "--protocol", "prepared",
		"--file", script, "--define", fmt.Sprintf("accounts=%d", accounts),
		"--client", strconv.Itoa(clients), "--jobs", "2", "--time", strconv.Itoa(int(duration.Seconds())),
		"--log", "--log-prefix", filepath.Join(dir, "tx"), databaseURL)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		return result{}, fmt.Errorf("pgbench printed no tps:\n%s", out)
	}
	if failed := regexp.MustCompile(`number of failed transactions: ([1-9][0-9]*)`).FindSubmatch(out); failed != nil {
		return result{}, fmt.Errorf("pgbench: %s transactions failed:\n%s", failed[1], out)
	}
	tps, _ := strconv.ParseFloat(string(m[1]), 64)
	latencies, err := pgbenchLatencies(dir)
	if err != nil {
		return result{}, err
	}
	return result{max: tps, p50: percentile(latencies, 0.50), p99: percentile(latencies, 0.99)}, nil
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
