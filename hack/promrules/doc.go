// Command promrules prints, one per line and sorted, the metric names that the expressions of
// Prometheus rule files select. The repository's test that every alert reads metrics the
// binaries export compares its output with what they serve on /metrics.
//
// It is a module of its own so that the Prometheus module, which the parsing needs, stays out
// of codeport's go.mod; `make promtool` builds it into bin/.
package main
