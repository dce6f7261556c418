package catalog

import (
	"net/url"
	"slices"
)

// ParseQuery reads the list filters and paging of the spec from values.
func ParseQuery(values url.Values) (Query, error) {
	var p QueryParser
	for key, vs := range values {
		for _, v := range vs {
			p.Add(key, v)
		}
	}
	return p.Query()
}

// matches is the linear scan the snapshot's posting lists stand in for: the tests hold the two
// to the same selections.
func (e *entry) matches(q *Query) bool {
	return anyOf(q.Countries, e.country) &&
		anyOf(q.Brands, e.brand) &&
		anyOf(q.Categories, e.category) &&
		intersects(q.Languages, e.languages) &&
		intersects(q.Tags, e.tags) &&
		e.searched(q.Search)
}

func anyOf(filter []string, value string) bool {
	return len(filter) == 0 || slices.Contains(filter, value)
}

func intersects(filter, values []string) bool {
	if len(filter) == 0 {
		return true
	}
	for _, v := range values {
		if slices.Contains(filter, v) {
			return true
		}
	}
	return false
}
