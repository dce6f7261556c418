// Package openapi holds the OpenAPI 3.1 documents of the partner API (v2 and legacy v1), served
// as they are, and renders them as a self-contained HTML reference. The HTTP test suites
// validate every response against these documents, so they cannot drift from the code.
package openapi
