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

// Header is one response header of a decision: a name and an integer value.
type Header struct {
	Name  string
	Value int64
}

// Headers are the X-RateLimit-* response headers of the decision. Integers rather than their
// text, in an array rather than a map: every response carries them, and the caller can format
// them into its own buffers without an allocation per header.
func (d Decision) Headers() [3]Header {
	return [3]Header{
		{"X-RateLimit-Limit", int64(d.Limit)},
		{"X-RateLimit-Remaining", int64(d.Remaining)},
		{"X-RateLimit-Reset", d.Reset.Unix()},
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

// Redis shares counters between replicas: INCRBY counts atomically however many replicas count
// at once, and EXPIREAT in the same transaction forgets a window soon after it ends.
//
// Requests that arrive while a round trip is in flight are sent together in the next pipeline,
// and requests for the same key in one pipeline share one INCRBY: under load a replica pays one
// round trip per batch rather than per request, and every request still gets its exact count.
type Redis struct {
	client *redis.Client
	// pipelines bounds the round trips in flight (DefaultPipelines).
	pipelines int

	mu       sync.Mutex
	queue    []*pendingCount
	inFlight int
}

// DefaultPipelines is how many round trips one replica keeps in flight. Two keep Redis busy
// while the next batch forms; more only make the batches smaller (BenchmarkRedisAllow).
const DefaultPipelines = 2

// pendingCount is one request waiting for its count. result receives true when count and err
// are set, false when the request is to send batch, the requests queued behind it.
type pendingCount struct {
	key      string
	expireAt int64
	count    int64
	err      error
	batch    []*pendingCount
	result   chan bool
}

// NewRedis uses client for counters.
func NewRedis(client *redis.Client) *Redis {
	return &Redis{client: client, pipelines: DefaultPipelines}
}

// Allow implements Limiter. A queued request waits for its batch without watching ctx: the
// client's read and write timeouts bound every round trip, and a waiter that left could not
// send the batch it was handed.
func (r *Redis) Allow(ctx context.Context, key string, limit int, now time.Time) (Decision, error) {
	start, end := windowOf(now)
	p := &pendingCount{
		key: "codeport:rl:" + strconv.FormatInt(start.Unix(), 10) + ":" + key,
		// Expire a little after the window so clock skew between replicas can't resurrect a count.
		expireAt: end.Add(5 * time.Second).Unix(),
		result:   make(chan bool, 1),
	}
	r.mu.Lock()
	r.queue = append(r.queue, p)
	if r.inFlight < r.pipelines {
		r.inFlight++
		r.handOffQueue()
	}
	r.mu.Unlock()
	if !<-p.result {
		r.send(context.WithoutCancel(ctx), p.batch)
		<-p.result
	}
	if p.err != nil {
		return Decision{}, p.err // the fallback logs it with context
	}
	return decide(p.count, limit, end), nil
}

// send counts batch in one pipeline, answers it, and hands the requests queued meanwhile, if
// any, to the first of them.
func (r *Redis) send(ctx context.Context, batch []*pendingCount) {
	r.count(ctx, batch)
	for _, p := range batch {
		p.result <- true
	}
	r.mu.Lock()
	if len(r.queue) > 0 {
		r.handOffQueue()
	} else {
		r.inFlight--
	}
	r.mu.Unlock()
}

// handOffQueue makes the first queued request send everything queued (r.mu held, queue not
// empty, a round-trip slot reserved for it).
func (r *Redis) handOffQueue() {
	first := r.queue[0]
	first.batch, r.queue = r.queue, nil
	first.result <- false
}

// count sets every request's count (or error): one MULTI/EXEC for the batch, in it an INCRBY
// and an EXPIREAT per key. The transaction keeps a counter from ever living without its expiry.
func (r *Redis) count(ctx context.Context, batch []*pendingCount) {
	// The requests of each key, in arrival order.
	groupOf := make(map[string]int, len(batch))
	var groups [][]*pendingCount
	for _, p := range batch {
		i, seen := groupOf[p.key]
		if !seen {
			i = len(groups)
			groupOf[p.key] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], p)
	}
	totals := make([]*redis.IntCmd, len(groups))
	_, _ = r.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, group := range groups {
			totals[i] = pipe.IncrBy(ctx, group[0].key, int64(len(group)))
			pipe.ExpireAt(ctx, group[0].key, time.Unix(group[0].expireAt, 0))
		}
		return nil
	})
	for i, group := range groups {
		total, err := totals[i].Result()
		for j, p := range group {
			p.count, p.err = total-int64(len(group)-1-j), err
		}
	}
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
