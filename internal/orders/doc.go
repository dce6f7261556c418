// Package orders owns order placement and retrieval: decoding and validating a PlaceOrder
// request against the account's catalog, the idempotent placement transaction (order, wallet
// debit, fulfilment job), and the order representation partners poll.
package orders
