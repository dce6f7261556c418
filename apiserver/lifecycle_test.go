package apiserver_test

import (
	"testing"
	"time"

	"github.com/codeport/codeport/apiserver"
)

// TestV1Lifecycle: every /v1 answer, refusals and unrouted paths included, announces v1's
// deprecation (RFC 9745), its sunset when one is set (RFC 8594), and links the migration notes;
// /v2 answers announce nothing.
func TestV1Lifecycle(t *testing.T) {
	sunset := time.Date(2027, time.June, 30, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		lifecycle *apiserver.Lifecycle
		want      map[string]string
	}{
		{"default", nil, map[string]string{
			"Deprecation": "@1796083200", // 2026-12-01T00:00:00Z
			"Sunset":      "",
			"Link":        `</docs#1.0.0>; rel="deprecation"; type="text/html"`,
		}},
		{"sunset set", &apiserver.Lifecycle{Deprecation: apiserver.DefaultV1Deprecation, Sunset: sunset,
			Docs: "https://docs.example/v1-migration"}, map[string]string{
			"Deprecation": "@1796083200",
			"Sunset":      "Wed, 30 Jun 2027 00:00:00 GMT",
			"Link": `<https://docs.example/v1-migration>; rel="deprecation"; type="text/html", ` +
				`<https://docs.example/v1-migration>; rel="sunset"; type="text/html"`,
		}},
		{"nothing announced", &apiserver.Lifecycle{}, map[string]string{"Deprecation": "", "Sunset": "", "Link": ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStack(t, stackOptions{noWorker: true, v1Lifecycle: c.lifecycle})
			tn := s.onboard(t, "acme", nil)
			bearer := "Bearer " + tn.keys["bearer:production"]
			for _, r := range []struct {
				path, key string
				status    int
			}{
				{"/v1/catalog/products", bearer, 200},
				{"/v1/catalog/product?ean=5901234123457", bearer, 200},
				{"/v1/catalog/products", "", 401},
				{"/v1/nowhere", bearer, 404},
			} {
				got := s.call(t, "production", "GET", r.path, r.key, nil)
				if got.status != r.status {
					t.Fatalf("%s: %d", r.path, got.status)
				}
				for name, want := range c.want {
					if v := got.header.Get(name); v != want {
						t.Errorf("%s %d: %s %q, want %q", r.path, got.status, name, v, want)
					}
				}
			}
			v2 := s.call(t, "production", "GET", "/v2/ping", tn.keys["production"], nil)
			for _, name := range []string{"Deprecation", "Sunset", "Link"} {
				if v := v2.header.Get(name); v != "" {
					t.Errorf("/v2 answers with %s %q", name, v)
				}
			}
		})
	}
}
