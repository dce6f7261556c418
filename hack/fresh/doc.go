// Package fresh checks that the scripts which install what the tests need work on a machine that
// has none of it: each scenario runs a script's install step and the decisions it takes from the
// machine's state (which directory holds the CNI plugins, where PostgreSQL's server binaries
// are) in hack/fresh/sandbox.sh, a mount namespace whose /usr, /opt, /etc, /var and /run are
// throwaway overlays with the script's Debian packages purged. apt-get and dpkg run for real
// there; the test then checks that the script asked for exactly the packages that were missing
// and that every path it resolved holds what the package installed.
//
// A script that looks at the machine before the step that installs what it looks for resolves
// the wrong path there, as it would on a fresh machine; on a machine that already has the
// packages (every developer's after the first run) it cannot fail. docs/testing.md ("Fresh
// machines") says what this covers and what only a fresh machine does.
package fresh
