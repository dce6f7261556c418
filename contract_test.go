package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/codeport/codeport/internal/test/contracttest"
)

// servedDocuments are the OpenAPI documents the package's servers served, parsed once for all of
// them; each server is still fetched for its own (contracttest).
var servedDocuments = contracttest.NewDocuments()

// apiClient is an HTTP client whose every exchange with a path the documents describe is held to
// the document of the server it went to; violations fail t.
func apiClient(t testing.TB) *http.Client {
	t.Helper()
	return servedDocuments.Contracts().Wrap(t, nil)
}

// contractProxy serves target (a base URL) through a proxy that holds every exchange to the
// documents target serves, for clients that are not Go's: their exchanges fail t as apiClient's
// do. It returns the proxy's base URL, with target's path.
func contractProxy(t *testing.T, target string) string {
	t.Helper()
	to, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	origin := &url.URL{Scheme: to.Scheme, Host: to.Host}
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(origin); r.Out.Host = to.Host },
		Transport: servedDocuments.Contracts().Transport(t, nil),
	})
	t.Cleanup(proxy.Close)
	return proxy.URL + to.Path
}
