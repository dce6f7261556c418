package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/testprocess"
)

type config struct {
	duration                   time.Duration
	partners, products, funded int
	clients                    int
	figures                    map[string]bool
	cpuProfile                 string
	// rounds of each B3 and B7 figure and readRounds of each B1 and B2 figure, ours and its
	// baseline taking turns; the tables show medians.
	rounds, readRounds int
	// operatorPartners, noiseSecrets and noiseBytes size the operator figures' cluster.
	operatorPartners, noiseSecrets, noiseBytes int
	// catalogProducts sizes the catalog-scale figures' catalog.
	catalogProducts int
	// historyPoints are the sizes of order history the history figures measure at, the first
	// the baseline; historyDump times pg_dump and pg_restore at each size but the empty one, and
	// historyKeep leaves the database behind for EXPLAIN.
	historyPoints            []int64
	historyDump, historyKeep bool
}

// figureGroups are the parts of a run that -figures selects, in the order they run;
// defaultFigures are those a run without -figures measures.
const (
	figureGroups   = "reads,redis,orders,completed,completion,archival,scale,operator,catalog-scale,history"
	defaultFigures = "reads,redis,orders,completed,completion,archival,scale"
	// defaultHistoryPoints are the sizes of order history a history run measures at; make
	// bench-history passes the same.
	defaultHistoryPoints = "0,1000000,10000000"
)

// wants reports whether the run measures the figure group.
func (cfg config) wants(group string) bool { return cfg.figures[group] }

// wantsAny reports whether the run measures any of the figure groups.
func (cfg config) wantsAny(groups ...string) bool { return slices.ContainsFunc(groups, cfg.wants) }

// peak is a serve process's peak resident memory (B5).
type peak struct {
	process string
	mb      float64
}

func main() {
	var cfg config
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "length of each measurement")
	flag.IntVar(&cfg.partners, "partners", 1000, "partners to provision, each with a production key")
	flag.IntVar(&cfg.products, "products", 1000, "products in the partners' catalog")
	flag.IntVar(&cfg.funded, "funded", 100, "partners with a funded wallet, placing the orders of B3 and B7")
	flag.IntVar(&cfg.rounds, "rounds", 3,
		"rounds of each B3 and B7 measurement, ours and the baseline taking turns; the medians are reported")
	flag.IntVar(&cfg.readRounds, "read-rounds", 5,
		"rounds of each B1 and B2 measurement (their tails at a fixed rate swing more between rounds than "+
			"throughputs do); the medians are reported")
	flag.IntVar(&cfg.clients, "clients", 32, "concurrent clients of B3 and B7 (and pgbench connections)")
	scale := flag.Bool("scale", true, "measure the B6 scale curve (provisions up to 10,000 partners)")
	figures := flag.String("figures", defaultFigures,
		"figure groups to measure: reads (B1, B2), redis (B1 with the Redis limiter), orders (B3), "+
			"completed (B7, orders completed per second with the workers on), completion (B4), "+
			"scale (B6); B5 covers the processes that ran. Ratios against the list baseline need reads. "+
			"operator (O1-O3: the operator's cold start, memory and failover against envtest) and "+
			"catalog-scale (C1-C4: a catalog of CatalogShards through envtest, the operator and two serve replicas) "+
			"run only when named, as does history (the API on years of orders: see -history-points)")
	flag.IntVar(&cfg.catalogProducts, "catalog-products", 100_000,
		"catalog-scale figures: realistic products of the catalog, in shards of MaxShardProducts (500)")
	flag.IntVar(&cfg.operatorPartners, "operator-partners", 1000,
		"operator figures: partners, each with a catalog ref, two ApiKeys and a Wallet")
	flag.IntVar(&cfg.noiseSecrets, "operator-unrelated-secrets", 10000,
		"operator figures: Secrets in the cluster that have nothing to do with codeport")
	flag.IntVar(&cfg.noiseBytes, "operator-unrelated-secret-bytes", 4096,
		"operator figures: data size of each unrelated Secret (a TLS Secret is about 4 KB)")
	points := flag.String("history-points", defaultHistoryPoints,
		"history figures: orders of history to measure at, in increasing order, the first the baseline")
	flag.BoolVar(&cfg.historyDump, "history-dump", true,
		"history figures: time pg_dump and pg_restore at each size of history but the empty one")
	flag.BoolVar(&cfg.historyKeep, "history-keep", false,
		"history figures: keep the database (its URL is printed), to EXPLAIN queries on it")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "",
		"write CPU profiles of serve during the throughput runs to PREFIX-b1.prof, -b1-filtered.prof, -b2.prof, "+
			"-b1-redis.prof, -b3.prof and -b7.prof, and its heap after B1 and B2 to PREFIX-b1-heap.prof")
	baselineAddr := flag.String("serve-baseline", "",
		"serve the Fiber baseline at this address, GET path answering file for each path=file argument "+
			"(the bench starts it so)")
	baselineRedis := flag.String("baseline-redis", "",
		"with -serve-baseline: count every request in this Redis first, "+
			"one MULTI/EXEC of INCR and EXPIREAT per request")
	flag.Parse()
	if *baselineAddr != "" {
		if err := serveBaseline(*baselineAddr, *baselineRedis, flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	// The load generator allocates per request; collecting less often keeps its own pauses and
	// mark workers out of the latencies and the CPU it shares with the servers it measures.
	debug.SetGCPercent(800)
	cfg.figures = map[string]bool{}
	for _, g := range strings.Split(*figures, ",") {
		if !slices.Contains(strings.Split(figureGroups, ","), g) {
			fmt.Fprintf(os.Stderr, "bench: unknown figure group %q (have %s)\n", g, figureGroups)
			os.Exit(2)
		}
		cfg.figures[g] = true
	}
	if cfg.rounds < 1 || cfg.readRounds < 1 {
		fmt.Fprintln(os.Stderr, "bench: -rounds and -read-rounds must be at least 1")
		os.Exit(2)
	}
	for _, p := range strings.Split(*points, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil || n < 0 || (len(cfg.historyPoints) > 0 && n < cfg.historyPoints[len(cfg.historyPoints)-1]) {
			fmt.Fprintf(os.Stderr, "bench: -history-points must be order counts in increasing order, not %q\n", *points)
			os.Exit(2)
		}
		cfg.historyPoints = append(cfg.historyPoints, n)
	}
	cfg.figures["scale"] = cfg.figures["scale"] && *scale
	if cfg.figures["scale"] && !cfg.figures["reads"] {
		fmt.Fprintln(os.Stderr, "bench: the scale curve is held against the list baseline: -figures scale needs reads")
		os.Exit(2)
	}
	if err := run(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// profiled runs measure and, in a run's first round when -cpuprofile is set, records a CPU
// profile of srv meanwhile into PREFIX-figure.prof.
func (cfg config) profiled(
	ctx context.Context, srv *server, figure string, round int, measure func() (result, error),
) (result, error) {
	if cfg.cpuProfile == "" || round > 0 {
		return measure()
	}
	done := make(chan error, 1)
	go func() { done <- srv.cpuProfile(ctx, cfg.cpuProfile+"-"+figure+".prof", cfg.duration) }()
	res, err := measure()
	return res, errors.Join(err, <-done)
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func run(ctx context.Context, cfg config) error {
	if cfg.funded > cfg.partners {
		return errors.New("-funded must not exceed -partners")
	}
	if _, err := exec.LookPath("pgbench"); err != nil && cfg.wantsAny("orders", "completed") {
		return errors.New("the baselines of B3 and B7 need pgbench (Debian: apt-get install postgresql)")
	}
	dir, err := os.MkdirTemp("", "codeport-bench-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	binary, err := testprocess.Build(ctx, dir)
	if err != nil {
		return err
	}

	var t *tenants
	if cfg.wantsAny("reads", "redis", "orders", "completed", "completion", "archival") {
		progress("provisioning %d partners and %d products", cfg.partners, cfg.products)
		started := time.Now()
		if t, err = newTenants(ctx, cfg.partners, cfg.products, cfg.funded); err != nil {
			return err
		}
		defer t.close()
		progress("provisioned in %s", time.Since(started).Round(time.Millisecond))
	}
	var rows []row
	var peaks []peak
	var listBaseline float64
	if cfg.wants("reads") {
		reads, baseline, rss, err := readPhase(ctx, cfg, t, binary)
		if err != nil {
			return err
		}
		rows, listBaseline = append(rows, reads...), baseline
		peaks = append(peaks, peak{"production serve (B1, B2)", rss})
	}
	if cfg.wants("redis") {
		shared, rss, err := sharedLimiterFigures(ctx, cfg, t, binary, listBaseline)
		if err != nil {
			return err
		}
		rows = append(rows, shared...)
		peaks = append(peaks, peak{"production serve, Redis limiter (B1)", rss})
	}
	if cfg.wants("orders") {
		placed, rss, err := orderFigures(ctx, cfg, t, binary)
		if err != nil {
			return err
		}
		rows = append(rows, placed...)
		peaks = append(peaks, peak{"production API replica (B3)", rss})
	}
	if cfg.wants("completed") {
		completed, rss, err := completedFigures(ctx, cfg, t, binary, dir)
		if err != nil {
			return err
		}
		rows = append(rows, completed...)
		peaks = append(peaks, peak{"production serve with workers (B7)", rss})
	}
	if cfg.wants("completion") {
		progress("B4 placement to completed")
		latency, rss, err := completionFigures(ctx, cfg, t, binary)
		if err != nil {
			return err
		}
		rows = append(rows, latency...)
		peaks = append(peaks, peak{"sandbox serve (B4)", rss})
	}
	archival, err := archivalFigures(ctx, cfg, t, binary)
	if err != nil {
		return err
	}
	rows = append(rows, archival...)
	for _, p := range peaks {
		rows = append(rows, row{"B5 peak RSS, " + p.process + " (MB)", p.mb, 0, "<= 150 MB", p.mb <= 150})
	}
	var curve []scalePoint
	if cfg.wants("scale") {
		if curve, err = scaleCurve(ctx, cfg, binary, listBaseline); err != nil {
			return err
		}
	}
	clusterRows, err := clusterFigures(ctx, cfg, binary)
	if err != nil {
		return err
	}
	historyPoints, err := historyFigures(ctx, cfg, binary, dir)
	if err != nil {
		return err
	}
	printTables(cfg, append(rows, clusterRows...), curve)
	printHistoryTables(cfg, historyPoints)
	return nil
}

// clusterFigures measures the figure groups that run against envtest's kube-apiserver.
func clusterFigures(ctx context.Context, cfg config, binary string) ([]row, error) {
	var rows []row
	if cfg.wants("operator") {
		operatorRows, err := operatorFigures(ctx, cfg, binary)
		if err != nil {
			return nil, err
		}
		rows = append(rows, operatorRows...)
	}
	if cfg.wants("catalog-scale") {
		catalogRows, err := catalogScaleFigures(ctx, cfg, binary)
		if err != nil {
			return nil, err
		}
		rows = append(rows, catalogRows...)
	}
	return rows, nil
}

// readPhase starts the production serve process and measures B1 and B2 against it; it returns
// the rows, the baseline's list throughput and the process's peak RSS.
func readPhase(ctx context.Context, cfg config, t *tenants, binary string) ([]row, float64, float64, error) {
	prod, err := startServe(binary, t.database.URL, string(tenancy.Production))
	if err != nil {
		return nil, 0, 0, err
	}
	defer prod.stop()
	rows, listBaseline, err := readFigures(ctx, cfg, t, prod)
	if err != nil {
		return nil, 0, 0, err
	}
	if cfg.cpuProfile != "" {
		if err := prod.heapProfile(ctx, cfg.cpuProfile+"-b1-heap.prof"); err != nil {
			return nil, 0, 0, err
		}
	}
	rss, err := prod.peakRSS()
	if err != nil {
		return nil, 0, 0, err
	}
	progress("B5 memory of idle keep-alive connections")
	perThousand, err := idleConnectionMemory(binary, t.database.URL, t.keys)
	if err != nil {
		return nil, 0, 0, err
	}
	rows = append(rows, row{"B5 serve memory per 1,000 idle keep-alive connections (MB)", perThousand, 0, "", true})
	return rows, listBaseline, rss, nil
}

// orderFigures measures B3 against an API-only replica (--workers=false) with no other process
// working the production queue, so its figure is the placement path alone, as pgbench's is;
// fulfilment is B4's subject. It returns the rows and the replica's peak RSS.
func orderFigures(ctx context.Context, cfg config, t *tenants, binary string) ([]row, float64, error) {
	api, err := startServe(binary, t.database.URL, string(tenancy.Production), "--workers=false")
	if err != nil {
		return nil, 0, err
	}
	defer api.stop()
	var oursRounds, baseRounds []result
	for round := range cfg.rounds {
		progress("B3 order placement, round %d of %d", round+1, cfg.rounds)
		placed, err := cfg.profiled(ctx, api, "b3", round, func() (result, error) {
			return placeOrders(api.base, t.keys[:cfg.funded], cfg.clients, cfg.duration, fmt.Sprintf("b3-%d-", round))
		})
		if err != nil {
			return nil, 0, err
		}
		progress("B3 pgbench baseline, round %d of %d", round+1, cfg.rounds)
		pgb, err := pgbenchPlacements(ctx, t.db, t.database.URL, cfg.clients, cfg.duration)
		if err != nil {
			return nil, 0, err
		}
		oursRounds, baseRounds = append(oursRounds, placed), append(baseRounds, pgb)
	}
	rss, err := api.peakRSS()
	if err != nil {
		return nil, 0, err
	}
	orders, pgb := median(oursRounds), median(baseRounds)
	figure := fmt.Sprintf("B3 POST /orders, %d clients over %d partners", cfg.clients, cfg.funded)
	return []row{
		{figure + ": orders/s", orders.max, pgb.max, ">= 0.5x", orders.max >= 0.5*pgb.max},
		// Both sides run the same clients closed-loop: their p99s are at the same concurrency.
		{figure + ": p99 (ms)", orders.p99, pgb.p99, "<= 1.5x", orders.p99 <= latencyRatio*pgb.p99},
		{figure + ": p50 (ms)", orders.p50, pgb.p50, "", true},
	}, rss, nil
}

// readFigures measures B1 and B2 against prod and the Fiber baseline; it also returns the
// baseline's list throughput, which the scale curve is compared with.
func readFigures(ctx context.Context, cfg config, t *tenants, prod *server) ([]row, float64, error) {
	paths := map[string]string{
		"/list":     "/catalog/products?take=20",
		"/filtered": "/catalog/products?take=20&country=de&brand=brand-3,brand-7&tag=gaming",
		"/detail":   "/catalog/products/" + orderProduct,
	}
	bodies := map[string][]byte{}
	for name, path := range paths {
		body, err := fetch(prod.base+path, t.keys[0])
		if err != nil {
			return nil, 0, err
		}
		bodies[name] = body
	}
	baseline, stopBaseline, err := startBaseline(bodies, "")
	if err != nil {
		return nil, 0, err
	}
	defer stopBaseline()

	var rows []row
	var listBaseline float64
	for _, b := range []struct{ figure, name, profile string }{
		{"B1 GET /catalog/products?take=20", "/list", "b1"},
		{"B1 GET /catalog/products, 3 filters", "/filtered", "b1-filtered"},
		{"B2 GET /catalog/products/{code}", "/detail", "b2"},
	} {
		var oursRounds, baseRounds, sameRateRounds []result
		countsBefore, err := prod.counts(ctx)
		if err != nil {
			return nil, 0, err
		}
		for round := range cfg.readRounds {
			progress("%s, round %d of %d", b.figure, round+1, cfg.readRounds)
			ours, err := cfg.profiled(ctx, prod, b.profile, round, func() (result, error) {
				return measure(prod.base+paths[b.name], t.keys, cfg.duration), nil
			})
			if err != nil {
				return nil, 0, err
			}
			oursRounds = append(oursRounds, ours)
			base := measure(baseline+b.name, t.keys, cfg.duration)
			baseRounds = append(baseRounds, base)
			sameRateRounds = append(sameRateRounds,
				measureAt(prod.base+paths[b.name], t.keys, base.max/2, cfg.duration))
		}
		countsAfter, err := prod.counts(ctx)
		if err != nil {
			return nil, 0, err
		}
		allocations, cpuMicros := countsAfter.perRequest(countsBefore)
		ours, base, sameRate := median(oursRounds), median(baseRounds), median(sameRateRounds)
		if b.name == "/list" {
			listBaseline = base.max
		}
		rows = append(rows,
			row{b.figure + ": req/s", ours.max, base.max, ">= 0.5x", ours.max >= 0.5*base.max},
			row{b.figure + ": p99 at the baseline's 50% load (ms)", sameRate.p99, base.p99, "<= 1.5x",
				sameRate.p99 <= latencyRatio*base.p99},
			row{b.figure + ": p99 at our 50% load (ms)", ours.p99, base.p99, "", true},
			row{b.figure + ": p50 at our 50% load (ms)", ours.p50, base.p50, "", true},
			row{b.figure + ": serve's heap allocations per request", allocations, 0, "", true},
			row{b.figure + ": serve's CPU per request (µs)", cpuMicros, 0, "", true})
	}
	return rows, listBaseline, nil
}

// sharedLimiterFigures measures the unfiltered B1 list against a serve process whose rate
// limits are shared through Redis, as replicas of one environment run, and against the Fiber
// baseline making the same Redis round trip per request before it answers; it returns the rows
// and the serve process's peak RSS.
func sharedLimiterFigures(
	ctx context.Context, cfg config, t *tenants, binary string, listBaseline float64,
) ([]row, float64, error) {
	redisURL, err := storetest.RedisURL()
	if err != nil {
		return nil, 0, err
	}
	progress("B1 with the shared (Redis) rate limiter")
	srv, err := startServe(binary, t.database.URL, string(tenancy.Production), "--redis-url", redisURL, "--workers=false")
	if err != nil {
		return nil, 0, err
	}
	defer srv.stop()
	const path = "/catalog/products?take=20"
	body, err := fetch(srv.base+path, t.keys[0])
	if err != nil {
		return nil, 0, err
	}
	baseline, stopBaseline, err := startBaseline(map[string][]byte{"/list": body}, redisURL)
	if err != nil {
		return nil, 0, err
	}
	defer stopBaseline()
	// Our half load is the busier one when our limiter takes more at full load than the
	// baseline's does, so ours is also measured at the baseline's half load.
	var oursRounds, baseRounds, sameRateRounds []result
	for round := range cfg.readRounds {
		ours, err := cfg.profiled(ctx, srv, "b1-redis", round, func() (result, error) {
			return measure(srv.base+path, t.keys, cfg.duration), nil
		})
		if err != nil {
			return nil, 0, err
		}
		oursRounds = append(oursRounds, ours)
		base := measure(baseline+"/list", t.keys, cfg.duration)
		baseRounds = append(baseRounds, base)
		sameRateRounds = append(sameRateRounds, measureAt(srv.base+path, t.keys, base.max/2, cfg.duration))
	}
	ours, base, sameRate := median(oursRounds), median(baseRounds), median(sameRateRounds)
	rss, err := srv.peakRSS()
	if err != nil {
		return nil, 0, err
	}
	figure := "B1 GET /catalog/products?take=20, Redis limiter"
	throughput := row{figure + ": req/s", ours.max, listBaseline, ">= 0.5x", ours.max >= 0.5*listBaseline}
	if listBaseline == 0 {
		// Without the reads there is no baseline to hold it against.
		throughput.target = ""
	}
	return []row{
		throughput,
		{figure + ": req/s against the baseline counting in Redis", ours.max, base.max, ">= 1.0x", ours.max >= base.max},
		{figure + ": p99 at the baseline's 50% load (ms)", sameRate.p99, base.p99, "<= 1.5x",
			sameRate.p99 <= latencyRatio*base.p99},
		{figure + ": p99 at our 50% load (ms)", ours.p99, base.p99, "", true},
		{figure + ": p50 at our 50% load (ms)", ours.p50, base.p50, "", true},
	}, rss, nil
}

// completionFigures measures B4 against a sandbox serve process; it returns the rows and the
// process's peak RSS.
func completionFigures(ctx context.Context, cfg config, t *tenants, binary string) ([]row, float64, error) {
	first := partnerName(0)
	key, err := t.addKey(ctx, first, string(tenancy.Sandbox))
	if err != nil {
		return nil, 0, err
	}
	if err := t.fund(ctx, first, string(tenancy.Sandbox)); err != nil {
		return nil, 0, err
	}
	sandbox, err := startServe(binary, t.database.URL, string(tenancy.Sandbox))
	if err != nil {
		return nil, 0, err
	}
	defer sandbox.stop()
	p50, p99, err := placementToCompleted(ctx, t.db, sandbox.base, key, 100, cfg.duration)
	if err != nil {
		return nil, 0, err
	}
	rss, err := sandbox.peakRSS()
	if err != nil {
		return nil, 0, err
	}
	return []row{
		{"B4 placement to completed at 100 orders/s: p50 (ms)", p50, 0, "<= 50 ms", p50 <= 50},
		{"B4 placement to completed at 100 orders/s: p99 (ms)", p99, 0, "<= 250 ms", p99 <= 250},
	}, rss, nil
}

// latencyRatio is how much longer than its same-run baseline's, at the same offered load, a p99
// may be. On a machine whose CPUs the load generator, the servers, Redis and PostgreSQL share, an
// absolute p99 moves from run to run; against a baseline measured in the same run, it does not.
const latencyRatio = 1.5

type row struct {
	figure         string
	ours, baseline float64
	target         string
	pass           bool
}

func printTables(cfg config, rows []row, curve []scalePoint) {
	if len(rows) == 0 && len(curve) == 0 {
		return
	}
	host, _ := os.Hostname()
	fmt.Printf("Machine: %s, %d CPUs. Tenant set: %d partners, %d products. "+
		"%s per measurement; B1 and B2 are medians of %d rounds, B3 and B7 of %d.\n\n",
		host, numCPU(), cfg.partners, cfg.products, cfg.duration, cfg.readRounds, cfg.rounds)
	fmt.Println("| Figure | codeport | baseline | ratio | target | result |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rows {
		ratio, base := "", ""
		if r.baseline > 0 {
			ratio = fmt.Sprintf("%.2fx", r.ours/r.baseline)
			base = fmt.Sprintf("%.1f", r.baseline)
		}
		result := "pass"
		if !r.pass {
			result = "FAIL"
		}
		if r.target == "" {
			result = ""
		}
		fmt.Printf("| %s | %.1f | %s | %s | %s | %s |\n", r.figure, r.ours, base, ratio, r.target, result)
	}
	if len(curve) == 0 {
		return
	}
	fmt.Println()
	fmt.Println("B6: GET /catalog/products?take=20 by catalog size and partner count (baseline: the B1 Fiber handler).")
	fmt.Println()
	fmt.Println("| products | partners | req/s | ratio to baseline | p50 at 50% load (ms) | p99 at 50% load (ms) " +
		"| B3 orders/s | B3 p99 (ms) | serve peak RSS (MB) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, p := range curve {
		orders, p99 := "", ""
		if p.orders.max > 0 {
			orders, p99 = fmt.Sprintf("%.1f", p.orders.max), fmt.Sprintf("%.1f", p.orders.p99)
		}
		fmt.Printf("| %d | %d | %.1f | %.2fx | %.1f | %.1f | %s | %s | %.1f |\n",
			p.products, p.partners, p.max, p.ratio, p.p50, p.p99, orders, p99, p.rss)
	}
	if perThousand, ok := memoryPerThousandPartners(curve); ok {
		fmt.Printf("\nServe memory per 1,000 partners (1,000 products): %.1f MB\n", perThousand)
	}
}

// memoryPerThousandPartners is the growth of serve's peak RSS from the fewest to the most
// partners of the curve's 1,000-product points, per 1,000 partners.
func memoryPerThousandPartners(curve []scalePoint) (float64, bool) {
	var fewest, most *scalePoint
	for i := range curve {
		p := &curve[i]
		if p.products != 1000 {
			continue
		}
		if fewest == nil || p.partners < fewest.partners {
			fewest = p
		}
		if most == nil || p.partners > most.partners {
			most = p
		}
	}
	if fewest == nil || most == nil || most.partners == fewest.partners {
		return 0, false
	}
	return (most.rss - fewest.rss) / float64(most.partners-fewest.partners) * 1000, true
}

func numCPU() int {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "processor\t:")
}
