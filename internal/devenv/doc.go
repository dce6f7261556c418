// Package devenv is the environment `codeport dev` runs in: an embedded PostgreSQL under a state
// directory (locked against a second dev, stopped by a guard process however dev ends), the
// custom resources of a manifest directory admitted as the API server would admit them, and
// their provisioning through internal/provisioning, the operator's own write path.
package devenv
