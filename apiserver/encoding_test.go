package apiserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/codeport/codeport/api/v1alpha1"
)

// codings are the content codings Fiber's Ctx.Body would decode, each as a function that
// encodes a body with it.
var codings = map[string]func([]byte) []byte{
	"gzip":    func(b []byte) []byte { return fasthttp.AppendGzipBytes(nil, b) },
	"deflate": func(b []byte) []byte { return fasthttp.AppendDeflateBytes(nil, b) },
	"br":      func(b []byte) []byte { return fasthttp.AppendBrotliBytes(nil, b) },
}

// encode applies the codings of a Content-Encoding value in the order listed, as a sender does;
// a coding it does not know leaves the body as it is.
func encode(contentEncoding string, body []byte) []byte {
	for _, coding := range strings.Split(contentEncoding, ",") {
		if f, ok := codings[strings.ToLower(strings.TrimSpace(coding))]; ok {
			body = f(body)
		}
	}
	return body
}

func encodingMessage(coding string) string {
	if coding == "" {
		return "Content-Encoding is not supported; send the body uncompressed."
	}
	return "Content-Encoding " + coding + " is not supported; send the body uncompressed."
}

// TestContentEncodingRefused: a body sent with any content coding but identity is refused with
// the contract's 415 and the headers every answer carries, and nothing is placed; identity (no
// coding) is accepted.
func TestContentEncodingRefused(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "1000.00"})
	key := tn.keys["production"]
	cases := []struct {
		name, encoding string
		// refused names the coding the answer names; accepted when nil.
		refused *string
	}{
		{"gzip", "gzip", ptr("gzip")},
		{"deflate", "deflate", ptr("deflate")},
		{"br", "br", ptr("br")},
		{"stacked gzip", "gzip, gzip", ptr("gzip")},
		{"upper case", "GZIP", ptr("GZIP")},
		{"identity then gzip", "identity, gzip", ptr("gzip")},
		{"unknown coding", "x-snappy", ptr("x-snappy")},
		{"not a token", "gzip;q=1", ptr("")},
		{"identity", "identity", nil},
		{"identity, any case and spacing", " Identity ,identity", nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code := fmt.Sprintf("enc-%d", i)
			raw, err := json.Marshal(order(code, line{"productCode": "10000000000001", "quantity": 1}))
			if err != nil {
				t.Fatal(err)
			}
			r := s.callWith(t, "production", "POST", "/v2/orders", key, encode(tc.encoding, raw),
				http.Header{"Content-Encoding": {tc.encoding}})
			if tc.refused == nil {
				if r.status != 202 || r.str("externalOrderCode") != code {
					t.Fatalf("%q: %d %s, want the order placed", tc.encoding, r.status, r.raw)
				}
				return
			}
			expectError(t, r, http.StatusUnsupportedMediaType, encodingMessage(*tc.refused))
			if r.str("error") != "Unsupported Media Type" {
				t.Fatalf("error label %q", r.str("error"))
			}
			for _, h := range []string{"X-Request-Id", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
				if r.header.Get(h) == "" {
					t.Fatalf("415 without %s: %v", h, r.header)
				}
			}
			if got := s.call(t, "production", "GET", "/v2/orders/"+code, key, nil); got.status != 404 {
				t.Fatalf("refused order %s: %d %s, want it never placed", code, got.status, got.raw)
			}
		})
	}
}

// TestContentEncodingRefusedAfterTheKey: the refusal follows the key check, so that a request
// without a valid key is told that first; past it, every route refuses a content coding, those
// that read no body and those outside the API included.
func TestContentEncodingRefusedAfterTheKey(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	key, bearer := tn.keys["production"], "Bearer "+tn.keys["bearer:production"]
	cases := []struct {
		name, method, path, key string
		status                  int
		message                 string
		rateLimited             bool
	}{
		{"no key", "POST", "/v2/orders", "", 401, "Missing API key", true},
		{"wrong key", "POST", "/v2/orders", "cp_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA000000", 401, "Invalid API key", true},
		{"no bearer token", "GET", "/v1/catalog", "", 401, "Missing bearer token", true},
		{"a read of the API", "GET", "/v2/ping", key, 415, encodingMessage("gzip"), true},
		{"a path no route takes", "POST", "/v2/nowhere", key, 415, encodingMessage("gzip"), true},
		{"a read of v1", "GET", "/v1/catalog", bearer, 415, encodingMessage("gzip"), true},
		{"a probe", "GET", "/healthz", "", 415, encodingMessage("gzip"), false},
		{"the contract", "GET", "/v2/openapi.json", "", 415, encodingMessage("gzip"), false},
	}
	addr := strings.TrimPrefix(s.baseURL["production"], "http://")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Sent raw: the published documents list a 415 only where a body is taken, as they
			// list a 413, though any request can carry either.
			req := pipelined{method: tc.method, path: tc.path, body: string(encode("gzip", []byte(`{}`))),
				headers: []string{"Content-Encoding: gzip", "Connection: close"}}
			switch {
			case strings.HasPrefix(tc.key, "Bearer "):
				req.auth = "Authorization: " + tc.key
			case tc.key != "":
				req.auth = "x-api-key: " + tc.key
			}
			status, header, raw := roundTrip(t, addr, req.raw())
			var got struct {
				StatusCode     int
				Error, Message string
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("%d %.300s: %v", status, raw, err)
			}
			if status != tc.status || got.StatusCode != tc.status || got.Message != tc.message {
				t.Fatalf("%d %.300s, want %d %q", status, raw, tc.status, tc.message)
			}
			if header.Get("X-Request-Id") == "" || header.Get("Cache-Control") != "no-store" {
				t.Fatalf("answer without its id or protective headers: %v", header)
			}
			if tc.rateLimited && header.Get("X-RateLimit-Limit") == "" {
				t.Fatalf("API answer without rate-limit headers: %v", header)
			}
		})
	}
}

// roundTrip writes one raw request on a new connection and reads its answer.
func roundTrip(t *testing.T, addr, request string) (status int, header http.Header, body []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, raw
}

// TestCompressedBodiesDoNotGrowTheServer: a stream of small compressed bodies, each inflating
// to megabytes, costs the server what the small bodies cost, not what they inflate to. The
// server runs in this process, so its allocations are this process's: the bounds are a
// fraction of the inflated total and do not depend on timing.
func TestCompressedBodiesDoNotGrowTheServer(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	tn := s.onboard(t, "acme", nil)
	key := tn.keys["production"]
	const inflated, rounds = 8 << 20, 8
	// JSON whitespace: inflated, it is a body any JSON decoder would read to the end.
	plain := bytes.Repeat([]byte(" "), inflated)
	var bodies [][]byte
	var headers []string
	for _, encoding := range []string{"gzip", "deflate", "br", "gzip, gzip"} {
		body := encode(encoding, plain)
		if len(body) > 1<<20 {
			t.Fatalf("%s: %d bytes, over the body limit", encoding, len(body))
		}
		bodies, headers = append(bodies, body), append(headers, encoding)
	}
	// Answers other than 415 are reported after the measurement, which is what fails first
	// when bodies are decoded.
	var answers []string
	send := func(body []byte, encoding string) {
		r := s.callWith(t, "production", "POST", "/v2/orders", key, body, http.Header{"Content-Encoding": {encoding}})
		if r.status != http.StatusUnsupportedMediaType {
			answers = append(answers, fmt.Sprintf("%s: %d %.200s", encoding, r.status, r.raw))
		}
	}
	// Warm the connection and the server's pools, so that what follows measures the bodies alone.
	send(bodies[0], headers[0])

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range rounds {
		for i := range bodies {
			send(bodies[i], headers[i])
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)

	total := uint64(rounds * len(bodies) * inflated)
	allocated := after.TotalAlloc - before.TotalAlloc
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d bodies inflating to %d MiB in all: %d MiB allocated, heap %+d KiB",
		rounds*len(bodies), total>>20, allocated>>20, grown>>10)
	if allocated > total/8 {
		t.Errorf("%d MiB allocated while refusing bodies that inflate to %d MiB: they were decoded",
			allocated>>20, total>>20)
	}
	if grown > 32<<20 {
		t.Errorf("heap grew by %d MiB over the stream", grown>>20)
	}
	if len(answers) > 0 {
		t.Errorf("compressed bodies not refused with 415: %v", answers)
	}
}
