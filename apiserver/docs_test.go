package apiserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/codeport/codeport/apiserver"
	"github.com/codeport/codeport/apiserver/openapi"
	"github.com/codeport/codeport/apiserver/ratelimit"
)

// answer is a response with its body as sent.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// fetch sends a GET with the given headers.
func fetch(t *testing.T, url string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	// Without an Accept-Encoding of the caller's, the client would add gzip and undo it unseen.
	req.Header.Set("Accept-Encoding", "identity")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, body}
}

func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	a := fetch(t, url, nil)
	return a.status, a.header.Get("Content-Type"), string(a.body)
}

// servedDocument is the parts of a served OpenAPI document the docs tests look at.
type servedDocument struct {
	OpenAPI string                    `json:"openapi"`
	Servers []openapi.Server          `json:"servers"`
	Paths   map[string]map[string]any `json:"paths"`
}

func document(t *testing.T, url string, header map[string]string) servedDocument {
	t.Helper()
	a := fetch(t, url, header)
	var doc servedDocument
	if a.status != http.StatusOK || json.Unmarshal(a.body, &doc) != nil || !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("%s: %d %.200s", url, a.status, a.body)
	}
	return doc
}

// operations lists "METHOD /vN/path" of a served document.
func operations(t *testing.T, base, prefix string) []string {
	t.Helper()
	var ops []string
	for path, methods := range document(t, base+prefix+"/openapi.json", nil).Paths {
		for m := range methods {
			ops = append(ops, strings.ToUpper(m)+" "+prefix+path)
		}
	}
	return ops
}

// TestDocsServedWithoutKey: both documents, the reference page and its renderer need no key; the
// documents name the server that served them as their only server, whatever Host a client
// forwards from outside the trusted proxies; the page loads nothing but from its own server.
func TestDocsServedWithoutKey(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	base := s.baseURL["production"]
	ops := append(operations(t, base, "/v2"), operations(t, base, "/v1")...)
	// The contract's ten operations, history and statement, webhook events and replay, but the
	// sandbox's scenarios.
	if len(ops) != 13 {
		t.Fatalf("operations: %v", ops)
	}
	for _, prefix := range []string{"/v2", "/v1"} {
		doc := document(t, base+prefix+"/openapi.json", map[string]string{"X-Forwarded-Host": "attacker.example"})
		if len(doc.Servers) != 1 || doc.Servers[0].URL != base+prefix ||
			!strings.Contains(doc.Servers[0].Description, "production") {
			t.Errorf("%s/openapi.json servers: %+v, want %s%s (production) alone", prefix, doc.Servers, base, prefix)
		}
	}

	status, contentType, page := get(t, base+"/docs")
	if status != http.StatusOK || !strings.HasPrefix(contentType, "text/html") {
		t.Fatalf("/docs: %d %s", status, contentType)
	}
	for _, want := range []string{
		`<script src="` + openapi.RendererPath + `">`, `url: '/v2/openapi.json'`, `url: '/v1/openapi.json'`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/docs lacks %s", want)
		}
	}
	for _, external := range []string{`src="http`, `href="http`, "//cdn", "fonts."} {
		if strings.Contains(page, external) {
			t.Errorf("/docs uses an external asset: %s", external)
		}
	}

	plain, err := openapi.Renderer()
	if err != nil {
		t.Fatal(err)
	}
	a := fetch(t, base+openapi.RendererPath, map[string]string{"Accept-Encoding": "gzip, deflate, br"})
	if a.status != http.StatusOK || a.header.Get("Content-Encoding") != "gzip" ||
		!bytes.Equal(a.body, openapi.RendererGzip()) {
		t.Errorf("renderer to a browser: %d, Content-Encoding %q, %d bytes", a.status,
			a.header.Get("Content-Encoding"), len(a.body))
	}
	a = fetch(t, base+openapi.RendererPath, map[string]string{"Accept-Encoding": "gzip;q=0"})
	if a.status != http.StatusOK || a.header.Get("Content-Encoding") != "" || !bytes.Equal(a.body, plain) ||
		!strings.HasPrefix(a.header.Get("Content-Type"), "text/javascript") {
		t.Errorf("renderer to a client without gzip: %d, Content-Encoding %q, Content-Type %q, %d bytes",
			a.status, a.header.Get("Content-Encoding"), a.header.Get("Content-Type"), len(a.body))
	}
}

// TestDocumentsNameTheirPublicServer: the documents name the configured public base URL when
// there is one, else the scheme and host a trusted proxy forwards, else the request's own.
func TestDocumentsNameTheirPublicServer(t *testing.T) {
	s := newStack(t, stackOptions{noWorker: true})
	everyone := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	forwarded := map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "docs.example, inner.example"}
	for _, c := range []struct {
		name    string
		public  string
		proxies []netip.Prefix
		header  map[string]string
		want    string
	}{
		{"configured", "https://sandbox.api.example.com/", everyone, forwarded, "https://sandbox.api.example.com/v2"},
		{"from a trusted proxy", "", everyone, forwarded, "https://docs.example/v2"},
		{"from anyone else", "", nil, forwarded, "http://api.example:8080/v2"},
	} {
		cfg := apiserver.DefaultConfig("sandbox")
		cfg.PublicBaseURL, cfg.TrustedProxies = c.public, c.proxies
		app := apiserver.New(cfg, apiserver.Deps{DB: s.db, Limiter: ratelimit.NewMemory()}).App()
		req := httptest.NewRequest(http.MethodGet, "/v2/openapi.json", http.NoBody)
		req.Host = "api.example:8080"
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		var doc servedDocument
		err = json.NewDecoder(resp.Body).Decode(&doc)
		_ = resp.Body.Close()
		if err != nil || len(doc.Servers) != 1 || doc.Servers[0].URL != c.want {
			t.Errorf("%s: servers %+v (%v), want %s", c.name, doc.Servers, err, c.want)
		}
	}
	for _, bad := range []string{"api.example.com", "ftp://api.example.com", "https://api.example.com/v2",
		"https://user@api.example.com", "https://api.example.com?x=1"} {
		if apiserver.CheckPublicBaseURL(bad) == nil {
			t.Errorf("public base URL %q accepted", bad)
		}
	}
	if err := apiserver.CheckPublicBaseURL("https://api.example.com"); err != nil {
		t.Error(err)
	}
}

// TestEachEnvironmentDocumentsItsOwnRoutes: the documents an environment serves list exactly the
// routes of its route table (the sandbox's scenarios in the sandbox alone) and the
// X-Sandbox-Scenario values its server takes (none in production, which has no such header).
func TestEachEnvironmentDocumentsItsOwnRoutes(t *testing.T) {
	for _, env := range []string{"sandbox", "production"} {
		server := apiserver.New(apiserver.DefaultConfig(env), apiserver.Deps{Limiter: ratelimit.NewMemory()})
		var routes []string
		for _, r := range server.App().GetRoutes(true) {
			api := strings.HasPrefix(r.Path, "/v2/") || strings.HasPrefix(r.Path, "/v1/")
			if api && r.Method != http.MethodHead && !strings.HasSuffix(r.Path, "/openapi.json") {
				routes = append(routes, r.Method+" "+fiberParam.ReplaceAllString(r.Path, "{$1}"))
			}
		}
		documented, scenarios := documentedRoutes(t, server)
		slices.Sort(routes)
		slices.Sort(documented)
		if !slices.Equal(routes, documented) {
			t.Errorf("%s: the route table has\n%s\nthe documents\n%s", env,
				strings.Join(routes, "\n"), strings.Join(documented, "\n"))
		}
		if env == "sandbox" && !slices.Equal(scenarios, apiserver.Scenarios) ||
			env == "production" && scenarios != nil {
			t.Errorf("%s: the documents' %s takes %q, the server %q", env, apiserver.ScenarioHeader, scenarios,
				apiserver.Scenarios)
		}
	}
}

// documentedRoutes lists "METHOD /vN/path" of the documents a server serves, and the values
// they give X-Sandbox-Scenario (nil without the header).
func documentedRoutes(t *testing.T, server *apiserver.Server) (routes, scenarios []string) {
	t.Helper()
	for _, prefix := range []string{"/v2", "/v1"} {
		resp, err := server.App().Test(httptest.NewRequest(http.MethodGet, prefix+"/openapi.json", http.NoBody))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Paths      map[string]map[string]json.RawMessage
			Components struct {
				Parameters map[string]struct {
					Name   string
					Schema struct{ Pattern string }
				}
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for path, methods := range doc.Paths {
			for m := range methods {
				if m != "parameters" && !strings.HasPrefix(m, "x-") {
					routes = append(routes, strings.ToUpper(m)+" "+prefix+path)
				}
			}
		}
		for _, p := range doc.Components.Parameters {
			if p.Name == apiserver.ScenarioHeader {
				// The values are the pattern's alternatives: ^(a|b|...)$.
				scenarios = strings.Split(strings.TrimSuffix(strings.TrimPrefix(p.Schema.Pattern, "^("), ")$"), "|")
			}
		}
	}
	return routes, scenarios
}

// fiberParam is a parameter of a route's path, as the router spells it.
var fiberParam = regexp.MustCompile(`:([A-Za-z]+)`)
