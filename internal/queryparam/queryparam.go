package queryparam

import "net/url"

// Args is a request's query: *fasthttp.Args, as a Fiber handler has it
// (c.Context().QueryArgs()), or Values.
type Args interface {
	Has(name string) bool
	Peek(name string) []byte
}

// Get returns the value of the parameter name (its first, when sent more than once) and whether
// the query names it. present with value "" is a parameter sent empty, never an absent one.
func Get(args Args, name string) (value string, present bool) {
	if !args.Has(name) {
		return "", false
	}
	return string(args.Peek(name)), true
}

// Values are parsed query parameters as Args.
type Values url.Values

// Has reports whether the query names name.
func (v Values) Has(name string) bool { return url.Values(v).Has(name) }

// Peek returns the first value of name.
func (v Values) Peek(name string) []byte { return []byte(url.Values(v).Get(name)) }
