// Package queryparam reads a request's query parameters by the API's one rule for empty values,
// which docs/partner-api.md states: a parameter is present when the query names it, with a value
// or without one. ?limit= and ?limit are present with the value "", which the parameter's rule
// then judges like any other value: a type, format, enumeration or bound that
// excludes it refuses it with the parameter's message, and a required parameter sent empty is
// missing. Only a parameter the query does not name is absent and takes its default.
//
// The catalog's list query (catalog.QueryParser) reads every pair of the query itself, to parse
// without allocating; a pair with an empty value is present there too.
package queryparam
