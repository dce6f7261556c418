package logthrottle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/logthrottle"
)

// TestRepeatsAreCountedIntoTheNextLine logs a run of identical errors, timed by their records,
// with a second message and a derived logger mixed in: each message is written once per
// interval, and the line after a run says how many were left out.
func TestRepeatsAreCountedIntoTheNextLine(t *testing.T) {
	var out bytes.Buffer
	h := logthrottle.New(slog.NewJSONHandler(&out, nil), 10*time.Second)
	derived := h.WithAttrs([]slog.Attr{slog.String("component", "producer")})
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	log := func(handler slog.Handler, at time.Duration, level slog.Level, msg string) {
		r := slog.NewRecord(start.Add(at), level, msg, 0)
		r.AddAttrs(slog.String("err", "connection refused"))
		if err := handler.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	// 69 lines a second for 25 seconds, as River's producer logged while PostgreSQL was down.
	for i := range 25 * 69 {
		at := time.Duration(i) * time.Second / 69
		log(h, at, slog.LevelError, "producer: Error fetching jobs")
		if i%69 == 0 {
			log(derived, at, slog.LevelError, "producer: Error fetching jobs")
			log(h, at, slog.LevelWarn, "elector: error attempting to elect")
		}
	}
	var lines []map[string]any
	for line := range strings.Lines(out.String()) {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		lines = append(lines, l)
	}
	var fetching, electing []any
	for _, l := range lines {
		switch l["msg"] {
		case "producer: Error fetching jobs":
			fetching = append(fetching, l["suppressed"])
		case "elector: error attempting to elect":
			electing = append(electing, l["suppressed"])
		}
	}
	// At 0 s, 10 s and 20 s; the runs between hold 10 s of records each (69*10 + 10 derived - 1).
	if len(fetching) != 3 || fetching[0] != nil || fetching[1] != float64(699) || fetching[2] != float64(699) {
		t.Errorf("fetch errors written: %v", fetching)
	}
	if len(electing) != 3 || electing[1] != float64(9) {
		t.Errorf("election errors written: %v", electing)
	}
	if total := 25*69 + 25 + 25; uint64(len(lines))+h.Suppressed() != uint64(total) {
		t.Errorf("%d written + %d suppressed, want %d records", len(lines), h.Suppressed(), total)
	}
}
