package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// unchecked is the comment that lets a test's HTTP client go without contracttest, on its line
// or the line above, with the reason: a client of a server that is not codeport's (kube-apiserver,
// a webhook receiver) or of paths no document describes (/metrics, probes).
var unchecked = regexp.MustCompile(`//contract:unchecked \S`)

// TestTestClientsHoldToTheContract: every HTTP client the tests build is wrapped by
// internal/test/contracttest, so that every exchange with a codeport server is held to the OpenAPI
// document that server serves, unless it says why not (unchecked). Test code is every _test.go
// file of the module, whatever its build tags.
func TestTestClientsHoldToTheContract(t *testing.T) {
	t.Parallel()
	var problems []string
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") &&
			path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || strings.Contains(path, "internal/test/contracttest/") {
			return nil
		}
		found, err := uncheckedClients(path, nil)
		problems = append(problems, found...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestUncheckedClientsAreFound: each way of building a client without the wrapper is found, and
// wrapped clients and those marked unchecked with a reason are not.
func TestUncheckedClientsAreFound(t *testing.T) {
	src := `package x

import (
	"net/http"

	"github.com/codeport/codeport/client"
	"github.com/codeport/codeport/internal/test/contracttest"
)

func f(t *testing.T) {
	http.Get("u")
	http.DefaultClient.Do(nil)
	c := &http.Client{}
	d := new(http.Client)
	client.NewClientWithResponses("u", client.WithAPIKey("k"))
	http.Post("u", "", nil) //contract:unchecked
	ok := contracttest.Wrap(t, &http.Client{Timeout: 1})
	fine := contracts.Wrap(t, nil)
	client.NewClientWithResponses("u", client.WithHTTPClient(ok))
	//contract:unchecked kube-apiserver's metrics
	kube := &http.Client{}
	_ = http.Header{}
}
`
	got, err := uncheckedClients("x_test.go", src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"x_test.go:11: http.Get",
		"x_test.go:12: http.DefaultClient",
		"x_test.go:13: http.Client",
		"x_test.go:14: new(http.Client)",
		"x_test.go:15: client.NewClientWithResponses without client.WithHTTPClient",
		"x_test.go:16: http.Post",
	}
	if len(got) != len(want) {
		t.Fatalf("found %d:\n%s\nwant %d", len(got), strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]+" ") {
			t.Errorf("found %q, want %q…", got[i], want[i])
		}
	}
}

// uncheckedClients lists the HTTP clients a file builds without contracttest (src, when not
// nil, instead of the file's contents: a string).
func uncheckedClients(path string, src any) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	exempt := map[int]bool{}
	for _, group := range f.Comments {
		for _, c := range group.List {
			if unchecked.MatchString(c.Text) {
				line := fset.Position(c.Pos()).Line
				exempt[line], exempt[line+1] = true, true
			}
		}
	}
	var problems []string
	report := func(n ast.Node, what string) {
		pos := fset.Position(n.Pos())
		if !exempt[pos.Line] {
			problems = append(problems, fmt.Sprintf("%s:%d: %s builds an HTTP client without contracttest: "+
				"wrap it (contracttest.Wrap), or say why its exchanges need no contract (//contract:unchecked reason)",
				path, pos.Line, what))
		}
	}
	var wrapped []ast.Expr // the arguments of Wrap calls
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			switch {
			case isSelector(n.Fun, "", "Wrap"):
				wrapped = append(wrapped, n.Args...)
			case isSelector(n.Fun, "http", "Get"), isSelector(n.Fun, "http", "Head"), isSelector(n.Fun, "http", "Post"),
				isSelector(n.Fun, "http", "PostForm"):
				report(n, "http."+n.Fun.(*ast.SelectorExpr).Sel.Name)
			case isIdent(n.Fun, "new") && len(n.Args) == 1 && isSelector(n.Args[0], "http", "Client"):
				report(n, "new(http.Client)")
			case isSelector(n.Fun, "client", "NewClient"), isSelector(n.Fun, "client", "NewClientWithResponses"):
				if !hasOption(n, "WithHTTPClient") {
					report(n, "client."+n.Fun.(*ast.SelectorExpr).Sel.Name+" without client.WithHTTPClient")
				}
			}
		case *ast.SelectorExpr:
			if isSelector(n, "http", "DefaultClient") {
				report(n, "http.DefaultClient")
			}
		case *ast.CompositeLit:
			if isSelector(n.Type, "http", "Client") && !within(n, wrapped) {
				report(n, "http.Client")
			}
		}
		return true
	})
	return problems, nil
}

// within tells whether lit is one of args or the operand of one (&http.Client{…}).
func within(lit *ast.CompositeLit, args []ast.Expr) bool {
	for _, a := range args {
		if a == lit {
			return true
		}
		if u, ok := a.(*ast.UnaryExpr); ok && u.X == lit {
			return true
		}
	}
	return false
}

// hasOption tells whether a call passes an option made by pkg.name(…) of the generated client.
func hasOption(call *ast.CallExpr, name string) bool {
	for _, a := range call.Args {
		if c, ok := a.(*ast.CallExpr); ok && isSelector(c.Fun, "client", name) {
			return true
		}
	}
	return false
}

// isSelector tells whether e is pkg.name (any qualifier when pkg is empty).
func isSelector(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	if pkg == "" {
		return true
	}
	return isIdent(sel.X, pkg)
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
