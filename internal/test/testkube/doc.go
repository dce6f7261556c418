// Package testkube starts a real kube-apiserver and etcd (envtest) with codeport's CRDs for tests
// that run the operator as a process of its own, and reads the Ready condition the operator
// sets. One place for what each such test used to repeat: the server, a cluster-admin
// kubeconfig for the process, and a client for the test.
package testkube
