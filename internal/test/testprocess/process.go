package testprocess

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FreeAddr is a loopback address with a port nothing listens on now.
func FreeAddr() (string, error) {
	addrs, err := FreeAddrs(1)
	if err != nil {
		return "", err
	}
	return addrs[0], nil
}

// FreeAddrs is n loopback addresses with ports nothing listens on now, for a process that serves
// on several. Each port is held until all are picked, so no two are the same.
func FreeAddrs(n int) ([]string, error) {
	held := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	addrs := make([]string, 0, n)
	for range n {
		ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		held = append(held, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// Addr is FreeAddr for a test.
func Addr(t testing.TB) string {
	t.Helper()
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// DefaultReadyTimeout is how long Start waits for the readiness endpoint: long enough for a
// busy machine, where a process's start takes many times what it takes on an idle one.
const DefaultReadyTimeout = 60 * time.Second

// logLimit is how much of its output a Process keeps in memory: the end of it.
const logLimit = 1 << 20

// Process is one process of a binary, started and restarted with the same arguments (and so on
// the same ports).
type Process struct {
	// Name names the process in errors and logs.
	Name   string
	Binary string
	Args   []string
	// Env is added to the test's environment, or to Environ when that is set.
	Env []string
	// Environ, when set, stands for the test's environment: a child that must not see some of
	// the test's variables (a database, a cluster) is given the rest.
	Environ []string
	// Group starts the process in a process group of its own, which the processes it starts
	// (a guard, a server under make) join: Stop, Kill and SignalGroup then reach them all, so
	// that none outlives the test.
	Group bool
	// ReadyURL, when set, is polled by Start until it answers 200.
	ReadyURL     string
	ReadyTimeout time.Duration
	// LogFile, when set, receives the output of every run, each after a marker line; Output,
	// when set, receives it instead (io.Discard: nowhere, without copying it through this
	// process); otherwise the end of it is kept in memory.
	LogFile string
	Output  io.Writer

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	// spent is the CPU time of the runs that have exited.
	spent time.Duration
	// waitErr is how the last run that exited ended.
	waitErr error
	out     tailBuffer
}

// Start runs the process and, with a ReadyURL, waits until it is ready, failing early when the
// process exits.
func (p *Process) Start(ctx context.Context) error {
	if err := p.launch(); err != nil {
		return err
	}
	if p.ReadyURL == "" {
		return nil
	}
	return p.waitReady(ctx)
}

func (p *Process) launch() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out io.Writer = &p.out
	var file *os.File
	if p.LogFile != "" {
		f, err := os.OpenFile(p.LogFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("log of %s: %w", p.Name, err)
		}
		fmt.Fprintf(f, "=== start %s at %s\n", p.Name, time.Now().Format(time.RFC3339Nano))
		out, file = f, f
	}
	switch p.Output {
	case nil:
	case io.Discard:
		out = nil
	default:
		out = p.Output
	}
	// Not bound to a context: the process lives until Stop or Kill, which the tests call.
	//nolint:gosec // running the binary under test is the point
	cmd := exec.CommandContext(context.Background(), p.Binary, p.Args...)
	environ := p.Environ
	if environ == nil {
		environ = os.Environ()
	}
	cmd.Env = append(slices.Clip(environ), p.Env...)
	if out != nil {
		cmd.Stdout, cmd.Stderr = out, out
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: p.Group}
	dieWithParent(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		if file != nil {
			_ = file.Close()
		}
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		if file != nil {
			_ = file.Close()
		}
		p.mu.Lock()
		p.spent += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		p.waitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return nil
}

func (p *Process) waitReady(ctx context.Context) error {
	limit := p.ReadyTimeout
	if limit == 0 {
		limit = DefaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		if !p.Running() {
			if p.LogFile != "" {
				return fmt.Errorf("%s exited before it was ready at %s; see %s", p.Name, p.ReadyURL, p.LogFile)
			}
			return fmt.Errorf("%s exited before it was ready at %s:\n%s", p.Name, p.ReadyURL, p.Log())
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.ReadyURL, http.NoBody)
		if err != nil {
			return fmt.Errorf("readiness of %s: %w", p.Name, err)
		}
		if resp, err := client.Do(req); err != nil {
			last = err.Error()
		} else {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s within %s (last: %s)", p.Name, p.ReadyURL, limit, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Running says whether the last run has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// PID is the process id of the last run, 0 before the first.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Signal sends sig to the running process alone, not to the processes it started.
func (p *Process) Signal(sig syscall.Signal) error { return p.signal(sig, false) }

// SignalGroup sends sig to the process group of a process started with Group: the process and
// the processes it started.
func (p *Process) SignalGroup(sig syscall.Signal) error {
	if !p.Group {
		return errors.New(p.Name + " has no process group of its own")
	}
	return p.signal(sig, true)
}

func (p *Process) signal(sig syscall.Signal, group bool) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return errors.New(p.Name + " was not started")
	}
	if err := send(cmd, sig, group); err != nil {
		return fmt.Errorf("signal %s: %w", p.Name, err)
	}
	return nil
}

// send signals cmd's process or, with group, the process group it leads.
func send(cmd *exec.Cmd, sig syscall.Signal, group bool) error {
	if group {
		return syscall.Kill(-cmd.Process.Pid, sig)
	}
	return cmd.Process.Signal(sig)
}

// Exited is closed when the last run has exited.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// Wait waits until the last run has exited and returns how it ended, as exec.Cmd's Wait does.
func (p *Process) Wait() error {
	exited := p.Exited()
	if exited == nil {
		return errors.New(p.Name + " was not started")
	}
	<-exited
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Process) Kill() { p.Stop(0) }

// Stop sends SIGTERM, waits up to grace for the process to exit, then kills it; with no grace it
// kills at once. With Group, the signals go to the whole group.
func (p *Process) Stop(grace time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	if grace > 0 {
		_ = send(cmd, syscall.SIGTERM, p.Group)
		select {
		case <-exited:
			return
		case <-time.After(grace):
		}
	}
	_ = send(cmd, syscall.SIGKILL, p.Group)
	<-exited
}

// Restart kills the process and starts it again with the same arguments, on the same ports.
func (p *Process) Restart(ctx context.Context) error {
	p.Kill()
	return p.Start(ctx)
}

// CPU is the CPU time (user and system) the process has used over all its runs so far.
func (p *Process) CPU() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	spent := p.spent
	if p.cmd == nil {
		return spent
	}
	select {
	case <-p.exited:
		return spent // the exit added this run
	default:
	}
	return spent + ReadStat(p.cmd.Process.Pid).CPU
}

// Log is the process's output: the end of what it wrote in memory, or its log file.
func (p *Process) Log() string {
	if p.LogFile != "" {
		data, err := os.ReadFile(p.LogFile)
		if err != nil {
			return fmt.Sprintf("(log %s: %v)", p.LogFile, err)
		}
		return string(data)
	}
	return p.out.String()
}

// Start starts p for the test and waits until it is ready, failing the test when it does not
// get there. Cleanup stops it (SIGTERM, then SIGKILL after five seconds) and, when the test
// failed, logs its output.
func Start(t testing.TB, p *Process) *Process {
	t.Helper()
	if p.Name == "" {
		p.Name = p.Binary + " " + strings.Join(p.Args, " ")
	}
	t.Cleanup(func() {
		p.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("output of %s:\n%s", p.Name, p.Log())
		}
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// Stat is what /proc says of a live process.
type Stat struct {
	Command string
	// State is the process's state letter: R running, S sleeping, Z a zombie (exited, not yet
	// reaped), ...; 0 for a process that is gone.
	State  byte
	Parent int
	// CPU is the process's CPU time (user and system); Reaped that of its children that have
	// exited and been waited for.
	CPU, Reaped time.Duration
}

// ReadStat reads a live process's /proc stat; a process that is gone reads as zero.
func ReadStat(pid int) Stat {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}
	}
	// The command name is in parentheses and may hold spaces; after it come the state, the
	// parent, ..., utime, stime, cutime and cstime (the 12th to 15th fields, in ticks of
	// 1/100 s on Linux).
	open, closing := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || closing < open {
		return Stat{}
	}
	fields := strings.Fields(string(data[closing+1:]))
	if len(fields) < 15 {
		return Stat{}
	}
	ticks := func(i int) time.Duration {
		n, _ := strconv.ParseInt(fields[i], 10, 64)
		return time.Duration(n) * 10 * time.Millisecond
	}
	parent, _ := strconv.Atoi(fields[1])
	return Stat{Command: string(data[open+1 : closing]), State: fields[0][0], Parent: parent,
		CPU: ticks(11) + ticks(12), Reaped: ticks(13) + ticks(14)}
}

// Alive tells whether pid is a process that has not exited. A zombie has, though kill(pid, 0)
// would say otherwise until its parent reaps it.
func Alive(pid int) bool {
	switch ReadStat(pid).State {
	case 0, 'Z', 'X':
		return false
	}
	return true
}

// tailBuffer keeps at least the last logLimit bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	// Trimmed only at twice the limit, so that a chatty process costs a copy per logLimit
	// bytes rather than one per write.
	if len(b.buf) > 2*logLimit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-logLimit:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf[max(0, len(b.buf)-logLimit):])
}

// Buffer collects what a process, or a command run in-process, writes from several goroutines
// at once; String is everything written so far.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p under the buffer's lock.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
