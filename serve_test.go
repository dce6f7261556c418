package main

import (
	"testing"
	"time"
)

func TestParseLifecycle(t *testing.T) {
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		deprecation, sunset string
		want                [2]time.Time
		err                 string
	}{
		{"2026-12-01", "", [2]time.Time{day(2026, 12, 1), {}}, ""},
		{"2026-12-01", "2027-06-30", [2]time.Time{day(2026, 12, 1), day(2027, 6, 30)}, ""},
		{"2026-12-01T12:00:00+02:00", "", [2]time.Time{day(2026, 12, 1).Add(10 * time.Hour), {}}, ""},
		{"", "", [2]time.Time{}, ""},
		{"", "2027-06-30", [2]time.Time{{}, day(2027, 6, 30)}, ""},
		{"01/12/2026", "", [2]time.Time{}, `--v1-deprecation must be a date, YYYY-MM-DD or RFC 3339, not "01/12/2026"`},
		{"2026-12-01", "soon", [2]time.Time{}, `--v1-sunset must be a date, YYYY-MM-DD or RFC 3339, not "soon"`},
		{"2026-12-01", "2026-11-30", [2]time.Time{}, "--v1-sunset must not be before --v1-deprecation"},
	} {
		l, err := parseLifecycle(c.deprecation, c.sunset, "/docs")
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%q, %q: error %v, want %q", c.deprecation, c.sunset, err, c.err)
			}
			continue
		}
		if err != nil || !l.Deprecation.Equal(c.want[0]) || !l.Sunset.Equal(c.want[1]) || l.Docs != "/docs" {
			t.Errorf("%q, %q: %+v, %v", c.deprecation, c.sunset, l, err)
		}
	}
}
