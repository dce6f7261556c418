// Package apitime is how the partner API writes instants: RFC 3339 in UTC with exactly three
// fractional digits. An instant just computed carries nanoseconds and the same instant read back
// from PostgreSQL microseconds; truncated to milliseconds, both read as the same string.
package apitime
