// Package wallet is the partner's money: per-currency balances changed only through the
// append-only ledger, and their rendering as decimal major units.
package wallet
