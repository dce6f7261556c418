// Package recovery keeps one goroutine's panic from ending the whole process. Go ends the
// process when any goroutine panics unrecovered, whoever started it; a server that holds many
// partners' connections, and the orders being fulfilled, must lose only the work that panicked.
// Every goroutine codeport starts runs its body through Do (or recovers with Recovered).
package recovery
