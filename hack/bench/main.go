// Command bench measures the partner API against baselines taken in the same run and prints a
// markdown table. It provisions a realistic tenant set through apiserver/provisioning, starts a
// real `codeport serve` process against a real PostgreSQL, and drives it with vegeta.
//
//	go run ./hack/bench -duration 10s      (make bench)
//
// Figures measured so far: B1 catalog list (with and without filters), B2 single product, B4
// placement-to-completed latency of sandbox orders, B5 peak RSS of the serve process. B3 (orders
// against a pgbench baseline) and B6 (scale curve) are not implemented yet.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver/auth"
	"github.com/codeport/codeport/apiserver/provisioning"
	"github.com/codeport/codeport/apiserver/store"
	"github.com/codeport/codeport/apiserver/store/storetest"
)

const codesKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func main() {
	duration := flag.Duration("duration", 10*time.Second, "length of each measurement")
	partners := flag.Int("partners", 100, "partners to provision")
	products := flag.Int("products", 1000, "products in the shared catalog")
	flag.Parse()
	if err := run(*duration, *partners, *products); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func run(duration time.Duration, partnerCount, productCount int) error {
	ctx := context.Background()
	database, err := storetest.Create(ctx, "bench", true)
	if err != nil {
		return err
	}
	defer func() { _ = database.Drop(context.Background()) }()
	db, err := store.Open(ctx, database.URL, store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	keys, err := provision(ctx, provisioning.New(db), partnerCount, productCount)
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "codeport-bench-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	binary := filepath.Join(dir, "codeport")
	if out, err := exec.Command("go", "build", "-o", binary, "github.com/codeport/codeport").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %w\n%s", err, out)
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	serve := exec.Command(binary, "serve", "--environment", "production", "--addr", addr, "--metrics-addr", "",
		"--database-url", database.URL, "--codes-key", codesKey)
	if err := serve.Start(); err != nil {
		return fmt.Errorf("start serve: %w", err)
	}
	defer func() { _ = serve.Process.Kill(); _ = serve.Wait() }()
	base := "http://" + addr + "/v2"
	if err := waitReady("http://" + addr + "/readyz"); err != nil {
		return err
	}

	list := base + "/catalog/products?take=20"
	filtered := base + "/catalog/products?take=20&country=de&brand=brand-3,brand-7&tag=gaming"
	detail := base + "/catalog/products/10000000000042"
	bodies := map[string][]byte{}
	for _, u := range []string{list, filtered, detail} {
		if bodies[u], err = fetch(u, keys[0]); err != nil {
			return err
		}
	}
	baselineAddr, stopBaseline, err := startBaseline(bodies[list], bodies[filtered], bodies[detail])
	if err != nil {
		return err
	}
	defer stopBaseline()

	var rows []row
	for _, b := range []struct {
		figure, ours, baseline string
	}{
		{"B1 GET /catalog/products?take=20", list, "http://" + baselineAddr + "/list"},
		{"B1 GET /catalog/products (3 filters)", filtered, "http://" + baselineAddr + "/filtered"},
		{"B2 GET /catalog/products/{code}", detail, "http://" + baselineAddr + "/detail"},
	} {
		ours := measure(b.ours, keys, duration)
		baseline := measure(b.baseline, keys, duration)
		rows = append(rows,
			row{b.figure + " throughput (req/s)", ours.max, baseline.max, ">= 0.5x", ours.max >= 0.5*baseline.max},
			row{b.figure + " p99 at 50% load (ms)", ours.p99, baseline.p99, "<= 5 ms", ours.p99 <= 5},
			row{b.figure + " p50 at 50% load (ms)", ours.p50, baseline.p50, "", true})
	}
	sbKey, err := sandboxKey(ctx, provisioning.New(db))
	if err != nil {
		return err
	}
	sbAddr, err := freeAddr()
	if err != nil {
		return err
	}
	sandbox := exec.Command(binary, "serve", "--environment", "sandbox", "--addr", sbAddr, "--metrics-addr", "",
		"--database-url", database.URL, "--codes-key", codesKey)
	if err := sandbox.Start(); err != nil {
		return fmt.Errorf("start sandbox serve: %w", err)
	}
	defer func() { _ = sandbox.Process.Kill(); _ = sandbox.Wait() }()
	if err := waitReady("http://" + sbAddr + "/readyz"); err != nil {
		return err
	}
	p50, p99, err := placementToCompleted(ctx, db, "http://"+sbAddr+"/v2", sbKey, 100, duration)
	if err != nil {
		return err
	}
	rows = append(rows, row{"B4 placement to completed, p50 at 100 orders/s (ms)", p50, 0, "<= 50 ms", p50 <= 50},
		row{"B4 placement to completed, p99 at 100 orders/s (ms)", p99, 0, "<= 250 ms", p99 <= 250})
	rss, err := peakRSS(serve.Process.Pid)
	if err == nil {
		rows = append(rows, row{"B5 peak RSS of serve (MB)", rss, 0, "<= 150 MB", rss <= 150})
	}
	printTable(rows, partnerCount, productCount, duration)
	return nil
}

type row struct {
	figure         string
	ours, baseline float64
	target         string
	pass           bool
}

func printTable(rows []row, partners, products int, duration time.Duration) {
	host, _ := os.Hostname()
	fmt.Printf("Machine: %s, %d CPUs; %d partners, %d products; %s per measurement.\n\n", host, numCPU(), partners, products, duration)
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
}

func numCPU() int {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "processor\t:")
}

// provision creates the tenant set the way the operator would.
func provision(ctx context.Context, prov *provisioning.Provisioner, partners, products int) ([]string, error) {
	price := int64(2000)
	items := make([]v1alpha1.CatalogProduct, products)
	for i := range items {
		items[i] = v1alpha1.CatalogProduct{ProductCode: fmt.Sprintf("1%013d", i), Name: fmt.Sprintf("Product %d", i),
			Brand: fmt.Sprintf("brand-%d", i%20), CountryCode: []string{"DE", "GB", "FR"}[i%3], CurrencyCode: "EUR", Price: &price,
			MainCategory: "Gaming", Tags: []string{"gaming", fmt.Sprintf("t%d", i%7)}, Status: "active",
			Languages: []v1alpha1.ProductLanguage{{LanguageCode: "en", Name: "English"}}}
	}
	cat := &v1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "main"},
		Spec: v1alpha1.CatalogSpec{ValidFrom: metav1.NewTime(time.Now().Add(-time.Hour)), DefaultDiscountPercentage: "5"}}
	res, err := prov.ApplyCatalog(ctx, cat, items)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if len(res.Invalid) > 0 {
		return nil, fmt.Errorf("catalog: invalid products %v", res.Invalid)
	}
	keys := make([]string, 0, partners)
	for i := range partners {
		p := &v1alpha1.Partner{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("p%04d", i)},
			Spec: v1alpha1.PartnerSpec{DisplayName: "Bench", ContactEmail: "bench@example.com", CatalogRef: &v1alpha1.LocalObjectReference{Name: "main"},
				AccessPolicy: v1alpha1.AccessPolicy{IPWhitelist: []string{"127.0.0.1"}, RateLimit: &v1alpha1.RateLimitSpec{RequestsPerMinute: 100_000_000}}}}
		if _, err := prov.ApplyPartner(ctx, p, &res.ID, nil); err != nil {
			return nil, err
		}
		key, err := auth.GenerateKey("production")
		if err != nil {
			return nil, err
		}
		if _, err := prov.RegisterKey(ctx, provisioning.Key{Namespace: "bench", Partner: p.Name, Environment: "production",
			Kind: "apiKey", Source: "bench/" + p.Name, Plaintext: key}); err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// sandboxKey gives the first partner a sandbox key and funds for the latency run.
func sandboxKey(ctx context.Context, prov *provisioning.Provisioner) (string, error) {
	key, err := auth.GenerateKey("sandbox")
	if err != nil {
		return "", err
	}
	if _, err := prov.RegisterKey(ctx, provisioning.Key{Namespace: "bench", Partner: "p0000", Environment: "sandbox",
		Kind: "apiKey", Source: "bench/p0000-sandbox", Plaintext: key}); err != nil {
		return "", err
	}
	w := &v1alpha1.Wallet{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "p0000-sandbox"},
		Spec: v1alpha1.WalletSpec{PartnerRef: v1alpha1.LocalObjectReference{Name: "p0000"}, Environment: "sandbox",
			TopUps: []v1alpha1.TopUp{{ID: "bench", Currency: "EUR", Amount: "10000000.00"}}}}
	if _, err := prov.ApplyWallet(ctx, w); err != nil {
		return "", err
	}
	return key, nil
}

// placementToCompleted places 1-unit sandbox orders at rate per second and returns the p50 and
// p99 of the time from placement to completion, in milliseconds, from the orders' own timestamps.
func placementToCompleted(ctx context.Context, db *store.DB, base, key string, rate int, duration time.Duration) (float64, float64, error) {
	n := 0
	var targeter vegeta.Targeter = func(t *vegeta.Target) error {
		n++
		t.Method, t.URL = http.MethodPost, base+"/orders"
		t.Header = http.Header{"X-Api-Key": []string{key}, "Content-Type": []string{"application/json"}}
		t.Body = []byte(fmt.Sprintf(`{"externalOrderCode":"b4-%d","currency":"EUR","orderProducts":[{"productCode":"99000000000001","quantity":1}]}`, n))
		return nil
	}
	attacker := vegeta.NewAttacker(vegeta.Workers(16), vegeta.KeepAlive(true))
	for res := range attacker.Attack(targeter, vegeta.Rate{Freq: rate, Per: time.Second}, duration, "b4") {
		if res.Code != 202 {
			return 0, 0, fmt.Errorf("order placement answered %d: %s", res.Code, res.Body)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var processing int64
		if err := db.Gorm.WithContext(ctx).Raw(`SELECT count(*) FROM orders WHERE status = 'processing'`).Scan(&processing).Error; err != nil {
			return 0, 0, fmt.Errorf("count processing: %w", err)
		}
		if processing == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("%d orders still processing", processing)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var p struct{ P50, P99 float64 }
	err := db.Gorm.WithContext(ctx).Raw(`SELECT
			percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM finished_at - created_at)) * 1000 AS p50,
			percentile_cont(0.99) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM finished_at - created_at)) * 1000 AS p99
		FROM orders WHERE external_order_code LIKE 'b4-%'`).Scan(&p).Error
	if err != nil {
		return 0, 0, fmt.Errorf("latency percentiles: %w", err)
	}
	return p.P50, p.P99, nil
}

func waitReady(url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil { //nolint:noctx // readiness poll
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("serve not ready at %s", url)
}

func fetch(url, key string) ([]byte, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil) //nolint:noctx // one-off
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("fetch %s: status %d", url, resp.StatusCode)
	}
	return body, nil
}

// startBaseline is a minimal Fiber app returning the same pre-encoded bytes: the ceiling of
// what any handler can do on this machine.
func startBaseline(list, filtered, detail []byte) (string, func(), error) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/list", func(c *fiber.Ctx) error { c.Set("Content-Type", "application/json"); return c.Send(list) })
	app.Get("/filtered", func(c *fiber.Ctx) error { c.Set("Content-Type", "application/json"); return c.Send(filtered) })
	app.Get("/detail", func(c *fiber.Ctx) error { c.Set("Content-Type", "application/json"); return c.Send(detail) })
	addr, err := freeAddr()
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("baseline: %w", err)
	}
	go func() { _ = app.Listener(ln) }()
	return addr, func() { _ = app.ShutdownWithTimeout(time.Second) }, nil
}

type result struct{ max, p50, p99 float64 }

// measure finds the maximum throughput (closed loop, 64 workers), then the latency at half of it.
func measure(url string, keys []string, duration time.Duration) result {
	i := 0
	var targeter vegeta.Targeter = func(t *vegeta.Target) error {
		t.Method, t.URL = http.MethodGet, url
		t.Header = http.Header{"X-Api-Key": []string{keys[i%len(keys)]}}
		i++
		return nil
	}
	attack := func(rate vegeta.Rate, workers uint64) vegeta.Metrics {
		attacker := vegeta.NewAttacker(vegeta.Workers(workers), vegeta.MaxWorkers(workers), vegeta.KeepAlive(true))
		var m vegeta.Metrics
		for res := range attacker.Attack(targeter, rate, duration, "bench") {
			m.Add(res)
		}
		m.Close()
		return m
	}
	maxRun := attack(vegeta.Rate{Freq: 0}, 64)
	half := int(maxRun.Throughput / 2)
	if half < 1 {
		half = 1
	}
	paced := attack(vegeta.Rate{Freq: half, Per: time.Second}, 64)
	return result{max: maxRun.Throughput, p50: ms(paced.Latencies.P50), p99: ms(paced.Latencies.P99)}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// peakRSS reads the high-water mark of a process's resident memory, in MB.
func peakRSS(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status: %w", err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if fields := strings.Fields(string(line)); len(fields) >= 2 && fields[0] == "VmHWM:" {
			kb, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM: %w", err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM for %d", pid)
}
