// Package pgtext says whether a string can be stored as PostgreSQL text. PostgreSQL refuses a
// NUL character in text and a byte sequence that is not valid in the database's encoding
// (UTF-8), and refuses the whole statement with it: a request carrying such a string must be
// refused at the edge, as the client's mistake, before it becomes a failed query that looks like
// the server's.
package pgtext
