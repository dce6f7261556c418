package doccheck

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// architectureDoc is the document whose package map and Go symbols are held to the tree: it is
// where a newcomer learns where things are, and a map that drifts sends them to the wrong room.
const architectureDoc = "docs/architecture.md"

// packageMapHeading is the section of architectureDoc whose first fenced block is the package map.
const packageMapHeading = "## Packages"

// mapEntryIndent is the deepest indentation of a map line that opens entries (three levels of
// two spaces); a line indented further continues the description above it.
const mapEntryIndent = 6

// TestArchitectureMapsEveryPackage: the package map of docs/architecture.md has a line for every
// Go package of the repository, and every directory it names exists.
func TestArchitectureMapsEveryPackage(t *testing.T) {
	problems, err := packageMapProblems(repoRoot, architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestArchitectureNamesRealSymbols: every Go symbol docs/architecture.md names in a code span as
// pkg.Symbol, pkg.Type.Member or Type.Member exists in the code.
func TestArchitectureNamesRealSymbols(t *testing.T) {
	problems, checked, err := symbolProblems(repoRoot, architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if checked < 15 {
		t.Fatalf("only %d symbols found in %s: the parser missed them", checked, architectureDoc)
	}
}

// TestArchitectureChecksFail plants each kind of drift in a small tree of its own and checks that
// the two checks above report it: a check that cannot fail checks nothing.
func TestArchitectureChecksFail(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.24\n")
	write("main.go", "package main\n\nimport _ \"net/url\"\n\nfunc main() {}\n")
	write("internal/store/db.go", `package store

type DB struct{ Pool int }

func (db *DB) PlaceOrder() {}

func ApplyLedgerEntry() {}
`)
	write("internal/store/storetest/storetest.go", "package storetest\n\nfunc New() {}\n")
	write("internal/tenancy/tenancy.go", "package tenancy\n\ntype Environment string\n")
	write("internal/store/testdata/fixture.go", "package fixture\n")
	write("hack/openapi/spectral.yaml", "rules: {}\n")
	write("docs/architecture.md", "# Architecture\n\n"+packageMapHeading+"\n\n```\n"+
		"*.go               the binary\n"+
		"internal/          the domain\n"+
		"  store/           all SQL\n"+
		"    storetest/     test databases\n"+
		"  orders/          placement\n"+
		"                   continued/ not an entry\n"+
		"hack/\n"+
		"  openapi/         not Go, but a directory\n"+
		"```\n\n"+
		"A request calls `store.ApplyLedgerEntry`, `DB.PlaceOrder`, `store.DB.Pool` and\n"+
		"`url.Values`; the drift: `store.PlaceOrder`, `DB.InTx`, `store.DB.Close`, `Ledger.Apply`,\n"+
		"`tenancy.Production`, `fulfillment.Job` and `url.Value`. Not symbols: `order.completed`,\n"+
		"`store/doc.go`, `v1.51`.\n")

	problems, err := packageMapProblems(root, "docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	wantProblems(t, "package map", problems,
		"names internal/orders/, which is no directory",
		"lacks internal/tenancy/",
	)

	problems, checked, err := symbolProblems(root, "docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	wantProblems(t, "symbols", problems,
		"`store.PlaceOrder`: package store has no top-level PlaceOrder",
		"`DB.InTx`: no type DB of the module has a method or field InTx",
		"`store.DB.Close`: type store.DB has no method or field Close",
		"`Ledger.Apply`: names no type of the module",
		"`tenancy.Production`: package tenancy has no top-level Production",
		"`fulfillment.Job`: names no package of the module, nor one it imports",
		"`url.Value`: package url has no top-level Value",
	)
	if checked != 11 {
		t.Errorf("checked %d symbols, want 11", checked)
	}
}

// wantProblems fails unless problems are exactly one per want, each containing it, in order.
func wantProblems(t *testing.T, what string, problems []string, want ...string) {
	t.Helper()
	if len(problems) != len(want) {
		t.Errorf("%s: got %d problems, want %d:\n%s", what, len(problems), len(want), strings.Join(problems, "\n"))
		return
	}
	for i, w := range want {
		if !strings.Contains(problems[i], w) {
			t.Errorf("%s: problem %d is %q, want one saying %q", what, i, problems[i], w)
		}
	}
}

// packageMapProblems compares the package map of the document doc (relative to root) with the
// Go packages under root.
func packageMapProblems(root, doc string) ([]string, error) {
	entries, problems, err := readPackageMap(filepath.Join(root, filepath.FromSlash(doc)))
	if err != nil {
		return nil, err
	}
	mapped := map[string]bool{}
	for _, e := range entries {
		if mapped[e.dir] {
			problems = append(problems, fmt.Sprintf("%s:%d: the package map names %s twice", doc, e.line, e.shown()))
		}
		mapped[e.dir] = true
		if info, err := os.Stat(filepath.Join(root, filepath.FromSlash(e.dir))); err != nil || !info.IsDir() {
			problems = append(problems, fmt.Sprintf(
				"%s:%d: the package map names %s, which is no directory of the repository", doc, e.line, e.shown()))
		}
	}
	packages, err := goPackageDirs(root)
	if err != nil {
		return nil, err
	}
	for _, dir := range packages {
		if !mapped[dir] {
			problems = append(problems, fmt.Sprintf(
				"%s: the package map (%s) lacks %s: give the package a line under its parent",
				doc, packageMapHeading, mapEntry{dir: dir}.shown()))
		}
	}
	return problems, nil
}

// mapEntry is one directory the package map names, relative to the repository's root ("." for
// the binary's *.go).
type mapEntry struct {
	dir  string
	line int
}

func (e mapEntry) shown() string {
	if e.dir == "." {
		return "*.go"
	}
	return e.dir + "/"
}

// readPackageMap reads the package map: the first fenced block after packageMapHeading.
func readPackageMap(file string) ([]mapEntry, []string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
	m := packageMap{name: filepath.Base(file)}
	section, inside, lineNo := false, false, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		switch {
		case !section:
			section = strings.TrimSpace(line) == packageMapHeading
		case !inside && strings.HasPrefix(line, "## "):
			return nil, nil, fmt.Errorf("%s: %s has no fenced package map", m.name, packageMapHeading)
		case strings.HasPrefix(line, "```") && inside:
			if len(m.entries) == 0 {
				return nil, nil, fmt.Errorf("%s: the package map has no entries", m.name)
			}
			return m.entries, m.problems, nil
		case strings.HasPrefix(line, "```"):
			inside = true
		case inside:
			m.read(lineNo, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return nil, nil, fmt.Errorf("%s: no package map under %s", m.name, packageMapHeading)
}

// packageMap is the package map as read so far.
type packageMap struct {
	name     string
	entries  []mapEntry
	problems []string
	parents  []string // parents[d] is the directory of the last entry at depth d
}

// read takes one line of the map. A line indented by at most mapEntryIndent spaces (two per
// level) opens one or more entries, the words before its first double space, each a directory
// ending in "/" under the entry above it one level up; *.go at the top is the root package.
// Deeper lines continue a description.
func (m *packageMap) read(lineNo int, line string) {
	body := strings.TrimLeft(line, " ")
	indent := len(line) - len(body)
	if body == "" || indent > mapEntryIndent {
		return
	}
	depth := indent / 2
	if indent%2 != 0 || depth > len(m.parents) {
		m.problems = append(m.problems, fmt.Sprintf(
			"%s:%d: a map line indented by %d spaces, under no entry one level up", m.name, lineNo, indent))
		return
	}
	head, _, _ := strings.Cut(body, "  ")
	for _, word := range strings.Split(head, " ") {
		switch {
		case word == "*.go" && depth == 0:
			m.entries = append(m.entries, mapEntry{dir: ".", line: lineNo})
		case !strings.HasSuffix(word, "/"):
			m.problems = append(m.problems, fmt.Sprintf(
				"%s:%d: %q in the package map is not a directory ending in /", m.name, lineNo, word))
		default:
			dir := strings.TrimSuffix(word, "/")
			if depth > 0 {
				dir = m.parents[depth-1] + "/" + dir
			}
			m.entries = append(m.entries, mapEntry{dir: dir, line: lineNo})
			m.parents = append(m.parents[:depth], dir)
		}
	}
}

// goPackageDirs are the directories under root holding .go files, relative to root, skipping
// what the go command skips (names starting with . or _, testdata) and node_modules.
func goPackageDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			if rel = filepath.ToSlash(rel); !slices.Contains(dirs, rel) {
				dirs = append(dirs, rel)
			}
		}
		return nil
	})
	return dirs, err
}

// symbolSpan is a code span naming a Go symbol: pkg.Symbol, pkg.Type.Member or Type.Member (an
// exported name second, so that file names, versions and event names such as order.completed
// are not taken for symbols), optionally called with ().
var symbolSpan = regexp.MustCompile(`^([A-Za-z_]\w*)\.([A-Z]\w*)(?:\.([A-Za-z_]\w*))?(?:\(\))?$`)

// goPackage is what the symbol check knows of a package: its top-level names and its types'
// members.
type goPackage struct {
	name  string
	decls map[string]bool
	types map[string]*goType
}

// goType is a declared type: its methods and fields (or an interface's methods), and whether it
// embeds a type of another package, whose members cannot be listed from here.
type goType struct {
	members       map[string]bool
	embeds        []string // types of the same package it embeds
	embedsForeign bool
}

// hasMember reports whether the type has the member, directly or through a type it embeds.
func (p *goPackage) hasMember(typeName, member string, seen map[string]bool) bool {
	typ := p.types[typeName]
	if typ == nil || seen[typeName] {
		return false
	}
	seen[typeName] = true
	if typ.members[member] || typ.embedsForeign {
		return true
	}
	return slices.ContainsFunc(typ.embeds, func(e string) bool { return p.hasMember(e, member, seen) })
}

// symbolProblems checks the Go symbols that the document doc (relative to root) names in code
// spans outside fenced blocks against the packages under root and those they import. It returns
// the problems and how many spans it checked.
func symbolProblems(root, doc string) ([]string, int, error) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
	if err != nil {
		return nil, 0, err
	}
	dirs, err := goPackageDirs(root)
	if err != nil {
		return nil, 0, err
	}
	byName := map[string][]*goPackage{}
	imports := map[string]bool{}
	for _, dir := range dirs {
		pkg, err := parsePackage(filepath.Join(root, filepath.FromSlash(dir)), imports)
		if err != nil {
			return nil, 0, err
		}
		if pkg != nil {
			byName[pkg.name] = append(byName[pkg.name], pkg)
		}
	}
	imported := importedPackages(root, imports)

	var problems []string
	checked := 0
	text := withoutFences(string(data))
	for _, at := range docCodeSpan.FindAllStringIndex(text, -1) {
		span := text[at[0]:at[1]]
		m := symbolSpan.FindStringSubmatch(strings.Trim(span, "`"))
		if m == nil {
			continue
		}
		checked++
		if problem := checkSymbol(m[1], m[2], m[3], byName, imported); problem != "" {
			line := 1 + strings.Count(text[:at[0]], "\n")
			problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", doc, line, span, problem))
		}
	}
	return problems, checked, nil
}

// checkSymbol says what is wrong with the symbol first.second[.third], or "".
func checkSymbol(first, second, third string, byName map[string][]*goPackage,
	imported func(string) ([]*goPackage, error),
) string {
	if isUpper(first) {
		return checkMember(first, second, byName)
	}
	pkgs := byName[first]
	if len(pkgs) == 0 {
		var err error
		if pkgs, err = imported(first); err != nil {
			return err.Error()
		}
	}
	if len(pkgs) == 0 {
		return fmt.Sprintf("names no package of the module, nor one it imports, called %s", first)
	}
	for _, p := range pkgs {
		switch {
		case third == "" && p.decls[second]:
			return ""
		case third != "" && p.hasMember(second, third, map[string]bool{}):
			return ""
		}
	}
	if third == "" {
		return fmt.Sprintf("package %s has no top-level %s", first, second)
	}
	for _, p := range pkgs {
		if p.types[second] != nil {
			return fmt.Sprintf("type %s.%s has no method or field %s", first, second, third)
		}
	}
	return fmt.Sprintf("package %s has no type %s", first, second)
}

// checkMember says what is wrong with Type.Member, a member of a type of some package of the
// module, or "".
func checkMember(typeName, member string, byName map[string][]*goPackage) string {
	found := false
	for _, pkgs := range byName {
		for _, p := range pkgs {
			if p.types[typeName] == nil {
				continue
			}
			found = true
			if p.hasMember(typeName, member, map[string]bool{}) {
				return ""
			}
		}
	}
	if !found {
		return fmt.Sprintf("names no type of the module (as %s.%s)", typeName, member)
	}
	return fmt.Sprintf("no type %s of the module has a method or field %s", typeName, member)
}

func isUpper(s string) bool { return s != "" && s[0] >= 'A' && s[0] <= 'Z' }

// withoutFences is Markdown text with its fenced blocks blanked out, lines kept.
func withoutFences(text string) string {
	lines := strings.Split(text, "\n")
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			lines[i] = ""
		} else if fenced {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// parsePackage reads the declarations of the package in dir, and adds the paths its files
// import to imports. The package is the one most of its non-test files declare (a file kept out
// of builds may declare another, such as a generator's main), or, in a directory of tests only,
// that of its tests; _test.go files of the package count, external test packages do not. It
// returns nil for a directory of external tests alone.
func parsePackage(dir string, imports map[string]bool) (*goPackage, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	votes := map[string]int{}
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, imp := range f.Imports {
			imports[strings.Trim(imp.Path.Value, `"`)] = true
		}
		if strings.HasSuffix(f.Name.Name, "_test") {
			continue
		}
		parsed = append(parsed, f)
		if !strings.HasSuffix(file, "_test.go") {
			votes[f.Name.Name]++
		} else if _, ok := votes[f.Name.Name]; !ok {
			votes[f.Name.Name] = 0 // a test's package wins only where no other file votes
		}
	}
	name, most := "", -1
	for n, v := range votes {
		if v > most || v == most && n < name {
			name, most = n, v
		}
	}
	if name == "" {
		return nil, nil
	}
	pkg := &goPackage{name: name, decls: map[string]bool{}, types: map[string]*goType{}}
	for _, f := range parsed {
		if f.Name.Name == name {
			pkg.add(f)
		}
	}
	return pkg, nil
}

// add records a file's top-level declarations and its types' members.
func (p *goPackage) add(f *ast.File) {
	typeOf := func(name string) *goType {
		if p.types[name] == nil {
			p.types[name] = &goType{members: map[string]bool{}}
		}
		return p.types[name]
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				p.decls[d.Name.Name] = true
				continue
			}
			if recv := receiverType(d.Recv.List[0].Type); recv != "" {
				typeOf(recv).members[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						p.decls[n.Name] = true
					}
				case *ast.TypeSpec:
					p.decls[s.Name.Name] = true
					addMembers(typeOf(s.Name.Name), s.Type)
				}
			}
		}
	}
}

// addMembers records the fields of a struct type or the methods of an interface type.
func addMembers(typ *goType, expr ast.Expr) {
	var fields *ast.FieldList
	switch e := expr.(type) {
	case *ast.StructType:
		fields = e.Fields
	case *ast.InterfaceType:
		fields = e.Methods
	default:
		return
	}
	for _, field := range fields.List {
		if len(field.Names) > 0 {
			for _, n := range field.Names {
				typ.members[n.Name] = true
			}
			continue
		}
		// An embedded type: its name is a member, and its members are promoted.
		switch t := unstar(field.Type).(type) {
		case *ast.Ident:
			typ.members[t.Name] = true
			typ.embeds = append(typ.embeds, t.Name)
		case *ast.SelectorExpr:
			typ.members[t.Sel.Name] = true
			typ.embedsForeign = true
		default:
			typ.embedsForeign = true // a type set or generic instance: not followed
		}
	}
}

// receiverType is the name of a method receiver's type: T, *T, T[P] or *T[P].
func receiverType(expr ast.Expr) string {
	switch t := unstar(expr).(type) {
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return receiverType(t.X)
	case *ast.IndexListExpr:
		return receiverType(t.X)
	}
	return ""
}

func unstar(expr ast.Expr) ast.Expr {
	if s, ok := expr.(*ast.StarExpr); ok {
		return s.X
	}
	return expr
}

// importedPackages looks up, on demand, the packages outside the module that its files import
// (the standard library's among them) by the name a document would call them: the last element
// of the path that is not a major version. The go command finds their directories.
func importedPackages(root string, imports map[string]bool) func(string) ([]*goPackage, error) {
	cache := map[string][]*goPackage{}
	return func(name string) ([]*goPackage, error) {
		if pkgs, ok := cache[name]; ok {
			return pkgs, nil
		}
		var paths []string
		for p := range imports {
			if importName(p) == name {
				paths = append(paths, p)
			}
		}
		var pkgs []*goPackage
		if len(paths) > 0 {
			slices.Sort(paths)
			cmd := exec.Command("go", append([]string{"list", "-find", "-f", "{{.Dir}}"}, paths...)...)
			cmd.Dir = root
			out, err := cmd.Output()
			if err != nil {
				return nil, fmt.Errorf("go list %s: %w", strings.Join(paths, " "), err)
			}
			for _, dir := range strings.Fields(string(out)) {
				pkg, err := parsePackage(dir, map[string]bool{})
				if err != nil {
					return nil, err
				}
				if pkg != nil && pkg.name == name {
					pkgs = append(pkgs, pkg)
				}
			}
		}
		cache[name] = pkgs
		return pkgs, nil
	}
}

// importName is the name an import path is usually known by: its last element, or the one
// before a major version suffix (math/rand/v2, github.com/jackc/pgx/v5).
func importName(importPath string) string {
	base := path.Base(importPath)
	if len(base) > 1 && base[0] == 'v' && strings.Trim(base[1:], "0123456789") == "" {
		base = path.Base(path.Dir(importPath))
	}
	return base
}
