package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestProbeWaitsForEveryURL serves a URL that answers 503 twice before 200 and one that always
// answers 503: probe rides out the first and fails on the second, naming it and its answer, and
// fails on a URL nothing listens on.
func TestProbeWaitsForEveryURL(t *testing.T) {
	var calls atomic.Int32
	starting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) <= 2 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
	}))
	defer starting.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "database: connection refused", http.StatusServiceUnavailable)
	}))
	defer broken.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	run := func(args ...string) (string, error) {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"probe", "--interval", "1ms", "--attempts", "3"}, args...))
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run(starting.URL + "/readyz")
	if err != nil || !strings.Contains(out, `"msg":"ready"`) || calls.Load() != 3 {
		t.Fatalf("a URL ready on the third call: %v, %d calls, %q", err, calls.Load(), out)
	}
	_, err = run(starting.URL+"/readyz", broken.URL+"/readyz")
	if err == nil || !strings.Contains(err.Error(), broken.URL) || !strings.Contains(err.Error(), "503") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("a URL answering 503: %v", err)
	}
	if _, err := run(closed.URL); err == nil {
		t.Fatal("a URL nothing listens on passed")
	}
}
