package testprocess_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/store/storetest"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testprocess"
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

// TestFreeAddrsAreDistinctAndFree: the addresses are all different, and each can be listened on.
func TestFreeAddrsAreDistinctAndFree(t *testing.T) {
	addrs, err := testprocess.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, addr := range addrs {
		if seen[addr] {
			t.Fatalf("%s given twice: %v", addr, addrs)
		}
		seen[addr] = true
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		_ = ln.Close()
	}
	if len(addrs) != 3 {
		t.Fatalf("asked for 3 addresses, got %v", addrs)
	}
}

// TestBufferKeepsEveryConcurrentWrite: writes from many goroutines all arrive, each whole.
func TestBufferKeepsEveryConcurrentWrite(t *testing.T) {
	var b testprocess.Buffer
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				fmt.Fprintf(&b, "writer %d line %d\n", w, i)
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, "writer ") || strings.Count(line, "line") != 1 {
			t.Fatalf("torn line %q", line)
		}
	}
}

// TestBinaryIsLinkedOnce: every test gets the same binary, and a second call, of this test binary
// or another package's, finds it up to date instead of linking it again.
func TestBinaryIsLinkedOnce(t *testing.T) {
	first := testprocess.Binary(t)
	info, err := os.Stat(first)
	if err != nil || info.Mode()&0o111 == 0 {
		t.Fatalf("%s: %v, not an executable", first, err)
	}
	if again := testprocess.Binary(t); again != first {
		t.Fatalf("a second call built again: %s, then %s", first, again)
	}
	// go build touches an up-to-date binary but leaves the file itself, so a process running it
	// meanwhile is never disturbed; a relinked binary would be a new file.
	if again, err := os.Stat(first); err != nil || !os.SameFile(info, again) {
		t.Fatalf("%s was written again by a second call: %v", first, err)
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

// TestGroupStopsWhatTheProcessStarted: Signal reaches a Group process alone; Kill reaches what
// it started too, even once the process itself has ended, and Wait reports how the process ended.
func TestGroupStopsWhatTheProcessStarted(t *testing.T) {
	p := testprocess.Start(t, &testprocess.Process{Name: "sh", Binary: "/bin/sh",
		Args: []string{"-c", "sleep 600 & echo $!; wait"}, Group: true})
	var child int
	poll.UntilTrue(t, time.Minute, "the shell to name its child", func() bool {
		child, _ = strconv.Atoi(strings.TrimSpace(p.Log()))
		return child > 0
	})
	// Should the group not be reached, the child would hold the test's cleanup up for good.
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	shell := p.PID()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, time.Minute, "the shell to end", func() bool { return !testprocess.Alive(shell) })
	if !testprocess.Alive(child) {
		t.Fatal("signalling the shell alone ended its child")
	}
	// The child holds the output open, so the run has not ended yet: Kill waits for it.
	go p.Kill()
	poll.Until(t, time.Minute, "the child of a killed group to end", func() (bool, string) {
		return !testprocess.Alive(child), fmt.Sprintf("pid %d still runs", child)
	})
	var exit *exec.ExitError
	if err := p.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("Wait: %v, want the shell's end by SIGTERM", err)
	}
}

// TestEnvironReplacesTheTestsEnvironment: a process given Environ sees it and Env, and nothing
// else of the test's environment.
func TestEnvironReplacesTheTestsEnvironment(t *testing.T) {
	t.Setenv("CODEPORT_TESTPROCESS_HIDDEN", "seen")
	p := &testprocess.Process{Name: "sh", Binary: "/bin/sh",
		Args:    []string{"-c", `echo "$BASE $ADDED $CODEPORT_TESTPROCESS_HIDDEN"`},
		Environ: []string{"BASE=base"}, Env: []string{"ADDED=added"}}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(p.Log()); got != "base added" {
		t.Fatalf("the process saw %q, want %q", got, "base added")
	}
}

// get returns the status of GET url, 0 when nothing answers.
func get(t *testing.T, url string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	//contract:unchecked the harness's own probes, not the partner API
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
