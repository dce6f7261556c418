package apiserver_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// asSent is one value sent in a query parameter or header the way a lenient server would take,
// and the answer: the contract judges every value as sent (docs/partner-api.md, "Values as
// sent"), so whitespace around it and its letter case count, and an integer beyond the bound of
// every integer is refused naming the bound.
type asSent struct {
	route, param string
	// query is the whole query sent; header, when set, is the X-Sandbox-Scenario sent.
	query, header string
	status        int
	message       string
}

const (
	skipBoundMessage = "skip must be at most 9007199254740991"
	scenarioMessage  = `Unknown X-Sandbox-Scenario "%s". Valid scenarios: timeout, rate-limited, server-error, ` +
		"insufficient-funds."
)

var asSentCases = []asSent{
	{"GET /v2/ping", "X-Sandbox-Scenario", "", "insufficient-funds", 200, ""},
	{"GET /v2/ping", "X-Sandbox-Scenario", "", "Insufficient-Funds", 400, ""},
	{"GET /v2/ping", "X-Sandbox-Scenario", "", "TIMEOUT", 400, ""},
	{"GET /v2/wallet", "X-Sandbox-Scenario", "", "Server-Error", 400, ""},

	{"GET /v2/catalog/products", "skip", "skip=5", "", 200, ""},
	{"GET /v2/catalog/products", "skip", "skip=%2B5", "", 200, ""}, // a plus sign is an integer's
	{"GET /v2/catalog/products", "skip", "skip=%205", "", 400, skipMessage},
	{"GET /v2/catalog/products", "skip", "skip=5%09", "", 400, skipMessage},
	{"GET /v2/catalog/products", "skip", "skip=9007199254740991", "", 200, ""},
	{"GET /v2/catalog/products", "skip", "skip=9007199254740992", "", 400, skipBoundMessage},
	{"GET /v2/catalog/products", "skip", "skip=99999999999999999999", "", 400, skipBoundMessage},
	{"GET /v2/catalog/products", "skip", "skip=-99999999999999999999", "", 400, skipMessage},
	{"GET /v2/catalog/products", "take", "take=%205", "", 400, takeMessage},
	{"GET /v2/catalog/products", "take", "take=99999999999999999999", "", 400, takeMessage},
	{"GET /v1/catalog/products", "skip", "skip=%205", "", 400, skipMessage},
	{"GET /v1/catalog/products", "skip", "skip=9007199254740992", "", 400, skipBoundMessage},
	{"GET /v1/catalog/products", "take", "take=5%20", "", 400, takeMessage},

	{"GET /v2/orders", "externalOrderCode", "externalOrderCode=%20po-1%20", "", 200, ""},
	{"GET /v2/orders", "externalOrderCode", "externalOrderCode=%20" + strings.Repeat("a", 100), "", 400,
		externalCodeMessage},
	{"GET /v2/orders", "externalOrderCode", "externalOrderCode=%C2%A0%E3%80%80", "", 400, externalCodeMessage},
	{"GET /v2/orders", "status", "status=COMPLETED", "", 400, statusMessage},
	{"GET /v2/orders", "status", "status=%20completed", "", 400, statusMessage},
	{"GET /v2/orders", "from", "from=%202026-01-01", "", 400, fromMessage},
	{"GET /v2/orders", "to", "to=2026-01-01T00:00:00Z%20", "", 400, toMessage},
	{"GET /v2/orders", "limit", "limit=%2010", "", 400, limitMessage},
	{"GET /v2/orders", "limit", "limit=99999999999999999999", "", 400, limitMessage},

	{"GET /v2/wallet/transactions", "currency", "currency=eur", "", 200, ""},
	{"GET /v2/wallet/transactions", "currency", "currency=%20EUR", "", 400, currencyMessage},
	{"GET /v2/wallet/transactions", "currency", "currency=EUR%C2%A0", "", 400, currencyMessage},
	// Withdrawn codes the ledger may hold, and codes it never held (an empty statement).
	{"GET /v2/wallet/transactions", "currency", "currency=DEM", "", 200, ""},
	{"GET /v2/wallet/transactions", "currency", "currency=QQQ", "", 200, ""},
	{"GET /v2/wallet/transactions", "currency", "currency=EURO", "", 400, currencyMessage},

	{"GET /v2/webhooks/events", "type", "type=Order.Completed", "", 400, eventTypeMessage},
	{"GET /v2/webhooks/events", "type", "type=order.completed%20", "", 400, eventTypeMessage},
	{"GET /v2/webhooks/events", "limit", "limit=%2010", "", 400, "limit must be an integer from 1 to 200"},
	{"POST /v2/webhooks/replay", "since", "since=%202026-11-25T08:00:00Z", "", 400,
		"since must be an RFC 3339 date-time, e.g. 2026-11-25T08:00:00Z"},
	{"POST /v2/webhooks/replay", "type", replaySince + "type=STOCK.LOW", "", 400, eventTypeMessage},
}

// TestValuesAsSent sends values that differ from admitted ones only by whitespace, letter case
// or size, and checks that the server answers as the contract says and as the document it
// serves judges them: a value the document refuses is refused, naming the parameter, and one it
// admits is taken. The contract generator draws such values for every parameter and field; this
// table keeps the ones a server was once lenient about.
func TestValuesAsSent(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	docs := documents(t)
	for _, tc := range asSentCases {
		method, path, _ := strings.Cut(tc.route, " ")
		env, key := "sandbox", tn.keys["sandbox"]
		if strings.HasPrefix(path, "/v1/") {
			// Bearer tokens are issued for production.
			env, key = "production", "Bearer "+tn.keys["bearer:production"]
		}
		t.Run(tc.route+"?"+tc.query+tc.header, func(t *testing.T) {
			header := http.Header{}
			if tc.header != "" {
				header.Set("X-Sandbox-Scenario", tc.header)
			}
			target := path
			if tc.query != "" {
				target += "?" + tc.query
			}
			admits := documentAdmits(t, docs, method, target, header)
			if admits != (tc.status < 400) {
				t.Fatalf("the document admits it: %v; the contract answers %d", admits, tc.status)
			}
			var body any
			if method == http.MethodPost {
				body = map[string]any{}
			}
			r := s.callWith(t, env, method, target, key, body, header)
			switch {
			case tc.status < 400 && r.status >= 400:
				t.Fatalf("status %d, want it taken: %s", r.status, r.raw)
			case tc.status < 400:
			case tc.header != "":
				expectError(t, r, tc.status, strings.Replace(scenarioMessage, "%s", tc.header, 1))
			default:
				expectError(t, r, tc.status, tc.message)
			}
		})
	}
}

// documentAdmits says whether the published document of target's version admits the request.
func documentAdmits(t *testing.T, docs map[string]*openapi3.T, method, target string, header http.Header) bool {
	t.Helper()
	doc := docs[target[:3]]
	doc.Servers = openapi3.Servers{{URL: target[:3]}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	if method == http.MethodPost {
		body = []byte("{}")
	}
	req := &http.Request{Method: method, URL: u, Header: header.Clone(), Body: io.NopCloser(bytes.NewReader(body))}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}) == nil
}
