package apitime_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/apitime"
)

func TestOneInstantOneString(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	cases := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 11, 23, 22, 4, 5, 123456789, time.UTC), `"2026-11-23T22:04:05.123Z"`},
		{time.Date(2026, 11, 23, 22, 4, 5, 123456000, time.UTC), `"2026-11-23T22:04:05.123Z"`}, // as PostgreSQL returns it
		{time.Date(2026, 11, 23, 23, 4, 5, 999999999, berlin), `"2026-11-23T22:04:05.999Z"`},
		{time.Date(2026, 11, 23, 22, 4, 5, 0, time.UTC), `"2026-11-23T22:04:05.000Z"`},
	}
	for _, tc := range cases {
		got, err := json.Marshal(apitime.Of(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("%v: %s %v, want %s", tc.in, got, err, tc.want)
		}
		var back apitime.Time
		if err := json.Unmarshal(got, &back); err != nil || !back.Equal(tc.in.Truncate(time.Millisecond)) {
			t.Errorf("%s read back as %v (%v)", got, back, err)
		}
	}
	if err := json.Unmarshal([]byte(`12`), new(apitime.Time)); err == nil {
		t.Error("a number read as a date-time")
	}
}
