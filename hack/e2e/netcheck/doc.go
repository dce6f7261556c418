// Command netcheck is the NetworkPolicy test's probe, run in Pods of the end-to-end cluster:
// "netcheck listen ADDR" accepts TCP connections on ADDR until SIGTERM, and "netcheck dial
// ADDR..." connects to each ADDR once and prints one JSON line per address saying whether it was
// reached. A refused or timed-out connection is a result, not a failure: dial exits 0 unless
// its arguments are wrong. The node's images come from no registry, and the release's image
// (distroless) has no shell or client to connect with.
package main
