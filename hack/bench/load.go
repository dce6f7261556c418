package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/test/testprocess"
)

type result struct{ max, p50, p99 float64 }

// medianOf is the median of one field over rounds (the upper one of an even count).
func medianOf[T any](rounds []T, field func(T) float64) float64 {
	values := make([]float64, len(rounds))
	for i, r := range rounds {
		values[i] = field(r)
	}
	slices.Sort(values)
	return values[len(values)/2]
}

// median is each field's median over rounds.
func median(rounds []result) result {
	pick := func(field func(result) float64) float64 { return medianOf(rounds, field) }
	return result{
		max: pick(func(r result) float64 { return r.max }),
		p50: pick(func(r result) float64 { return r.p50 }),
		p99: pick(func(r result) float64 { return r.p99 }),
	}
}

// measure finds the maximum throughput of GET url (closed loop, 64 workers, keys in rotation),
// then the latency at half of it. Every key is used once before anything is timed, so the
// figures are of a server whose per-partner state (key lookups, catalog snapshots) is loaded.
func measure(url string, keys []string, duration time.Duration) result {
	attack(gets(url, keys, true), vegeta.Rate{Freq: 0}, 64, time.Minute)
	targeter := gets(url, keys, false)
	maxRun := attack(targeter, vegeta.Rate{Freq: 0}, 64, duration)
	paced := measureAt(url, keys, maxRun.Throughput/2, duration)
	paced.max = maxRun.Throughput
	return paced
}

// measureAt is the p50 and p99 of GET url at rate requests per second, keys in rotation.
func measureAt(url string, keys []string, rate float64, duration time.Duration) result {
	paced := attack(gets(url, keys, false), vegeta.Rate{Freq: max(int(rate), 1), Per: time.Second}, 64, duration)
	return result{p50: ms(paced.Latencies.P50), p99: ms(paced.Latencies.P99)}
}

// gets is GET url with the keys in rotation; with once, each key once and then no more.
func gets(url string, keys []string, once bool) vegeta.Targeter {
	// Targeters are called from every attack worker at once.
	var n atomic.Int64
	return func(t *vegeta.Target) error {
		i := int(n.Add(1)) - 1
		if once && i >= len(keys) {
			return vegeta.ErrNoTargets
		}
		t.Method, t.URL = http.MethodGet, url
		t.Header = http.Header{"X-Api-Key": []string{keys[i%len(keys)]}}
		return nil
	}
}

// newAttacker is a vegeta attacker of workers that sends over the wire transport.
func newAttacker(workers uint64, opts ...func(*vegeta.Attacker)) *vegeta.Attacker {
	opts = append([]func(*vegeta.Attacker){
		vegeta.Workers(workers), vegeta.MaxWorkers(workers), vegeta.Client(&http.Client{Transport: newWireTransport()}),
	}, opts...)
	return vegeta.NewAttacker(opts...)
}

func attack(targeter vegeta.Targeter, rate vegeta.Rate, workers uint64, duration time.Duration) vegeta.Metrics {
	// Bodies are read to the end but not kept: copying each into its result was a seventh of
	// the load generator's CPU, taken from the servers it measures.
	attacker := newAttacker(workers, vegeta.MaxBody(0))
	var m vegeta.Metrics
	for res := range attacker.Attack(targeter, rate, duration, "bench") {
		m.Add(res)
	}
	m.Close()
	return m
}

// placeOrders runs B3's (and B7's) load: clients place 1-unit orders with external order codes
// prefix and a counter as fast as the server takes them, keys in rotation. It returns accepted
// orders per second and the p99.
func placeOrders(base string, keys []string, clients int, duration time.Duration, prefix string) (result, error) {
	var n atomic.Int64
	var targeter vegeta.Targeter = func(t *vegeta.Target) error {
		i := n.Add(1)
		t.Method, t.URL = http.MethodPost, base+"/orders"
		t.Header = http.Header{"X-Api-Key": []string{keys[int(i)%len(keys)]}, "Content-Type": []string{"application/json"}}
		t.Body = []byte(`{"externalOrderCode":"` + prefix + strconv.FormatInt(i, 10) +
			`","currency":"EUR","orderProducts":[{"productCode":"` + orderProduct + `","quantity":1}]}`)
		return nil
	}
	m := attack(targeter, vegeta.Rate{Freq: 0}, uint64(clients), duration)
	if m.StatusCodes["202"] != int(m.Requests) {
		return result{}, fmt.Errorf("%d of %d orders accepted (status codes %v, errors %v)",
			m.StatusCodes["202"], m.Requests, m.StatusCodes, m.Errors)
	}
	return result{max: m.Throughput, p50: ms(m.Latencies.P50), p99: ms(m.Latencies.P99)}, nil
}

// placementToCompleted runs B4: 1-unit sandbox orders at rate per second; it returns the p50 and
// p99 of the time from placement to completion, in milliseconds, from the orders' own timestamps.
func placementToCompleted(
	ctx context.Context, db *store.DB, base, key string, rate int, duration time.Duration,
) (float64, float64, error) {
	var n atomic.Int64
	var targeter vegeta.Targeter = func(t *vegeta.Target) error {
		t.Method, t.URL = http.MethodPost, base+"/orders"
		t.Header = http.Header{"X-Api-Key": []string{key}, "Content-Type": []string{"application/json"}}
		t.Body = []byte(fmt.Sprintf(`{"externalOrderCode":"b4-%d","currency":"EUR",`+
			`"orderProducts":[{"productCode":"99000000000001","quantity":1}]}`, n.Add(1)))
		return nil
	}
	attacker := newAttacker(16)
	for res := range attacker.Attack(targeter, vegeta.Rate{Freq: rate, Per: time.Second}, duration, "b4") {
		if res.Code != 202 {
			return 0, 0, fmt.Errorf("order placement answered %d: %s", res.Code, res.Body)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var processing int64
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM orders
			WHERE status = 'processing' AND external_order_code LIKE 'b4-%'`).Scan(&processing); err != nil {
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
	err := db.Pool.QueryRow(ctx, `SELECT
			COALESCE(percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM finished_at - created_at)), 0) * 1000,
			COALESCE(percentile_cont(0.99) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM finished_at - created_at)), 0) * 1000
		FROM orders WHERE external_order_code LIKE 'b4-%'`).Scan(&p.P50, &p.P99)
	if err != nil {
		return 0, 0, fmt.Errorf("latency percentiles: %w", err)
	}
	return p.P50, p.P99, nil
}

// startBaseline starts the baseline of B1, B2 and B6: a minimal Fiber app returning the same
// pre-encoded bytes, the ceiling of what any handler can do on this machine. It is a process of
// its own (this program, re-run with -serve-baseline), as the servers it is held against are, so
// that it shares neither the load generator's collector nor its scheduler.
//
// With redisURL, the baseline counts every request in that Redis before it answers (see
// serveBaseline).
func startBaseline(bodies map[string][]byte, redisURL string) (string, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("baseline: %w", err)
	}
	addr, err := testprocess.FreeAddr()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "codeport-baseline-")
	if err != nil {
		return "", nil, fmt.Errorf("baseline: %w", err)
	}
	args := []string{"-serve-baseline", addr}
	if redisURL != "" {
		args = append(args, "-baseline-redis", redisURL)
	}
	var probe string
	for path, body := range bodies {
		file := filepath.Join(dir, strings.ReplaceAll(strings.Trim(path, "/"), "/", "_")+".json")
		if err := os.WriteFile(file, body, 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return "", nil, fmt.Errorf("baseline: %w", err)
		}
		args, probe = append(args, path+"="+file), path
	}
	proc := &testprocess.Process{Name: "baseline", Binary: exe, Args: args, ReadyURL: "http://" + addr + probe,
		ReadyTimeout: readyTimeout, Output: os.Stderr}
	stop := func() { proc.Kill(); _ = os.RemoveAll(dir) }
	if err := proc.Start(context.Background()); err != nil {
		stop()
		return "", nil, err
	}
	return "http://" + addr, stop, nil
}

// serveBaseline is the baseline process: GET path answers the bytes of file, for each
// path=file of routes. With redisURL, every request is first counted against its key in Redis as
// the simplest shared limiter would: one MULTI/EXEC of INCR and EXPIREAT, a round trip each.
func serveBaseline(addr, redisURL string, routes []string) error {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	if redisURL != "" {
		opts, err := redis.ParseURL(redisURL)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		client := redis.NewClient(opts)
		defer client.Close()
		app.Use(func(c *fiber.Ctx) error {
			window := time.Now().Truncate(time.Minute)
			key := "codeport:bench:" + strconv.FormatInt(window.Unix(), 10) + ":" + c.Get("X-Api-Key")
			_, err := client.TxPipelined(c.Context(), func(pipe redis.Pipeliner) error {
				pipe.Incr(c.Context(), key)
				pipe.ExpireAt(c.Context(), key, window.Add(time.Minute))
				return nil
			})
			if err != nil {
				return fmt.Errorf("count: %w", err)
			}
			return c.Next()
		})
	}
	for _, route := range routes {
		path, file, ok := strings.Cut(route, "=")
		if !ok {
			return fmt.Errorf("baseline route %q is not path=file", route)
		}
		body, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		app.Get(path, func(c *fiber.Ctx) error { c.Set("Content-Type", "application/json"); return c.Send(body) })
	}
	if err := app.Listen(addr); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
