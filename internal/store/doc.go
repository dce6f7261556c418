// Package store owns the PostgreSQL schema (embedded goose migrations) and every SQL statement
// of the service. Other packages call its functions rather than writing SQL.
//
// # Two drivers, each with one calling convention
//
// The data plane runs on pgx. Every function that the API, the fulfilment and notification
// workers or the wallet's ledger run takes (ctx context.Context, q Querier, …): q is the pool for
// a statement on its own, or the pgx.Tx of a transaction the caller opened with DB.InTx. These
// are the statements that place, fulfil and read orders, move money (ledger.go, wallet.go),
// authenticate keys, load catalogs for serving and deliver webhooks. pgx sends arrays and binary
// parameters as they are and pipelines the placement (DB.PlaceOrder owns its connection for
// that), which the hot path needs; its rows scan straight into the models.
//
// The operator's provisioning writes configuration through GORM (config.go): upserts of
// partners, accounts, keys, catalogs and webhook endpoints, whose many columns a builder keeps
// readable. Those functions take (ctx context.Context, tx *gorm.DB, …), tx being DB.Gorm or a
// GORM transaction. Nothing else uses GORM; the domain packages never import it.
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
