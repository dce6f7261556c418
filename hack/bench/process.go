package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/codeport/codeport/internal/test/testprocess"
)

// codesKey encrypts the bench's codes at rest; any 32 bytes do.
const codesKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// server is a running `codeport serve` process.
type server struct {
	proc *testprocess.Process
	// base is the API's URL up to /v2; metrics serves /metrics and /debug/pprof/.
	base, metrics string
}

// startServe starts `codeport serve` the way a deployment runs it: metrics on their own port,
// JSON request logs on stderr (discarded here, but still written).
func startServe(binary, databaseURL, environment string, extra ...string) (*server, error) {
	addrs, err := testprocess.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	addr, metrics := addrs[0], addrs[1]
	proc := &testprocess.Process{Name: "serve " + environment, Binary: binary,
		Args: append([]string{"serve", "--environment", environment, "--addr", addr, "--metrics-addr", metrics, "--pprof",
			"--database-url", databaseURL, "--codes-key", codesKey}, extra...),
		ReadyURL: "http://" + addr + "/readyz", ReadyTimeout: readyTimeout, Output: io.Discard}
	if err := proc.Start(context.Background()); err != nil {
		proc.Kill()
		return nil, err
	}
	return &server{proc: proc, base: "http://" + addr + "/v2", metrics: "http://" + metrics}, nil
}

// readyTimeout is how long a process the bench starts may take to be ready.
const readyTimeout = 30 * time.Second

func (s *server) stop() { s.proc.Kill() }

// peakRSS reads the high-water mark of the process's resident memory, in MB.
func (s *server) peakRSS() (float64, error) { return s.memoryStatus("VmHWM:") }

// residentMB reads the process's resident memory now, in MB.
func (s *server) residentMB() (float64, error) { return s.memoryStatus("VmRSS:") }

// memoryStatus reads field (in kB) of the process's /proc status, in MB.
func (s *server) memoryStatus(field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.proc.PID()))
	if err != nil {
		return 0, fmt.Errorf("read status: %w", err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if fields := strings.Fields(string(line)); len(fields) >= 2 && fields[0] == field {
			kb, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				return 0, fmt.Errorf("%s %w", field, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s for %d", field, s.proc.PID())
}

// cpuProfile records a CPU profile of the process while load runs, into file.
func (s *server) cpuProfile(ctx context.Context, file string, d time.Duration) error {
	seconds := max(int(d.Seconds())-1, 1)
	return s.saveProfile(ctx, fmt.Sprintf("profile?seconds=%d", seconds), file)
}

// heapProfile saves the process's heap profile (live objects as of the last collection) to file.
func (s *server) heapProfile(ctx context.Context, file string) error {
	return s.saveProfile(ctx, "heap", file)
}

func (s *server) saveProfile(ctx context.Context, profile, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.metrics+"/debug/pprof/"+profile, http.NoBody)
	if err != nil {
		return fmt.Errorf("profile request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	out, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		_ = out.Close()
		return fmt.Errorf("profile: %w", err)
	}
	return out.Close()
}

func fetch(url, key string) ([]byte, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("fetch %s: status %d", url, resp.StatusCode)
	}
	return body, nil
}

// serveCounts are a serve process's heap allocations and CPU seconds since it started and the
// requests it has answered, from its /metrics.
type serveCounts struct{ allocations, cpuSeconds, requests float64 }

// perRequest is the allocations and CPU microseconds per request between earlier and c.
func (c serveCounts) perRequest(earlier serveCounts) (allocations, cpuMicros float64) {
	requests := c.requests - earlier.requests
	if requests == 0 {
		return 0, 0
	}
	return (c.allocations - earlier.allocations) / requests, (c.cpuSeconds - earlier.cpuSeconds) * 1e6 / requests
}

func (s *server) counts(ctx context.Context) (serveCounts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.metrics+"/metrics", http.NoBody)
	if err != nil {
		return serveCounts{}, fmt.Errorf("metrics request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return serveCounts{}, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return serveCounts{}, fmt.Errorf("metrics: %w", err)
	}
	var c serveCounts
	for _, line := range strings.Split(string(body), "\n") {
		var into *float64
		switch {
		case strings.HasPrefix(line, "go_memstats_mallocs_total "):
			into = &c.allocations
		case strings.HasPrefix(line, "process_cpu_seconds_total "):
			into = &c.cpuSeconds
		case strings.HasPrefix(line, "codeport_http_requests_total{"):
			into = &c.requests
		default:
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return serveCounts{}, fmt.Errorf("metrics line %q: %w", line, err)
		}
		*into += v
	}
	return c, nil
}
