// Package drill holds the backup and restore drill: a test that backs up a live codeport
// database with pg_dump while orders flow, restores it into a fresh database, starts codeport on
// it and checks what the restore procedure of docs/operations.md promises (every order readable
// with its codes, the ledger equal to the balances, orders in flight finished or refunded, keys
// and allowlists in force). It has no code outside its test: the drill is the procedure run end
// to end, against real processes and a real PostgreSQL, in `make test`.
package drill
