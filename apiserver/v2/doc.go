// Package v2 holds the handlers of the current partner API. Each one parses the request, calls
// the package that owns the rule, and renders the result; none holds business logic.
package v2
