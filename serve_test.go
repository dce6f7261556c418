package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestProcessLogsBoundRepeatedLines: an error repeated by every request of an outage is written
// once, then once an interval with the count of those left out, whatever the request rate.
func TestProcessLogsBoundRepeatedLines(t *testing.T) {
	var out bytes.Buffer
	logs, log := processLogs(&out, 0)
	for range 500 {
		log.Error("place order", slog.Any("err", errors.New("connection refused")))
	}
	log.Error("key lookup failed", slog.Any("err", errors.New("connection refused")))
	if err := logs.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"msg":"place order"`) ||
		!strings.Contains(lines[1], `"msg":"key lookup failed"`) {
		t.Fatalf("%d lines for 501 errors of two messages within %s:\n%s", len(lines), repeatedLineEvery, out.String())
	}
}

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
