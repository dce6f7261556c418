// Package testprocess runs the codeport binary as a real process for tests, benchmarks and the
// soak: it builds the binary (once per test binary run), picks a free port, starts the process
// with its arguments, waits until its readiness endpoint answers, and stops it at the end,
// printing the process's log when the test failed. Fault tests get at the process itself: its
// PID, signals, SIGKILL, and a restart on the same port.
//
// Other processes a test starts (make, a shell, this test binary re-run as codeport) run the same
// way: in a process group of their own when they start processes of their own, which Stop and
// Kill then reach too, and with an environment of their own when they must not see the test's.
// Buffer collects what such a process, or a command run in-process, writes from several
// goroutines.
package testprocess
