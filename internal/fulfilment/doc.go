// Package fulfilment delivers codes for orders: one River job per order, enqueued in the
// placement transaction. Jobs that run at the same time are finished together, in one
// transaction that records the codes of all their orders, refunds the undelivered value and
// moves each order to its terminal state, a statement per step for all of them. Finishing is
// guarded by status = 'processing', so a job retried or rescued after a crash never delivers
// twice.
package fulfilment
