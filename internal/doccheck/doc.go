// Package doccheck holds the repository's documentation to what it describes: the webhook
// signature snippets of docs/guide.md are run against codeport's own signing code, the partner
// API reference names every operation and field of the served OpenAPI documents, every relative
// link of README.md and docs/ must resolve, and README.md stays a short front door. It has tests
// only.
package doccheck
