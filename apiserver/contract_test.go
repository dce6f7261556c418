package apiserver_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/codeport/codeport/apiserver/openapi"
)

// contract holds the routers of the published documents, by environment and prefix; every call
// of the HTTP suites is checked against its environment's.
type contract struct {
	once    sync.Once
	err     error
	routers map[string]routers.Router
}

var published contract

func (c *contract) load() error {
	c.once.Do(func() {
		c.routers = map[string]routers.Router{}
		for prefix, raw := range map[string][]byte{"/v2": openapi.V2(), "/v1": openapi.V1()} {
			for _, env := range []string{"sandbox", "production"} {
				if c.err = c.add(env, prefix, raw); c.err != nil {
					return
				}
			}
		}
	})
	return c.err
}

// add loads env's variant of the kept document of prefix.
func (c *contract) add(env, prefix string, kept []byte) error {
	raw, err := openapi.ForEnvironment(kept, env)
	if err != nil {
		return err
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return err
	}
	doc.Servers = openapi3.Servers{{URL: prefix}}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return err
	}
	c.routers[env+prefix] = r
	return nil
}

// checkContract validates a response (and, when the server accepted it, the request) against
// the document env publishes. Paths the documents do not describe (health probes, unknown routes)
// are not checked against it. Every answer, whatever its path, must forbid caches to keep it
// (answers carry codes, balances and prices) and forbid type sniffing.
func checkContract(t *testing.T, env string, req *http.Request, body []byte, resp *http.Response, raw []byte) {
	t.Helper()
	cc, sniff := resp.Header.Get("Cache-Control"), resp.Header.Get("X-Content-Type-Options")
	if cc != "no-store" || sniff != "nosniff" {
		t.Errorf("%s %s: %d with Cache-Control %q and X-Content-Type-Options %q, want no-store and nosniff",
			req.Method, req.URL.Path, resp.StatusCode, cc, sniff)
	}
	if err := published.load(); err != nil {
		t.Fatalf("OpenAPI documents: %v", err)
	}
	prefix := "/v2"
	if strings.HasPrefix(req.URL.Path, "/v1/") {
		prefix = "/v1"
	} else if !strings.HasPrefix(req.URL.Path, "/v2/") || strings.HasSuffix(req.URL.Path, "openapi.json") {
		return
	}
	check := req.Clone(context.Background())
	check.URL.Host, check.URL.Scheme, check.Host = "", "", ""
	check.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := published.routers[env+prefix].FindRoute(check)
	if err != nil {
		return
	}
	input := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if resp.StatusCode < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), input); err != nil {
			t.Errorf("%s %s: the server accepted a request the document rejects: %v", req.Method, req.URL.Path, err)
		}
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(raw)), Options: &openapi3filter.Options{IncludeResponseStatus: true},
	})
	if err != nil {
		t.Errorf("%s %s: response %d does not match the document: %v", req.Method, req.URL.Path, resp.StatusCode, err)
	}
}
