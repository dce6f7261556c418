package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// lightDependencies are the modules the client may import besides the standard library:
// partners import this package, so it must not bring the service's dependencies with it.
var lightDependencies = []string{
	"github.com/oapi-codegen/runtime",
	"github.com/google/uuid",
	"github.com/apapsch/go-jsonmerge/v2",
}

// TestClientImportsOnlyItsRuntime: the client's packages are the generator's runtime and what it
// needs, nothing of the module's own code or of its other dependencies.
func TestClientImportsOnlyItsRuntime(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "github.com/codeport/codeport/client" {
			continue
		}
		light := false
		for _, dep := range lightDependencies {
			light = light || pkg == dep || strings.HasPrefix(pkg, dep+"/")
		}
		if !light {
			t.Errorf("the client imports %s: partners would have to build it too", pkg)
		}
	}
}
