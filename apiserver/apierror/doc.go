// Package apierror holds every error body and message of the partner API contract. Partners'
// code matches on these texts, so they live in one place and nowhere else.
package apierror
