package logthrottle

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// maxKeys bounds the messages remembered: past it, messages quiet for an interval are forgotten.
const maxKeys = 1024

// Handler passes records on to the next handler, at most one per message and level per
// interval. The record written after a suppressed run has the attribute "suppressed": how many
// records of that message were left out since the last one written. Handlers derived with
// WithAttrs or WithGroup share the count, so a message is bounded however its loggers were made.
type Handler struct {
	next  slog.Handler
	every time.Duration
	state *state
}

type key struct {
	level   slog.Level
	message string
}

type entry struct {
	written    time.Time
	suppressed int
}

type state struct {
	mu         sync.Mutex
	seen       map[key]*entry
	suppressed atomic.Uint64
}

// New returns a Handler writing to next at most one record of a message and level per every.
func New(next slog.Handler, every time.Duration) *Handler {
	return &Handler{next: next, every: every, state: &state{seen: map[key]*entry{}}}
}

// Suppressed counts the records left out since the Handler was made.
func (h *Handler) Suppressed() uint64 { return h.state.suppressed.Load() }

// Enabled reports whether the next handler handles level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle writes r unless a record of the same message and level was written less than an
// interval before (by r.Time, so that the bound does not depend on when the record is handled).
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	k := key{level: r.Level, message: r.Message}
	s := h.state
	s.mu.Lock()
	e := s.seen[k]
	if e != nil && r.Time.Sub(e.written) < h.every {
		e.suppressed++
		s.mu.Unlock()
		s.suppressed.Add(1)
		return nil
	}
	left := 0
	if e != nil {
		left = e.suppressed
	} else if len(s.seen) >= maxKeys {
		s.forget(r.Time, h.every)
	}
	s.seen[k] = &entry{written: r.Time}
	s.mu.Unlock()
	if left > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", left))
	}
	return h.next.Handle(ctx, r)
}

// forget drops the messages last written an interval or more before now: their next record
// would be written anyway. Their suppressed counts, if any, are lost.
func (s *state) forget(now time.Time, every time.Duration) {
	for k, e := range s.seen {
		if now.Sub(e.written) >= every {
			delete(s.seen, k)
		}
	}
}

// WithAttrs returns a Handler adding attrs, sharing h's counts.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), every: h.every, state: h.state}
}

// WithGroup returns a Handler opening group name, sharing h's counts.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), every: h.every, state: h.state}
}
