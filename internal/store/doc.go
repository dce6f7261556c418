// Package store owns the PostgreSQL schema (embedded goose migrations) and every SQL statement
// of the service but the operator's configuration upserts (internal/provisioning/configdb).
// Other packages call its functions rather than writing SQL.
//
// # One driver, one calling convention
//
// Every statement here runs on pgx. Every function that the API, the fulfilment and
// notification workers, the wallet's ledger or provisioning's reads run takes
// (ctx context.Context, q Querier, …): q is the pool for a statement on its own, or the pgx.Tx
// of a transaction the caller opened with DB.InTx. These are the statements that place, fulfil and read
// orders, move money (ledger.go, wallet.go), authenticate keys, load and sync catalogs and
// deliver webhooks. pgx sends arrays and binary parameters as they are and pipelines the
// placement (DB.PlaceOrder owns its connection for that), which the hot path needs; its rows
// scan straight into the models (models.go), plain row types that know no ORM.
//
// GORM is not here. The operator's upserts of partners, accounts, keys and webhook endpoints,
// whose many columns a builder keeps readable, live with their only caller, in
// internal/provisioning/configdb, with GORM models of their own, over DB.SQL (this pool's
// database/sql view, which the migrations use too).
//
// # Jobs
//
// Work for River's workers is enqueued one way: a row written into River's job table by this
// package (Job; placeOrderSQL and EnqueueJob), in the transaction that causes it, so a job
// exists if and only if its cause committed. River itself only works the queues; its client's
// own insert costs the placement round trips that measured too slow (Job says how much). Its
// table is River's, not ours: TestJobRowsMatchRiversOwn pins the columns these inserts rely on
// against the River version in go.mod. ReadGauges only reads it, for the queue depth gauge.
//
// # Locks
//
// The lock order of money rows is written once, in ledger.go.
package store
