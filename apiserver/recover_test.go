package apiserver

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/codeport/codeport/apiserver/ratelimit"
)

func panickingServer(t *testing.T, logs io.Writer) *Server {
	t.Helper()
	return New(DefaultConfig("production"), Deps{Limiter: ratelimit.NewMemory(),
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
}

// TestPanicInAHandlerIsThatRequestsAnswer: a handler's panic is its request's 500 in the
// contract's shape, logged with the stack and the request id; the server answers the next one.
func TestPanicInAHandlerIsThatRequestsAnswer(t *testing.T) {
	var logs bytes.Buffer
	s := panickingServer(t, &logs)
	s.app.Get("/boom", func(*fiber.Ctx) error { panic("boom") })
	req := httptest.NewRequest("GET", "/boom", http.NoBody)
	req.Header.Set(HeaderRequestID, "req-1")
	resp, err := s.app.Test(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || string(body) != `{"statusCode":500,"message":"Internal server error"}` ||
		resp.Header.Get(HeaderRequestID) != "req-1" {
		t.Fatalf("%d %s %v", resp.StatusCode, body, resp.Header)
	}
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(logs.Bytes()), &line); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if stack, _ := line["stack"].(string); line["request_id"] != "req-1" || line["panic"] != "boom" ||
		!strings.Contains(stack, "recover_test.go") {
		t.Fatalf("log line %v", line)
	}
	next, err := s.app.Test(httptest.NewRequest("GET", "/healthz", http.NoBody))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Body.Close()
	if next.StatusCode != 200 {
		t.Fatalf("after the panic: %d", next.StatusCode)
	}
}

// TestPanicOutsideTheRouteIsThatRequestsAnswer: the outermost handler catches what escapes the
// route table's own recovery (the request's observation, the error handler).
func TestPanicOutsideTheRouteIsThatRequestsAnswer(t *testing.T) {
	var logs bytes.Buffer
	s := panickingServer(t, &logs)
	handle := s.recoverPanics(func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set(HeaderRequestID, "req-2")
		ctx.SetBodyString("half an answer")
		panic("outside")
	})
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/v2/ping")
	handle(&ctx)
	const internal = `{"statusCode":500,"message":"Internal server error"}`
	if ctx.Response.StatusCode() != 500 || string(ctx.Response.Body()) != internal ||
		string(ctx.Response.Header.Peek(HeaderRequestID)) != "req-2" ||
		string(ctx.Response.Header.Peek("Cache-Control")) != "no-store" {
		t.Fatalf("%d %s %s", ctx.Response.StatusCode(), ctx.Response.Body(), ctx.Response.Header.String())
	}
	if !strings.Contains(logs.String(), `"request_id":"req-2"`) || !strings.Contains(logs.String(), `"panic":"outside"`) {
		t.Fatalf("logs: %s", logs.String())
	}
}
