package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testprocess"
)

// TestOperatorWritesOnlyJSON runs the operator as a process of its own into what made it write
// text on a real node: its database closed to connections (the ledger refresh warned through
// the standard library's logger) and its API server gone (client-go's reflectors and leader
// election wrote klog lines), until it stops with an error. Every line it wrote must be JSON.
func TestOperatorWritesOnlyJSON(t *testing.T) {
	t.Parallel()
	kubeconfigPath, stopAPIServer := startKubeAPIServer(t)
	db := storetest.New(t)

	operator := startComponent(t, db.URL, "operator", "--kubeconfig", kubeconfigPath,
		"--leader-elect", "--leader-election-namespace", "default", "--leader-elect-lease-duration", "4s",
		"--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "1s",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	wrote := func(what string) func() (bool, string) {
		return func() (bool, string) { return strings.Contains(operator.Log(), what), operator.Log() }
	}
	poll.Until(t, 2*time.Minute, "the operator to lead", wrote("cquired lease"))

	storetest.SetConnectable(t, db.Name, false)
	defer storetest.SetConnectable(t, db.Name, true)
	poll.Until(t, time.Minute, "a failed ledger refresh", wrote("ledger refresh"))

	if err := stopAPIServer(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-operator.Exited():
		if operator.Wait() == nil {
			t.Error("the operator ended without an error when it lost its API server")
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the operator still runs without its API server:\n%s", operator.Log())
	}
	out := operator.Log()

	everyLineJSON(t, out)
	if !strings.Contains(out, "leader election lost") {
		t.Errorf("no line says the operator lost its lease:\n%s", out)
	}
}

// startComponent runs `codeport <args>` as a process of its own on the database at databaseURL
// until the test ends; its log holds its stdout and stderr.
func startComponent(t *testing.T, databaseURL string, args ...string) *testprocess.Process {
	t.Helper()
	return testprocess.Start(t, &testprocess.Process{Name: args[0], Binary: os.Args[0], Args: args,
		Env: []string{runMainEnv + "=1", "CODEPORT_DATABASE_URL=" + databaseURL,
			"CODEPORT_CODES_KEY=" + strings.Repeat("ab", 32)}})
}

// servingAddr waits until serve, whose output log returns, logs that it serves, and returns the
// address.
func servingAddr(t *testing.T, log func() string) string {
	t.Helper()
	var addr string
	poll.Until(t, time.Minute, "serve to listen", func() (bool, string) {
		for _, line := range strings.Split(log(), "\n") {
			var record struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &record) == nil && record.Msg == "serving partner API" {
				addr = record.Addr
			}
		}
		return addr != "", log()
	})
	return addr
}

// everyLineJSON fails the test for each line of out that is not a JSON object.
func everyLineJSON(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var record map[string]any
		if err := json.Unmarshal([]byte(line), &record); err != nil {
			t.Errorf("not JSON: %s", line)
		}
	}
}

// TestServeWritesOnlyJSON runs serve as a process of its own through bad requests, a malformed
// one among them, and a database closed to connections (River's failures, the API's 502s), until
// SIGTERM stops it. Every line it wrote must be JSON.
func TestServeWritesOnlyJSON(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	serve := startComponent(t, db.URL, "serve", "--environment", "sandbox", "--addr", "127.0.0.1:0",
		"--metrics-addr", "", "--redis-url", "", "--log-flush-interval", "0")
	addr := servingAddr(t, serve.Log)
	call := func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v2/orders", strings.NewReader("{"))
		req.Header.Set("Authorization", "Bearer cp_test_nonsense")
		if resp, err := apiClient(t).Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}
	call()
	if conn, err := net.Dial("tcp", addr); err == nil {
		_, _ = conn.Write([]byte("GARBAGE / HTTP/9.9\r\nHost\r\n\r\n"))
		_, _ = io.Copy(io.Discard, conn)
		_ = conn.Close()
	}
	storetest.SetConnectable(t, db.Name, false)
	defer storetest.SetConnectable(t, db.Name, true)
	poll.Until(t, time.Minute, "River's failures to be logged", func() (bool, string) {
		call()
		return strings.Contains(serve.Log(), "Error fetching jobs"), serve.Log()
	})
	if err := serve.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-serve.Exited():
		if err := serve.Wait(); err != nil {
			t.Errorf("serve stopped by SIGTERM: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("serve still runs after SIGTERM:\n%s", serve.Log())
	}
	everyLineJSON(t, serve.Log())
}
