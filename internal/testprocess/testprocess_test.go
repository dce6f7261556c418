package testprocess_test

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/testprocess"
)

// TestServeStartsAndRestartsOnItsPort: the built binary serves on the port picked for it once
// Start returns; after SIGKILL it is gone, and a restart serves on the same port as a new
// process.
func TestServeStartsAndRestartsOnItsPort(t *testing.T) {
	db := storetest.New(t)
	addr := testprocess.Addr(t)
	p := testprocess.Start(t, &testprocess.Process{Name: "serve", Binary: testprocess.Binary(t),
		Args: []string{"serve", "--environment", "sandbox", "--addr", addr, "--metrics-addr", "",
			"--database-url", db.URL, "--database-min-idle-conns", "1", "--codes-key", strings.Repeat("ab", 32)},
		ReadyURL: "http://" + addr + "/readyz"})
	if status := get(t, "http://"+addr+"/readyz"); status != http.StatusOK {
		t.Fatalf("ready, then /readyz answered %d", status)
	}
	first := p.PID()
	p.Kill()
	if p.Running() || get(t, "http://"+addr+"/readyz") != 0 {
		t.Fatal("killed, and still running or answering")
	}
	if err := p.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p.PID() == first || get(t, "http://"+addr+"/readyz") != http.StatusOK {
		t.Fatalf("restarted: pid %d (was %d)", p.PID(), first)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("SIGTERM did not stop serve")
	}
}

// TestStartReportsAnEarlyExitWithItsOutput: a process that exits before it is ready fails
// Start at once, with what it wrote.
func TestStartReportsAnEarlyExitWithItsOutput(t *testing.T) {
	p := &testprocess.Process{Name: "sh", Binary: "/bin/sh", Args: []string{"-c", "echo no database >&2; exit 3"},
		ReadyURL: "http://" + testprocess.Addr(t) + "/readyz"}
	err := p.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no database") || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("Start: %v", err)
	}
}

// get returns the status of GET url, 0 when nothing answers.
func get(t *testing.T, url string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
