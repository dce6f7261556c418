// Package notify tells partners what happened: signed webhooks (Standard Webhooks scheme) for
// finished orders, low balances, catalog changes and low stock, and a low-balance e-mail once
// per crossing. Events are recorded and their deliveries enqueued in the same transaction as
// the change they report, so an event exists exactly when its change committed; River delivers
// them at least once.
package notify
