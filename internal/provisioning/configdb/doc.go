// Package configdb is the operator's configuration write path: the GORM models of partners,
// accounts, API keys and webhook endpoints, and the upserts that provisioning runs with them.
//
// It is the only place GORM is used: its many-column upserts are where a builder keeps the
// statements readable. Only internal/provisioning imports it (internal/archtest and the
// depguard rule of .golangci.yml fail otherwise); the API, the workers and the domain packages
// read the same tables through internal/store's pgx functions and plain row types. GORM runs
// over the process's one pgx pool (Open), so provisioning holds no connections of its own.
package configdb
