package ratelimit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
)

func backends(t *testing.T) map[string]Limiter {
	t.Helper()
	return map[string]Limiter{"memory": NewMemory(), "redis": NewRedis(storetest.Redis(t))}
}

func TestWindowSemantics(t *testing.T) {
	for name, l := range backends(t) {
		t.Run(name, func(t *testing.T) { checkWindowSemantics(t, l) })
	}
}

// checkWindowSemantics checks that l allows the limit within a window, refuses and answers the
// request after it, starts afresh in the next window and counts keys apart.
func checkWindowSemantics(t *testing.T, l Limiter) {
	t.Helper()
	ctx := context.Background()
	key := t.Name() + time.Now().String()
	// A window in the near future: Redis expires keys of windows already over.
	now := time.Now().Truncate(time.Minute).Add(time.Hour + 30*time.Second)
	reset := now.Truncate(time.Minute).Add(time.Minute)
	for i := 1; i <= 3; i++ {
		d, err := l.Allow(ctx, key, 3, now)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed || d.Remaining != 3-i || d.Limit != 3 || !d.Reset.Equal(reset) {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	d, _ := l.Allow(ctx, key, 3, now.Add(20*time.Second))
	if d.Allowed || d.Remaining != 0 {
		t.Fatalf("4th request allowed: %+v", d)
	}
	if got := d.RetryAfter(now.Add(20 * time.Second)); got != 10 {
		t.Fatalf("RetryAfter = %d, want 10", got)
	}
	want := [3]Header{{"X-RateLimit-Limit", 3}, {"X-RateLimit-Remaining", 0}, {"X-RateLimit-Reset", reset.Unix()}}
	if h := d.Headers(); h != want {
		t.Fatalf("headers %v, want %v", h, want)
	}
	d, _ = l.Allow(ctx, key, 3, reset)
	if !d.Allowed || d.Remaining != 2 {
		t.Fatalf("new window: %+v", d)
	}
	other, _ := l.Allow(ctx, key+"-other", 3, now)
	if !other.Allowed || other.Remaining != 2 {
		t.Fatalf("keys not independent: %+v", other)
	}
}

// TestRedisSharedAcrossReplicas: two limiters with their own connections, as two API replicas
// would have, together allow exactly the limit.
func TestRedisSharedAcrossReplicas(t *testing.T) {
	a, b := NewRedis(storetest.Redis(t)), NewRedis(storetest.Redis(t))
	key := "replicas-" + time.Now().String()
	now := time.Now()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := a
			if i%2 == 1 {
				l = b
			}
			d, err := l.Allow(context.Background(), key, 50, now)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != 50 {
		t.Fatalf("allowed %d of 200 with limit 50", allowed.Load())
	}
}

func TestFallbackWhenRedisDown(t *testing.T) {
	down := NewRedis(redis.NewClient(&redis.Options{
		Addr:        "127.0.0.1:1",
		DialTimeout: 200 * time.Millisecond,
		MaxRetries:  -1,
	}))
	f := NewFallback(down, NewMemory(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Now()
	for i := range 3 {
		d, err := f.Allow(context.Background(), "k", 2, now)
		if err != nil {
			t.Fatalf("fallback returned error: %v", err)
		}
		if d.Allowed != (i < 2) {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	if f.Failures.Load() != 3 {
		t.Fatalf("failures = %d, want 3", f.Failures.Load())
	}
}

// pipelineGate holds every pipeline until released and counts those that count requests.
type pipelineGate struct {
	release chan struct{}
	sent    atomic.Int64
}

func (g *pipelineGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *pipelineGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (g *pipelineGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		<-g.release
		// Connection set-up (HELLO, CLIENT SETINFO) is pipelined too; count only the counting.
		if len(cmds) > 0 && cmds[0].Name() == "multi" {
			g.sent.Add(1)
		}
		return next(ctx, cmds)
	}
}

// TestRedisBatchesWhileBusy: requests arriving while both round trips are in flight go out
// together in one pipeline, with one INCRBY for their shared key, and each still gets its own
// exact count.
func TestRedisBatchesWhileBusy(t *testing.T) {
	client := storetest.Redis(t)
	ctx := context.Background()
	gate := &pipelineGate{release: make(chan struct{})}
	client.AddHook(gate)
	l := NewRedis(client)
	key, now := "batch-"+time.Now().String(), time.Now()

	const queued = 50
	remaining := make(chan int, DefaultPipelines+queued)
	var wg sync.WaitGroup
	allow := func() {
		defer wg.Done()
		d, err := l.Allow(ctx, key, 1000, now)
		if err != nil {
			t.Error(err)
			return
		}
		remaining <- d.Remaining
	}
	for range DefaultPipelines {
		wg.Add(1)
		go allow()
	}
	poll.UntilTrue(t, 10*time.Second, "every pipeline in flight", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.inFlight == DefaultPipelines
	})
	for range queued {
		wg.Add(1)
		go allow()
	}
	poll.UntilTrue(t, 10*time.Second, "requests queued", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.queue) == queued
	})
	close(gate.release)
	wg.Wait()
	close(remaining)

	if got, want := gate.sent.Load(), int64(DefaultPipelines+1); got != want {
		t.Errorf("%d pipelines for %d requests, want %d", got, DefaultPipelines+queued, want)
	}
	seen := map[int]bool{}
	for r := range remaining {
		seen[1000-r] = true
	}
	for count := 1; count <= DefaultPipelines+queued; count++ {
		if !seen[count] {
			t.Fatalf("count %d given to no request (counts given: %v)", count, seen)
		}
	}
}

// TestRedisCountsExactUnderLoad: many requests over a few keys from two replicas; every key's
// counts are exactly 1..n, each given once.
func TestRedisCountsExactUnderLoad(t *testing.T) {
	replicas := []*Redis{NewRedis(storetest.Redis(t)), NewRedis(storetest.Redis(t))}
	prefix, now := "load-"+time.Now().String()+"-", time.Now()
	const keys, perKey = 3, 300
	var mu sync.Mutex
	counts := map[string][]int{}
	var wg sync.WaitGroup
	for i := range keys * perKey {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := prefix + strconv.Itoa(i%keys)
			d, err := replicas[i%2].Allow(context.Background(), key, 10_000, now)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts[key] = append(counts[key], 10_000-d.Remaining)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for key, given := range counts {
		seen := make([]bool, perKey+1)
		for _, c := range given {
			if c < 1 || c > perKey || seen[c] {
				t.Fatalf("%s: count %d out of range or given twice", key, c)
			}
			seen[c] = true
		}
	}
	if len(counts) != keys {
		t.Fatalf("counted %d keys, want %d", len(counts), keys)
	}
}

// TestRedisCounterExpires: a window's counter expires five seconds after the window ends.
func TestRedisCounterExpires(t *testing.T) {
	client := storetest.Redis(t)
	l := NewRedis(client)
	ctx, key, now := context.Background(), "expiry-"+time.Now().String(), time.Now()
	if _, err := l.Allow(ctx, key, 10, now); err != nil {
		t.Fatal(err)
	}
	start, end := windowOf(now)
	expiry, err := client.ExpireTime(ctx, "codeport:rl:"+strconv.FormatInt(start.Unix(), 10)+":"+key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := end.Add(5 * time.Second).Unix(); int64(expiry.Seconds()) != want {
		t.Fatalf("counter expires at %d, want %d", int64(expiry.Seconds()), want)
	}
}

// BenchmarkRedisAllow: 64 concurrent requests over 1,000 keys, as a busy replica sees them,
// counted with one round trip per request (the baseline) and batched with 1, 2 and 4 round
// trips in flight; each batched run reports its time per request as a ratio to the baseline's.
func BenchmarkRedisAllow(b *testing.B) {
	client := storetest.Redis(b)
	now := time.Now()
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "bench-" + strconv.Itoa(i)
	}
	run := func(b *testing.B, allow func(key string) error) float64 {
		b.Helper()
		var next atomic.Int64
		b.SetParallelism(32)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := allow(keys[next.Add(1)%int64(len(keys))]); err != nil {
					b.Error(err)
					return
				}
			}
		})
		return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	}
	var baseline float64
	b.Run("round trip per request", func(b *testing.B) {
		l := NewRedis(client)
		baseline = run(b, func(key string) error {
			p := &pendingCount{key: "codeport:rl:bench:" + key, expireAt: now.Add(time.Minute).Unix()}
			l.count(context.Background(), []*pendingCount{p})
			return p.err
		})
	})
	for _, pipelines := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("batched, %d in flight", pipelines), func(b *testing.B) {
			l := NewRedis(client)
			l.pipelines = pipelines
			perRequest := run(b, func(key string) error {
				_, err := l.Allow(context.Background(), key, 1<<30, now)
				return err
			})
			if baseline > 0 {
				b.ReportMetric(perRequest/baseline, "x-baseline")
			}
		})
	}
}
