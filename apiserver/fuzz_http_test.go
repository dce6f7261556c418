package apiserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
)

// Placeholders of the fuzz corpus, replaced by the tenant's credentials before a request is
// sent: the fuzzer mutates the requests around them, so most inputs get past the key check.
const (
	keyPlaceholder   = "{{KEY}}"
	tokenPlaceholder = "{{TOKEN}}"
)

// httpSeeds are valid requests of every route of the contract, as raw HTTP/1.1.
func httpSeeds() []string {
	get := func(path string, headers ...string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: api\r\nx-api-key: " + keyPlaceholder + "\r\n" +
			strings.Join(append(headers, ""), "\r\n") + "\r\n"
	}
	post := func(path, contentType, body string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: api\r\nx-api-key: %s\r\nContent-Type: %s\r\n"+
			"Content-Length: %d\r\n\r\n%s", path, keyPlaceholder, contentType, len(body), body)
	}
	const order = `{"externalOrderCode":"F-1","currency":"EUR","price":2000,"orderProducts":[` +
		`{"productCode":"10000000000001","quantity":1,"price":2000,"sku":"DE-EN-10000000000001"}],"metadata":{"k":"v"}}`
	return []string{
		get("/v2/ping"),
		get("/v2/catalog/products?country=DE&brand=Acme%20Credit&tag=gaming&search=credit&skip=0&take=20"),
		get("/v2/catalog/products/10000000000001", "If-None-Match: \"x\""),
		get("/v2/orders?status=processing&externalOrderCode=F-1&from=2026-01-01&limit=10"),
		get("/v2/orders/F-1"),
		get("/v2/orders/00000000-0000-0000-0000-000000000000"),
		get("/v2/wallet"),
		get("/v2/wallet/transactions?currency=EUR&limit=5", "Accept: text/csv"),
		get("/v2/wallet/transactions?cursor=bm9wZQ"),
		get("/v2/webhooks/events?type=order.completed&limit=5"),
		get("/v2/sandbox/scenarios"),
		get("/v2/nowhere"),
		get("/healthz"),
		"HEAD /v2/wallet/transactions HTTP/1.1\r\nHost: api\r\nAccept: text/csv\r\nx-api-key: " + keyPlaceholder + "\r\n\r\n",
		"GET /v1/catalog/products?skip=0&take=5 HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer " + tokenPlaceholder +
			"\r\n\r\n",
		"GET /v1/catalog/product?ean=5901234123457 HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer " + tokenPlaceholder +
			"\r\n\r\n",
		post("/v2/orders", "application/json", order),
		post("/v2/orders", "application/json; charset=utf-8", strings.Replace(order, "F-1", "F-2", 1)),
		post("/v2/webhooks/replay?since=2026-11-25T08:00:00Z", "application/json", ""),
		"POST /v2/orders HTTP/1.1\r\nHost: api\r\nx-api-key: " + keyPlaceholder + "\r\nContent-Type: application/json\r\n" +
			"Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(order), order),
	}
}

// pipelinedPing follows every fuzzed request on its connection: whenever the server keeps the
// connection after the fuzzed request, this one must be answered too, after it and as itself.
const pipelinedPing = "GET /v2/ping HTTP/1.1\r\nHost: api\r\nX-Request-Id: pipelined-ping\r\nx-api-key: " +
	keyPlaceholder + "\r\n\r\n"

// FuzzHTTP sends mutated raw requests of every route to the production API over TCP, each
// followed by a pipelined ping, and fails on a panic (which ends the test process), on any
// 5xx (the database is up and production has no error scenarios, so none is documented for
// such input), on an error answer not in the contract's shape, and on a pipelined ping the
// server kept the connection for but never answered.
func FuzzHTTP(f *testing.F) {
	s := newStack(f, stackOptions{noWorker: true})
	// Each fuzz worker is a process of its own sharing the package's database: its own partner.
	tn := s.onboard(f, fmt.Sprintf("fuzz-%d", os.Getpid()), nil)
	s.topUp(f, tn, "production", "0", v1alpha1.TopUp{ID: "fuzz", Currency: "EUR", Amount: "10000000.00"})
	for _, seed := range httpSeeds() {
		f.Add([]byte(seed))
	}
	addr := strings.TrimPrefix(s.baseURL["production"], "http://")
	credentials := strings.NewReplacer(keyPlaceholder, tn.keys["production"],
		tokenPlaceholder, tn.keys["bearer:production"])
	ping := credentials.Replace(pipelinedPing)
	f.Fuzz(func(t *testing.T, raw []byte) {
		request := []byte(credentials.Replace(string(raw)))
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// Generous: the server answers or closes within its own read timeout once it sees EOF.
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := conn.Write(append(request, ping...)); err != nil {
			return // the server refused what came first and closed; nothing to read
		}
		_ = conn.(*net.TCPConn).CloseWrite()
		replies := bufio.NewReader(conn)
		method, _, _ := strings.Cut(string(request), " ")
		first, err := readResponse(replies, method) //nolint:bodyclose // readResponse read the body whole
		if err != nil {
			// No answer: the request never ended (a body longer than what was sent) or the
			// server could not tell where it did; either way it closed the connection.
			return
		}
		checkAnswer(t, first, request)
		if first.Close || !separateRequest(request) {
			return
		}
		second, err := readResponse(replies, http.MethodGet) //nolint:bodyclose // read whole
		if err != nil {
			t.Fatalf("pipelined ping after a %d answer to %q: no answer (%v)", first.StatusCode, request, err)
		}
		if second.StatusCode != http.StatusOK || second.Header.Get("X-Request-Id") != "pipelined-ping" {
			t.Fatalf("pipelined ping after %q: %d %v", request, second.StatusCode, second.Header)
		}
	})
}

// readResponse reads the next final response, its body included.
func readResponse(r *bufio.Reader, method string) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(r, &http.Request{Method: method})
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 {
			return resp, nil
		}
	}
}

// separateRequest says whether request is one whole HTTP/1.1 request with nothing after it, as
// Go's server reads it: the pipelined ping then starts a request of its own.
func separateRequest(request []byte) bool {
	r := bufio.NewReader(bytes.NewReader(request))
	req, err := http.ReadRequest(r)
	if err != nil || req.ProtoMajor != 1 || req.ProtoMinor != 1 {
		return false
	}
	if _, err := io.Copy(io.Discard, req.Body); err != nil {
		return false
	}
	_, err = r.Peek(1)
	return errors.Is(err, io.EOF)
}

// checkAnswer holds one answer to the contract: never a 5xx here, every answer with its request
// id, every error in the contract's shape.
func checkAnswer(t *testing.T, resp *http.Response, request []byte) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 500 {
		t.Fatalf("%d for %q: %s", resp.StatusCode, request, body)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("%d without X-Request-Id for %q", resp.StatusCode, request)
	}
	if resp.StatusCode < 400 {
		return
	}
	var e struct {
		StatusCode int    `json:"statusCode"`
		Error      string `json:"error"`
		Message    string `json:"message"`
	}
	if len(body) == 0 && resp.Request.Method == http.MethodHead {
		return
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || json.Unmarshal(body, &e) != nil ||
		e.StatusCode != resp.StatusCode || e.Error == "" || e.Message == "" {
		t.Fatalf("%d for %q is not the contract's error: %q %s", resp.StatusCode, request, resp.Header.Get("Content-Type"),
			body)
	}
}
