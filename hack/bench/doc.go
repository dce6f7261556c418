// Command bench measures the partner API against baselines taken in the same run and prints
// markdown tables. It provisions a realistic tenant set through internal/provisioning, starts
// real `codeport serve` processes against a real PostgreSQL, and drives them with vegeta (over
// fasthttp's client: see wireTransport).
//
//	go run ./hack/bench -duration 10s      (make bench)
//
// Figures: B1 catalog list (with and without filters, and with rate limits shared through
// Redis) and B2 single product against a minimal Fiber handler serving the same bytes from a
// process of its own (this program, run with -serve-baseline; for the Redis figure it also
// counts each request in Redis, -baseline-redis); B3 order placement against
// pgbench running the same writes; B7 orders completed per second by a serve process with its
// fulfilment workers, from imported stock, against pgbench running both transactions of an
// order (completed.go); B4 placement-to-completed latency of sandbox orders; B8 placement while
// archival moves orders past retention, against placement alone, and the disk an archived order
// frees (archival.go); B5 peak RSS of each
// serve process; B6 the B1 throughput across catalog sizes and partner counts. B1-B3 and B7 are
// the medians of -rounds rounds, ours and the baseline taking turns. O1-O3 (-figures
// operator, not in the default set: it starts envtest's kube-apiserver) are the operator's cold
// start, memory and failover; see operator.go.
package main
