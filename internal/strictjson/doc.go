// Package strictjson checks what encoding/json lets pass in a request body that moves money:
// an object with the same key twice (encoding/json keeps the last, so the body a partner logged
// and the one that was charged can differ), text PostgreSQL cannot store (invalid UTF-8, which
// encoding/json silently replaces, NUL, lone UTF-16 surrogates), and key spellings it matches
// case-insensitively. It reads a document once, without building it, and allocates only for
// keys that use escapes and for the names of large objects' keys.
package strictjson
