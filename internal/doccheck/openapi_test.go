package doccheck

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// docCodeSpan is a code span of the reference, where it names routes and fields.
	docCodeSpan = regexp.MustCompile("`[^`]+`")
	identifier  = regexp.MustCompile(`[A-Za-z][A-Za-z0-9]*`)
)

// openAPIDocument is what the coverage check reads of an OpenAPI document.
type openAPIDocument struct {
	Paths map[string]map[string]json.RawMessage `json:"paths"`
}

// TestReferenceCoversTheOpenAPIDocuments: docs/partner-api.md names every operation of the
// served OpenAPI documents in its endpoint table, and every property of their schemas.
func TestReferenceCoversTheOpenAPIDocuments(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "partner-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	reference := string(data)
	named := map[string]bool{}
	for _, span := range docCodeSpan.FindAllString(reference, -1) {
		for _, word := range identifier.FindAllString(span, -1) {
			named[word] = true
		}
	}
	for _, version := range []string{"v1", "v2"} {
		checkCoverage(t, reference, named, version)
	}
}

// checkCoverage checks the reference against one version's OpenAPI document.
func checkCoverage(t *testing.T, reference string, named map[string]bool, version string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "apiserver", "openapi", version+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPIDocument
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s.json: %v", version, err)
	}
	if len(doc.Paths) == 0 {
		t.Fatalf("%s.json has no paths", version)
	}
	for path, operations := range doc.Paths {
		for method := range operations {
			row := "| " + strings.ToUpper(method) + " | `/" + version + path + "` |"
			if isMethod(method) && !strings.Contains(reference, row) {
				t.Errorf("docs/partner-api.md's endpoint table lacks %s /%s%s (want a row %q)",
					strings.ToUpper(method), version, path, row)
			}
		}
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	for _, property := range properties(tree) {
		if !named[property] {
			t.Errorf("docs/partner-api.md never names the field %s of %s.json", property, version)
		}
	}
}

func isMethod(key string) bool {
	switch key {
	case "get", "put", "post", "delete", "patch", "head", "options":
		return true
	}
	return false
}

// properties are the names of every schema property anywhere in an OpenAPI document.
func properties(node any) []string {
	var names []string
	switch n := node.(type) {
	case map[string]any:
		if props, ok := n["properties"].(map[string]any); ok {
			for name := range props {
				names = append(names, name)
			}
		}
		for _, child := range n {
			names = append(names, properties(child)...)
		}
	case []any:
		for _, child := range n {
			names = append(names, properties(child)...)
		}
	}
	return names
}
