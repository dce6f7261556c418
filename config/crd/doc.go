// Package crd carries the CustomResourceDefinitions that `make manifests` generates into bases/,
// so the binary holds the very schemas a cluster is given (`codeport dev` validates against
// them). The package lives beside bases/ rather than in it because go:embed reaches only into
// the package's own directory tree, and bases/ belongs to the generator.
package crd
