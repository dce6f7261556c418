// Package upgrade holds the rolling-upgrade test (build tag upgrade, `make test-upgrade`): the
// previous release's API replicas and operator under order load, the current release's
// `migrate up` applied beneath them, then each replica and the operator rolled to the current
// release while the load goes on. It asserts that no request fails and that every order, debit
// and balance comes out exactly once. previous-release pins the commit of the previous release.
package upgrade
