// Package archtest checks the layout's dependency rules on the real import graph, build tags
// included, where lint sees only each file's own imports.
package archtest

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/codeport/codeport"

// edgeOnly are the frameworks that belong to the HTTP layer (apiserver) alone.
var edgeOnly = []string{"github.com/gofiber/fiber", "github.com/valyala/fasthttp"}

// wiring may reach anything: it assembles whole environments for `codeport dev`.
var wiring = []string{module + "/internal/devenv"}

// graph is every package the patterns reach, with its direct imports.
func graph(t *testing.T, tags string, patterns ...string) (roots []string, imports map[string][]string) {
	t.Helper()
	list := func(args ...string) []string {
		t.Helper()
		cmd := exec.Command("go", append([]string{"list", "-tags", tags}, args...)...)
		cmd.Dir = "../.."
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	roots = list(patterns...)
	imports = map[string][]string{}
	for _, line := range list(append([]string{"-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, patterns...)...) {
		fields := strings.Fields(line)
		imports[fields[0]] = fields[1:]
	}
	return roots, imports
}

// reach is the import chain from root to the first package under one of forbidden, or nil.
func reach(root string, imports map[string][]string, forbidden []string) []string {
	from := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if slices.ContainsFunc(forbidden, func(f string) bool { return p == f || strings.HasPrefix(p, f+"/") }) {
			var chain []string
			for ; p != ""; p = from[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		for _, next := range imports[p] {
			if _, seen := from[next]; !seen {
				from[next] = p
				queue = append(queue, next)
			}
		}
	}
	return nil
}

func TestFrameworksStayAtTheEdges(t *testing.T) {
	t.Parallel()
	for _, tags := range []string{"", "faults", "soak"} {
		roots, imports := graph(t, tags, "./controllers/...", "./internal/...", "./apiserver")
		checked := 0
		for _, root := range roots {
			switch {
			case root == module+"/apiserver":
				// The HTTP layer must reach them, or this test would be checking nothing.
				if reach(root, imports, edgeOnly) == nil {
					t.Errorf("tags %q: %s does not reach %v: is the check still looking at the graph?",
						tags, root, edgeOnly)
				}
				continue
			case slices.Contains(wiring, root):
				continue
			}
			checked++
			if chain := reach(root, imports, edgeOnly); chain != nil {
				t.Errorf("tags %q: %s reaches an HTTP framework:\n\t%s", tags, root, strings.Join(chain, "\n\t-> "))
			}
		}
		if checked < 10 {
			t.Errorf("tags %q: only %d packages checked: %v", tags, checked, roots)
		}
	}
}

// configWrites is the one package that may reach GORM: the operator's configuration write path,
// whose upserts live in its own subpackage (configdb).
const configWrites = module + "/internal/provisioning"

// TestGORMOnlyWritesConfiguration: no package of the checked tree reaches gorm.io but
// provisioning and what it alone imports; controllers and every other package that calls
// provisioning reach it only through it, and nothing else imports configdb.
func TestGORMOnlyWritesConfiguration(t *testing.T) {
	for _, tags := range []string{"", "faults", "soak"} {
		roots, imports := graph(t, tags, "./controllers/...", "./internal/...", "./apiserver")
		if reach(configWrites, imports, []string{"gorm.io"}) == nil {
			t.Fatalf("tags %q: %s does not reach gorm.io: is the check still looking at the graph?", tags, configWrites)
		}
		// Drop provisioning's own edges: what is left must not lead to GORM.
		pruned := make(map[string][]string, len(imports))
		for p, deps := range imports {
			if p != configWrites {
				pruned[p] = deps
			}
		}
		checked := 0
		for _, root := range roots {
			if root == configWrites || strings.HasPrefix(root, configWrites+"/") {
				continue
			}
			checked++
			if chain := reach(root, pruned, []string{"gorm.io"}); chain != nil {
				t.Errorf("tags %q: %s reaches GORM other than through %s:\n\t%s",
					tags, root, configWrites, strings.Join(chain, "\n\t-> "))
			}
		}
		if checked < 10 {
			t.Errorf("tags %q: only %d packages checked: %v", tags, checked, roots)
		}
	}
}

// notLinked are the packages the codeport binary must not link: a MySQL driver, and the column
// types that brought one in (internal/store has its own).
var notLinked = []string{"github.com/go-sql-driver/mysql", "gorm.io/driver/mysql", "gorm.io/datatypes"}

// pqOnlyVia are the packages allowed to bring github.com/lib/pq into the binary, for their own use:
// embedded-postgres, which `codeport dev` starts its database with, connects through it, and
// River's database/sql driver (store's migrations run River's over goose's *sql.DB) uses its types.
var pqOnlyVia = []string{
	"github.com/fergusstrange/embedded-postgres",
	"github.com/riverqueue/river/riverdriver/riverdatabasesql",
}

func TestBinaryLinksNoOtherSQLDriver(t *testing.T) {
	t.Parallel()
	for _, tags := range []string{"", "faults", "soak"} {
		_, imports := graph(t, tags, ".")
		if len(imports) < 100 {
			t.Fatalf("tags %q: only %d packages in the binary: is the check still looking at the graph?",
				tags, len(imports))
		}
		if chain := reach(module, imports, notLinked); chain != nil {
			t.Errorf("tags %q: the binary links %s:\n\t%s", tags, chain[len(chain)-1], strings.Join(chain, "\n\t-> "))
		}
		// Drop the sanctioned edges, then github.com/lib/pq must be out of reach.
		pruned := make(map[string][]string, len(imports))
		for p, deps := range imports {
			if !slices.Contains(pqOnlyVia, p) {
				pruned[p] = deps
			}
		}
		if chain := reach(module, pruned, []string{"github.com/lib/pq"}); chain != nil {
			t.Errorf("tags %q: the binary links github.com/lib/pq other than through %v:\n\t%s",
				tags, pqOnlyVia, strings.Join(chain, "\n\t-> "))
		}
	}
}
