package apiserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/codeport/codeport/apiserver"
)

// TestOTLPExport: with a collector's base URL configured, spans reach its /v1/traces; without one,
// tracing is off.
func TestOTLPExport(t *testing.T) {
	var posts atomic.Int32
	var contentType atomic.Value
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
			contentType.Store(r.Header.Get("Content-Type"))
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	ctx := context.Background()
	tp, shutdown, err := apiserver.NewTracerProvider(ctx, collector.URL, "codeport-test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("test").Start(ctx, "exported")
	span.End()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 || contentType.Load() != "application/x-protobuf" {
		t.Fatalf("collector got %d posts (%v)", posts.Load(), contentType.Load())
	}

	off, _, err := apiserver.NewTracerProvider(ctx, "", "codeport-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, span := off.Tracer("test").Start(ctx, "dropped"); span.IsRecording() {
		t.Fatal("tracing is on without an endpoint")
	}
}
