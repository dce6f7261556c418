package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/codeport/codeport/hack/bench/history"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
)

// historyTables are the tables years of orders fill, largest first.
var historyTables = []string{"delivered_codes", "code_stock", "orders", "wallet_entries", "order_lines"}

// historyPoint is what one size of history measured.
type historyPoint struct {
	orders int64
	// placement is B7 on this database; spend is one partner under a daily spend limit placing
	// orders; reads are the p99 of each read at a fixed rate.
	placement completion
	spend     result
	reads     map[string]float64
	// walPerOrder is the WAL the placement run wrote per completed order, in bytes.
	walPerOrder float64
	sizes       []tableSize
	generated   history.Result
	// dump and restore of the database, seconds per GB of database.
	dumpPerGB, restorePerGB float64
	databaseBytes           int64
	// restoreSkipped says why the restore was not measured.
	restoreSkipped string
	// coldStart is a fresh operator on this database bringing historyOperatorPartners to Ready.
	coldStart time.Duration
	load      string
}

// databaseGB is the database's size at this point, in GB.
func (p historyPoint) databaseGB() float64 { return float64(p.databaseBytes) / (1 << 30) }

type tableSize struct {
	table                string
	heap, indexes, toast int64
	rows                 int64
	indexSizes           map[string]int64
}

// historyReads are the reads measured at each size: a partner's newest and oldest order, the
// first and the 50th page of its order history and of its statement (JSON and CSV).
var historyReads = []string{"GET /orders/{ref}, newest", "GET /orders/{ref}, oldest",
	"GET /orders, page 1", "GET /orders, page 50",
	"GET /wallet/transactions, page 1", "GET /wallet/transactions, page 50",
	"GET /wallet/transactions CSV, page 1", "GET /wallet/transactions CSV, page 50"}

// historyOperatorPartners is how many partners (each with a sandbox and a production ApiKey and
// a Wallet, 1 + 4n objects with the catalog) the operator's cold start brings to Ready at each
// size: a quarter of O1's, so three sizes cost about as much as O1.
const historyOperatorPartners = 250

// historyRounds is how many windows each throughput figure of a size of history is the median
// of. On two CPUs shared by the load, the fulfilment workers, autovacuum and checkpoints, one
// window's throughput swings by a fifth from the next, so a single window says more of the
// moment than of the history.
const historyRounds = 3

// historyReadRounds is how many windows each read takes at each size; its p99 is that of every
// request of them: of 10,000 requests, the 100 slowest. The median of three windows' p99s, each
// its 20 slowest of 2,000, moved by more than a millisecond from run to run, as much as the
// history was to be judged by.
const historyReadRounds = 5

// historyPageSize is the page of the history figures: page 50 is 1,000 rows down, which the
// spend figure's orders give the busiest partner even on the empty database.
const historyPageSize = 20

// historyFigures (when -figures names history) measures the API on a database that grows through the sizes of
// -history-points (orders written by the history generator before each), against the first
// size (the empty database) in the same run: B7 completed orders per second and placement p99,
// orders of a partner under a daily spend limit, the reads of historyReads, the tables' sizes
// per order, the WAL per completed order and pg_dump and pg_restore per GB.
func historyFigures(ctx context.Context, cfg config, binary, dir string) ([]historyPoint, error) {
	if !cfg.wants("history") {
		return nil, nil
	}
	ctrl.SetLogger(logr.Discard()) // envtest's, for the operator's cold start
	progress("history: provisioning %d partners and %d products", cfg.partners, cfg.products)
	t, err := newTenants(ctx, cfg.partners, cfg.products, cfg.funded)
	if err != nil {
		return nil, err
	}
	if !cfg.historyKeep {
		defer t.close()
	} else {
		defer t.db.Close()
		defer progress("history: kept the database %s", t.database.URL)
	}
	// The busiest partner of the history orders under a daily spend limit it never reaches:
	// every one of its orders takes the transactional path and reads the day's running total.
	if _, err := t.db.Pool.Exec(ctx, `UPDATE accounts SET daily_spend_limits = '{"EUR": 100000000000}'
		WHERE environment = $1 AND partner_id = (SELECT id FROM partners WHERE name = $2)`,
		string(tenancy.Production), partnerName(0)); err != nil {
		return nil, fmt.Errorf("spend limit: %w", err)
	}
	ring, err := codes.ParseKeyring(codesKey, "")
	if err != nil {
		return nil, err
	}
	if ring, err = ring.Attach(ctx, t.db.Pool); err != nil {
		return nil, err
	}
	srv, err := startServe(binary, t.database.URL, string(tenancy.Production))
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	var points []historyPoint
	var written int64
	for i, target := range cfg.historyPoints {
		p := historyPoint{orders: target}
		if add := target - written; add > 0 {
			progress("history: writing %d orders (to %d)", add, target)
			p.generated, err = history.Generate(ctx, t.db.Pool, history.Config{Orders: int(add),
				Until: time.Now().Add(-time.Minute), Span: 2 * 365 * 24 * time.Hour, Prefix: fmt.Sprintf("h%d", i),
				Workers: 2, Batch: 5000, Seed: uint64(i), Cipher: ring})
			if err != nil {
				return nil, err
			}
			written = target
			progress("history: wrote %d orders, %d entries, %d codes in %s", p.generated.Orders, p.generated.Entries,
				p.generated.Codes, p.generated.Elapsed.Round(time.Second))
			if err := verifyHistory(ctx, t); err != nil {
				return nil, err
			}
		}
		if _, err := t.db.Pool.Exec(ctx, `VACUUM ANALYZE orders, order_lines, wallet_entries, code_stock,
			delivered_codes`); err != nil {
			return nil, fmt.Errorf("vacuum: %w", err)
		}
		if err := settle(ctx, t); err != nil {
			return nil, err
		}
		if err := measureHistoryPoint(ctx, cfg, t, srv, binary, dir, i, &p); err != nil {
			return nil, err
		}
		points = append(points, p)
	}
	return points, nil
}

// settle writes out what writing the history left dirty before its size is measured: the
// server's dirty buffers (CHECKPOINT), then the host's dirty pages (sync: the test server runs on
// this host). Writing 10 M orders and vacuuming them leaves gigabytes unwritten; written during
// the windows instead, they would be charged to the size of the history rather than to a server
// in its steady state, and the empty database leaves nothing to write.
func settle(ctx context.Context, t *tenants) error {
	started := time.Now()
	if _, err := t.db.Pool.Exec(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	syscall.Sync()
	progress("history: checkpoint and sync in %s", time.Since(started).Round(time.Second))
	return nil
}

func verifyHistory(ctx context.Context, t *tenants) error {
	started := time.Now()
	findings, err := history.Verify(ctx, t.db.Pool)
	if err != nil {
		return err
	}
	if len(findings) > 0 {
		return fmt.Errorf("history: the money audit's rules are broken: %v", findings)
	}
	progress("history: the money audit's rules hold (%s)", time.Since(started).Round(time.Second))
	return nil
}

func measureHistoryPoint(
	ctx context.Context, cfg config, t *tenants, srv *server, binary, dir string, i int, p *historyPoint,
) error {
	p.load = loadAverage()
	// B7 on this database, with the WAL it writes; the spend-limited orders draw on the same
	// stock. Each window takes at most about 1,000 orders a second.
	need := int64(1000*cfg.duration.Seconds()) * 2 * historyRounds
	if err := topUpStock(ctx, t, binary, dir, orderProduct, need); err != nil {
		return err
	}
	var before, after int64
	if err := t.db.Pool.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&before); err != nil {
		return fmt.Errorf("wal position: %w", err)
	}
	progress("history: B7 at %d orders", p.orders)
	var err error
	placement := make([]completion, historyRounds)
	var placed float64
	for r := range placement {
		// Each round waits for its orders to complete, so the next starts on an empty queue.
		if placement[r], err = deployedOrders(ctx, t.db, srv.base, t.keys[1:cfg.funded], cfg.clients, cfg.duration,
			fmt.Sprintf("hb7-%d-%d-", i, r)); err != nil {
			return err
		}
		placed += placement[r].placed * cfg.duration.Seconds()
	}
	p.placement = medianCompletion(placement)
	if err := t.db.Pool.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&after); err != nil {
		return fmt.Errorf("wal position: %w", err)
	}
	p.walPerOrder = float64(after-before) / max(placed, 1)
	// One partner's orders take turns on its wallet and day rows, so the figure is the length of
	// that turn. Each window starts once the previous one's orders are fulfilled, as do the reads.
	progress("history: orders under a daily spend limit at %d orders", p.orders)
	spend := make([]result, historyRounds)
	for r := range spend {
		if spend[r], err = placeOrders(srv.base, t.keys[:1], 8, cfg.duration,
			fmt.Sprintf("hspend-%d-%d-", i, r)); err != nil {
			return fmt.Errorf("spend-limited orders: %w", err)
		}
		if err := waitFulfilled(ctx, t.db); err != nil {
			return err
		}
	}
	p.spend = median(spend)
	progress("history: reads at %d orders", p.orders)
	if p.reads, err = historyReadFigures(ctx, t, srv.base, cfg.duration); err != nil {
		return err
	}
	if p.sizes, err = historySizes(ctx, t); err != nil {
		return err
	}
	if err := t.db.Pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&p.databaseBytes); err != nil {
		return fmt.Errorf("database size: %w", err)
	}
	progress("history: operator cold start at %d orders", p.orders)
	if p.coldStart, err = historyColdStart(ctx, t, binary, dir, i); err != nil {
		return err
	}
	if p.orders > 0 && cfg.historyDump {
		return dumpAndRestore(ctx, t, p)
	}
	return nil
}

// historyColdStart is O1 on the history's database: a cluster of its own, with its tenants in a
// namespace of their own (the operator keys what it writes by namespace and name), and a fresh
// operator bringing them to Ready.
func historyColdStart(ctx context.Context, t *tenants, binary, dir string, i int) (time.Duration, error) {
	c, err := startClusterOn(ctx, filepath.Join(dir, fmt.Sprintf("history-operator-%d", i)),
		fmt.Sprintf("history-%d", i), t.database)
	if err != nil {
		return 0, err
	}
	defer c.stop()
	if err := c.createTenants(ctx, historyOperatorPartners); err != nil {
		return 0, err
	}
	op, err := c.startOperator(binary, fmt.Sprintf("history %d", i))
	if err != nil {
		return 0, err
	}
	defer op.stop()
	return c.waitReady(ctx, op.started, historyOperatorPartners, op)
}

// historyReadFigures is the p99 of each of historyReads at 200 requests a second, by the
// busiest partner, over historyReadRounds windows.
func historyReadFigures(
	ctx context.Context, t *tenants, base string, duration time.Duration,
) (map[string]float64, error) {
	key := t.keys[0]
	var newest, oldest string
	if err := t.db.Pool.QueryRow(ctx, `SELECT
			(SELECT external_order_code FROM orders WHERE account_id = a.id ORDER BY created_at DESC LIMIT 1),
			(SELECT external_order_code FROM orders WHERE account_id = a.id ORDER BY created_at LIMIT 1)
		FROM accounts a JOIN partners p ON p.id = a.partner_id WHERE p.name = $1 AND a.environment = $2`,
		partnerName(0), string(tenancy.Production)).Scan(&newest, &oldest); err != nil {
		return nil, fmt.Errorf("orders to read: %w", err)
	}
	page := "?limit=" + strconv.Itoa(historyPageSize)
	urls := map[string][2]string{
		"GET /orders/{ref}, newest": {base + "/orders/" + url.PathEscape(newest), ""},
		"GET /orders/{ref}, oldest": {base + "/orders/" + url.PathEscape(oldest), ""},
	}
	for _, list := range []struct{ name, path, accept string }{
		{"GET /orders", "/orders", ""}, {"GET /wallet/transactions", "/wallet/transactions", ""},
		{"GET /wallet/transactions CSV", "/wallet/transactions", "text/csv"},
	} {
		first := base + list.path + page
		deep, err := pageURL(ctx, first, key, list.accept, 50)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", list.name, err)
		}
		urls[list.name+", page 1"] = [2]string{first, list.accept}
		urls[list.name+", page 50"] = [2]string{deep, list.accept}
	}
	// The rounds go through every read in turn, so that a slow spell of the machine falls on one
	// window of several reads rather than on every window of one.
	latencies := map[string][]float64{}
	for range historyReadRounds {
		for _, name := range historyReads {
			u := urls[name]
			targeter := func(tg *vegeta.Target) error {
				tg.Method, tg.URL = http.MethodGet, u[0]
				tg.Header = http.Header{"X-Api-Key": []string{key}}
				if u[1] != "" {
					tg.Header.Set("Accept", u[1])
				}
				return nil
			}
			attacker := newAttacker(16, vegeta.MaxBody(0))
			for res := range attacker.Attack(targeter, vegeta.Rate{Freq: 200, Per: time.Second}, duration, "bench") {
				if res.Code != http.StatusOK {
					return nil, fmt.Errorf("%s: status %d, error %q", name, res.Code, res.Error)
				}
				latencies[name] = append(latencies[name], ms(res.Latency))
			}
		}
	}
	out := map[string]float64{}
	for name, values := range latencies {
		out[name] = percentile(values, 0.99)
	}
	return out, nil
}

// pageURL follows a list's cursors from first to the n-th page (JSON's nextCursor, CSV's
// X-Next-Cursor) and returns that page's URL.
func pageURL(ctx context.Context, first, key, accept string, n int) (string, error) {
	u := first
	for range n - 1 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, http.NoBody)
		if err != nil {
			return "", err
		}
		req.Header.Set("X-Api-Key", key)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %d %s", u, resp.StatusCode, body)
		}
		cursor := resp.Header.Get("X-Next-Cursor")
		if accept == "" {
			var page struct {
				NextCursor *string `json:"nextCursor"`
			}
			if err := json.Unmarshal(body, &page); err != nil {
				return "", fmt.Errorf("%s: %w", u, err)
			}
			if page.NextCursor != nil {
				cursor = *page.NextCursor
			}
		}
		if cursor == "" {
			return "", fmt.Errorf("%s: the list ends before page %d", first, n)
		}
		u = first + "&cursor=" + url.QueryEscape(cursor)
	}
	return u, nil
}

// historySizes reads each history table's heap, indexes and TOAST, and its rows.
func historySizes(ctx context.Context, t *tenants) ([]tableSize, error) {
	var out []tableSize
	for _, table := range historyTables {
		s := tableSize{table: table, indexSizes: map[string]int64{}}
		if err := t.db.Pool.QueryRow(ctx, `SELECT pg_relation_size(c.oid), pg_indexes_size(c.oid),
				COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0), (SELECT count(*) FROM `+table+`)
			FROM pg_class c WHERE c.oid = $1::regclass`, table).Scan(&s.heap, &s.indexes, &s.toast, &s.rows); err != nil {
			return nil, fmt.Errorf("size of %s: %w", table, err)
		}
		rows, err := t.db.Pool.Query(ctx, `SELECT indexrelid::regclass::text, pg_relation_size(indexrelid)
			FROM pg_index WHERE indrelid = $1::regclass`, table)
		if err != nil {
			return nil, fmt.Errorf("index sizes of %s: %w", table, err)
		}
		for rows.Next() {
			var name string
			var size int64
			if err := rows.Scan(&name, &size); err != nil {
				rows.Close()
				return nil, err
			}
			s.indexSizes[name] = size
		}
		rows.Close()
		out = append(out, s)
	}
	return out, nil
}

// dumpAndRestore times pg_dump (custom format) of the database and pg_restore of it into a new
// database with two jobs, per GB of the database's size.
func dumpAndRestore(ctx context.Context, t *tenants, p *historyPoint) error {
	file, err := os.CreateTemp("", "codeport-history-*.dump")
	if err != nil {
		return err
	}
	file.Close()
	defer os.Remove(file.Name())
	progress("history: pg_dump of %.1f GB", p.databaseGB())
	started := time.Now()
	if out, err := exec.CommandContext(ctx, "pg_dump", "-Fc", "-f", file.Name(), "-d", t.database.URL).
		CombinedOutput(); err != nil {
		return fmt.Errorf("pg_dump: %w\n%s", err, out)
	}
	p.dumpPerGB = time.Since(started).Seconds() / p.databaseGB()
	if p.restoreSkipped, err = restoreRoom(ctx, t, p.databaseBytes); err != nil || p.restoreSkipped != "" {
		return err
	}
	restored, err := storetest.Create(ctx, "bench_restore", false)
	if err != nil {
		return err
	}
	defer func() { _ = restored.Drop(context.WithoutCancel(ctx)) }()
	progress("history: pg_restore")
	started = time.Now()
	if out, err := exec.CommandContext(ctx, "pg_restore", "-j", "2", "--no-owner", "-d", restored.URL, file.Name()).
		CombinedOutput(); err != nil {
		return fmt.Errorf("pg_restore: %w\n%s", err, out)
	}
	p.restorePerGB = time.Since(started).Seconds() / p.databaseGB()
	return nil
}

// restoreRoom says why a restore of a database of size bytes would not fit beside it and its
// dump, or "" when it would: the restore needs about the database's size again, and running out
// of disk would stop the PostgreSQL server the whole run uses.
func restoreRoom(ctx context.Context, t *tenants, size int64) (string, error) {
	var dataDir string
	if err := t.db.Pool.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dataDir); err != nil {
		return "", fmt.Errorf("data directory: %w", err)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dataDir, &fs); err != nil {
		return "", fmt.Errorf("free space of %s: %w", dataDir, err)
	}
	free := int64(fs.Bavail) * fs.Bsize
	if need := size + size/4; free < need {
		return fmt.Sprintf("the restore needs about %.0f GB free, %.0f GB were", float64(need)/(1<<30),
			float64(free)/(1<<30)), nil
	}
	return "", nil
}

// loadAverage is the machine's load average over the last minute and five minutes.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return f[0] + " / " + f[1]
}

// printHistoryTables prints the figures of each size against the first (the empty database),
// and the bytes each table takes per order.
func printHistoryTables(cfg config, points []historyPoint) {
	if len(points) == 0 {
		return
	}
	fmt.Printf("\nYears of orders: %d partners, the busiest under a daily spend limit; %s per window, "+
		"each throughput figure the median of %d windows, each read's p99 that of its %d windows' requests.\n\n",
		cfg.partners, cfg.duration, historyRounds, historyReadRounds)
	header, rule := "| Figure |", "|---|"
	for i, p := range points {
		header += fmt.Sprintf(" %s orders |", count(p.orders))
		rule += "---|"
		if i > 0 {
			header += " ratio |"
			rule += "---|"
		}
	}
	fmt.Println(header + " target | result |")
	fmt.Println(rule + "---|---|")
	base := points[0]
	line := func(name string, value func(historyPoint) float64, target string, ok func(ratio float64) bool) {
		s := "| " + name + " |"
		pass := true
		for i, p := range points {
			s += fmt.Sprintf(" %.1f |", value(p))
			switch {
			case i == 0:
			case value(base) == 0:
				// Measured only where there is history (pg_dump and pg_restore per GB).
				s += " |"
			default:
				ratio := value(p) / value(base)
				s += fmt.Sprintf(" %.2fx |", ratio)
				pass = pass && (ok == nil || ok(ratio))
			}
		}
		result := "met"
		if !pass {
			result = "missed"
		}
		if target == "" {
			result = ""
		}
		fmt.Println(s + " " + target + " | " + result + " |")
	}
	atLeast := func(ratio float64) bool { return ratio >= 0.9 }
	atMost := func(ratio float64) bool { return ratio <= latencyRatio }
	line("B7 completed orders/s", func(p historyPoint) float64 { return p.placement.completed }, ">= 0.9x", atLeast)
	line("B7 placement p99 (ms)", func(p historyPoint) float64 { return p.placement.p99 }, "<= 1.5x", atMost)
	line("daily spend limit: orders/s, 8 clients, one partner",
		func(p historyPoint) float64 { return p.spend.max },
		">= 0.9x", atLeast)
	line("daily spend limit: placement p99 (ms)", func(p historyPoint) float64 { return p.spend.p99 },
		"<= 1.5x", atMost)
	for _, name := range historyReads {
		line(name+": p99 at 200/s (ms)", func(p historyPoint) float64 { return p.reads[name] }, "<= 1.5x", atMost)
	}
	line("WAL per completed order (bytes)", func(p historyPoint) float64 { return p.walPerOrder }, "", nil)
	line("pg_dump -Fc (s per GB)", func(p historyPoint) float64 { return p.dumpPerGB }, "", nil)
	line("pg_restore -j 2 (s per GB)", func(p historyPoint) float64 { return p.restorePerGB }, "", nil)
	line(fmt.Sprintf("operator cold start, %d partners to Ready (s)", historyOperatorPartners),
		func(p historyPoint) float64 { return p.coldStart.Seconds() }, "<= 1.5x", atMost)
	fmt.Print("\nLoad average (1 / 5 min) at each size's start:")
	for _, p := range points {
		fmt.Printf(" %s: %s;", count(p.orders), p.load)
	}
	fmt.Println()
	for _, p := range points {
		if p.restoreSkipped != "" {
			fmt.Printf("\npg_restore not measured at %s orders: %s.\n", count(p.orders), p.restoreSkipped)
		}
	}
	for _, p := range points[1:] {
		fmt.Printf("\nWritten: %d orders, %d lines, %d ledger entries, %d codes in %s; database %.2f GB.\n",
			p.generated.Orders, p.generated.Lines, p.generated.Entries, p.generated.Codes,
			p.generated.Elapsed.Round(time.Second), p.databaseGB())
	}
	last := points[len(points)-1]
	if last.orders == 0 {
		return
	}
	fmt.Printf("\nBytes per order at %s orders (heap / indexes / TOAST, and each index):\n\n", count(last.orders))
	fmt.Println("| table | rows | heap | indexes | TOAST | per order | indexes per order |")
	fmt.Println("|---|---|---|---|---|---|---|")
	var total float64
	for _, s := range last.sizes {
		per := float64(s.heap+s.indexes+s.toast) / float64(last.orders)
		total += per
		var idx []string
		for name, size := range s.indexSizes {
			idx = append(idx, fmt.Sprintf("%s %.0f", name, float64(size)/float64(last.orders)))
		}
		fmt.Printf("| %s | %d | %s | %s | %s | %.0f | %s |\n", s.table, s.rows, mb(s.heap), mb(s.indexes), mb(s.toast),
			per, strings.Join(idx, ", "))
	}
	fmt.Printf("| all | | | | | %.0f | |\n", total)
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/(1<<20)) }

func count(n int64) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%d M", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%d k", n/1000)
	}
	return strconv.FormatInt(n, 10)
}
