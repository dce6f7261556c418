package catalog

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/codeport/codeport/internal/store"
)

// Paging bounds of GET /catalog/products. MaxSkip is I-JSON's largest exact integer (RFC 7493),
// the bound of every integer the API takes; a skip past the last product is an empty page.
const (
	DefaultTake = 20
	MaxTake     = 100
	MaxSkip     = 1<<53 - 1
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

// PagingError is a skip or take parameter that is not a number in its range (0 <= skip <=
// MaxSkip, 1 <= take <= MaxTake). TooLarge: skip is an integer above MaxSkip, whose refusal
// names that bound rather than the lower one.
type PagingError struct {
	Param    string
	TooLarge bool
}

// Error implements error.
func (e *PagingError) Error() string { return "malformed paging parameter " + e.Param }

// QueryParser reads the list filters and paging of the spec one parameter at a time, each key's
// values in the order sent, without collecting them first. Unknown parameters are ignored;
// malformed paging is an error rather than a silent default. A list filter takes both ?brand=a,b
// and ?brand=a&brand=b; search takes its first value, skip and take their last. The strings
// given to Add need only stay valid until Query returns (a request's buffers do): what the
// Query keeps is copied into the parser, and stays valid until the parser is Reset. A parser
// that is Reset and used again (one per request, pooled) reuses its memory: parsing allocates
// nothing once it has parsed queries as long. The zero value is ready to use.
type QueryParser struct {
	q                    Query
	searched             bool
	skip, take           string
	skipGiven, takeGiven bool
	// arena holds the copies of the values the Query keeps; when full, the next copies go to a
	// new arena, and the old one lives on as long as the strings that point into it.
	arena []byte
}

// Reset readies the parser for another query, reusing its memory: Queries it returned before
// are no longer valid.
func (p *QueryParser) Reset() {
	*p = QueryParser{
		q: Query{Countries: p.q.Countries[:0], Languages: p.q.Languages[:0], Brands: p.q.Brands[:0],
			Categories: p.q.Categories[:0], Tags: p.q.Tags[:0]},
		arena: p.arena[:0],
	}
}

// keep copies s into the parser's arena.
func (p *QueryParser) keep(s string) string {
	if s == "" {
		return ""
	}
	if len(p.arena)+len(s) > cap(p.arena) {
		p.arena = make([]byte, 0, max(256, len(s)))
	}
	start := len(p.arena)
	p.arena = append(p.arena, s...)
	// Bytes of the arena that a string points to are not written again before Reset.
	return unsafe.String(&p.arena[start], len(s)) //nolint:gosec // see above

}

// Add reads one parameter.
func (p *QueryParser) Add(key, value string) {
	switch key {
	case "country":
		p.q.Countries = p.appendList(p.q.Countries, value)
	case "language":
		p.q.Languages = p.appendList(p.q.Languages, value)
	case "brand":
		p.q.Brands = p.appendList(p.q.Brands, value)
	case "category":
		p.q.Categories = p.appendList(p.q.Categories, value)
	case "tag":
		p.q.Tags = p.appendList(p.q.Tags, value)
	case "search":
		if !p.searched {
			p.q.Search, p.searched = p.keep(strings.ToLower(strings.TrimSpace(value))), true
		}
	case "skip":
		p.skip, p.skipGiven = value, true
	case "take":
		p.take, p.takeGiven = value, true
	}
}

// Query is the query the parameters make, or a *PagingError.
func (p *QueryParser) Query() (Query, error) {
	p.q.Take = DefaultTake
	if p.skipGiven {
		// Judged as sent, as the documents' integer type is: " 5" is not an integer.
		n, err := strconv.ParseInt(p.skip, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(p.skip, "-"), err == nil && n > MaxSkip:
			return Query{}, &PagingError{Param: "skip", TooLarge: true}
		case err != nil || n < 0:
			return Query{}, &PagingError{Param: "skip"}
		}
		p.q.Skip = int(n)
	}
	if p.takeGiven {
		n, err := strconv.Atoi(p.take)
		if err != nil || n < 1 || n > MaxTake {
			return Query{}, &PagingError{Param: "take"}
		}
		p.q.Take = n
	}
	return p.q, nil
}

// appendList adds the lower-cased comma-separated parts of value to list, each once. The parts
// are copied into the parser: a Query outlives the request whose buffers value may point into.
func (p *QueryParser) appendList(list []string, value string) []string {
	for part := range strings.SplitSeq(value, ",") {
		if part = strings.ToLower(strings.TrimSpace(part)); part != "" && !slices.Contains(list, part) {
			list = append(list, p.keep(part))
		}
	}
	return list
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

// appendFilterKey appends what identifies q's filters, whatever its paging, to b.
func (q *Query) appendFilterKey(b []byte) []byte {
	for _, list := range q.lists() {
		for _, v := range list {
			b = append(b, v...)
			b = append(b, ',')
		}
		b = append(b, '|')
	}
	return append(b, q.Search...)
}

// dimension is one of the list filters.
type dimension int

const (
	byCountry dimension = iota
	byLanguage
	byBrand
	byCategory
	byTag
	dimensions
)

// lists are q's list filters by dimension.
func (q *Query) lists() [dimensions][]string {
	return [dimensions][]string{q.Countries, q.Languages, q.Brands, q.Categories, q.Tags}
}

// values are the entry's match keys in dimension d; one is room for a single one.
func (e *entry) values(d dimension, one *[1]string) []string {
	switch d {
	case byLanguage:
		return e.languages
	case byTag:
		return e.tags
	case byCountry:
		one[0] = e.country
	case byBrand:
		one[0] = e.brand
	default:
		one[0] = e.category
	}
	return one[:]
}

// unfiltered reports whether q selects every product.
func (q *Query) unfiltered() bool {
	return len(q.Countries) == 0 && len(q.Languages) == 0 && len(q.Brands) == 0 && len(q.Categories) == 0 &&
		len(q.Tags) == 0 && q.Search == ""
}

// searched reports whether the product's name or code contains search ("" matches all).
func (e *entry) searched(search string) bool {
	return search == "" || strings.Contains(e.name, search) || strings.Contains(e.product.ProductCode, search)
}

// postings maps each lower-cased value of one filter to the indices of the entries that have it,
// ascending.
type postings map[string][]int32

// add records that entry i has value; an entry's values arrive together, so a value it repeats
// is recorded once.
func (p postings) add(value string, i int32) {
	list := p[value]
	if n := len(list); n == 0 || list[n-1] != i {
		p[value] = append(list, i)
	}
}

// union is the ascending indices of the entries with any of values.
func (p postings) union(values []string) []int32 {
	if len(values) == 1 {
		return p[values[0]]
	}
	var out []int32
	for _, v := range values {
		out = mergeSorted(out, p[v])
	}
	return out
}

// mergeSorted is the ascending union of two ascending lists.
func mergeSorted(a, b []int32) []int32 {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	out := make([]int32, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		switch {
		case a[0] < b[0]:
			out, a = append(out, a[0]), a[1:]
		case b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	out = append(out, a...)
	return append(out, b...)
}

// intersect is the ascending indices in every one of lists (each ascending, the shortest first):
// each index of the shortest is looked up in the others, each search starting where the last
// one ended.
func intersect(lists [][]int32) []int32 {
	out := make([]int32, 0, len(lists[0]))
	rest := make([][]int32, len(lists)-1)
	copy(rest, lists[1:])
next:
	for _, i := range lists[0] {
		for j, list := range rest {
			at, found := slices.BinarySearch(list, i)
			rest[j] = list[at:]
			if !found {
				continue next
			}
		}
		out = append(out, i)
	}
	return out
}

// index is a snapshot's posting lists, one per list filter. A list is never empty: a value no
// product has is absent.
type index [dimensions]postings

func newIndex(entries []*entry) index {
	var x index
	var one [1]string
	for d := range dimensions {
		x[d] = postings{}
		for n, e := range entries {
			for _, v := range e.values(d, &one) {
				x[d].add(v, int32(n))
			}
		}
	}
	return x
}

// patched is the index of entries made from the one of the entries before a patch: oldToNew maps
// the old entries' indices to the new ones (-1: gone), keeping their order; added are the new
// entries' indices, ascending. It costs a copy of the lists, not a lookup per product.
func (x *index) patched(oldToNew []int32, added []int32, entries []*entry) index {
	var n index
	var one [1]string
	for d := range dimensions {
		additions := postings{}
		for _, j := range added {
			for _, v := range entries[j].values(d, &one) {
				additions.add(v, j)
			}
		}
		n[d] = make(postings, len(x[d])+len(additions))
		for v, list := range x[d] {
			kept := make([]int32, 0, len(list))
			for _, i := range list {
				if j := oldToNew[i]; j >= 0 {
					kept = append(kept, j)
				}
			}
			kept = mergeSorted(kept, additions[v])
			delete(additions, v)
			if len(kept) > 0 {
				n[d][v] = kept
			}
		}
		maps.Copy(n[d], additions)
	}
	return n
}

// selectAll is the ascending indices of the entries q's filters select: the posting lists of its
// list filters intersected, shortest first, then the search tested on what remains.
func (s *Snapshot) selectAll(q *Query) []int32 {
	var lists [][]int32
	for d, values := range q.lists() {
		if len(values) == 0 {
			continue
		}
		list := s.index[d].union(values)
		if len(list) == 0 {
			return []int32{}
		}
		lists = append(lists, list)
	}
	var selected []int32
	switch {
	case len(lists) == 0:
		selected = make([]int32, 0, len(s.entries))
		for i := range s.entries {
			selected = append(selected, int32(i))
		}
	default:
		slices.SortFunc(lists, func(a, b []int32) int { return cmp.Compare(len(a), len(b)) })
		selected = intersect(lists)
	}
	if q.Search == "" {
		return selected
	}
	kept := selected[:0]
	for _, i := range selected {
		if s.entries[i].searched(q.Search) {
			kept = append(kept, i)
		}
	}
	return kept
}

// Snapshot is an immutable view of one catalog (plus the test products in sandbox), safe to
// share between requests. A change of some products makes a new snapshot (Patch) that shares
// the unchanged products' encodings with this one.
type Snapshot struct {
	// Catalog is the partner's catalog record (nil when none is bound); Active says whether it
	// is within its validity window.
	Catalog *store.Catalog
	Active  bool
	// today decides which promotions apply; testProducts says whether the sandbox's test
	// products follow the catalog's own (those whose code the catalog does not use).
	today        string
	testProducts bool
	// entries are the catalog's products by position, then code, then the test products.
	entries []*entry
	byCode  map[string]*entry
	index   index
	// selections remembers which products each filter selects: partners page through the same
	// filtered lists again and again, and then a page costs a lookup.
	selections selectionCache
}

// maxCachedSelections bounds the filters a snapshot remembers (at most 4 bytes per selected
// product each); filters beyond it are evaluated per request.
const maxCachedSelections = 256

// selectionCache is read by every filtered request and written by few: readers load an immutable
// map (no lock, no write to shared memory), writers replace it with a copy.
type selectionCache struct {
	byFilter atomic.Pointer[map[string][]int32]
	mu       sync.Mutex
}

// selection returns the indices of the entries q's filters select, in catalog order.
func (s *Snapshot) selection(q *Query) []int32 {
	var buf [256]byte
	key := q.appendFilterKey(buf[:0])
	if m := s.selections.byFilter.Load(); m != nil {
		if selected, ok := (*m)[string(key)]; ok {
			return selected
		}
	}
	selected := s.selectAll(q)
	s.selections.mu.Lock()
	defer s.selections.mu.Unlock()
	var next map[string][]int32
	if m := s.selections.byFilter.Load(); m != nil {
		if len(*m) >= maxCachedSelections {
			return selected
		}
		next = maps.Clone(*m)
	} else {
		next = map[string][]int32{}
	}
	next[string(key)] = selected
	s.selections.byFilter.Store(&next)
	return selected
}

// newEntry pre-encodes p and its match keys.
func newEntry(p *Product, today string) (*entry, error) {
	list, detail, err := p.encode(today)
	if err != nil {
		return nil, err
	}
	e := &entry{
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
	return e, nil
}

// NewSnapshot indexes and pre-encodes products, in the order given; today (YYYY-MM-DD) decides
// which promotions apply.
func NewSnapshot(products []Product, today string) (*Snapshot, error) {
	s := &Snapshot{today: today, entries: make([]*entry, 0, len(products)),
		byCode: make(map[string]*entry, len(products))}
	for i := range products {
		e, err := newEntry(&products[i], today)
		if err != nil {
			return nil, err
		}
		s.entries = append(s.entries, e)
		s.byCode[e.product.ProductCode] = e
	}
	s.index = newIndex(s.entries)
	return s, nil
}

// newCatalogSnapshot is the snapshot of a catalog's products (in catalog order), followed in
// sandbox by the test products whose codes the catalog does not use.
func newCatalogSnapshot(products []Product, today string, testProducts bool) (*Snapshot, error) {
	if testProducts {
		codes := make(map[string]struct{}, len(products))
		for i := range products {
			codes[products[i].ProductCode] = struct{}{}
		}
		for _, t := range TestProducts() {
			if _, taken := codes[t.ProductCode]; !taken {
				products = append(products, t)
			}
		}
	}
	s, err := NewSnapshot(products, today)
	if err != nil {
		return nil, err
	}
	s.testProducts = testProducts
	return s, nil
}

// catalogOrder orders a catalog's products as the database lists them: by position, then code.
func catalogOrder(a, b *entry) int {
	if c := cmp.Compare(a.product.Position, b.product.Position); c != 0 {
		return c
	}
	return strings.Compare(a.product.ProductCode, b.product.ProductCode)
}

// Patch returns the snapshot with the products named by codes replaced by rows, their current
// state: a named code without a row was deleted, a row whose code is new was added. The result
// equals the snapshot NewSnapshot would build from the whole catalog as it now stands; s is left
// as it is, and both share the encodings of the products that did not change. Patch costs a
// pass over the product pointers, not a re-encoding of the catalog.
func (s *Snapshot) Patch(codes []string, rows []store.CatalogProduct) (*Snapshot, error) {
	changed := make(map[string]struct{}, len(codes)+len(rows))
	for _, c := range codes {
		changed[c] = struct{}{}
	}
	fresh := make([]*entry, 0, len(rows))
	for i := range rows {
		changed[rows[i].ProductCode] = struct{}{}
		e, err := newEntry(&Product{CatalogProduct: rows[i]}, s.today)
		if err != nil {
			return nil, err
		}
		fresh = append(fresh, e)
	}
	slices.SortFunc(fresh, catalogOrder)
	n := &Snapshot{Catalog: s.Catalog, Active: s.Active, today: s.today, testProducts: s.testProducts,
		entries: make([]*entry, 0, len(s.entries)+len(fresh)), byCode: maps.Clone(s.byCode)}
	for c := range changed {
		delete(n.byCode, c)
	}
	// oldToNew and added let the index follow the entries without visiting every product.
	oldToNew := make([]int32, len(s.entries))
	var added []int32
	appendNew := func(e *entry) {
		added = append(added, int32(len(n.entries))) //nolint:gosec // a catalog holds far fewer than 2^31 products
		n.entries = append(n.entries, e)
	}
	next := 0
	for i, e := range s.entries {
		oldToNew[i] = -1
		if e.product.IsSandboxProduct {
			// The test products follow the catalog's; which of them do depends on its codes.
			if n.byCode[e.product.ProductCode] == e {
				delete(n.byCode, e.product.ProductCode)
			}
			continue
		}
		if _, ok := changed[e.product.ProductCode]; ok {
			continue
		}
		for ; next < len(fresh) && catalogOrder(fresh[next], e) < 0; next++ {
			appendNew(fresh[next])
		}
		oldToNew[i] = int32(len(n.entries)) //nolint:gosec // a catalog holds far fewer than 2^31 products
		n.entries = append(n.entries, e)
	}
	for _, e := range fresh[next:] {
		appendNew(e)
	}
	for _, e := range fresh {
		n.byCode[e.product.ProductCode] = e
	}
	if s.testProducts {
		for _, t := range TestProducts() {
			if _, taken := n.byCode[t.ProductCode]; taken {
				continue
			}
			e, err := newEntry(&t, s.today)
			if err != nil {
				return nil, err
			}
			appendNew(e)
			n.byCode[t.ProductCode] = e
		}
	}
	n.index = s.index.patched(oldToNew, added, n.entries)
	return n, nil
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
	at := func(i int) *entry {
		if filtered {
			return s.entries[selected[i]]
		}
		return s.entries[i]
	}
	// One allocation at most: the page's pre-encoded products plus the envelope.
	size := 64
	for i := from; i < to; i++ {
		size += len(at(i).list) + 1
	}
	buf = slices.Grow(buf, size)
	buf = append(buf, `{"count":`...)
	buf = strconv.AppendInt(buf, int64(count), 10)
	buf = append(buf, `,"skip":`...)
	buf = strconv.AppendInt(buf, int64(q.Skip), 10)
	buf = append(buf, `,"take":`...)
	buf = strconv.AppendInt(buf, int64(q.Take), 10)
	buf = append(buf, `,"products":[`...)
	for i := from; i < to; i++ {
		if i > from {
			buf = append(buf, ',')
		}
		buf = append(buf, at(i).list...)
	}
	return append(buf, "]}"...)
}

// Products returns the products in catalog order, for callers that render other shapes (v1).
func (s *Snapshot) Products() []*Product {
	out := make([]*Product, len(s.entries))
	for i, e := range s.entries {
		out[i] = e.product
	}
	return out
}
