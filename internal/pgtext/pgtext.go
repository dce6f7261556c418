// Package pgtext says whether a string can be stored as PostgreSQL text. PostgreSQL refuses a
// NUL character in text and a byte sequence that is not valid in the database's encoding
// (UTF-8), and refuses the whole statement with it: a request carrying such a string must be
// refused at the edge, as the client's mistake, before it becomes a failed query that looks like
// the server's.
package pgtext

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// Storable reports whether s is valid UTF-8 without NUL.
func Storable(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// StorableBytes reports whether b is valid UTF-8 without NUL.
func StorableBytes(b []byte) bool { return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 }
