// Package v1 serves the legacy catalog interface: bearer-token authentication, the catalog
// record, paged products and single-product lookup by EAN or SKU, in the legacy field shapes.
package v1
