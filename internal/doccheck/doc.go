// Package doccheck holds the repository's documentation to what it describes: the webhook
// signature snippets of docs/guide.md are run against codeport's own signing code, the partner
// API reference names every operation and field of the served OpenAPI documents, every relative
// link of README.md, CONTRIBUTING.md and docs/ must resolve, README.md stays a short front door,
// docs/architecture.md's package map has a line for every Go package and names no directory that
// is gone, and the Go symbols it names exist. The history is a document too: hack/commits.sh,
// which make lint runs on the commits a change adds, is tested here to fail on each message the
// commit rules forbid. It has tests only.
package doccheck
