package apitime

import (
	"fmt"
	"time"
)

// Layout is the API's date-time format.
const Layout = "2006-01-02T15:04:05.000Z07:00"

// Time is an instant as the API writes it.
type Time struct{ time.Time }

// Of is t as the API writes it.
func Of(t time.Time) Time { return Time{t} }

// String is t in Layout, in UTC, truncated to the millisecond.
func (t Time) String() string { return t.UTC().Truncate(time.Millisecond).Format(Layout) }

// MarshalJSON writes t as a JSON string in Layout.
func (t Time) MarshalJSON() ([]byte, error) { return []byte(`"` + t.String() + `"`), nil }

// UnmarshalJSON reads any RFC 3339 instant.
func (t *Time) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("date-time %s is not a JSON string", b)
	}
	parsed, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
	if err != nil {
		return fmt.Errorf("date-time: %w", err)
	}
	t.Time = parsed
	return nil
}
