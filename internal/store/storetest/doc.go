// Package storetest gives each test package a database of its own on a real PostgreSQL server,
// with the production migrations applied, and drops it afterwards.
//
// The server comes from TEST_DATABASE_URL, which `make test` sets through hack/testenv.sh (it
// finds a running server or starts a throwaway one). Tests never fall back to a fake.
package storetest
