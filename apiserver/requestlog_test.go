package apiserver

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/auth"
)

// slogLine is the line log/slog's JSON handler writes for r, as the request log did through slog.
func slogLine(t *testing.T, environment string, id []byte, r *requestRecord) string {
	t.Helper()
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil)).With(slog.String("environment", environment))
	if r.caller != nil {
		log = log.With(slog.String("partner", r.caller.Account.Partner), slog.String("account_id", r.caller.AccountID))
	}
	level := slog.LevelInfo
	if r.status >= 500 {
		level = slog.LevelError
	}
	record := slog.NewRecord(r.at, level, "request", 0)
	record.AddAttrs(slog.String("request_id", string(id)), slog.String("method", r.method),
		slog.String("route", r.route))
	if r.path != nil {
		record.AddAttrs(slog.String("path", string(r.path)))
	}
	record.AddAttrs(slog.Int("status", r.status),
		slog.Float64("latency_ms", float64(r.elapsed.Microseconds())/1000),
		slog.String("client_ip", r.clientIP.String()))
	if err := log.Handler().Handle(context.Background(), record); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestRequestLineIsSlogsLine: the request log writes exactly the bytes slog's JSON handler
// writes for the same record, so the request lines and the process's other lines read alike.
func TestRequestLineIsSlogsLine(t *testing.T) {
	caller := &auth.Principal{Account: &auth.Account{Partner: "partners/acme"},
		AccountID: "0b9c3f3e-8a55-4f0e-9f7a-2f1d2a9c6b11"}
	at := time.Date(2026, 11, 25, 14, 7, 28, 0, time.UTC)
	type line struct {
		id string
		r  *requestRecord
	}
	cases := map[string]line{
		"authenticated": {"trace-me-123", &requestRecord{at: at.Add(123456789), caller: caller, method: "GET",
			route: "/v2/catalog/products/:productCode", status: 200, elapsed: 123 * time.Microsecond,
			clientIP: netip.MustParseAddr("10.1.2.3")}},
		"refused before a key": {"6f1c0a9e2b7d4c18-1f", &requestRecord{at: at, method: "other", route: "unmatched",
			status: 405, elapsed: 0, clientIP: netip.MustParseAddr("127.0.0.1")}},
		"server error, IPv6 client": {"a.b_c:d-e", &requestRecord{at: at.Add(999999999), caller: caller, method: "POST",
			route: "/v2/orders", status: 502, elapsed: 12345678 * time.Microsecond,
			clientIP: netip.MustParseAddr("2001:db8::1")}},
		"whole milliseconds": {"x", &requestRecord{at: at.Add(time.Millisecond), method: "HEAD", route: "/v1",
			status: 401, elapsed: 2 * time.Millisecond, clientIP: netip.MustParseAddr("192.0.2.1")}},
		"refused before routing, with its path": {"p", &requestRecord{at: at, method: "GET", route: "/v2",
			path: []byte("/v2/ordres"), status: 401, elapsed: time.Microsecond,
			clientIP: netip.MustParseAddr("10.0.0.1")}},
		"a path of invalid UTF-8 and separators": {"u", &requestRecord{at: at, method: "GET", route: "unmatched",
			path: []byte("/caf\xc3\xa9/\xff\xfe/\xe2\x80\xa8\xe2\x80\xa9/\xe2\x82/\"\\/\x01\x7f/\u00e9"), status: 404,
			elapsed: time.Microsecond, clientIP: netip.MustParseAddr("10.0.0.1")}},
		"characters JSON escapes": {"q", &requestRecord{at: at.In(time.FixedZone("CET", 3600)),
			caller: &auth.Principal{Account: &auth.Account{Partner: "a\"b\\c\n\x01"}, AccountID: "id\t"},
			method: "GET", route: "/v2/ping", status: 200, elapsed: time.Microsecond,
			clientIP: netip.MustParseAddr("::ffff:10.0.0.1")}},
	}
	for name, c := range cases {
		var out bytes.Buffer
		newRequestLog(&out, "production").write([]byte(c.id), c.r)
		if want := slogLine(t, "production", []byte(c.id), c.r); out.String() != want {
			t.Errorf("%s:\n got  %s want %s", name, out.String(), want)
		}
	}
}

// TestLoggedPath: a refused request's path is logged up to 512 bytes, never splitting a
// character, and without what would tell a key sent in it by mistake.
func TestLoggedPath(t *testing.T) {
	key := "cp_live_AbCd" + strings.Repeat("x", 34)
	long := "/" + strings.Repeat("a", 600)
	split := "/" + strings.Repeat("a", 509) + "\u20ac" // the euro sign's 3 bytes straddle byte 512
	for _, c := range []struct{ path, want string }{
		{"/v2/ping", "/v2/ping"},
		{long, long[:512]},
		{split, split[:510]},
		{"/" + strings.Repeat("\xff", 600), "/" + strings.Repeat("\xff", 511)},
		{"/v2/" + key + "/ping", "/v2/cp_live_AbCd" + strings.Repeat("*", 34) + "/ping"},
		{"/cp_test_Ab", "/cp_test_Ab"},
		{"/cp_test_", "/cp_test_"},
	} {
		var buf [maxLoggedPath]byte
		if got := string(loggedPath(&buf, []byte(c.path))); got != c.want {
			t.Errorf("%.40q… logged as %.40q… (%d bytes), want %.40q… (%d bytes)",
				c.path, got, len(got), c.want, len(c.want))
		}
	}
	var out bytes.Buffer
	log := newRequestLog(&out, "sandbox")
	log.compact = true
	log.write([]byte("c"), &requestRecord{at: time.Now(), method: "GET", route: "/v2", path: []byte("/v2/\xffx\n"),
		status: 401, clientIP: netip.MustParseAddr("127.0.0.1")})
	if _, rest, _ := strings.Cut(out.String(), " sandbox "); !strings.HasPrefix(rest, `GET /v2/\ufffdx\n 401 `) {
		t.Errorf("compact line %q", out.String())
	}
}

// flushRecorder is a buffered destination that records its flushes.
type flushRecorder struct {
	bytes.Buffer
	flushes int
}

func (f *flushRecorder) Flush() error {
	f.flushes++
	return nil
}

func TestServerErrorLinesAreFlushed(t *testing.T) {
	out := &flushRecorder{}
	log := newRequestLog(out, "sandbox")
	for _, status := range []int{200, 404, 429, 500, 502} {
		log.write([]byte("r"), &requestRecord{at: time.Now(), method: "GET", route: "/v2/ping", status: status,
			clientIP: netip.MustParseAddr("127.0.0.1")})
	}
	if out.flushes != 2 {
		t.Fatalf("%d flushes for two 5xx lines", out.flushes)
	}
	if lines := strings.Count(out.String(), "\n"); lines != 5 {
		t.Fatalf("%d lines for 5 requests", lines)
	}
}

// TestRequestLineDoesNotAllocate: a warm request log encodes and writes a line without
// allocating, for a caller whose fields it has encoded before.
func TestRequestLineDoesNotAllocate(t *testing.T) {
	var out bytes.Buffer
	out.Grow(1 << 20)
	log := newRequestLog(&out, "production")
	caller := &auth.Principal{Account: &auth.Account{Partner: "partners/acme"}, AccountID: "acct"}
	var issued [issuedIDSize]byte
	ids := newRequestIDs()
	r := &requestRecord{caller: caller, method: "GET", route: "/v2/catalog/products/:productCode", status: 200,
		elapsed: 87 * time.Microsecond, clientIP: netip.MustParseAddr("10.0.0.7")}
	write := func() {
		r.at = time.Now()
		log.write(ids.appendNext(issued[:0]), r)
	}
	write()
	if allocs := testing.AllocsPerRun(100, write); allocs > 0 {
		t.Fatalf("%v allocations per request line", allocs)
	}
	r.caller, r.route, r.path = nil, "/v2", []byte("/v2/orders/\xff"+strings.Repeat("a", 600))
	if allocs := testing.AllocsPerRun(100, write); allocs > 0 {
		t.Fatalf("%v allocations per line of a request refused before routing", allocs)
	}
}

func TestValidRequestID(t *testing.T) {
	for id, valid := range map[string]bool{
		"trace-me-123": true, "a.b_c:d-E9": true, strings.Repeat("a", maxRequestIDLength): true,
		"": false, strings.Repeat("a", maxRequestIDLength+1): false, "with space": false, "quote\"": false,
		"new\nline": false, "slash/": false, "é": false,
	} {
		if got := validRequestID([]byte(id)); got != valid {
			t.Errorf("validRequestID(%q) = %v, want %v", id, got, valid)
		}
	}
	ids := newRequestIDs()
	var issued [issuedIDSize]byte
	first := string(ids.appendNext(issued[:0]))
	if second := string(ids.appendNext(issued[:0])); first == second || !validRequestID([]byte(first)) {
		t.Fatalf("issued ids %q, %q", first, second)
	}
}
