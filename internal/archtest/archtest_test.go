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

// importGraph is the import graph of the module's code under one set of build tags.
type importGraph struct {
	tags string
	// checked are the packages of ./controllers/..., ./internal/... and ./apiserver/....
	checked []string
	// imports holds the direct imports of every package those and the binary reach.
	imports map[string][]string
}

// loadGraph lists the graph once (go list is a second of CPU per call; the rules below share it).
func loadGraph(t *testing.T, tags string) importGraph {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", tags, "-deps",
		"-f", "{{.ImportPath}} {{.DepOnly}} {{join .Imports \" \"}}",
		"./controllers/...", "./internal/...", "./apiserver/...", ".")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -tags %q: %v\n%s", tags, err, stderr.String())
	}
	g := importGraph{tags: tags, imports: map[string][]string{}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		g.imports[fields[0]] = fields[2:]
		if fields[1] == "false" && fields[0] != module {
			g.checked = append(g.checked, fields[0])
		}
	}
	return g
}

// TestImportGraph holds the layout's dependency rules on the graph of every build tag set.
func TestImportGraph(t *testing.T) {
	t.Parallel()
	for _, tags := range []string{"", "faults", "soak"} {
		g := loadGraph(t, tags)
		name := tags
		if name == "" {
			name = "untagged"
		}
		t.Run("frameworks stay at the edges/"+name, g.frameworksStayAtTheEdges)
		t.Run("gorm only writes configuration/"+name, g.gormOnlyWritesConfiguration)
		t.Run("binary links no other SQL driver/"+name, g.binaryLinksNoOtherSQLDriver)
		t.Run("binary links no test support/"+name, g.binaryLinksNoTestSupport)
		t.Run("sql stays in store/"+name, g.sqlStaysInStore)
		t.Run("handlers hold services/"+name, g.handlersHoldServices)
	}
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

func (g importGraph) frameworksStayAtTheEdges(t *testing.T) {
	tags, imports := g.tags, g.imports
	checked := 0
	for _, root := range g.checked {
		switch {
		case root == module+"/apiserver":
			// The HTTP layer must reach them, or this test would be checking nothing.
			if reach(root, imports, edgeOnly) == nil {
				t.Errorf("tags %q: %s does not reach %v: is the check still looking at the graph?",
					tags, root, edgeOnly)
			}
			continue
		case strings.HasPrefix(root, module+"/apiserver/"):
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
		t.Errorf("tags %q: only %d packages checked: %v", tags, checked, g.checked)
	}
}

// configWrites is the one package that may reach GORM: the operator's configuration write path,
// whose upserts live in its own subpackage (configdb).
const configWrites = module + "/internal/provisioning"

// gormOnlyWritesConfiguration: no package of the checked tree reaches gorm.io but
// provisioning and what it alone imports; controllers and every other package that calls
// provisioning reach it only through it, and nothing else imports configdb.
func (g importGraph) gormOnlyWritesConfiguration(t *testing.T) {
	tags, imports := g.tags, g.imports
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
	for _, root := range g.checked {
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
		t.Errorf("tags %q: only %d packages checked: %v", tags, checked, g.checked)
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

func (g importGraph) binaryLinksNoOtherSQLDriver(t *testing.T) {
	tags, imports := g.tags, g.imports
	if n := len(reachable(module, imports)); n < 100 {
		t.Fatalf("tags %q: only %d packages in the binary: is the check still looking at the graph?", tags, n)
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

// testSupport holds the packages that the tests and hack/'s tools share.
const testSupport = module + "/internal/test"

// binaryLinksNoTestSupport: the codeport binary links nothing of internal/test, which would bring
// the test tools' dependencies (kin-openapi, envtest) into it.
func (g importGraph) binaryLinksNoTestSupport(t *testing.T) {
	if chain := reach(module, g.imports, []string{testSupport}); chain != nil {
		t.Errorf("tags %q: the binary links %s, which is for tests:\n\t%s",
			g.tags, chain[len(chain)-1], strings.Join(chain, "\n\t-> "))
	}
}

// reachable is every package root imports, directly or not, and root itself.
func reachable(root string, imports map[string][]string) map[string]bool {
	seen := map[string]bool{root: true}
	for queue := []string{root}; len(queue) > 0; queue = queue[1:] {
		for _, next := range imports[queue[0]] {
			if !seen[next] {
				seen[next] = true
				queue = append(queue, next)
			}
		}
	}
	return seen
}

// sqlDrivers are the packages that run statements. Outside internal/store no package imports
// one: the others call store's functions, name a transaction store.Tx, and classify errors
// through store's predicates. pgtype, pgx's column values, is not among them.
var sqlDrivers = []string{
	"database/sql",
	"github.com/jackc/pgx/v5",
	"github.com/jackc/pgx/v5/pgconn",
	"github.com/jackc/pgx/v5/pgxpool",
	"github.com/jackc/pgx/v5/stdlib",
}

// sqlRoom is the package that runs SQL, with its subpackages (migrations, test databases).
// provisioning/configdb runs the operator's configuration statements through GORM (its doc
// lists them); gormOnlyWritesConfiguration holds that line.
const sqlRoom = module + "/internal/store"

// sqlStaysInStore: no checked package outside store imports a package that runs statements;
// the controllers, which must not even classify the driver's errors themselves, least of all.
func (g importGraph) sqlStaysInStore(t *testing.T) {
	if !slices.ContainsFunc(g.imports[sqlRoom], func(p string) bool { return slices.Contains(sqlDrivers, p) }) {
		t.Fatalf("tags %q: %s imports none of %v: is the check still looking at the graph?", g.tags, sqlRoom, sqlDrivers)
	}
	checked := 0
	for _, p := range g.checked {
		if p == sqlRoom || strings.HasPrefix(p, sqlRoom+"/") {
			continue
		}
		checked++
		for _, imp := range g.imports[p] {
			if slices.Contains(sqlDrivers, imp) {
				t.Errorf("tags %q: %s imports %s: run statements through %s", g.tags, p, imp, sqlRoom)
			}
		}
	}
	if checked < 10 {
		t.Errorf("tags %q: only %d packages checked: %v", g.tags, checked, g.checked)
	}
}

// handlersHoldServices: the HTTP layer's packages (handlers, principal, apierror, ratelimit,
// openapi) call the domain's services and never import store; apiserver's own package is the data
// plane's wiring and hands the one *store.DB to the services it builds.
func (g importGraph) handlersHoldServices(t *testing.T) {
	checked := 0
	for _, p := range g.checked {
		if !strings.HasPrefix(p, module+"/apiserver/") {
			continue
		}
		checked++
		if slices.Contains(g.imports[p], sqlRoom) {
			t.Errorf("tags %q: %s imports %s: hold a service of internal/ instead", g.tags, p, sqlRoom)
		}
	}
	if checked < 4 {
		t.Errorf("tags %q: only %d packages of apiserver/ checked: %v", g.tags, checked, g.checked)
	}
}
