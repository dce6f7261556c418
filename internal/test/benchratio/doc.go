// Package benchratio reports a Go benchmark's cost as a ratio to a baseline timed in the same
// run, so that figures compare across machines and noisy neighbours.
package benchratio
