//go:build soak

// Package soak runs the deployed topology of docs/architecture.md on one machine, as a cluster runs it: two
// operator processes with leader election against a real kube-apiserver and etcd, two
// production API replicas sharing rate limits through Redis and one sandbox replica, all on one
// PostgreSQL database, under partner traffic while platform engineers change things. It asserts
// that the whole holds: no 5xx, no answer slower than a second outside the killed replica,
// every accepted order finished and paid exactly once, ledgers equal to balances, key rotations
// and suspensions seen at once, Wallet status following the ledger. Run it with
// `make test-soak`; SOAK_DURATION (default 60s) is the length of the phase with churn (the
// phases without operators before and after it last a quarter of it),
// SOAK_WORKERS (default 12) the concurrent requests, and SOAK_KEEP=1 keeps the processes' logs
// of a passing run.
package soak

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/codeport/codeport/internal/tenancy"
)

// The phases of the load: a warm-up, not counted, then the same load before, during and after
// the operators run with churn.
const (
	phaseWarmUp = iota
	phaseBefore
	phaseChurn
	phaseAfter
)

func TestSoak(t *testing.T) {
	duration := envDuration(t, "SOAK_DURATION", 60*time.Second)
	if duration < 30*time.Second {
		t.Fatalf("SOAK_DURATION %s: the churn needs at least 30s", duration)
	}
	workers := envInt(t, "SOAK_WORKERS", 12)
	ctx, cancel := context.WithTimeout(context.Background(), 2*duration+5*time.Minute)
	defer cancel()
	began := time.Now()
	machine := &loadAverage{}
	go machine.run(ctx)

	c := newCluster(t)
	prodA := startReplica(ctx, t, c, "production-a", string(tenancy.Production))
	prodB := startReplica(ctx, t, c, "production-b", string(tenancy.Production))
	sandbox := startReplica(ctx, t, c, "sandbox", string(tenancy.Sandbox))
	startOperator := func() (*process, error) { return c.startOperator(ctx, prodA.base+"/v2", sandbox.base+"/v2") }
	startTwoOperators(ctx, t, c, startOperator)
	partners, err := c.onboard(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for product, n := range map[string]int{plentiful: envInt(t, "SOAK_STOCK", 30000), scarce: 400} {
		out, err := c.importStock(ctx, product, n)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s", out)
	}
	t.Logf("topology up and %d partners onboarded through the Kubernetes API in %s",
		len(partners), time.Since(began).Round(time.Millisecond))

	l := newLoad(t, partners, []*replica{prodA, prodB}, sandbox, workers)
	durations := map[int]time.Duration{}
	cpu := map[int]map[string]time.Duration{}
	starts := map[int]time.Time{}
	// withoutOperators runs the load as phase for d with the operators stopped, then waits for
	// its orders to be fulfilled: each phase starts with an empty queue, so that its orders/s
	// and CPU do not pay for an earlier phase's fulfilment.
	withoutOperators := func(phase int, d time.Duration) time.Duration {
		for _, op := range c.runningOperators() {
			op.Stop(10 * time.Second)
		}
		before := c.cpuByRole()
		starts[phase] = time.Now()
		durations[phase] = l.runFor(ctx, phase, d, nil)
		drained, err := c.waitTerminal(ctx, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		cpu[phase] = since(before, c.cpuByRole())
		return drained
	}

	// The control plane's cost is the orders/s of the churn phase against the mean of the same
	// load with the operators stopped before and after it, so that what changes with time alone
	// (the tables growing, the machine's neighbours) weighs on both sides. A warm-up, not
	// counted, first fills the pools, caches and prepared statements of the replicas.
	withoutOperators(phaseWarmUp, 5*time.Second)
	delete(durations, phaseWarmUp)
	baseline := duration / 4
	drained := withoutOperators(phaseBefore, baseline)

	startTwoOperators(ctx, t, c, startOperator)
	ch := &churn{c: c, l: l, start: startOperator, duration: duration, machine: machine, churned: map[string]bool{}}
	before := c.cpuByRole()
	requestsBefore := c.apiserverRequests(ctx)
	starts[phaseChurn] = time.Now()
	durations[phaseChurn] = l.runFor(ctx, phaseChurn, duration, ch.run)
	cpu[phaseChurn] = since(before, c.cpuByRole())
	logAPIServerRequests(t, requestsBefore, c.apiserverRequests(ctx), durations[phaseChurn])
	stopped := time.Now()
	for _, e := range ch.events {
		t.Log("churn " + e)
	}

	f := newFindings()
	for _, msg := range ch.failures {
		f.add("churn", "%s", msg)
	}
	convergence, err := c.walletConvergence(ctx, partners, stopped, f)
	if err != nil {
		t.Error(err)
	}
	drain, err := c.waitTerminal(ctx, 2*time.Minute)
	if err != nil {
		t.Error(err)
	}
	c.checkTopUpsApplied(ctx, len(partners), ch.topUps, f)
	t.Logf("operator reconciles (running operators): wallet %.0f, apikey %.0f, partner %.0f, catalog %.0f",
		c.metricSum(ctx, "controller_runtime_reconcile_total", `controller="wallet"`),
		c.metricSum(ctx, "controller_runtime_reconcile_total", `controller="apikey"`),
		c.metricSum(ctx, "controller_runtime_reconcile_total", `controller="partner"`),
		c.metricSum(ctx, "controller_runtime_reconcile_total", `controller="catalog"`))
	withoutOperators(phaseAfter, baseline)

	results, orders := l.merged()
	results = append(results, ch.probes...)
	logSlowest(t, results, starts, 5)
	logTimeline(t, results, starts, 5*time.Second)
	stats, reasons := ch.checkResults(results, orders, durations, f)
	for phase, s := range stats {
		s.cpu = cpu[phase]
	}
	byStatus, err := c.checkOrders(ctx, partners, orders, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.checkLedger(ctx, partners, ch.topUps, f); err != nil {
		t.Fatal(err)
	}

	summary(t, stats, machine, reasons, byStatus, map[string]string{
		"Wallet status converged (slowest, from load stop)": convergence.Round(time.Millisecond).String(),
		"churn phase's orders terminal after its load stop": drain.Round(time.Millisecond).String(),
		"first phase's orders terminal after its load stop": drained.Round(time.Millisecond).String(),
		"wall time of the test":                             time.Since(began).Round(time.Second).String(),
	})
	logCounts(t, c)

	if lines := f.report(); len(lines) > 0 {
		t.Errorf("the topology did not hold:\n%s", strings.Join(lines, "\n"))
		logTails(t, c)
	}
}

// startReplica starts an API replica serving environment.
func startReplica(ctx context.Context, t *testing.T, c *cluster, name, environment string) *replica {
	t.Helper()
	r, err := c.startServe(ctx, name, environment)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startTwoOperators starts two operator processes with start and waits for one to lead.
func startTwoOperators(ctx context.Context, t *testing.T, c *cluster, start func() (*process, error)) {
	t.Helper()
	for range 2 {
		if _, err := start(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.waitLeader(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
}

// checkTopUpsApplied waits until every wallet of the first n partners is Ready with its
// onboarding top-up and the churn's topUps applied.
func (c *cluster) checkTopUpsApplied(ctx context.Context, n, topUps int, f *findings) {
	for i := range n {
		for _, env := range environments {
			if err := c.waitWallet(ctx, keyName(i, env), int32(1+topUps)); err != nil {
				f.add("top-ups not all applied", "%v", err)
			}
		}
	}
}

// runFor runs the load as phase for d and, when alongside is set, until alongside has returned
// too (alongside gets at most d plus two minutes); it returns how long the load ran.
func (l *load) runFor(ctx context.Context, phase int, d time.Duration, alongside func(context.Context)) time.Duration {
	loop, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	bounded, cancel := context.WithTimeout(ctx, d+2*time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if alongside != nil {
			alongside(bounded)
		}
	}()
	go func() {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		<-done
		stopLoop()
	}()
	l.began.set(time.Now())
	start := time.Now()
	l.run(loop, ctx, phase)
	return time.Since(start)
}

func (l *load) startedAt() time.Time {
	t, _ := l.began.get()
	return t
}

func summary(
	t *testing.T, stats map[int]*phaseStats, machine *loadAverage, reasons map[string]int, byStatus map[string]int,
	extra map[string]string,
) {
	t.Helper()
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	before, churn, after := stats[phaseBefore], stats[phaseChurn], stats[phaseAfter]
	fmt.Fprintf(w, "\t operators stopped\t operators + churn\t operators stopped again\n")
	row := func(name string, f func(*phaseStats) string) {
		fmt.Fprintf(w, "%s\t %s\t %s\t %s\n", name, f(before), f(churn), f(after))
	}
	row("duration", func(s *phaseStats) string { return s.duration.Round(100 * time.Millisecond).String() })
	row("requests", func(s *phaseStats) string { return strconv.Itoa(s.requests) })
	row("orders accepted (202)", func(s *phaseStats) string { return strconv.Itoa(s.accepted) })
	row("orders/s", func(s *phaseStats) string { return fmt.Sprintf("%.1f", s.perSecond()) })
	row("p50 latency", func(s *phaseStats) string { return s.percentile(0.50).Round(100 * time.Microsecond).String() })
	row("p99 latency", func(s *phaseStats) string { return s.percentile(0.99).Round(100 * time.Microsecond).String() })
	row("max latency", func(s *phaseStats) string { return s.percentile(1).Round(time.Millisecond).String() })
	for _, role := range []string{"operator", "kube-apiserver and etcd", "serve", "postgres", "the load generator"} {
		row("CPU of "+role+" (cores)", func(s *phaseStats) string {
			return fmt.Sprintf("%.2f", s.cpu[role].Seconds()/s.duration.Seconds())
		})
	}
	// CPU per order is the data plane's own cost, which a busy machine does not change the way
	// it changes orders/s: the operators' effect on the API shows here.
	row("serve CPU per accepted order", func(s *phaseStats) string {
		if s.accepted == 0 {
			return "-"
		}
		return (s.cpu["serve"] / time.Duration(s.accepted)).Round(10 * time.Microsecond).String()
	})
	row("5xx", func(s *phaseStats) string { return strconv.Itoa(s.fiveXX) })
	row("during the replica kill", func(s *phaseStats) string { return strconv.Itoa(s.killAffected) })
	row("machine load average (max)", func(s *phaseStats) string { return fmt.Sprintf("%.1f", machine.max(s.from, s.to)) })
	labels := map[string]bool{}
	for _, s := range stats {
		for l := range s.statuses {
			labels[l] = true
		}
	}
	var sorted []string
	for l := range labels {
		sorted = append(sorted, l)
	}
	sort.Strings(sorted)
	for _, l := range sorted {
		row("status "+l, func(s *phaseStats) string { return strconv.Itoa(s.statuses[l]) })
	}
	if stopped := (before.perSecond() + after.perSecond()) / 2; stopped > 0 {
		fmt.Fprintf(w, "orders/s ratio (churn / mean of stopped)\t\t %.2f\n", churn.perSecond()/stopped)
	}
	_ = w.Flush()
	t.Logf("summary\n%s", b.String())
	var lines []string
	for r, n := range reasons {
		lines = append(lines, fmt.Sprintf("  %6d  %s", n, r))
	}
	sort.Strings(lines)
	t.Logf("expected refusals, by reason:\n%s", strings.Join(lines, "\n"))
	t.Logf("orders by final status: %v", byStatus)
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		t.Logf("%s: %s", k, extra[k])
	}
}

// logPatterns are what a process log is searched for after the run.
var logPatterns = []string{
	"deadlock detected", "placement rolled back", `"level":"ERROR"`, "panic", "rate limiter unavailable",
}

// logCounts logs how often each pattern occurs in each process log.
func logCounts(t *testing.T, c *cluster) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(c.dir, "*.log"))
	for _, file := range files {
		counts := map[string]int{}
		scanLog(file, func(line string) {
			for _, p := range logPatterns {
				if strings.Contains(line, p) {
					counts[p]++
				}
			}
		})
		if len(counts) > 0 {
			t.Logf("%s: %v", filepath.Base(file), counts)
		}
	}
}

// logTails prints the last lines of each process log that mention a deadlock, an error or a
// panic.
func logTails(t *testing.T, c *cluster) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(c.dir, "*.log"))
	for _, file := range files {
		var tail []string
		scanLog(file, func(line string) {
			l := strings.ToLower(line)
			if strings.Contains(l, "deadlock") || strings.Contains(l, "error") || strings.Contains(l, "panic") {
				if len(line) > 600 {
					line = line[:600] + "…"
				}
				tail = append(tail, line)
				if len(tail) > 15 {
					tail = tail[1:]
				}
			}
		})
		if len(tail) > 0 {
			t.Logf("%s (last %d lines with deadlock/error/panic):\n%s", filepath.Base(file), len(tail), strings.Join(tail, "\n"))
		}
	}
}

func scanLog(file string, each func(string)) {
	f, err := os.Open(file)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for sc.Scan() {
		each(sc.Text())
	}
}

// logSlowest logs the n slowest answers, with where and when they were served.
func logSlowest(t *testing.T, results []result, starts map[int]time.Time, n int) {
	t.Helper()
	sorted := slices.Clone(results)
	slices.SortFunc(sorted, func(a, b result) int { return int(b.dur - a.dur) })
	var lines []string
	for _, r := range sorted[:min(n, len(sorted))] {
		lines = append(lines, fmt.Sprintf("  %s %s %s phase %d on %s at %s (%s into the phase): %d",
			r.dur.Round(time.Millisecond), r.op, r.env, r.phase, r.replica.name, r.start.Format("15:04:05.000"),
			r.start.Sub(starts[r.phase]).Round(100*time.Millisecond), r.status))
	}
	t.Logf("slowest answers:\n%s", strings.Join(lines, "\n"))
}

// logTimeline logs each phase's accepted orders/s by window of step, beside the churn's events:
// a drop under churn shows when, and so after which event, it happened.
func logTimeline(t *testing.T, results []result, starts map[int]time.Time, step time.Duration) {
	t.Helper()
	windows := map[int][]int{}
	for _, r := range results {
		start, ok := starts[r.phase]
		if !ok || r.op != opOrder || r.status != http.StatusAccepted || r.start.Before(start) {
			continue
		}
		i := int(r.start.Sub(start) / step)
		for len(windows[r.phase]) <= i {
			windows[r.phase] = append(windows[r.phase], 0)
		}
		windows[r.phase][i]++
	}
	for _, phase := range slices.Sorted(maps.Keys(windows)) {
		var b strings.Builder
		for _, n := range windows[phase] {
			fmt.Fprintf(&b, " %.0f", float64(n)/step.Seconds())
		}
		t.Logf("phase %d orders/s by %s:%s", phase, step, b.String())
	}
}

// logAPIServerRequests logs what the kube-apiserver was asked during the churn, the most
// frequent first: the control plane's share of the machine is mostly these.
func logAPIServerRequests(t *testing.T, before, after map[string]float64, d time.Duration) {
	t.Helper()
	type count struct {
		what string
		n    float64
	}
	var counts []count
	total := 0.0
	for what, n := range after {
		if delta := n - before[what]; delta > 0 {
			counts = append(counts, count{what, delta})
			total += delta
		}
	}
	slices.SortFunc(counts, func(a, b count) int { return cmp.Compare(b.n, a.n) })
	var b strings.Builder
	fmt.Fprintf(&b, "kube-apiserver requests during the churn: %.0f (%.1f/s)", total, total/d.Seconds())
	for _, c := range counts[:min(len(counts), 10)] {
		fmt.Fprintf(&b, "\n  %6.0f  %s", c.n, c.what)
	}
	t.Log(b.String())
}

// since is the CPU time each role used between two readings of cpuByRole.
func since(before, after map[string]time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	for role, t := range after {
		out[role] = t - before[role]
	}
	return out
}

func envDuration(t *testing.T, name string, fallback time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return fallback
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

func envInt(t *testing.T, name string, fallback int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return fallback
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s: %q is not a positive number", name, v)
	}
	return n
}
