// Package logthrottle bounds how often a slog.Handler writes the same message. A dependency that
// logs every failed attempt of a tight retry loop (River's producer fetches jobs every few
// milliseconds and logs each failure while PostgreSQL is down) would otherwise flood the log
// pipeline with identical lines: the first of a run is written at once, repeats within the
// interval are counted, and the next line written carries how many were left out.
package logthrottle
