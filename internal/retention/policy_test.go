package retention_test

import (
	"testing"

	"github.com/codeport/codeport/internal/retention"
)

// TestCheckDays: the period is off (0) or long enough to outlive every webhook event.
func TestCheckDays(t *testing.T) {
	for _, tc := range []struct {
		days int
		ok   bool
	}{
		{0, true},
		{31, true},
		{365, true},
		{30, false},
		{1, false},
		{-1, false},
	} {
		err := retention.CheckDays(tc.days)
		if (err == nil) != tc.ok {
			t.Errorf("CheckDays(%d) = %v; want ok %v", tc.days, err, tc.ok)
		}
	}
	if retention.Minimum != 31*retention.Day {
		t.Errorf("Minimum is %s; the flag's help and the chart's schema say 31 days", retention.Minimum)
	}
}
