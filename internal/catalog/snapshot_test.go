package catalog_test

import (
	"errors"
	"net/url"
	"testing"
	"unsafe"

	"github.com/codeport/codeport/internal/catalog"
)

func TestParseQueryBounds(t *testing.T) {
	cases := []struct {
		query      string
		ok         bool
		skip, take int
	}{
		{"", true, 0, 20}, {"skip=0&take=1", true, 0, 1}, {"take=100", true, 0, 100}, {"skip=5&skip=7", true, 7, 20},
		{"take=0", false, 0, 0}, {"take=101", false, 0, 0}, {"take=-1", false, 0, 0}, {"skip=-1", false, 0, 0},
		{"skip=x", false, 0, 0}, {"take=1e2", false, 0, 0}, {"take=", false, 0, 0},
	}
	for _, tc := range cases {
		values, _ := url.ParseQuery(tc.query)
		q, err := catalog.ParseQuery(values)
		if (err == nil) != tc.ok || (tc.ok && (q.Skip != tc.skip || q.Take != tc.take)) {
			t.Errorf("%q: %+v %v", tc.query, q, err)
		}
	}
	values, _ := url.ParseQuery("brand=Acme,%20acme%20,Other&brand=OTHER&tag=")
	q, _ := catalog.ParseQuery(values)
	if len(q.Brands) != 2 || q.Brands[0] != "acme" || q.Brands[1] != "other" || len(q.Tags) != 0 {
		t.Errorf("lists: %+v", q)
	}
}

// TestQueryParserCopiesWhatItKeeps: a Query outlives the request buffers its parameters were read
// from; reusing them for the next request must not change it.
func TestQueryParserCopiesWhatItKeeps(t *testing.T) {
	buf := []byte("brand=de&search=gift&take=7")
	pairs := [][2][]byte{{buf[0:5], buf[6:8]}, {buf[9:15], buf[16:20]}, {buf[21:25], buf[26:27]}}
	var parser catalog.QueryParser
	for _, kv := range pairs {
		parser.Add(unsafe.String(&kv[0][0], len(kv[0])), unsafe.String(&kv[1][0], len(kv[1])))
	}
	q, apiErr := parser.Query()
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	copy(buf, "XXXXXXXXXXXXXXXXXXXXXXXXXXX")
	if len(q.Brands) != 1 || q.Brands[0] != "de" || q.Search != "gift" || q.Take != 7 {
		t.Fatalf("query changed with the buffer it was read from: %+v", q)
	}
}

// FuzzCatalogQuery: any query string parses into a bounded query or a 400, never a panic, and
// listing with it yields valid paging.
func FuzzCatalogQuery(f *testing.F) {
	for _, seed := range []string{
		"", "take=20&skip=0", "country=de,GB&brand=a&category=x&tag=y&language=en&search=%00",
		"take=999999999999999999999", "skip=-0", "%zz",
	} {
		f.Add(seed)
	}
	snap, err := catalog.NewSnapshot(catalog.TestProducts(), "2026-11-22")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		values, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := catalog.ParseQuery(values)
		if err != nil {
			var paging *catalog.PagingError
			if !errors.As(err, &paging) || (paging.Param != "skip" && paging.Param != "take") {
				t.Fatalf("error %v is not a paging parameter's", err)
			}
			return
		}
		if q.Skip < 0 || q.Take < 1 || q.Take > catalog.MaxTake {
			t.Fatalf("paging out of bounds: %+v", q)
		}
		if body := snap.AppendListJSON(nil, q); len(body) == 0 || body[0] != '{' {
			t.Fatalf("list body %q", body)
		}
	})
}
