package poll_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/test/poll"
)

// recorder is a testing.TB that records a failure instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	for _, a := range args {
		r.failed += " " + toString(a)
	}
	panic(r)
}

func toString(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case time.Duration:
		return v.String()
	}
	return ""
}

// TestUntilWaitsForTheCondition: a condition that comes true after a few looks passes; one that
// never does fails with what it last said.
func TestUntilWaitsForTheCondition(t *testing.T) {
	var looks atomic.Int32
	poll.Until(t, 5*time.Second, "third look", func() (bool, string) { return looks.Add(1) >= 3, "" })
	if looks.Load() != 3 {
		t.Fatalf("stopped after %d looks, want 3", looks.Load())
	}

	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != r {
				panic(p)
			}
		}()
		poll.Until(r, 50*time.Millisecond, "never", func() (bool, string) { return false, "still no" })
	}()
	if !strings.Contains(r.failed, "never") || !strings.Contains(r.failed, "still no") {
		t.Fatalf("failure %q does not say what was awaited and what was last seen", r.failed)
	}
}

// TestWaitReturnsWhatItLastSaw: Wait returns nil once the condition holds, and otherwise an error
// that names what was awaited and the condition's last detail, wrapping the context's error when
// the context ended first.
func TestWaitReturnsWhatItLastSaw(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		holdsAt   int32 // the look at which the condition first holds; 0: never
		wantErr   []string
		cancelled bool
	}{
		{name: "holds at the third look", ctx: context.Background(), holdsAt: 3},
		{name: "never holds", ctx: context.Background(), wantErr: []string{"key ready", "not within", "look "}},
		{name: "context ended", ctx: cancelled, wantErr: []string{"key ready", "look 1"}, cancelled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var looks atomic.Int32
			err := poll.Wait(tc.ctx, time.Millisecond, 100*time.Millisecond, "key ready", func() (bool, string) {
				n := looks.Add(1)
				return n == tc.holdsAt, fmt.Sprintf("look %d", n)
			})
			if tc.wantErr == nil {
				if err != nil || looks.Load() != tc.holdsAt {
					t.Fatalf("err %v after %d looks, want nil after %d", err, looks.Load(), tc.holdsAt)
				}
				return
			}
			if err == nil {
				t.Fatalf("nil after %d looks, want an error", looks.Load())
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if errors.Is(err, context.Canceled) != tc.cancelled {
				t.Errorf("error %q: wraps context.Canceled is %v, want %v", err, !tc.cancelled, tc.cancelled)
			}
		})
	}
}
