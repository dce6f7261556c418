// Package configdb is the operator's configuration write path: the GORM models of partners,
// accounts, API keys and webhook endpoints, and the upserts that provisioning runs with them.
//
// It is the only place GORM is used. GORM carries the models: it reads them (Where, Take, Find),
// inserts keys (Create with clause.OnConflict DoNothing), deletes webhook endpoints, and runs
// provisioning's transactions. The statements below stay raw SQL, through Raw and Exec, because
// GORM's builders would only wrap the same SQL in clause expressions:
//
//   - the upserts of partners, accounts and webhook endpoints, and the reads before them
//     (unchangedRow): a reconcile that finds nothing to change must write and notify nothing, so
//     each is an INSERT … ON CONFLICT … DO UPDATE … WHERE (…) IS DISTINCT FROM (…) with the casts
//     PostgreSQL needs (cidr[], jsonb), returning the id of the row whether or not it was written;
//   - RetirePartner's updates, each of a set of rows (a partner's accounts, keys, endpoints);
//   - the key rotation's updates and reads (RevokeKeysOf, ExpireKeysOf, ExpiringKeyOf,
//     RevokeExpiredKeysOf, KeyState), which compare with the database's now() rather than the
//     operator's clock;
//   - the catalog lookups and DeleteCatalog: catalogs are written by internal/store's pgx
//     catalog sync, and configdb has no model of them.
//
// Only internal/provisioning imports it (internal/archtest and the depguard rule of .golangci.yml
// fail otherwise); the API, the workers and the domain packages read the same tables through
// internal/store's pgx functions and plain row types. GORM runs over the process's one pgx pool
// (Open), so provisioning holds no connections of its own.
package configdb
