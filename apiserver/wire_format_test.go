package apiserver_test

import (
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// TestEstimatedReadyAtReadsTheSame: the 202 and a later read of the same order give one string
// for estimatedReadyAt, in the API's date-time format.
func TestEstimatedReadyAtReadsTheSame(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	placed := s.call(t, "production", "POST", "/v2/orders", tn.keys["production"],
		order("eta", line{"productCode": "10000000000001", "quantity": 1}))
	if placed.status != 202 {
		t.Fatalf("order: %d %s", placed.status, placed.raw)
	}
	read := s.call(t, "production", "GET", "/v2/orders/eta", tn.keys["production"], nil)
	eta := placed.str("estimatedReadyAt")
	if !etaFormat.MatchString(eta) || read.str("estimatedReadyAt") != eta {
		t.Fatalf("estimatedReadyAt %q on placement, %q on read", eta, read.str("estimatedReadyAt"))
	}
}

var etaFormat = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)

// TestRateLimitHeaderNamesAsWritten: on the wire, the rate-limit headers are spelled as the
// contract writes them (Go's client would canonicalise them, so the bytes are read directly), on
// every kind of answer: routed or refused before routing, a success, an error, and a 429 with
// its Retry-After.
func TestRateLimitHeaderNamesAsWritten(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	limited := s.onboard(t, "limited", testfixture.WithRateLimit(1))
	awayFromMinuteEnd()
	contract := []string{"X-RateLimit-Limit: ", "X-RateLimit-Remaining: ", "X-RateLimit-Reset: ", "X-Request-Id: "}
	cases := []struct {
		name    string
		request string // up to the blank line that ends the headers
		spend   int    // times the request is sent first, to spend a budget
		status  int
		more    []string
	}{
		{"success", "GET /v2/ping HTTP/1.1\r\nx-api-key: " + tn.keys["production"], 0, 200, []string{"Content-Type: "}},
		{"unknown key", "GET /v2/ping HTTP/1.1\r\nx-api-key: cp_live_unknown", 0, 401, []string{"Content-Type: "}},
		{"method the route does not take", "DELETE /v2/ping HTTP/1.1\r\nx-api-key: " + tn.keys["production"], 0, 405,
			[]string{"Allow: "}},
		{"method the router does not know", "PURGE /v2/ping HTTP/1.1", 0, 405, []string{"Allow: "}},
		{"body over the limit", "POST /v2/orders HTTP/1.1\r\nx-api-key: " + tn.keys["production"] +
			"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(2<<20), 0, 413, nil},
		{"rate limited", "GET /v2/ping HTTP/1.1\r\nx-api-key: " + limited.keys["production"], 1, 429,
			[]string{"Retry-After: "}},
		{"malformed request", "GET /v2/ping HTTP/1.1\r\nno colon in this header line", 0, 400, nil},
	}
	send := func(request string) (status int, head string) {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.baseURL["production"], "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// A body announced is never sent: the server answers 413 without reading it.
		fmt.Fprintf(conn, "%s\r\nHost: x\r\nConnection: close\r\n\r\n", request)
		raw, err := io.ReadAll(conn)
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ = strings.Cut(string(raw), "\r\n\r\n")
		statusLine, _, _ := strings.Cut(head, "\r\n")
		if _, err := fmt.Sscanf(statusLine, "HTTP/1.1 %d", &status); err != nil {
			t.Fatalf("status line %q: %v", statusLine, err)
		}
		return status, head
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for range tc.spend {
				send(tc.request)
			}
			status, head := send(tc.request)
			if status != tc.status {
				t.Fatalf("status %d, want %d:\n%s", status, tc.status, head)
			}
			for _, name := range append(append([]string{}, contract...), tc.more...) {
				if !strings.Contains(head, "\r\n"+name) {
					t.Errorf("no %q header in:\n%s", name, head)
				}
			}
		})
	}
}
