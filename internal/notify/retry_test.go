package notify

import (
	"testing"
	"time"

	"github.com/codeport/codeport/internal/store"
)

// TestAttemptsFor24h: the schedule's attempts span a day, and never exceed what a job row holds,
// however short the delays (tests and impatient operators configure seconds).
func TestAttemptsFor24h(t *testing.T) {
	cases := []struct {
		retry Retry
		want  int
	}{
		// The first attempt, ten retries 5 s to 2560 s apart (85 min), then 23 hourly ones.
		{DefaultRetry(), 34},
		{Retry{Base: time.Hour, Max: time.Hour}, 25},
		{Retry{Base: time.Second, Max: time.Second}, store.MaxJobAttempts},
		{Retry{Base: time.Millisecond, Max: time.Millisecond}, store.MaxJobAttempts},
	}
	for _, tc := range cases {
		if got := tc.retry.attemptsFor24h(); got != tc.want {
			t.Errorf("%+v: %d attempts, want %d", tc.retry, got, tc.want)
		}
	}
}
