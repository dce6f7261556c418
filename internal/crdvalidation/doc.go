// Package crdvalidation admits custom resources the way a kube-apiserver serving the given
// CustomResourceDefinitions admits a create, without a server: it reports and prunes fields the
// schema does not declare, applies the schema's defaults, validates metadata, the OpenAPI schema,
// list types and the CEL rules, and answers with the API server's own errors.
//
// Each step mirrors the apiextensions-apiserver code path it names (customresource_handler.go's
// decoder and defaulter, registry/customresource's strategy), built from the same libraries, so
// its verdicts and words are the cluster's.
package crdvalidation
