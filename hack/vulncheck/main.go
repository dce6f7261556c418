package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// The parts of govulncheck's JSON messages (golang.org/x/vuln's govulncheck package) read here.
type message struct {
	OSV     *entry   `json:"osv"`
	Finding *finding `json:"finding"`
}

type entry struct {
	ID      string `json:"id"`
	Summary string `json:"summary"`
}

type finding struct {
	OSV          string   `json:"osv"`
	FixedVersion string   `json:"fixed_version"`
	Trace        []*frame `json:"trace"`
}

// frame is a step of a finding's trace: the first is the vulnerable symbol, package or module,
// the last, for a called symbol, the project's own code that leads there.
type frame struct {
	Module   string    `json:"module"`
	Version  string    `json:"version"`
	Package  string    `json:"package"`
	Function string    `json:"function"`
	Receiver string    `json:"receiver"`
	Position *position `json:"position"`
}

type position struct {
	Filename string `json:"filename"`
	Line     int    `json:"line"`
}

// stdlibModule is the module govulncheck names for the standard library.
const stdlibModule = "stdlib"

// vuln is one vulnerability the code calls.
type vuln struct {
	id, summary, module, version, fixed string
	// calledFrom is where the project's code leads to the vulnerable symbol.
	calledFrom string
}

func main() {
	stdlib := flag.String("stdlib", "fail", "what a called vulnerability of the standard library does: fail or warn")
	flag.Parse()
	if *stdlib != "fail" && *stdlib != "warn" {
		fmt.Fprintf(os.Stderr, "vulncheck: -stdlib is fail or warn, not %q\n", *stdlib)
		os.Exit(2)
	}
	called, uncalled, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vulncheck: %v\n", err)
		os.Exit(2)
	}
	os.Exit(report(os.Stdout, called, uncalled, *stdlib == "fail"))
}

// read collects the called vulnerabilities, one each, and counts those only imported or required.
func read(r io.Reader) (called []vuln, uncalled int, err error) {
	summaries := map[string]string{}
	byID := map[string]*vuln{}
	notCalled := map[string]bool{}
	dec := json.NewDecoder(r)
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, 0, fmt.Errorf("read govulncheck's JSON output: %w", err)
		}
		if m.OSV != nil {
			summaries[m.OSV.ID] = m.OSV.Summary
		}
		f := m.Finding
		if f == nil || len(f.Trace) == 0 {
			continue
		}
		if f.Trace[0].Function == "" {
			notCalled[f.OSV] = true
			continue
		}
		if _, seen := byID[f.OSV]; seen {
			continue
		}
		top := f.Trace[0]
		v := &vuln{id: f.OSV, module: top.Module, version: top.Version, fixed: f.FixedVersion}
		if last := f.Trace[len(f.Trace)-1]; last.Position != nil {
			v.calledFrom = fmt.Sprintf("%s:%d (%s)", last.Position.Filename, last.Position.Line, symbol(last))
		}
		byID[f.OSV] = v
	}
	for id, v := range byID {
		v.summary = summaries[id]
		called = append(called, *v)
		delete(notCalled, id)
	}
	slices.SortFunc(called, func(a, b vuln) int {
		return cmp.Or(cmp.Compare(a.module, b.module), cmp.Compare(a.id, b.id))
	})
	return called, len(notCalled), nil
}

func symbol(f *frame) string {
	name := f.Package + "." + f.Function
	if f.Receiver != "" {
		name = f.Package + "." + strings.TrimPrefix(f.Receiver, "*") + "." + f.Function
	}
	return name
}

// report prints the called vulnerabilities and returns the exit code: 1 when any of them fails
// the run.
func report(w io.Writer, called []vuln, uncalled int, stdlibFails bool) int {
	failing := 0
	for _, v := range called {
		fails := v.module != stdlibModule || stdlibFails
		label := "FAIL"
		if !fails {
			label = "WARN (fixed by a Go release, not go.mod)"
		} else {
			failing++
		}
		fixed := cmp.Or(v.fixed, "no fixed version yet")
		fmt.Fprintf(w, "%s %s: %s@%s, fixed in %s\n  %s\n", label, v.id, v.module, v.version, fixed, v.summary)
		if v.calledFrom != "" {
			fmt.Fprintf(w, "  called from %s\n", v.calledFrom)
		}
	}
	fmt.Fprintf(w, "vulncheck: %d called vulnerabilities (%d failing); %d more in code that is imported or "+
		"required but not called\n", len(called), failing, uncalled)
	if failing > 0 {
		return 1
	}
	return 0
}
