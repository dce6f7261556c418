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
