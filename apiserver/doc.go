// Package apiserver is the data plane's HTTP layer: the partner API of one environment (v2 and
// legacy v1), its middleware, and the wiring of the domain and data packages of internal/ into a
// serving process.
package apiserver
