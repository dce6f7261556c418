package catalog

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/codeport/codeport/apiserver/apierror"
	"github.com/codeport/codeport/apiserver/store"
)

// Paging bounds of GET /catalog/products.
const (
	DefaultTake = 20
	MaxTake     = 100
)

// Query is a parsed GET /catalog/products request. Filter values are lower-cased; an empty
// filter matches everything.
type Query struct {
	Countries  []string
	Languages  []string
	Brands     []string
	Categories []string
	Tags       []string
	Search     string
	Skip       int
	Take       int
}

// ParseQuery reads the list filters and paging of the spec. Unknown parameters are ignored;
// malformed paging is a 400 rather than a silent default.
func ParseQuery(values url.Values) (Query, *apierror.Error) {
	q := Query{
		Countries:  splitList(values, "country"),
		Languages:  splitList(values, "language"),
		Brands:     splitList(values, "brand"),
		Categories: splitList(values, "category"),
		Tags:       splitList(values, "tag"),
		Search:     strings.ToLower(strings.TrimSpace(values.Get("search"))),
		Take:       DefaultTake,
	}
	if raw, ok := lastValue(values, "skip"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil || n < 0 {
			return Query{}, apierror.BadRequest("skip must be an integer greater than or equal to 0")
		}
		q.Skip = n
	}
	if raw, ok := lastValue(values, "take"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil || n < 1 || n > MaxTake {
			return Query{}, apierror.BadRequest("take must be an integer between 1 and 100")
		}
		q.Take = n
	}
	return q, nil
}

func lastValue(values url.Values, key string) (string, bool) {
	v := values[key]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// splitList accepts both ?brand=a,b and ?brand=a&brand=b.
func splitList(values url.Values, key string) []string {
	var out []string
	for _, v := range values[key] {
		for _, part := range strings.Split(v, ",") {
			if part = strings.ToLower(strings.TrimSpace(part)); part != "" && !slices.Contains(out, part) {
				out = append(out, part)
			}
		}
	}
	return out
}

// entry is a product with everything a request needs precomputed.
type entry struct {
	product *Product
	list    []byte
	detail  []byte
	// Lower-cased match keys.
	country, brand, category, name string
	languages, tags                []string
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

// filterKey identifies q's filters, whatever its paging.
func (q *Query) filterKey() string {
	var b strings.Builder
	for _, list := range [][]string{q.Countries, q.Languages, q.Brands, q.Categories, q.Tags} {
		for _, v := range list {
			b.WriteString(v)
			b.WriteByte(',')
		}
		b.WriteByte('|')
	}
	b.WriteString(q.Search)
	return b.String()
}

// unfiltered reports whether q selects every product.
func (q *Query) unfiltered() bool {
	return len(q.Countries) == 0 && len(q.Languages) == 0 && len(q.Brands) == 0 && len(q.Categories) == 0 &&
		len(q.Tags) == 0 && q.Search == ""
}

func (e *entry) matches(q *Query) bool {
	return anyOf(q.Countries, e.country) &&
		anyOf(q.Brands, e.brand) &&
		anyOf(q.Categories, e.category) &&
		intersects(q.Languages, e.languages) &&
		intersects(q.Tags, e.tags) &&
		(q.Search == "" || strings.Contains(e.name, q.Search) || strings.Contains(e.product.ProductCode, q.Search))
}

// Snapshot is an immutable view of one catalog (plus the test products in sandbox), safe to
// share between requests.
type Snapshot struct {
	// Catalog is the partner's catalog record (nil when none is bound); Active says whether it
	// is within its validity window.
	Catalog *store.Catalog
	Active  bool
	entries []entry
	byCode  map[string]*entry
	// selections remembers which products each filter selects: partners page through the same
	// filtered lists again and again, and a filter costs a pass over the whole catalog.
	selections selectionCache
}

// maxCachedSelections bounds the filters a snapshot remembers (at most 4 bytes per selected
// product each); filters beyond it are evaluated per request.
const maxCachedSelections = 256

type selectionCache struct {
	mu       sync.RWMutex
	byFilter map[string][]int32
}

// selection returns the indices of the entries q's filters select, in catalog order.
func (s *Snapshot) selection(q *Query) []int32 {
	key := q.filterKey()
	s.selections.mu.RLock()
	selected, ok := s.selections.byFilter[key]
	s.selections.mu.RUnlock()
	if ok {
		return selected
	}
	selected = []int32{}
	for i := range s.entries {
		if s.entries[i].matches(q) {
			selected = append(selected, int32(i)) //nolint:gosec // a catalog holds far fewer than 2^31 products
		}
	}
	s.selections.mu.Lock()
	if len(s.selections.byFilter) < maxCachedSelections {
		s.selections.byFilter[key] = selected
	}
	s.selections.mu.Unlock()
	return selected
}

// NewSnapshot indexes and pre-encodes products; today (YYYY-MM-DD) decides which promotions apply.
func NewSnapshot(products []Product, today string) (*Snapshot, error) {
	s := &Snapshot{entries: make([]entry, 0, len(products)), byCode: make(map[string]*entry, len(products)),
		selections: selectionCache{byFilter: map[string][]int32{}}}
	for i := range products {
		p := &products[i]
		list, detail, err := p.encode(today)
		if err != nil {
			return nil, err
		}
		e := entry{
			product: p, list: list, detail: detail,
			country:  strings.ToLower(p.CountryCode),
			brand:    strings.ToLower(p.Brand),
			category: strings.ToLower(p.MainCategory),
			name:     strings.ToLower(p.Name),
		}
		for _, l := range p.Languages {
			e.languages = append(e.languages, strings.ToLower(l.LanguageCode))
		}
		for _, t := range p.Tags {
			e.tags = append(e.tags, strings.ToLower(t))
		}
		s.entries = append(s.entries, e)
	}
	for i := range s.entries {
		s.byCode[s.entries[i].product.ProductCode] = &s.entries[i]
	}
	return s, nil
}

// Len is the number of products.
func (s *Snapshot) Len() int { return len(s.entries) }

// Get returns the product with productCode, if the catalog has it.
func (s *Snapshot) Get(productCode string) (*Product, bool) {
	e, ok := s.byCode[productCode]
	if !ok {
		return nil, false
	}
	return e.product, true
}

// DetailJSON is the single-product body of productCode.
func (s *Snapshot) DetailJSON(productCode string) ([]byte, bool) {
	e, ok := s.byCode[productCode]
	if !ok {
		return nil, false
	}
	return e.detail, true
}

// AppendListJSON appends the list response for q to buf: count is the number of products that
// match, products the page of them selected by skip and take.
func (s *Snapshot) AppendListJSON(buf []byte, q Query) []byte {
	// The common browse has no filter to test: the page is then a slice of the catalog.
	count := len(s.entries)
	var selected []int32
	filtered := !q.unfiltered()
	if filtered {
		selected = s.selection(&q)
		count = len(selected)
	}
	from := min(q.Skip, count)
	to := min(from+q.Take, count)
	page := make([]*entry, 0, to-from)
	for i := from; i < to; i++ {
		if filtered {
			page = append(page, &s.entries[selected[i]])
		} else {
			page = append(page, &s.entries[i])
		}
	}
	// One allocation at most: the page's pre-encoded products plus the envelope.
	size := 64
	for _, e := range page {
		size += len(e.list) + 1
	}
	buf = slices.Grow(buf, size)
	buf = append(buf, `{"count":`...)
	buf = strconv.AppendInt(buf, int64(count), 10)
	buf = append(buf, `,"skip":`...)
	buf = strconv.AppendInt(buf, int64(q.Skip), 10)
	buf = append(buf, `,"take":`...)
	buf = strconv.AppendInt(buf, int64(q.Take), 10)
	buf = append(buf, `,"products":[`...)
	for i, e := range page {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, e.list...)
	}
	return append(buf, "]}"...)
}

// Products returns the products in catalog order, for callers that render other shapes (v1).
func (s *Snapshot) Products() []*Product {
	out := make([]*Product, len(s.entries))
	for i := range s.entries {
		out[i] = s.entries[i].product
	}
	return out
}
