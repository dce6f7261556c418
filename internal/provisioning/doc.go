// Package provisioning is the one write path for partner configuration: partners and their
// accounts, keys, catalogs and wallet top-ups. It translates the custom resources of
// api/v1alpha1 into the data plane's tables, idempotently, for the operator and `codeport dev`
// alike. Every change raises a configuration notification that the API processes pick up.
package provisioning
