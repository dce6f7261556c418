package apiserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codeport/codeport/api/v1alpha1"
)

// pipelined is one raw request (of a pipeline) and what its answer must say.
type pipelined struct {
	method, path, auth string
	// headers are more header lines, "Name: value" each.
	headers []string
	body    string
	status  int
	// check, when set, looks at the decoded JSON body.
	check func(t *testing.T, body map[string]any)
}

// raw is the request on the wire, HTTP/1.1 with a Content-Length when it has a body.
func (p pipelined) raw() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: api\r\n", p.method, p.path)
	for _, h := range append([]string{p.auth}, p.headers...) {
		if h != "" {
			b.WriteString(h + "\r\n")
		}
	}
	if p.body != "" {
		fmt.Fprintf(&b, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(p.body))
	}
	b.WriteString("\r\n" + p.body)
	return b.String()
}

// TestPipelinedRequestsAnswerInOrder: HTTP/1.1 clients may write requests back to back on one
// connection before reading any answer (RFC 9112, section 9.3.2); each one gets its own answer,
// in the order sent, whatever its route. Two pipelined orders are both placed and both answered,
// and the wallet is debited for each exactly once.
func TestPipelinedRequestsAnswerInOrder(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "1000.00"})
	key := "x-api-key: " + tn.keys["production"]
	bearer := "Authorization: Bearer " + tn.keys["bearer:production"]
	placeOrder := func(code string) pipelined {
		raw, err := json.Marshal(order(code, line{"productCode": "10000000000001", "quantity": 1}))
		if err != nil {
			t.Fatal(err)
		}
		return pipelined{method: "POST", path: "/v2/orders", auth: key, body: string(raw), status: 202,
			check: func(t *testing.T, body map[string]any) {
				t.Helper()
				if body["externalOrderCode"] != code {
					t.Errorf("answer of order %s is for %v", code, body["externalOrderCode"])
				}
			}}
	}
	field := func(name string, want any) func(*testing.T, map[string]any) {
		return func(t *testing.T, body map[string]any) {
			t.Helper()
			if got := body[name]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
	}
	requests := []pipelined{
		{method: "GET", path: "/healthz", status: 200, check: field("status", "ok")},
		{method: "GET", path: "/v2/ping", auth: key, status: 200, check: field("status", "ok")},
		{method: "GET", path: "/v2/catalog/products?take=2", auth: key, status: 200, check: field("take", 2)},
		placeOrder("pipe-1"),
		{method: "GET", path: "/v2/catalog/products/10000000000004", auth: key, status: 200,
			check: field("productCode", "10000000000004")},
		placeOrder("pipe-2"),
		{method: "GET", path: "/v2/orders/pipe-1", auth: key, status: 200, check: field("externalOrderCode", "pipe-1")},
		{method: "GET", path: "/v2/nowhere", auth: key, status: 404, check: field("message", "Cannot GET /v2/nowhere")},
		{method: "GET", path: "/v1/catalog/product?ean=5901234123457", auth: bearer, status: 200},
		{method: "GET", path: "/v2/wallet/transactions", auth: key, status: 200,
			check: func(t *testing.T, body map[string]any) {
				t.Helper()
				entries, _ := body["entries"].([]any)
				var debits []string
				for _, e := range entries {
					if e := e.(map[string]any); e["type"] == "order_debit" {
						debits = append(debits, fmt.Sprint(e["externalOrderCode"]))
					}
				}
				if strings.Join(debits, " ") != "pipe-2 pipe-1" {
					t.Errorf("order debits %v, want one for each pipelined order", debits)
				}
			}},
		{method: "GET", path: "/v2/ping", auth: key, status: 200, check: field("status", "ok")},
	}

	pipeline(t, strings.TrimPrefix(s.baseURL["production"], "http://"), requests)
}

// pipeline writes requests back to back on one connection, in one write so that the server
// finds the next ones already buffered behind the first, then reads and checks an answer for
// each, in order, and no more.
func pipeline(t *testing.T, addr string, requests []pipelined) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Every answer is due well within this; it only stops a lost answer from hanging the test.
	if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var wire bytes.Buffer
	for _, r := range requests {
		wire.WriteString(r.raw())
	}
	if _, err := conn.Write(wire.Bytes()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for i, r := range requests {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d of %d (%s %s): %v", i+1, len(requests), r.method, r.path, err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("answer %d (%s %s): %v", i+1, r.method, r.path, err)
		}
		if resp.StatusCode != r.status {
			t.Fatalf("answer %d (%s %s): %d %s, want %d", i+1, r.method, r.path, resp.StatusCode, raw, r.status)
		}
		if resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("answer %d (%s %s) without X-Request-Id", i+1, r.method, r.path)
		}
		r.checkBody(t, raw)
	}
	// Nothing more: one answer per request.
	if err := conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if extra, _ := br.ReadByte(); br.Buffered() > 0 || extra != 0 {
		t.Fatalf("more answers than requests")
	}
}

// checkBody runs the request's check, if any, on its answer's JSON body.
func (p pipelined) checkBody(t *testing.T, raw []byte) {
	t.Helper()
	if p.check == nil {
		return
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("answer of %s %s: %v: %s", p.method, p.path, err, raw)
	}
	p.check(t, body)
}
