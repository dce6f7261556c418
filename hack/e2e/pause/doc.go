// Command pause is the end-to-end node's Pod sandbox process (containerd's sandbox_image): it
// holds the Pod's namespaces, reaps orphaned children as PID 1 must, and exits on SIGINT or
// SIGTERM. Kubernetes' own pause image is C and comes from a registry; the node has neither.
package main
