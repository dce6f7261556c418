package ratelimit

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/codeport/codeport/apiserver/store/storetest"
)

func backends(t *testing.T) map[string]Limiter {
	return map[string]Limiter{"memory": NewMemory(), "redis": NewRedis(storetest.Redis(t))}
}

func TestWindowSemantics(t *testing.T) {
	for name, l := range backends(t) {
		t.Run(name, func(t *testing.T) {
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
			if h := d.Headers(now); h["X-RateLimit-Reset"] != strconv.FormatInt(reset.Unix(), 10) || h["X-RateLimit-Remaining"] != "0" || h["X-RateLimit-Limit"] != "3" {
				t.Fatalf("headers %v", h)
			}
			d, _ = l.Allow(ctx, key, 3, reset)
			if !d.Allowed || d.Remaining != 2 {
				t.Fatalf("new window: %+v", d)
			}
			other, _ := l.Allow(ctx, key+"-other", 3, now)
			if !other.Allowed || other.Remaining != 2 {
				t.Fatalf("keys not independent: %+v", other)
			}
		})
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
	down := NewRedis(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1}))
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
