// Package history fills a database with years of orders, as the partner API and its fulfilment
// would have left them, fast enough to reach tens of millions: orders with their lines and
// payload hashes (orders.Request.Hash), debits, refunds and top-ups in the ledger with the
// balances they leave, and delivered codes sealed under the database's keyring from stock rows
// delivered to them (fulfilment.Outcome decides each order's status and refund). Rows go in by
// COPY, one transaction per batch, which also sets the balances it moved. Verify checks the money
// audit's rules in aggregate afterwards. `go run ./hack/bench -figures history` measures the API
// on what it writes; the package's test writes 100,000 orders and audits them.
package history
