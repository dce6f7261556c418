package apiserver_test

import (
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/codeport/codeport/api/v1alpha1"
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
// contract writes them (Go's client would canonicalise them, so the bytes are read directly).
func TestRateLimitHeaderNamesAsWritten(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	for _, key := range []string{tn.keys["production"], "cp_live_unknown"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.baseURL["production"], "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /v2/ping HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\nConnection: close\r\n\r\n", key)
		raw, err := io.ReadAll(conn)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
		for _, name := range []string{
			"X-RateLimit-Limit: ", "X-RateLimit-Remaining: ", "X-RateLimit-Reset: ", "Content-Type: ", "X-Request-Id: ",
		} {
			if !strings.Contains(head, "\r\n"+name) {
				t.Errorf("no %q header in:\n%s", name, head)
			}
		}
	}
}
