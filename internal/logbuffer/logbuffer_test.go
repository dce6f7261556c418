package logbuffer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/test/poll"
)

// output is a destination that records each write it receives.
type output struct {
	mu     sync.Mutex
	writes []string
	fail   int // writes still to refuse
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fail > 0 {
		o.fail--
		return 0, errors.New("disk full")
	}
	o.writes = append(o.writes, string(p))
	return len(p), nil
}

func (o *output) text() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.writes, "")
}

func (o *output) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.writes)
}

// never is an interval no test outlives: only Flush, Close, a full buffer or FlushAt write.
const never = time.Hour

func TestLinesWaitForFlushAndKeepTheirOrder(t *testing.T) {
	out := &output{}
	w := New(out, 1<<10, never)
	for i := range 5 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if out.count() != 0 {
		t.Fatalf("written before a flush: %q", out.text())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.text(), "line 0\nline 1\nline 2\nline 3\nline 4\n"; got != want {
		t.Fatalf("flushed %q, want %q", got, want)
	}
	if out.count() != 1 {
		t.Fatalf("%d writes for one flush, want 1", out.count())
	}
}

func TestIntervalWritesBufferedLines(t *testing.T) {
	out := &output{}
	w := New(out, 1<<10, 10*time.Millisecond)
	defer w.Close()
	fmt.Fprintln(w, "first")
	poll.Until(t, 5*time.Second, "buffered line written by the timer", func() (bool, string) {
		return out.text() == "first\n", out.text()
	})
	// The timer is armed again by the next line after a flush.
	fmt.Fprintln(w, "second")
	poll.Until(t, 5*time.Second, "second line written by the timer", func() (bool, string) {
		return out.text() == "first\nsecond\n", out.text()
	})
}

func TestFullBufferIsWrittenBeforeTheLineThatDoesNotFit(t *testing.T) {
	out := &output{}
	w := New(out, 16, never)
	fmt.Fprint(w, "0123456789\n")          // 11 bytes: buffered
	fmt.Fprint(w, "abcdefghij\n")          // does not fit beside it: the first goes out
	fmt.Fprint(w, strings.Repeat("x", 40)) // larger than the buffer: written through, after the second
	want := []string{"0123456789\n", "abcdefghij\n", strings.Repeat("x", 40)}
	if got := out.writes; !slices.Equal(got, want) {
		t.Fatalf("writes %q, want %q", got, want)
	}
}

func TestCloseFlushesAndLaterWritesGoThrough(t *testing.T) {
	out := &output{}
	w := New(out, 1<<10, never)
	fmt.Fprintln(w, "before close")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if out.text() != "before close\n" {
		t.Fatalf("close wrote %q", out.text())
	}
	fmt.Fprintln(w, "after close")
	if out.text() != "before close\nafter close\n" {
		t.Fatalf("write after close: %q", out.text())
	}
}

func TestZeroIntervalWritesEachLine(t *testing.T) {
	out := &output{}
	w := New(out, 1<<10, 0)
	fmt.Fprintln(w, "a")
	fmt.Fprintln(w, "b")
	if got, want := out.writes, []string{"a\n", "b\n"}; !slices.Equal(got, want) {
		t.Fatalf("writes %q, want %q", got, want)
	}
}

func TestFailedWriteDoesNotSilenceLaterLines(t *testing.T) {
	out := &output{fail: 1}
	w := New(out, 1<<10, never)
	fmt.Fprintln(w, "lost")
	if err := w.Flush(); err == nil {
		t.Fatal("flush to a failing output: no error")
	}
	fmt.Fprintln(w, "kept")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if out.text() != "kept\n" {
		t.Fatalf("after a failed write: %q", out.text())
	}
}

func TestFlushAtWritesWarningsAtOnce(t *testing.T) {
	out := &output{}
	w := New(out, 1<<10, never)
	log := slog.New(w.FlushAt(slog.NewJSONHandler(w, nil), slog.LevelWarn)).With("environment", "sandbox")
	log.Info("request")
	if out.count() != 0 {
		t.Fatalf("info line written at once: %q", out.text())
	}
	log.Error("key lookup failed")
	lines := strings.Split(strings.TrimSpace(out.text()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"msg":"request"`) ||
		!strings.Contains(lines[1], `"msg":"key lookup failed"`) {
		t.Fatalf("after an error line: %q", out.text())
	}
	for _, line := range lines {
		if !strings.Contains(line, `"environment":"sandbox"`) {
			t.Fatalf("attributes of With lost: %s", line)
		}
	}
	grouped := slog.New(w.FlushAt(slog.NewJSONHandler(w, nil), slog.LevelWarn)).WithGroup("g")
	grouped.Warn("warned", "k", "v")
	if !strings.Contains(out.text(), `"g":{"k":"v"}`) {
		t.Fatalf("grouped warning not written at once: %q", out.text())
	}
}

// TestConcurrentLinesStayWhole has many goroutines log at once through one buffer: every line
// comes out whole and exactly once.
func TestConcurrentLinesStayWhole(t *testing.T) {
	out := &output{}
	w := New(out, 512, time.Millisecond)
	log := slog.New(slog.NewJSONHandler(w, nil))
	const goroutines, lines = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range lines {
				log.Info("request", "goroutine", g, "i", i)
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[[2]int]bool{}
	scanner := bufio.NewScanner(bytes.NewReader([]byte(out.text())))
	for scanner.Scan() {
		var line struct{ Goroutine, I int }
		if err := json.Unmarshal(scanner.Bytes(), &line); err != nil {
			t.Fatalf("line not whole: %q: %v", scanner.Text(), err)
		}
		key := [2]int{line.Goroutine, line.I}
		if seen[key] {
			t.Fatalf("line %v written twice", key)
		}
		seen[key] = true
	}
	if len(seen) != goroutines*lines {
		t.Fatalf("%d lines written, want %d", len(seen), goroutines*lines)
	}
}
