// Package kubectlplugin is `kubectl codeport`, the platform engineers' command for the
// operator's custom resources: a status screen per namespace, wallet top-ups that pass the
// operator's rule before they are created, key rotations that wait for the new key, and
// support bundles with every key and code redacted. cmd/kubectl-codeport is its binary.
//
// It speaks only to the Kubernetes API, with the user's kubeconfig and rights: never to the
// database, and it never reads a Secret.
package kubectlplugin
