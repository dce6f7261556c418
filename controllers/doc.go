// Package controllers reconciles the codeport custom resources into the data plane: each
// reconciler translates its kind into calls of internal/provisioning, the one write path for
// partner configuration.
package controllers
