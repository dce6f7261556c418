// Package testprocess runs the codeport binary as a real process for tests, benchmarks and the
// soak: it builds the binary (once per test binary run), picks a free port, starts the process
// with its arguments, waits until its readiness endpoint answers, and stops it at the end,
// printing the process's log when the test failed. Fault tests get at the process itself: its
// PID, signals, SIGKILL, and a restart on the same port.
package testprocess
