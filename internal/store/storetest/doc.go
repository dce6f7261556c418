// Package storetest gives tests databases of their own on a real PostgreSQL server, with the
// production migrations applied, and drops them afterwards.
//
// The migrations run once per server and set of migrations, into a template database named after
// their digest (Template); every migrated test database is a CREATE DATABASE … TEMPLATE copy of
// it, which takes a fraction of a second where replaying the migrations takes seconds. Building
// the template is serialised by an advisory lock, so test binaries that start together build it
// once. Main gives a package one database; New and Open give one test its own, so a test that
// keeps to its database may run with t.Parallel.
//
// The server comes from TEST_DATABASE_URL, which `make test` sets through hack/testenv.sh (it
// finds a running server or starts a throwaway one). Tests never fall back to a fake.
package storetest
