// Package testfixture builds the custom resources of api/v1alpha1 for tests, benchmarks and the
// soak, builds the provisioner the operator runs (NewProvisioner, Provisioner) and onboards
// partners through it as the operator does.
//
// Each builder takes a name and options and returns an object that passes the CRDs' validation
// as it stands: a test states only what it is about (testfixture.Partner("acme",
// testfixture.WithRateLimit(60))) and the defaults carry the rest, so a field added to a kind is
// given its default in one place rather than in every test that builds one.
package testfixture
