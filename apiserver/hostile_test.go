package apiserver_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/apiserver"
	"github.com/codeport/codeport/apiserver/ratelimit"
)

// getRoutes are a request of every GET route of the table, by its template.
var getRoutes = map[string]string{
	"/healthz":                          "/healthz",
	"/readyz":                           "/readyz",
	"/docs":                             "/docs",
	"/docs/scalar.js":                   "/docs/scalar.js",
	"/v2/openapi.json":                  "/v2/openapi.json",
	"/v1/openapi.json":                  "/v1/openapi.json",
	"/v2/ping":                          "/v2/ping",
	"/v2/catalog/products":              "/v2/catalog/products?take=2",
	"/v2/catalog/products/:productCode": "/v2/catalog/products/10000000000001",
	"/v2/orders":                        "/v2/orders",
	"/v2/orders/:reference":             "/v2/orders/no-such-order",
	"/v2/wallet":                        "/v2/wallet",
	"/v2/wallet/transactions":           "/v2/wallet/transactions",
	"/v2/sandbox/scenarios":             "/v2/sandbox/scenarios",
	"/v2/webhooks/events":               "/v2/webhooks/events",
	"/v1/catalog":                       "/v1/catalog",
	"/v1/catalog/products":              "/v1/catalog/products",
	"/v1/catalog/product":               "/v1/catalog/product?ean=5901234123457",
}

// TestHeadOnEveryGetRoute: HEAD answers as GET does, without a body, on every GET route, the
// streamed CSV statement included (whose writer once crashed the process on HEAD).
func TestHeadOnEveryGetRoute(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "10.00"})
	table := apiserver.New(apiserver.DefaultConfig("production"), apiserver.Deps{DB: s.db, Limiter: ratelimit.NewMemory()})
	for _, r := range table.App().GetRoutes(true) {
		if _, ok := getRoutes[r.Path]; r.Method == http.MethodGet && !ok {
			t.Errorf("GET %s has no request in getRoutes", r.Path)
		}
	}
	type request struct{ env, path, accept string }
	var requests []request
	for _, path := range getRoutes {
		env := "production"
		if strings.Contains(path, "sandbox") {
			env = "sandbox"
		}
		requests = append(requests, request{env, path, ""})
	}
	requests = append(requests, request{"production", "/v2/wallet/transactions", "text/csv"})
	for _, r := range requests {
		key := tn.keys[r.env]
		if strings.HasPrefix(r.path, "/v1/") {
			key = "Bearer " + tn.keys["bearer:production"]
		}
		t.Run(r.path+" "+r.accept, func(t *testing.T) {
			header := http.Header{}
			if r.accept != "" {
				header.Set("Accept", r.accept)
			}
			get := s.callWith(t, r.env, http.MethodGet, r.path, key, nil, header)
			head := s.callWith(t, r.env, http.MethodHead, r.path, key, nil, header)
			if head.status != get.status || len(head.raw) != 0 {
				t.Fatalf("HEAD: %d with %d bytes, GET: %d", head.status, len(head.raw), get.status)
			}
			for _, name := range []string{"Content-Type", "X-RateLimit-Limit", "Cache-Control", "X-Next-Cursor", "Etag"} {
				if head.header.Get(name) != get.header.Get(name) {
					t.Errorf("%s: HEAD %q, GET %q", name, head.header.Get(name), get.header.Get(name))
				}
			}
		})
	}
	// The server is still there, on the connections the HEAD requests used.
	if r := s.call(t, "production", http.MethodGet, "/v2/ping", tn.keys["production"], nil); r.status != 200 {
		t.Fatalf("ping after the HEAD requests: %d", r.status)
	}
}

// TestStatementClientVanishes: a client that resets its connection while a CSV statement
// streams costs only that connection (the writer once closed a connection fasthttp had
// already released, and the panic ended the process).
func TestStatementClientVanishes(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	var topUps []v1alpha1.TopUp
	for i := range 1000 {
		topUps = append(topUps, v1alpha1.TopUp{ID: fmt.Sprintf("wire-%04d", i), Currency: "EUR", Amount: "1.00",
			Note: strings.Repeat("a note long enough to fill the socket buffers ", 4)})
	}
	s.topUp(t, tn, "production", "0", topUps...)
	addr := strings.TrimPrefix(s.baseURL["production"], "http://")
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		// A small receive window: the server's writes block and then fail, mid-body.
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	for range 20 {
		conn, err := dialer.DialContext(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /v2/wallet/transactions?limit=1000 HTTP/1.1\r\nHost: x\r\nAccept: text/csv\r\n"+
			"x-api-key: %s\r\n\r\n", tn.keys["production"])
		status, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.Contains(status, " 200 ") {
			t.Fatalf("status line %q: %v", status, err)
		}
		// Reset, not close: the server's next write fails at once.
		_ = conn.(*net.TCPConn).SetLinger(0)
		_ = conn.Close()
	}
	// Every statement writer has met its failed write by the time a whole statement streams to a
	// client that reads it.
	r := s.callWith(t, "production", http.MethodGet, "/v2/wallet/transactions?limit=1000", tn.keys["production"], nil,
		http.Header{"Accept": {"text/csv"}})
	if r.status != 200 || strings.Count(string(r.raw), "\r\n") != 1001 {
		t.Fatalf("statement after the resets: %d, %d lines", r.status, strings.Count(string(r.raw), "\r\n"))
	}
}

// TestTextPostgreSQLCannotStore: every way a request can carry NUL or invalid UTF-8 towards
// PostgreSQL is refused at the edge in the contract's shape: 404 for an order reference that
// cannot exist, 400 for the rest; never a 500, and never a 502 that tells a client to retry.
func TestTextPostgreSQLCannotStore(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	cursor := func(raw string) string { return base64.RawURLEncoding.EncodeToString([]byte(raw)) }
	order := func(code, metadata string) string {
		return `{"externalOrderCode":"` + code + `","currency":"EUR","orderProducts":[` +
			`{"productCode":"10000000000001","quantity":1}]` + metadata + `}`
	}
	queryMessage := func(name string) string {
		return fmt.Sprintf("Query parameter %q must be valid UTF-8 text without NUL characters", name)
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		message                  string
	}{
		{"NUL order reference", "GET", "/v2/orders/%00", "", 404, "Order \x00 not found"},
		{"0xFF order reference", "GET", "/v2/orders/%FF", "", 404, "Order \uFFFD not found"},
		{"overlong order reference", "GET", "/v2/orders/%C0%AF", "", 404, "Order \uFFFD\uFFFD not found"},
		{"NUL externalOrderCode filter", "GET", "/v2/orders?externalOrderCode=%00", "", 400,
			queryMessage("externalOrderCode")},
		{"invalid UTF-8 status filter", "GET", "/v2/orders?status=%FF", "", 400, queryMessage("status")},
		{"invalid UTF-8 parameter name", "GET", "/v2/catalog/products?%FF=1", "", 400, queryMessage("\xff")},
		{"NUL catalog search", "GET", "/v2/catalog/products?search=%00", "", 400, queryMessage("search")},
		{"NUL in a forged event cursor", "GET", "/v2/webhooks/events?cursor=" + cursor("2026-11-25T08:00:00Z|\x00"), "",
			400, "cursor is not valid: pass the nextCursor of a previous page"},
		{"0xFF in a forged event cursor", "GET", "/v2/webhooks/events?cursor=" + cursor("2026-11-25T08:00:00Z|\xff"), "",
			400, "cursor is not valid: pass the nextCursor of a previous page"},
		{"NUL in a v1 ean", "GET", "/v1/catalog/product?ean=%00", "", 400, queryMessage("ean")},
		{"NUL in externalOrderCode", "POST", "/v2/orders", order(`A\u0000`, ""), 400,
			"externalOrderCode must be valid UTF-8 text without NUL characters"},
		{"NUL in a metadata key", "POST", "/v2/orders", order("A", `,"metadata":{"\u0000":"x"}`), 400,
			"Keys in metadata must be valid UTF-8 text without NUL characters"},
		{"NUL in a metadata value", "POST", "/v2/orders", order("A", `,"metadata":{"k":"\u0000"}`), 400,
			"metadata.k must be valid UTF-8 text without NUL characters"},
		{"invalid UTF-8 in externalOrderCode", "POST", "/v2/orders", order("A\xff", ""), 400,
			"externalOrderCode must be valid UTF-8 text without NUL characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := tn.keys["production"]
			if strings.HasPrefix(tc.path, "/v1/") {
				key = "Bearer " + tn.keys["bearer:production"]
			}
			var body any
			if tc.body != "" {
				body = tc.body
			}
			expectError(t, s.call(t, "production", tc.method, tc.path, key, body), tc.status, tc.message)
		})
	}
	// A forged statement cursor was already refused; it still is.
	expectError(t, s.call(t, "production", "GET", "/v2/wallet/transactions?cursor="+
		cursor("ledger1.x.1.\x00"), tn.keys["production"], nil), 400,
		"cursor is not valid for this list; use a nextCursor this list returned")
	// Nothing was placed or charged.
	if r := s.call(t, "production", "GET", "/v2/wallet", tn.keys["production"], nil); fmt.Sprint(r.body["balances"]) !=
		"map[EUR:100]" {
		t.Fatalf("wallet after the refusals: %s", r.raw)
	}
}

// TestContentTypeAfterTheKey: the key is judged first (401), then what the body is (415):
// a multipart body once got a 400 before its key was looked at.
func TestContentTypeAfterTheKey(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	const body = `{"externalOrderCode":"A","currency":"EUR",` +
		`"orderProducts":[{"productCode":"10000000000001","quantity":1}]}`
	for _, tc := range []struct {
		name, path, key, contentType, body string
		status                             int
		message                            string
	}{
		{"multipart without a key", "/v2/orders", "", "multipart/form-data; boundary=x", "--x\r\nbroken", 401,
			"Missing API key"},
		{"multipart with a wrong key", "/v2/orders", "cp_live_wrong", "multipart/form-data; boundary=x", "--x\r\nbroken",
			401, "Invalid API key"},
		{"multipart with a key", "/v2/orders", tn.keys["production"], "multipart/form-data; boundary=x", "--x\r\nbroken",
			415, "Content-Type must be application/json"},
		{"form", "/v2/orders", tn.keys["production"], "application/x-www-form-urlencoded", "a=b", 415,
			"Content-Type must be application/json"},
		{"JSON in Latin-1", "/v2/orders", tn.keys["production"], "application/json; charset=iso-8859-1", body, 415,
			"Content-Type must be application/json"},
		{"no content type", "/v2/orders", tn.keys["production"], "", body, 415, "Content-Type must be application/json"},
		{"text body to replay", "/v2/webhooks/replay?since=2026-11-25T08:00:00Z", tn.keys["production"], "text/plain", "x",
			415, "Content-Type must be application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, s.baseURL["production"]+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			if tc.key != "" {
				req.Header.Set("x-api-key", tc.key)
			}
			resp, err := s.client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			checkCaching(t, req, resp)
			if resp.StatusCode != tc.status || !strings.Contains(string(raw), `"message":"`+tc.message+`"`) ||
				resp.Header.Get("X-RateLimit-Limit") == "" {
				t.Fatalf("%d %s (rate limit %q), want %d %q", resp.StatusCode, raw, resp.Header.Get("X-RateLimit-Limit"),
					tc.status, tc.message)
			}
		})
	}
	// UTF-8 named in any letter case is JSON as the API takes it.
	r := s.callWith(t, "production", "POST", "/v2/orders", tn.keys["production"], body,
		http.Header{"Content-Type": {"application/json; charset=UTF-8"}})
	if r.status == 415 {
		t.Fatalf("JSON with charset=UTF-8 refused: %s", r.raw)
	}
}
