// Package poll is how tests wait for what happens asynchronously (a cache invalidated by a
// notification, a reconcile, a watch): they poll the condition rather than sleep a fixed time,
// so a test waits no longer than the system takes and, when the time is up, fails saying what
// it last saw. Until fails the test; Wait returns that as an error, for the harnesses and
// benchmarks of hack/ that wait outside a test's goroutine or report instead of failing.
package poll
