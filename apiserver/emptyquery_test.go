package apiserver_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/codeport/codeport/apiserver/openapi"
)

// emptyQuery is one query parameter of a route sent with an empty value, and the answer the
// contract gives it (docs/partner-api.md, "Empty values and null").
type emptyQuery struct {
	// route is the method and path as the documents name them: "GET /v2/orders".
	route, param string
	// query is the whole query sent: the parameter empty, any others the route needs valid.
	query   string
	status  int
	message string
}

const (
	limitMessage     = "limit must be an integer between 1 and 1000"
	fromMessage      = "from must be an RFC 3339 date-time or a date (YYYY-MM-DD)"
	toMessage        = "to must be an RFC 3339 date-time or a date (YYYY-MM-DD)"
	currencyMessage  = "currency must be an ISO 4217 currency code"
	eventTypeMessage = "type must be one of order.completed, order.failed, order.partially_completed, " +
		"balance.low, product.updated, product.removed, catalog.updated, stock.low"
	skipMessage         = "skip must be an integer greater than or equal to 0"
	takeMessage         = "take must be an integer between 1 and 100"
	eanRequiredMessage  = "ean is required (or sku in the form {CC}-{LL}-{productCode})"
	eventCursorMessage  = "cursor is not valid: pass the nextCursor of a previous page"
	replaySince         = "since=2026-11-25T08:00:00Z&"
	statusMessage       = "status must be one of processing, completed, partially_completed, failed"
	externalCodeMessage = "externalOrderCode must be 1 to 100 characters"
)

// emptyQueries is every query parameter of every route. A parameter with a rule (a type, a
// format, an enumeration, a bound) refuses the empty value with its own message; a required one
// takes it as missing; the catalog's free-text filters take it as no filter.
var emptyQueries = slices.Concat(catalogQueries, listQueries("GET /v2/orders"),
	listQueries("GET /v2/wallet/transactions"), otherQueries)

var catalogQueries = []emptyQuery{
	{"GET /v2/catalog/products", "country", "country=", 200, ""},
	{"GET /v2/catalog/products", "language", "language=", 200, ""},
	{"GET /v2/catalog/products", "brand", "brand=", 200, ""},
	{"GET /v2/catalog/products", "category", "category=", 200, ""},
	{"GET /v2/catalog/products", "tag", "tag=", 200, ""},
	{"GET /v2/catalog/products", "search", "search=", 200, ""},
	{"GET /v2/catalog/products", "skip", "skip=", 400, skipMessage},
	{"GET /v2/catalog/products", "take", "take=", 400, takeMessage},
}

// listQueries are the parameters of the cursor-paged list at route: its window and paging, which
// every such list refuses alike, and its filters.
func listQueries(route string) []emptyQuery {
	list := []emptyQuery{
		{route, "from", "from=", 400, fromMessage},
		{route, "to", "to=", 400, toMessage},
		{route, "limit", "limit=", 400, limitMessage},
		{route, "limit", "limit", 400, limitMessage},
		{route, "cursor", "cursor=", 400, cursorMessage},
	}
	if route == "GET /v2/orders" {
		return append(list, emptyQuery{route, "status", "status=", 400, statusMessage},
			emptyQuery{route, "externalOrderCode", "externalOrderCode=", 400, externalCodeMessage})
	}
	return append(list, emptyQuery{route, "currency", "currency=", 400, currencyMessage})
}

var otherQueries = []emptyQuery{
	{"GET /v2/webhooks/events", "cursor", "cursor=", 400, eventCursorMessage},
	{"GET /v2/webhooks/events", "limit", "limit=", 400, "limit must be an integer from 1 to 200"},
	{"GET /v2/webhooks/events", "type", "type=", 400, eventTypeMessage},

	{"POST /v2/webhooks/replay", "since", "since=", 400, "since is required: an RFC 3339 date-time"},
	{"POST /v2/webhooks/replay", "until", replaySince + "until=", 400,
		"until must be an RFC 3339 date-time, e.g. 2026-11-25T09:00:00Z"},
	{"POST /v2/webhooks/replay", "type", replaySince + "type=", 400, eventTypeMessage},

	{"GET /v1/catalog/products", "skip", "skip=", 400, skipMessage},
	{"GET /v1/catalog/products", "take", "take=", 400, takeMessage},

	// ean and sku are one requirement: either names the product, and an empty one is missing.
	{"GET /v1/catalog/product", "ean", "ean=", 400, eanRequiredMessage},
	{"GET /v1/catalog/product", "ean", "ean=&sku=DE-EN-10000000000001", 200, ""},
	{"GET /v1/catalog/product", "sku", "sku=", 400, eanRequiredMessage},
	{"GET /v1/catalog/product", "sku", "sku=&ean=5901234123457", 200, ""},
}

// TestEmptyQueryValues sends every query parameter of every route with an empty value, in both
// environments, and checks the answer. The documents agree: a parameter that refuses the empty
// value says so in its schema, and one that takes it allows it.
func TestEmptyQueryValues(t *testing.T) {
	type param struct{ route, name string }
	takesEmpty := map[param]bool{}
	for _, tc := range emptyQueries {
		p := param{tc.route, tc.param}
		takesEmpty[p] = takesEmpty[p] || tc.status == 200
	}
	docs := documents(t)
	for p, takes := range takesEmpty {
		if err := documentedEmpty(t, docs, p.route, p.name); takes != (err == nil) {
			t.Errorf("%s %s: the server takes the empty value: %v; the document's schema admits it: %v (%v)",
				p.route, p.name, takes, err == nil, err)
		}
	}
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	for _, env := range []string{"sandbox", "production"} {
		for _, tc := range emptyQueries {
			method, path, _ := strings.Cut(tc.route, " ")
			key := tn.keys[env]
			if strings.HasPrefix(path, "/v1/") {
				// Bearer tokens are issued for production.
				if env != "production" {
					continue
				}
				key = "Bearer " + tn.keys["bearer:production"]
			}
			t.Run(env+" "+tc.route+"?"+tc.query, func(t *testing.T) {
				r := s.call(t, env, method, path+"?"+tc.query, key, nil)
				if tc.status == 200 {
					if r.status != 200 {
						t.Fatalf("status %d, want 200: %s", r.status, r.raw)
					}
					return
				}
				expectError(t, r, tc.status, tc.message)
			})
		}
	}
}

// documents are the published OpenAPI documents by base path.
func documents(t *testing.T) map[string]*openapi3.T {
	t.Helper()
	docs := map[string]*openapi3.T{}
	for base, raw := range map[string][]byte{"/v2": openapi.V2(), "/v1": openapi.V1()} {
		doc, err := openapi3.NewLoader().LoadFromData(raw)
		if err != nil {
			t.Fatal(err)
		}
		docs[base] = doc
	}
	return docs
}

// documentedEmpty is whether the documents' schema of a route's query parameter admits the
// empty value; err says why not.
func documentedEmpty(t *testing.T, docs map[string]*openapi3.T, route, name string) error {
	t.Helper()
	method, path, _ := strings.Cut(route, " ")
	base, rest := path[:3], path[3:]
	item := docs[base].Paths.Find(rest)
	if item == nil || item.GetOperation(method) == nil {
		t.Fatalf("%s is not in the document", route)
	}
	for _, p := range append(slices.Clone(item.Parameters), item.GetOperation(method).Parameters...) {
		if p.Value.In != openapi3.ParameterInQuery || p.Value.Name != name {
			continue
		}
		schema := p.Value.Schema.Value
		if !schema.Type.Is(openapi3.TypeString) {
			return fmt.Errorf("type %v", schema.Type)
		}
		return schema.VisitJSON("")
	}
	t.Fatalf("%s has no query parameter %s", route, name)
	return nil
}

// TestEveryQueryParameterIsSentEmpty keeps emptyQueries complete: every query parameter the
// documents give a route is sent empty there.
func TestEveryQueryParameterIsSentEmpty(t *testing.T) {
	documented := map[string]bool{}
	docs := documents(t)
	for base, doc := range docs {
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
					if p.Value.In == openapi3.ParameterInQuery {
						documented[method+" "+base+path+" "+p.Value.Name] = true
					}
				}
			}
		}
	}
	tested := map[string]bool{}
	for _, tc := range emptyQueries {
		tested[tc.route+" "+tc.param] = true
	}
	compare(t, "query parameter", documented, tested)

}
func compare(t *testing.T, what string, documented, tested map[string]bool) {
	t.Helper()
	var missing, stale []string
	for k := range documented {
		if !tested[k] {
			missing = append(missing, k)
		}
	}
	for k := range tested {
		if !documented[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	for _, k := range missing {
		t.Errorf("%s %s is in the OpenAPI documents but not checked here: add it", what, k)
	}
	for _, k := range stale {
		t.Errorf("%s %s is tested here but not in the OpenAPI documents", what, k)
	}
}
