package poll_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/poll"
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
