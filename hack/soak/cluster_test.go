//go:build soak

package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testkube"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// codesKey encrypts the stock and webhook secrets at rest; every process and the import share it.
const codesKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// leaseNamespace holds the operators' leader-election Lease, as the operator's own namespace
// does in a cluster.
const leaseNamespace = "codeport-system"

// cluster is the deployed topology of docs/architecture.md on this machine: a real kube-apiserver and etcd,
// a PostgreSQL database and a Redis database of the run's own, and the codeport processes
// (operators and API replicas) that the test starts, kills and restarts.
type cluster struct {
	t       *testing.T
	binary  string
	dir     string // process logs, kubeconfig, stock files
	dbURL   string
	db      *store.DB
	redis   string
	k8s     client.WithWatch
	kubecfg string
	// kubeHTTP and kubeHost reach the kube-apiserver's own endpoints (/metrics).
	kubeHTTP *http.Client
	kubeHost string

	mu        sync.Mutex
	operators []*process
	// processes are every codeport process started, for their CPU time.
	processes []*process
	// serial numbers the processes' log files.
	serial int
}

// newCluster starts everything but the codeport processes. Cleanup stops all of it; the
// directory of logs is kept, and named, when the test failed or SOAK_KEEP is set.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "codeport-soak-") //nolint:usetesting // kept when the test fails
	if err != nil {
		t.Fatalf("log directory: %v", err)
	}
	c := &cluster{t: t, dir: dir}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SOAK_KEEP") != "" {
			t.Logf("process logs and files kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	if prebuilt := os.Getenv("SOAK_BINARY"); prebuilt != "" {
		c.binary = prebuilt
		t.Logf("using the codeport binary %s (SOAK_BINARY)", prebuilt)
	} else {
		start := time.Now()
		// Built without -race: the processes under test share two CPUs with the load generator,
		// and the race detector's cost would turn the latency bounds into measurements of it.
		// `make test-go` runs the same code in process with -race.
		if c.binary, err = testprocess.Build(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
		t.Logf("built codeport in %s", time.Since(start).Round(time.Millisecond))
	}

	database := storetest.New(t)
	c.dbURL = database.URL
	ctx := context.Background()
	if c.db, err = store.Open(ctx, c.dbURL, store.Options{MaxConns: 4}); err != nil {
		t.Fatalf("open database: %v", err)
	}
	t.Cleanup(c.db.Close)
	if c.redis, err = claimRedisDB(t); err != nil {
		t.Fatal(err)
	}
	c.startKubernetes()
	return c
}

// claimRedisDB picks a Redis database number that no other run uses and returns its URL. The
// limiter names its keys after the window and the bucket, and requests that fail authentication
// all count against the client IP's bucket: two runs, or another package's tests, sharing a
// database would spend each other's budget. A claim key taken with SET NX marks the database
// as this run's; counters a previous run left behind there are removed.
func claimRedisDB(t *testing.T) (string, error) {
	t.Helper()
	base, err := storetest.RedisURL()
	if err != nil {
		return "", err
	}
	opts, err := redis.ParseURL(base)
	if err != nil {
		return "", fmt.Errorf("TEST_REDIS_URL: %w", err)
	}
	token := fmt.Sprintf("soak-%d-%d", os.Getpid(), time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Database 0 is where the other packages' tests count.
	for n := 1; n < 16; n++ {
		o := *opts
		o.DB = n
		rdb := redis.NewClient(&o)
		ok, err := rdb.SetNX(ctx, "codeport:soak:claim", token, 15*time.Minute).Result()
		if err != nil {
			_ = rdb.Close()
			return "", fmt.Errorf("claim Redis database %d: %w", n, err)
		}
		if !ok {
			_ = rdb.Close()
			continue
		}
		iter := rdb.Scan(ctx, 0, "codeport:rl:*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			_ = rdb.Close()
			return "", fmt.Errorf("clear stale counters in Redis database %d: %w", n, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if v, _ := rdb.Get(ctx, "codeport:soak:claim").Result(); v == token {
				rdb.Del(ctx, "codeport:soak:claim")
			}
			_ = rdb.Close()
		})
		u, err := url.Parse(base)
		if err != nil {
			return "", fmt.Errorf("TEST_REDIS_URL: %w", err)
		}
		u.Path = "/" + strconv.Itoa(n)
		return u.String(), nil
	}
	return "", errors.New("every Redis database 1-15 is claimed by another run (key codeport:soak:claim)")
}

// startKubernetes starts envtest's kube-apiserver and etcd with the CRDs, and writes a
// kubeconfig of a system:masters user for the operator processes.
func (c *cluster) startKubernetes() {
	t := c.t
	kube := testkube.Start(t, filepath.Join("..", "..", "config", "crd", "bases"), c.dir)
	c.kubecfg, c.k8s = kube.Kubeconfig, kube.Client
	cfg := kube.Config
	var err error
	if c.kubeHTTP, err = rest.HTTPClientFor(cfg); err != nil {
		t.Fatalf("kubernetes HTTP client: %v", err)
	}
	c.kubeHost = cfg.Host
	for _, ns := range []string{leaseNamespace, namespace} {
		if err := c.k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
	}
}

// process is one codeport process. Its stdout and stderr go to a log file of its own; a restart
// appends to the same file after a marker line.
type process struct {
	*testprocess.Process
	// metrics is the operator's metrics address (plain HTTP), empty for serve.
	metrics string
}

func (c *cluster) newProcess(name, ready string, args ...string) *process {
	c.mu.Lock()
	c.serial++
	n := c.serial
	c.mu.Unlock()
	p := &process{Process: &testprocess.Process{Name: name, Binary: c.binary, Args: args, ReadyURL: ready,
		LogFile: filepath.Join(c.dir, fmt.Sprintf("%02d-%s.log", n, name))}}
	c.mu.Lock()
	c.processes = append(c.processes, p)
	c.mu.Unlock()
	c.t.Cleanup(func() { p.Stop(5 * time.Second) })
	return p
}

// cpuByRole sums the CPU time of the codeport processes by command ("operator", "serve"), of
// the test's Kubernetes API server, of PostgreSQL and of the test itself. PostgreSQL's backends
// come and go with the connections (a killed replica takes its pool's with it): its figure is
// its live processes' time plus what the postmaster's exited children used.
func (c *cluster) cpuByRole() map[string]time.Duration {
	c.mu.Lock()
	procs := slices.Clone(c.processes)
	c.mu.Unlock()
	out := map[string]time.Duration{}
	for _, p := range procs {
		if len(p.Args) > 0 {
			out[p.Args[0]] += p.CPU()
		}
	}
	// envtest's kube-apiserver and etcd are this test's children: on one machine they share the
	// CPUs with the data plane, as they would not in a cluster.
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		switch st := testprocess.ReadStat(pid); {
		case st.Parent == os.Getpid() && (st.Command == "kube-apiserver" || st.Command == "etcd"):
			out["kube-apiserver and etcd"] += st.CPU
		case st.Command == "postgres":
			// The server's processes, its connections' backends included (the run's database is
			// the only busy one).
			out["postgres"] += st.CPU
			if testprocess.ReadStat(st.Parent).Command != "postgres" {
				out["postgres"] += st.Reaped // the postmaster: its backends that have exited
			}
		case pid == os.Getpid():
			out["the load generator"] += st.CPU
		}
	}
	return out
}

// replica is one API process of an environment on a fixed address, so that a restart comes back
// where the load balancer (here, the load generator) expects it.
type replica struct {
	name, environment, base string
	proc                    *process
	// downUntil (unix nanoseconds) keeps the load off the replica after a connection error, as
	// a load balancer's failed health check would.
	downUntil atomicTime

	mu sync.Mutex
	// kills are the intervals from a SIGKILL to the replica answering /readyz again.
	kills []interval
	// starts are when its process was started.
	starts []time.Time
}

type interval struct{ from, to time.Time }

func (r *replica) started(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, at)
}

// age is how long the process serving at t had been started then.
func (r *replica) age(t time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var age time.Duration
	for _, s := range r.starts {
		if !s.After(t) {
			age = t.Sub(s)
		}
	}
	return age
}

// killedBefore reports whether the replica was killed at or before t.
func (r *replica) killedBefore(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.kills {
		if !w.from.After(t) {
			return true
		}
	}
	return false
}

func (r *replica) killWindows() []interval {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]interval(nil), r.kills...)
}

// startServe starts `codeport serve` for environment with the Redis limiter and workers on,
// and waits until it is ready.
func (c *cluster) startServe(ctx context.Context, name, environment string) (*replica, error) {
	addr, err := testprocess.FreeAddr()
	if err != nil {
		return nil, err
	}
	r := &replica{name: name, environment: environment, base: "http://" + addr}
	// Jobs held by a killed replica are rescued after 10 s rather than the default minute, so
	// that the drain after the load fits the test's time.
	r.proc = c.newProcess(name, r.base+"/readyz", "serve", "--environment", environment, "--addr", addr,
		"--metrics-addr", "", "--database-url", c.dbURL, "--redis-url", c.redis, "--codes-key", codesKey,
		"--workers=true", "--fulfilment-rescue-after", "10s")
	r.started(time.Now())
	return r, r.proc.Start(ctx)
}

// restart kills the replica with SIGKILL, starts it again on its address and waits until it is
// ready; the interval is recorded as a kill window.
func (r *replica) restart(ctx context.Context) (time.Duration, error) {
	from := time.Now()
	r.proc.Kill()
	r.started(time.Now())
	err := r.proc.Start(ctx)
	to := time.Now()
	r.mu.Lock()
	r.kills = append(r.kills, interval{from, to})
	r.mu.Unlock()
	return to.Sub(from), err
}

// startOperator starts one `codeport operator` replica with leader election, metrics served in
// plain HTTP on a port of its own (leader_election_master_status says who leads).
func (c *cluster) startOperator(ctx context.Context, productionBase, sandboxBase string) (*process, error) {
	addrs, err := testprocess.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	metrics, probes := addrs[0], addrs[1]
	c.mu.Lock()
	name := fmt.Sprintf("operator-%d", len(c.operators)+1)
	c.mu.Unlock()
	p := c.newProcess(name, "http://"+probes+"/readyz",
		"operator", "--leader-elect", "--leader-election-namespace", leaseNamespace,
		"--kubeconfig", c.kubecfg, "--database-url", c.dbURL, "--codes-key", codesKey,
		"--metrics-bind-address", metrics, "--metrics-secure=false", "--health-probe-bind-address", probes,
		"--production-base-url", productionBase, "--sandbox-base-url", sandboxBase)
	p.metrics = "http://" + metrics + "/metrics"
	c.mu.Lock()
	c.operators = append(c.operators, p)
	c.mu.Unlock()
	return p, p.Start(ctx)
}

// runningOperators are the operator processes alive now.
func (c *cluster) runningOperators() []*process {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*process
	for _, p := range c.operators {
		if p.Running() {
			out = append(out, p)
		}
	}
	return out
}

var leaderLine = regexp.MustCompile(`(?m)^leader_election_master_status\{name="operator\.codeport\.dev"\} 1$`)

// leader is the running operator that holds the lease, or nil.
func (c *cluster) leader(ctx context.Context) *process {
	for _, p := range c.runningOperators() {
		body, err := httpGet(ctx, p.metrics)
		if err == nil && leaderLine.Match(body) {
			return p
		}
	}
	return nil
}

// waitLeader waits until one running operator leads.
func (c *cluster) waitLeader(ctx context.Context, limit time.Duration) (*process, error) {
	var leader *process
	err := poll.Wait(ctx, pollPause, limit, "an operator leads", func() (bool, string) {
		leader = c.leader(ctx)
		return leader != nil, fmt.Sprintf("%d operators running, none leads", len(c.runningOperators()))
	})
	return leader, err
}

// metricSum adds the samples of a metric whose labels contain every one of labels, over the
// running operators.
func (c *cluster) metricSum(ctx context.Context, name string, labels ...string) float64 {
	var sum float64
	for _, p := range c.runningOperators() {
		body, err := httpGet(ctx, p.metrics)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(strings.NewReader(string(body)))
		sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	lines:
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
				continue
			}
			for _, l := range labels {
				if !strings.Contains(line, l) {
					continue lines
				}
			}
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
					sum += v
				}
			}
		}
	}
	return sum
}

func httpGet(ctx context.Context, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", u, err)
	}
	resp, err := http.DefaultClient.Do(req) //contract:unchecked the operators' metrics, which no document describes
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := readAll(resp)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("get %s: status %d", u, resp.StatusCode)
	}
	return body, nil
}

// pollPause is the pause between two looks of poll.Wait at the processes of this machine.
const pollPause = 50 * time.Millisecond

// loadAverage samples the machine's one-minute load average every second: the machine is
// shared, and a latency bound reads differently at a load of 2 than at 12 on two CPUs.
type loadAverage struct {
	mu      sync.Mutex
	samples []sample
}

type sample struct {
	at    time.Time
	value float64
}

func (m *loadAverage) run(ctx context.Context) {
	for ctx.Err() == nil {
		if data, err := os.ReadFile("/proc/loadavg"); err == nil {
			if fields := strings.Fields(string(data)); len(fields) > 0 {
				if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
					m.mu.Lock()
					m.samples = append(m.samples, sample{time.Now(), v})
					m.mu.Unlock()
				}
			}
		}
		sleep(ctx, time.Second)
	}
}

// max is the highest sample between from and to.
func (m *loadAverage) max(from, to time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out float64
	for _, s := range m.samples {
		if !s.at.Before(from) && !s.at.After(to) {
			out = max(out, s.value)
		}
	}
	return out
}

// at is the last sample taken before t.
func (m *loadAverage) at(t time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out float64
	for _, s := range m.samples {
		if s.at.After(t) {
			break
		}
		out = s.value
	}
	return out
}

// apiserverRequests reads the kube-apiserver's request counters, summed by "VERB resource"
// (with the subresource, as in "PATCH wallets/status").
func (c *cluster) apiserverRequests(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	u := strings.TrimSuffix(c.kubeHost, "/") + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, http.NoBody)
	if err != nil {
		return out
	}
	resp, err := c.kubeHTTP.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	label := func(line, name string) string {
		_, rest, ok := strings.Cut(line, name+`="`)
		if !ok {
			return ""
		}
		v, _, _ := strings.Cut(rest, `"`)
		return v
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		what := label(line, "resource")
		if sub := label(line, "subresource"); sub != "" {
			what += "/" + sub
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				out[label(line, "verb")+" "+what] += v
			}
		}
	}
	return out
}
