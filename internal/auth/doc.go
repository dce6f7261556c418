// Package auth turns a request's credential into the account it acts for: key format checks,
// digest lookup through an in-memory directory kept fresh by PostgreSQL notifications, and the
// account's IP allowlist.
package auth
