package poll

import (
	"testing"
	"time"
)

// interval is the pause between two looks at a condition.
const interval = 20 * time.Millisecond

// Until polls cond until it holds, failing t when limit passes first with what and the last
// detail cond gave.
func Until(t testing.TB, limit time.Duration, what string, cond func() (ok bool, detail string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last: %s)", what, limit, detail)
		}
		time.Sleep(interval)
	}
}

// UntilTrue is Until for a condition with nothing to tell.
func UntilTrue(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	Until(t, limit, what, func() (bool, string) { return cond(), "false" })
}
