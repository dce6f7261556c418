package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/tenancy"
)

// unfinishedJobs counts the production fulfilment jobs not yet in a terminal state: the queue
// B7's workers work.
const unfinishedJobs = `SELECT count(*) FROM river_job WHERE queue = 'fulfilment_production'
	AND state IN ('available', 'pending', 'running', 'retryable', 'scheduled')`

// completedFigures measures B7, completed orders per second as deployed: one production serve
// process with its fulfilment workers, production keys of the funded partners, stock imported
// with `codeport codes import`, the clients of B3 placing 1-unit orders for the run's duration,
// and then the wait until every accepted order is terminal. Its baseline is pgbench running
// both transactions of an order (pgbenchCompletions). It returns the rows and the process's
// peak RSS.
func completedFigures(ctx context.Context, cfg config, t *tenants, binary, dir string) ([]row, float64, error) {
	// B3 leaves the jobs of its orders on the production queue for no worker; they are not this
	// figure's work.
	if _, err := t.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now()
		WHERE queue = 'fulfilment_production' AND state = 'available'`); err != nil {
		return nil, 0, fmt.Errorf("cancel B3's jobs: %w", err)
	}
	srv, err := startServe(binary, t.database.URL, string(tenancy.Production))
	if err != nil {
		return nil, 0, err
	}
	defer srv.stop()
	// Enough stock that neither side runs out: the first round allows for 4,000 orders/s, the
	// next ones for half as much again as the fastest side so far.
	rate := 4000.0
	var oursRounds, baseRounds []completion
	for round := range cfg.rounds {
		need := int64(rate * cfg.duration.Seconds())
		for _, product := range []string{orderProduct, pgbenchProduct} {
			if err := topUpStock(ctx, t, binary, dir, product, need); err != nil {
				return nil, 0, err
			}
		}
		progress("B7 completed orders as deployed, round %d of %d", round+1, cfg.rounds)
		var ours completion
		_, err := cfg.profiled(ctx, srv, "b7", round, func() (result, error) {
			var err error
			ours, err = deployedOrders(ctx, t.db, srv.base, t.keys[:cfg.funded], cfg.clients, cfg.duration,
				fmt.Sprintf("b7-%d-", round))
			return result{}, err
		})
		if err != nil {
			return nil, 0, err
		}
		progress("B7 pgbench baseline, round %d of %d", round+1, cfg.rounds)
		base, err := pgbenchCompletions(ctx, t.db, t.database.URL, cfg.clients, cfg.duration)
		if err != nil {
			return nil, 0, err
		}
		oursRounds, baseRounds = append(oursRounds, ours), append(baseRounds, base)
		rate = max(rate, 1.5*ours.placed, 1.5*base.placed)
		for _, product := range []string{orderProduct, pgbenchProduct} {
			left, err := store.StockCount(ctx, t.db.Pool, product)
			if err != nil {
				return nil, 0, err
			}
			if left == 0 {
				return nil, 0, fmt.Errorf("B7: the stock of %s ran out during round %d", product, round+1)
			}
		}
	}
	rss, err := srv.peakRSS()
	if err != nil {
		return nil, 0, err
	}
	ours, base := medianCompletion(oursRounds), medianCompletion(baseRounds)
	figure := fmt.Sprintf("B7 orders as deployed (workers on), %d clients over %d partners", cfg.clients, cfg.funded)
	return []row{
		{figure + ": completed/s (accepted orders ÷ (load window + drain))", ours.completed, base.completed, ">= 0.5x",
			ours.completed >= 0.5*base.completed},
		{figure + ": placed/s in the load window", ours.placed, base.placed, "", true},
		{figure + ": completed/s in the load window", ours.during, base.completed, "", true},
		// pgbench's latency is of both transactions of an order; ours is the placement's alone.
		{figure + ": p99 placement (ms; baseline: placement and fulfilment)", ours.p99, base.p99, "<= 1.5x",
			ours.p99 <= latencyRatio*base.p99},
		{figure + ": p50 placement (ms; baseline: placement and fulfilment)", ours.p50, base.p50, "", true},
		{figure + ": p99 placement to completed (ms)", ours.toCompleted, base.toCompleted, "", true},
		{figure + ": fulfilment jobs queued at the load stop", ours.depth, 0, "", true},
		{figure + ": drain after the load stops (s)", ours.drain, 0, "<= 2 s", ours.drain <= 2},
	}, rss, nil
}

// deployedOrders runs one round of B7 against the serve process at base: clients place 1-unit
// orders (external codes prefix and a counter) for duration, then it waits until every accepted
// order is terminal and reads the figures from the orders' own timestamps.
func deployedOrders(
	ctx context.Context, db *store.DB, base string, keys []string, clients int, duration time.Duration, prefix string,
) (completion, error) {
	start := time.Now()
	placed, err := placeOrders(base, keys, clients, duration, prefix)
	if err != nil {
		return completion{}, fmt.Errorf("B7: %w", err)
	}
	end := time.Now()
	endSeconds := float64(end.UnixMicro()) / 1e6
	var depth int64
	if err := db.Pool.QueryRow(ctx, unfinishedJobs).Scan(&depth); err != nil {
		return completion{}, fmt.Errorf("queue depth: %w", err)
	}
	var s struct {
		Accepted, Completed, Processing, During int64
		Last, P99                               float64
	}
	deadline := end.Add(2 * time.Minute)
	for {
		// A job is marked completed after its order's transaction commits, so an empty queue has
		// every order terminal; the orders are checked all the same.
		if err := waitFulfilled(ctx, db); err != nil {
			return completion{}, fmt.Errorf("B7: %w", err)
		}
		err := db.Pool.QueryRow(ctx, `SELECT count(*) AS accepted,
				count(*) FILTER (WHERE status = 'completed') AS completed,
				count(*) FILTER (WHERE status = 'processing') AS processing,
				count(*) FILTER (WHERE finished_at <= to_timestamp($1)) AS during,
				COALESCE(EXTRACT(EPOCH FROM max(finished_at)), 0)::float8 AS last,
				COALESCE(percentile_cont(0.99) WITHIN GROUP (
					ORDER BY EXTRACT(EPOCH FROM finished_at - created_at)), 0) * 1000 AS p99
			FROM orders WHERE external_order_code LIKE $2`, endSeconds, prefix+"%").
			Scan(&s.Accepted, &s.Completed, &s.Processing, &s.During, &s.Last, &s.P99)
		if err != nil {
			return completion{}, fmt.Errorf("B7 orders: %w", err)
		}
		if s.Processing == 0 {
			break
		}
		if time.Now().After(deadline) {
			return completion{}, fmt.Errorf("B7: %d orders still processing %s after the load stopped",
				s.Processing, time.Since(end).Round(time.Second))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s.Completed != s.Accepted {
		return completion{}, fmt.Errorf("B7: %d of %d accepted orders completed", s.Completed, s.Accepted)
	}
	window := end.Sub(start).Seconds()
	drain := max(s.Last-endSeconds, 0)
	return completion{
		placed:      float64(s.Accepted) / window,
		completed:   float64(s.Completed) / (window + drain),
		during:      float64(s.During) / window,
		p50:         placed.p50,
		p99:         placed.p99,
		toCompleted: s.P99,
		depth:       float64(depth),
		drain:       drain,
	}, nil
}

// waitFulfilled waits until the production fulfilment queue is empty, for at most two minutes.
func waitFulfilled(ctx context.Context, db *store.DB) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var unfinished int64
		if err := db.Pool.QueryRow(ctx, unfinishedJobs).Scan(&unfinished); err != nil {
			return fmt.Errorf("queue depth: %w", err)
		}
		if unfinished == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d fulfilment jobs still unfinished after two minutes", unfinished)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// topUpStock imports codes of product with `codeport codes import`, as an operator loads stock,
// until at least need are available.
func topUpStock(ctx context.Context, t *tenants, binary, dir, product string, need int64) error {
	have, err := store.StockCount(ctx, t.db.Pool, product)
	if err != nil {
		return err
	}
	if have >= need {
		return nil
	}
	n := need - have
	batch := make([]byte, 6)
	_, _ = rand.Read(batch)
	label := hex.EncodeToString(batch)
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "BENCH-%s-%s-%09d\n", product, label, i)
	}
	file := filepath.Join(dir, "stock-"+label+".txt")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("stock file: %w", err)
	}
	defer os.Remove(file)
	started := time.Now()
	out, err := exec.CommandContext(ctx, binary, "codes", "import", "--product", product,
		"--database-url", t.database.URL, "--codes-key", codesKey, file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("codes import %s: %w\n%s", product, err, out)
	}
	progress("B7 stock: %s (%s)", strings.TrimSpace(string(out)), time.Since(started).Round(time.Millisecond))
	return nil
}

// medianCompletion is each field's median over rounds (the upper one of an even count).
func medianCompletion(rounds []completion) completion {
	pick := func(field func(completion) float64) float64 { return medianOf(rounds, field) }
	return completion{
		placed:      pick(func(c completion) float64 { return c.placed }),
		completed:   pick(func(c completion) float64 { return c.completed }),
		p50:         pick(func(c completion) float64 { return c.p50 }),
		p99:         pick(func(c completion) float64 { return c.p99 }),
		toCompleted: pick(func(c completion) float64 { return c.toCompleted }),
		depth:       pick(func(c completion) float64 { return c.depth }),
		drain:       pick(func(c completion) float64 { return c.drain }),
		during:      pick(func(c completion) float64 { return c.during }),
	}
}
