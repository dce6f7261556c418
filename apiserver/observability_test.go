package apiserver_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// scrape returns every sample of the /metrics endpoint as "name{labels}" -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := client(t).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// TestMetricsAndLogs runs a scripted session and checks that the counters moved by exactly what
// happened, that every request logged one structured line with its request id, and that no log
// line holds a key, a code or a webhook secret.
func TestMetricsAndLogs(t *testing.T) {
	logs := &testprocess.Buffer{}
	s := newStack(t, stackOptions{metrics: true, logs: logs})
	tn := s.onboard(t, "acme", testfixture.WithRateLimit(1000))
	rcv := newReceiver(t, 0)
	s.setWebhook(t, tn, rcv.server.URL)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	key := tn.keys["sandbox"]
	before := scrape(t, s.metricsURL)

	for range 3 {
		s.call(t, "sandbox", "GET", "/v2/ping", key, nil)
	}
	s.call(t, "sandbox", "GET", "/v2/ping", "", nil)
	s.call(t, "sandbox", "GET", "/v2/ping", "cp_test_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA000000", nil)
	var codesSeen []string
	for i, product := range []string{"99000000000001", "99000000000003"} {
		codesSeen = append(codesSeen, placeAndCollectCodes(t, s, key, fmt.Sprintf("m-%d", i), product)...)
	}
	poll.UntilTrue(t, 10e9, "webhooks delivered", func() bool { return len(rcv.deliveries()) == 2 })
	_, header := rawRequest(t, http.MethodGet, s.baseURL["sandbox"]+"/v2/wallet", key, "trace-me-123")
	if header.Get("X-Request-Id") != "trace-me-123" {
		t.Fatalf("request id not echoed: %q", header.Get("X-Request-Id"))
	}
	// A method the router does not know is refused before the middleware, and still counted
	// and logged.
	status, header := rawRequest(t, "BREW", s.baseURL["sandbox"]+"/v2/ping", "", "brew-1")
	if status != http.StatusMethodNotAllowed || header.Get("X-Request-Id") != "brew-1" {
		t.Fatalf("BREW: %d, request id %q", status, header.Get("X-Request-Id"))
	}

	after := scrape(t, s.metricsURL)
	delta := func(k string) float64 { return after[k] - before[k] }
	expect := map[string]float64{
		`codeport_http_requests_total{environment=sandbox,method=GET,route=/v2/ping,status=200}`:    3,
		`codeport_http_requests_total{environment=sandbox,method=GET,route=/v2,status=401}`:         2,
		`codeport_http_requests_total{environment=sandbox,method=POST,route=/v2/orders,status=202}`: 2,
		`codeport_http_requests_total{environment=sandbox,method=other,route=unmatched,status=405}`: 1,
		`codeport_auth_failures_total{environment=sandbox,reason=missing_key}`:                      1,
		`codeport_auth_failures_total{environment=sandbox,reason=invalid_key}`:                      1,
		`codeport_orders_placed_total{environment=sandbox}`:                                         2,
		`codeport_orders_finished_total{environment=sandbox,status=completed}`:                      1,
		`codeport_orders_finished_total{environment=sandbox,status=failed}`:                         1,
		`codeport_order_fulfilment_seconds{environment=sandbox,status=completed}`:                   1,
	}
	for k, v := range expect {
		if got := delta(k); got != v {
			t.Errorf("%s moved by %v, want %v", k, got, v)
		}
	}
	if after[`codeport_wallet_balance{currency=EUR,environment=sandbox,partner=`+tn.namespace+`/acme}`] != 80 ||
		after[`codeport_queue_jobs{queue=fulfilment_sandbox}`] != 0 {
		t.Errorf("wallet gauge: %v", after)
	}

	// Requests without an id (or with one that is not a plain token) are given distinct ids.
	issued := map[string]bool{}
	for _, sent := range []string{"", "", "bad id with spaces"} {
		_, header := rawRequest(t, http.MethodGet, s.baseURL["sandbox"]+"/v2/ping", key, sent)
		id := header.Get("X-Request-Id")
		if id == "" || id == sent || issued[id] || !regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`).MatchString(id) {
			t.Fatalf("issued request id %q (sent %q, issued before %v)", id, sent, issued)
		}
		issued[id] = true
	}

	text := logs.String()
	secrets := append([]string{key, tn.keys["production"], tn.keys["bearer:production"], webhookSecret}, codesSeen...)
	if len(codesSeen) != 2 {
		t.Fatalf("codes seen: %v", codesSeen)
	}
	for _, secret := range secrets {
		if strings.Contains(text, secret) {
			t.Fatalf("a log line contains a secret (%.12s…)", secret)
		}
	}
	checkRequestLogs(t, text, tn.namespace+"/acme")
}

// TestRefusedRequestsLogTheirPath: a request refused before it reaches a route's handler (no
// key, no route, a method the server does not know, an unreadable request) is logged with the
// path it was sent to, which its route (/v2, unmatched) does not tell; never with its query, at
// most 512 bytes of it, and as valid UTF-8. A request its route served is logged without it.
func TestRefusedRequestsLogTheirPath(t *testing.T) {
	logs := &testprocess.Buffer{}
	s := newStack(t, stackOptions{logs: logs})
	tn := s.onboard(t, "acme", nil)
	key := tn.keys["sandbox"]
	base := s.baseURL["sandbox"]
	long := "/v2/" + strings.Repeat("a", 1000)
	for _, r := range []struct{ id, method, url, key string }{
		{"no-key", http.MethodGet, base + "/v2/orders/po-1?api_key=in-the-query", ""},
		{"served", http.MethodGet, base + "/v2/ping?x=in-the-query", key},
		{"no-route", http.MethodGet, base + "/v2/ordres?status=completed", key},
		{"outside", http.MethodGet, base + "/nowhere", ""},
		{"brew", "BREW", base + "/v2/ping?x=in-the-query", ""},
		{"long", http.MethodGet, base + long, ""},
	} {
		rawRequest(t, r.method, r.url, r.key, r.id)
	}
	// Bytes that are not UTF-8, sent as they are.
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /v2/caf\xc3\xa9-\xff HTTP/1.1\r\nHost: x\r\nX-Request-Id: bytes\r\nConnection: close\r\n\r\n")
	_, _ = io.ReadAll(conn)
	conn.Close()

	want := map[string]struct {
		route string
		path  any
	}{
		"no-key":   {"/v2", "/v2/orders/po-1"},
		"served":   {"/v2/ping", nil},
		"no-route": {"/v2", "/v2/ordres"},
		"outside":  {"unmatched", "/nowhere"},
		"brew":     {"unmatched", "/v2/ping"},
		"long":     {"/v2", long[:512]},
		"bytes":    {"/v2", "/v2/caf\u00e9-\ufffd"},
	}
	var text string
	poll.UntilTrue(t, 5e9, "the request lines", func() bool {
		text = logs.String()
		return strings.Contains(text, `"request_id":"bytes"`)
	})
	if strings.Contains(text, "in-the-query") {
		t.Error("a request line holds a query string")
	}
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(l), &entry); err != nil {
			t.Fatalf("log line is not JSON: %s", l)
		}
		id, _ := entry["request_id"].(string)
		w, ok := want[id]
		if !ok {
			continue
		}
		delete(want, id)
		if entry["route"] != w.route || entry["path"] != w.path {
			t.Errorf("request %s logged with route %v and path %.60v, want %s and %.60v", id, entry["route"], entry["path"],
				w.route, w.path)
		}
	}
	for id := range want {
		t.Errorf("no line for request %s", id)
	}
}

// placeAndCollectCodes places an order of two units of product, waits for it to finish and
// returns the codes it delivered.
func placeAndCollectCodes(t *testing.T, s *stack, key, ref, product string) []string {
	t.Helper()
	placed := s.call(t, "sandbox", "POST", "/v2/orders", key, order(ref, line{"productCode": product, "quantity": 2}))
	done := s.waitOrder(t, "sandbox", key, placed.str("orderId"))
	var codes []string
	products, _ := done.body["products"].([]any)
	for _, p := range products {
		for _, c := range p.(map[string]any)["codes"].([]any) {
			codes = append(codes, c.(map[string]any)["code"].(string))
		}
	}
	return codes
}

// rawRequest sends a body-less request with the API key and the request id given (each left out
// when empty), discards the response's body and returns the response's status and headers.
func rawRequest(t *testing.T, method, url, key, requestID string) (int, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, http.NoBody)
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// checkRequestLogs checks that every log line is JSON and that the scripted requests with ids
// trace-me-123 and brew-1 logged complete lines.
func checkRequestLogs(t *testing.T, text, partner string) {
	t.Helper()
	found, brewLogged := false, false
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(l), &entry); err != nil {
			t.Fatalf("log line is not JSON: %s", l)
		}
		if entry["request_id"] == "trace-me-123" {
			found = entry["route"] == "/v2/wallet" && entry["status"] == float64(200) && entry["partner"] == partner &&
				entry["account_id"] != nil && entry["latency_ms"] != nil && entry["environment"] == "sandbox"
		}
		if entry["request_id"] == "brew-1" {
			brewLogged = entry["route"] == "unmatched" && entry["method"] == "other" && entry["status"] == float64(405) &&
				entry["client_ip"] == "127.0.0.1" && entry["environment"] == "sandbox"
		}
	}
	if !found {
		t.Fatal("no complete log line for the request with id trace-me-123")
	}
	if !brewLogged {
		t.Fatal("no complete log line for the refused BREW request")
	}
}

// TestTracing: a request that sends traceparent continues the caller's trace; its statements,
// pipelined ones included, are child spans that carry SQL but no arguments; fulfilment records
// its own span.
func TestTracing(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	s := newStack(t, stackOptions{tracing: tp})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	key := tn.keys["sandbox"]
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	body := strings.NewReader(`{"externalOrderCode":"traced","currency":"EUR",` +
		`"orderProducts":[{"productCode":"99000000000001","quantity":1}]}`)
	req, _ := http.NewRequest(http.MethodPost, s.baseURL["sandbox"]+"/v2/orders", body)
	req.Header.Set("x-api-key", key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := s.client(t).Do(req)
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	s.waitOrder(t, "sandbox", key, "traced")

	var server, statements, batches int
	fulfilled := false
	for _, span := range recorder.Ended() {
		if span.Name() == "fulfil orders" {
			fulfilled = true
		}
		if span.SpanContext().TraceID().String() != traceID {
			continue
		}
		switch {
		case span.Name() == "POST /v2/orders":
			server++
		case span.Name() == "db.batch":
			batches++
		case span.Name() == "db.query":
			statements++
			for _, a := range span.Attributes() {
				if strings.Contains(a.Value.String(), key) {
					t.Fatal("a span attribute holds the API key")
				}
			}
		}
	}
	// The placement is two pipelined batches: [begin, order], [debit, commit].
	if server != 1 || statements < 4 || batches != 2 || !fulfilled {
		for _, span := range recorder.Ended() {
			t.Log(span.Name(), span.SpanContext().TraceID())
		}
		t.Fatalf("server spans %d, statement spans %d, batch spans %d, fulfilment span %v",
			server, statements, batches, fulfilled)
	}
}

// TestSpansKeepTheirRequestID: a span outlives its request, so the request id it carries is its
// own copy, not a view of a header buffer the connection's next request overwrites.
func TestSpansKeepTheirRequestID(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	s := newStack(t, stackOptions{tracing: tp})
	tn := s.onboard(t, "acme", nil)
	ids := []string{"req-aaaaaaaa", "req-bbbbbbbb", "req-cccccccc"}
	for _, id := range ids {
		rawRequest(t, http.MethodGet, s.baseURL["sandbox"]+"/v2/catalog/products?take=1", tn.keys["sandbox"], id)
	}
	var got []string
	for _, span := range recorder.Ended() {
		if span.Name() != "GET /v2/catalog/products" {
			continue
		}
		for _, a := range span.Attributes() {
			if a.Key == "codeport.request_id" {
				got = append(got, a.Value.AsString())
			}
		}
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("spans' request ids %q, want %q", got, ids)
	}
}
