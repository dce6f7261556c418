// Package ratelimit counts requests per key in fixed 60-second windows aligned to the minute,
// in process memory (one replica) or in Redis (shared by every replica).
package ratelimit

import (
	"context"
	"hash/maphash"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Window is the length of a rate-limit window.
const Window = time.Minute

// Decision is the outcome of counting one request.
type Decision struct {
	Limit     int
	Remaining int
	// Reset is the end of the current window.
	Reset   time.Time
	Allowed bool
}

// RetryAfter is the whole seconds until the window resets (at least 1).
func (d Decision) RetryAfter(now time.Time) int64 {
	s := int64(d.Reset.Sub(now).Seconds() + 0.999)
	return max(s, 1)
}

// Headers are the X-RateLimit-* response headers of the decision.
func (d Decision) Headers(time.Time) map[string]string {
	return map[string]string{
		"X-RateLimit-Limit":     strconv.Itoa(d.Limit),
		"X-RateLimit-Remaining": strconv.Itoa(d.Remaining),
		"X-RateLimit-Reset":     strconv.FormatInt(d.Reset.Unix(), 10),
	}
}

// Limiter counts a request against key's allowance of limit per window.
type Limiter interface {
	Allow(ctx context.Context, key string, limit int, now time.Time) (Decision, error)
}

func windowOf(now time.Time) (start, end time.Time) {
	start = now.Truncate(Window)
	return start, start.Add(Window)
}

func decide(count int64, limit int, reset time.Time) Decision {
	remaining := int64(limit) - count
	return Decision{Limit: limit, Remaining: int(max(remaining, 0)), Reset: reset, Allowed: count <= int64(limit)}
}

// Memory is a per-process limiter, sharded to keep lock contention low.
type Memory struct {
	seed   maphash.Seed
	shards [64]memoryShard
}

type memoryShard struct {
	mu      sync.Mutex
	window  time.Time
	counter map[string]int64
}

// NewMemory returns an empty in-memory limiter.
func NewMemory() *Memory { return &Memory{seed: maphash.MakeSeed()} }

// Allow implements Limiter. Each shard forgets everything when a new window starts, so memory is
// bounded by the keys seen in one minute.
func (m *Memory) Allow(_ context.Context, key string, limit int, now time.Time) (Decision, error) {
	start, end := windowOf(now)
	s := &m.shards[maphash.String(m.seed, key)%uint64(len(m.shards))]
	s.mu.Lock()
	if !s.window.Equal(start) || s.counter == nil {
		s.window = start
		s.counter = map[string]int64{}
	}
	s.counter[key]++
	count := s.counter[key]
	s.mu.Unlock()
	return decide(count, limit, end), nil
}

// Redis shares counters between replicas. INCR and EXPIREAT run in one script, so a counter
// never lives without its expiry and concurrent replicas never lose increments.
type Redis struct {
	client *redis.Client
}

// NewRedis uses client for counters.
func NewRedis(client *redis.Client) *Redis { return &Redis{client: client} }

var incrScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIREAT', KEYS[1], ARGV[1]) end
return n`)

// Allow implements Limiter.
func (r *Redis) Allow(ctx context.Context, key string, limit int, now time.Time) (Decision, error) {
	start, end := windowOf(now)
	redisKey := "codeport:rl:" + strconv.FormatInt(start.Unix(), 10) + ":" + key
	// Expire a little after the window so clock skew between replicas can't resurrect a count.
	count, err := incrScript.Run(ctx, r.client, []string{redisKey}, end.Add(5*time.Second).Unix()).Int64()
	if err != nil {
		return Decision{}, err //nolint:wrapcheck // the fallback logs it with context
	}
	return decide(count, limit, end), nil
}

// Fallback serves from primary and, while primary fails, from fallback. A Redis outage then
// degrades to per-process limits instead of failing or unlimiting the API.
type Fallback struct {
	primary, fallback Limiter
	log               *slog.Logger
	degraded          atomic.Bool
	// Failures counts requests served by the fallback.
	Failures atomic.Int64
}

// NewFallback wraps primary with fallback; a nil log logs to the default logger.
func NewFallback(primary, fallback Limiter, log *slog.Logger) *Fallback {
	if log == nil {
		log = slog.Default()
	}
	return &Fallback{primary: primary, fallback: fallback, log: log}
}

// SetLogger replaces the logger (before use).
func (f *Fallback) SetLogger(log *slog.Logger) { f.log = log }

// FallbackCount is how many decisions the fallback made (for the metrics).
func (f *Fallback) FallbackCount() int64 { return f.Failures.Load() }

// Allow implements Limiter.
func (f *Fallback) Allow(ctx context.Context, key string, limit int, now time.Time) (Decision, error) {
	d, err := f.primary.Allow(ctx, key, limit, now)
	if err == nil {
		if f.degraded.CompareAndSwap(true, false) {
			f.log.Info("shared rate limiter recovered")
		}
		return d, nil
	}
	f.Failures.Add(1)
	if f.degraded.CompareAndSwap(false, true) {
		f.log.Warn("shared rate limiter unavailable; limiting per process", slog.Any("err", err))
	}
	return f.fallback.Allow(ctx, key, limit, now)
}
