// Command vulncheck reads govulncheck's JSON output (-format json) on standard input, prints the
// vulnerabilities the code calls, and fails when any of them is in a module go.mod can upgrade.
//
// Those in the standard library are fixed by a newer Go release, not by go.mod: the toolchain is
// the machine's (GOTOOLCHAIN=local) and the image's base, which change with their own releases.
// With -stdlib=warn they are printed with the release that fixes them but do not fail the run,
// so that a Go security release does not stop every change until the machines catch up; with
// -stdlib=fail (the default) they fail like the others.
package main
