package openapi_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/codeport/codeport/apiserver/openapi"
)

// TestRendererIsTheLockedRelease: the embedded renderer is byte for byte the file of the release
// ui/scalar.lock records, as `make docs-ui-verify` also checks without Go.
func TestRendererIsTheLockedRelease(t *testing.T) {
	if err := openapi.VerifyRenderer(); err != nil {
		t.Fatal(err)
	}
	if pkg, version := openapi.RendererRelease(); pkg != "@scalar/api-reference" || version == "" {
		t.Fatalf("renderer release %q %q", pkg, version)
	}
}

// TestWithServersChangesOnlyServers: the served document is the kept one but for its servers, in
// the same key order (which is the order a renderer shows).
func TestWithServersChangesOnlyServers(t *testing.T) {
	for name, doc := range map[string][]byte{"v2": openapi.V2(), "v1": openapi.V1()} {
		served, err := openapi.WithServers(doc, []openapi.Server{{URL: "https://sandbox.example/" + name, Description: `a "quoted" one`}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var parsed struct{ Servers []openapi.Server }
		if err := json.Unmarshal(served, &parsed); err != nil {
			t.Fatalf("%s: served document is not JSON: %v", name, err)
		}
		if len(parsed.Servers) != 1 || parsed.Servers[0].URL != "https://sandbox.example/"+name {
			t.Errorf("%s: servers %+v", name, parsed.Servers)
		}
		before, _, _ := bytes.Cut(doc, []byte(`"servers"`))
		_, after, _ := bytes.Cut(doc, []byte(`"paths"`))
		if !bytes.HasPrefix(served, before) || !bytes.HasSuffix(served, after) {
			t.Errorf("%s: more than servers changed", name)
		}
	}
	if _, err := openapi.WithServers([]byte(`{"openapi": "3.1.0", "paths": {}}`), nil); err == nil ||
		!strings.Contains(err.Error(), "no top-level servers") {
		t.Errorf("a document without servers: %v", err)
	}
}
