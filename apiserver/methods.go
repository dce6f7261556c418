package apiserver

import (
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// methodTable knows, for each path template of the route table, the methods it serves: a
// request for a known path with another method is answered 405 with an Allow header rather than
// 404. It is built from the registered routes, so it cannot disagree with them.
type methodTable []pathMethods

type pathMethods struct {
	// segments of the template; a ":name" segment matches any one non-empty segment.
	segments []string
	allow    string
}

// newMethodTable reads routes (without middleware) and lists each template's methods in the
// order of methods.
func newMethodTable(routes []fiber.Route, methods []string) methodTable {
	byPath := map[string][]string{}
	var paths []string
	for _, r := range routes {
		if _, seen := byPath[r.Path]; !seen {
			paths = append(paths, r.Path)
		}
		if !slices.Contains(byPath[r.Path], r.Method) {
			byPath[r.Path] = append(byPath[r.Path], r.Method)
		}
	}
	table := make(methodTable, 0, len(paths))
	for _, p := range paths {
		served := byPath[p]
		var allow []string
		for _, m := range methods {
			if slices.Contains(served, m) {
				allow = append(allow, m)
			}
		}
		table = append(table, pathMethods{segments: splitPath(p), allow: strings.Join(allow, ", ")})
	}
	return table
}

// allow is the Allow header for path ("GET, HEAD"), or "" when no template matches it. Matching
// is as the router's: case-insensitive, a trailing slash ignored.
func (t methodTable) allow(path string) string {
	segments := splitPath(path)
	for _, route := range t {
		if matches(route.segments, segments) {
			return route.allow
		}
	}
	return ""
}

func matches(template, segments []string) bool {
	if len(template) != len(segments) {
		return false
	}
	for i, part := range template {
		if strings.HasPrefix(part, ":") {
			if segments[i] == "" {
				return false
			}
			continue
		}
		if !strings.EqualFold(part, segments[i]) {
			return false
		}
	}
	return true
}

func splitPath(path string) []string {
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(path, "/"), "/")
}
