// Package catalog serves partners' catalogs from memory: immutable snapshots with every product
// pre-encoded as JSON, the v2 list filters, and the sandbox's built-in test products.
package catalog
