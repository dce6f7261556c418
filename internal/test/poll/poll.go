package poll

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// interval is the pause between two looks at a condition in Until.
const interval = 20 * time.Millisecond

// Until polls cond until it holds, failing t when limit passes first with what and the last
// detail cond gave.
func Until(t testing.TB, limit time.Duration, what string, cond func() (ok bool, detail string)) {
	t.Helper()
	if err := Wait(t.Context(), interval, limit, what, cond); err != nil {
		t.Fatalf("%s", err.Error())
	}
}

// UntilTrue is Until for a condition with nothing to tell.
func UntilTrue(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	Until(t, limit, what, func() (bool, string) { return cond(), "false" })
}

// Wait polls cond every pause until it holds, and returns nil; when limit passes or ctx ends
// first, its error says what was awaited and the last detail cond gave. It is Until for code that
// returns errors instead of failing a test: the load generators, clusters and benchmarks of
// hack/, whose goroutines must not end a test, and whose pause suits what cond costs (a look
// through kubectl is slower than one at a process's metrics).
func Wait(ctx context.Context, pause, limit time.Duration, what string, cond func() (ok bool, detail string)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, detail := cond()
		if ok {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%s: not within %s (last: %s)", what, limit, detail)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %s)", what, ctx.Err(), detail)
		case <-time.After(pause):
		}
	}
}
