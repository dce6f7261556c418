// Package openapi holds the OpenAPI 3.1 documents of the partner API (v2 and legacy v1) and the
// reference page that renders them. The HTTP test suites validate every response against these
// documents, so they cannot drift from the code. The page is Scalar's API reference, embedded
// (ui/, kept by hack/openapi/scalar.sh) so that /docs works with no network but the server's.
package openapi
