package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: promrules RULE_FILE...")
		os.Exit(2)
	}
	names, err := metricNames(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "promrules:", err)
		os.Exit(1)
	}
	for _, n := range names {
		fmt.Println(n)
	}
}

// metricNames parses the rule files as Prometheus does and collects the metric name of every
// vector selector of every expression; a selector without one fixed name is an error, since
// what it reads could not be checked.
func metricNames(files []string) ([]string, error) {
	p := parser.NewParser(parser.Options{})
	seen := map[string]bool{}
	for _, f := range files {
		groups, errs := rulefmt.ParseFile(f, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				expr, err := p.ParseExpr(r.Expr)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", f, r.Alert+r.Record, err)
				}
				var inspectErr error
				parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
					vs, ok := node.(*parser.VectorSelector)
					if !ok {
						return nil
					}
					name := selectedName(vs)
					if name == "" {
						inspectErr = fmt.Errorf("%s: %s: selector %s names no single metric", f, r.Alert+r.Record, vs)
						return inspectErr
					}
					seen[name] = true
					return nil
				})
				if inspectErr != nil {
					return nil, inspectErr
				}
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// selectedName is the metric name a selector fixes, by name or by an equality matcher on
// __name__; "" when it fixes none.
func selectedName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}
