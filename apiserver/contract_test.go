package apiserver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/codeport/codeport/internal/test/contracttest"
)

// servedDocuments are the OpenAPI documents the package's servers served, parsed once for all of
// them; each server is still fetched for its own (contracttest).
var servedDocuments = contracttest.NewDocuments()

// clientTimeout bounds every request of the package's clients.
const clientTimeout = 30 * time.Second

// client is an HTTP client whose every exchange with a path the documents describe is held to
// the document of the server it went to; violations fail t. A stack's own client, s.client,
// fetches each of its servers' documents once for all its requests.
func client(t testing.TB) *http.Client {
	t.Helper()
	return servedDocuments.Contracts().Wrap(t, &http.Client{Timeout: clientTimeout})
}

// client is an HTTP client of s's servers, checked as the package's client is.
func (s *stack) client(t testing.TB) *http.Client {
	t.Helper()
	return s.contracts.Wrap(t, &http.Client{Timeout: clientTimeout})
}

// checkCaching: every answer, whatever its path, must forbid caches to keep it (answers carry
// codes, balances and prices) and forbid type sniffing.
func checkCaching(t *testing.T, req *http.Request, resp *http.Response) {
	t.Helper()
	cc, sniff := resp.Header.Get("Cache-Control"), resp.Header.Get("X-Content-Type-Options")
	if cc != "no-store" || sniff != "nosniff" {
		t.Errorf("%s %s: %d with Cache-Control %q and X-Content-Type-Options %q, want no-store and nosniff",
			req.Method, req.URL.Path, resp.StatusCode, cc, sniff)
	}
}
