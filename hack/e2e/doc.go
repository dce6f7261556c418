// Package e2e installs the chart into a real cluster and drives the mission through it: the
// migration hook, every Pod Ready under the chart's securityContext and probes, helm test,
// onboarding config/samples, orders through the production and sandbox Services, key
// rotation on every API replica, the leader operator Pod and an API Pod deleted under order
// load, helm upgrade under load, and helm uninstall followed by namespace deletion. Throughout,
// every log line of every codeport container must be JSON, no component's log may report a
// denied verb, and the API server's audit log (when given) may not record one for the chart's
// ServiceAccounts.
//
// The test is behind the build tag e2e and driven by its environment, so it runs against any
// cluster: `make test-e2e` brings one up on this machine (hack/e2e/cluster.sh) and sets it all;
// docs/operator.md ("End-to-end cluster") says how to point it at another one.
package e2e
